"""docs/draft-kinds.md's "Changes since the previous release" sections, from two maps.

changes(prev, cur) lists what differs between consecutive releases' maps: architectures added,
removed and renamed (a removed and an added architecture of the same registry class, or of the
same file and method), architectures whose file moved, that started or stopped building, modules
whose verdict changed (quantized or not, the scheme, the quant method; modules that appeared
or disappeared in an architecture built by both; per compressed-tensors format, where vLLM started
or stopped building it or a module's verdict under that format alone changed), speculators formats added, removed, refused
or changed, and serve options added, removed or changed. changes_section(maps, versions) is one
section per release after the first. No vLLM is needed.

Error policy: a missing map field raises KeyError (as docs.py): no page from a map it cannot read.
"""
from __future__ import annotations

import json

MAX_MODULES = 12  # per architecture; more are counted


def _code(x) -> str:
    return f"`{x}`"


def _verdict(m: dict) -> tuple:
    return (bool(m.get("quantized")), m.get("scheme"), m.get("quant_method"))


def _verdict_text(m: dict) -> str:
    state = "quantized" if m.get("quantized") else "dense"
    return f"{state} ({m.get('scheme') or m.get('quant_method') or 'no quant method'})"


def _renames(prev: dict, cur: dict, removed: list[str], added: list[str]) -> list[tuple]:
    """(old, new) pairs: same registry class, else same file and methods."""
    out = []
    for old in list(removed):
        o = prev[old]
        for new in added:
            n = cur[new]
            same_class = o.get("registry") and o.get("registry", {}).get("class") == \
                n.get("registry", {}).get("class")
            same_file = o.get("file") and o.get("file") == n.get("file") and \
                o.get("methods") == n.get("methods")
            if same_class or same_file:
                out.append((old, new))
                removed.remove(old)
                added.remove(new)
                break
    return out


def module_changes(name: str, old: dict, new: dict) -> list[str]:
    """The module verdicts of architecture `name` that differ between two built entries."""
    om, nm = old.get("modules", {}), new.get("modules", {})
    lines = []
    for key in sorted(set(om) & set(nm)):
        if _verdict(om[key]) != _verdict(nm[key]):
            lines.append(f"{_code(key)}: {_verdict_text(om[key])} -> {_verdict_text(nm[key])}")
    gone = sorted(set(om) - set(nm))
    came = sorted(set(nm) - set(om))
    if gone:
        lines.append("modules no longer built: " + ", ".join(map(_code, gone[:MAX_MODULES]))
                     + (f" and {len(gone) - MAX_MODULES} more" if len(gone) > MAX_MODULES else ""))
    if came:
        lines.append("modules now built: " + ", ".join(f"{_code(k)} ({_verdict_text(nm[k])})"
                                                       for k in came[:MAX_MODULES])
                     + (f" and {len(came) - MAX_MODULES} more" if len(came) > MAX_MODULES else ""))
    return [f"  - {name}: {ln}" for ln in lines]


def _quantized_under(entry: dict, fmt: str, key: str) -> bool:
    """Whether module `key` of a built entry loads quantized weights of format `fmt`: its
    scheme_verdicts entry where that format differs from the base, else the base verdict."""
    differing = ((entry.get("scheme_verdicts") or {}).get(fmt) or {}).get("modules") or {}
    m = differing.get(key, entry["modules"][key])
    return bool(m.get("quantized"))


def comparable_formats(prev: dict, cur: dict) -> list[str]:
    """The non-base formats both maps were built under on the same platform: a format's kernels
    choose by platform (0.32's CPU build has no FP4 kernel, 0.33's faked CUDA has), so verdicts from
    two platforms differ for that reason alone."""
    ps, cs = prev.get("schemes") or {}, cur.get("schemes") or {}
    return sorted(f for f in set(ps) & set(cs)
                  if not cs[f].get("base") and ps[f].get("platform") == cs[f].get("platform"))


def format_changes(name: str, old: dict, new: dict, formats: list[str]) -> list[str]:
    """Per compressed-tensors format of `formats` that both entries were built under: the format
    vLLM started or stopped building the architecture under, and modules whose verdict under it
    changed while the base (W4A16) verdict did not (module_changes lists those)."""
    ov, nv = old.get("scheme_verdicts") or {}, new.get("scheme_verdicts") or {}
    om, nm = old.get("modules", {}), new.get("modules", {})
    lines = []
    for fmt in sorted(set(ov) & set(nv) & set(formats)):
        oe, ne = ov[fmt].get("error"), nv[fmt].get("error")
        if bool(oe) != bool(ne):
            lines.append(f"under {fmt}: " + (f"no longer built: {ne[:160]}" if ne else "now built"))
            continue
        if oe:
            continue
        flips = []
        for key in sorted(set(om) & set(nm)):
            if _verdict(om[key]) != _verdict(nm[key]):
                continue
            was, now = _quantized_under(old, fmt, key), _quantized_under(new, fmt, key)
            if was != now:
                flips.append(f"{_code(key)} {'quantized' if was else 'dense'} -> "
                             f"{'quantized' if now else 'dense'}")
        if flips:
            lines.append(f"under {fmt}: " + ", ".join(flips[:MAX_MODULES])
                         + (f" and {len(flips) - MAX_MODULES} more"
                            if len(flips) > MAX_MODULES else ""))
    return [f"  - {name}: {ln}" for ln in lines]


def _dict_changes(what: str, old: dict, new: dict, describe) -> list[str]:
    out = []
    for k in sorted(set(old) | set(new)):
        if k not in new:
            out.append(f"- {what} removed: {_code(k)}")
        elif k not in old:
            out.append(f"- {what} added: {_code(k)}: {describe(new[k])}")
        elif old[k] != new[k]:
            out.append(f"- {what} changed: {_code(k)}: {describe(old[k])} -> {describe(new[k])}")
    return out


def _format_text(f: dict) -> str:
    archs = ", ".join(f"{k or 'no model_type'}: {a}" for k, a in sorted(f["architectures"].items()))
    spec = json.dumps(f.get("speculative_config", f.get("error")), separators=(",", ":"))
    return f"{archs or 'no architecture'}, served with `{spec}`"


def _option_text(o: dict) -> str:
    return (" or ".join(o.get("values", [])) or "no values") + f" (\"{o.get('doc')}\")"


def _option(o: dict) -> dict:
    """What a serve option's change is judged by: its values and vLLM's doc (not the line it
    is defined at, which moves with every edit of speculative.py)."""
    return {"values": o.get("values"), "doc": o.get("doc")}


def changes(prev: dict, cur: dict) -> list[str]:
    """Markdown bullet lines: what changed from map `prev` to map `cur`."""
    pa, ca = prev["architectures"], cur["architectures"]
    removed = sorted(set(pa) - set(ca))
    added = sorted(set(ca) - set(pa))
    renamed = _renames(pa, ca, removed, added)
    out = []
    for a in added:
        e = ca[a]
        state = "not built: " + e["error"][:160] if e.get("error") else "built"
        out.append(f"- architecture added: {_code(a)} ({', '.join(e['methods'])}; "
                   f"{_code(e.get('file'))}; {state})")
    out += [f"- architecture removed: {_code(a)} ({', '.join(pa[a]['methods'])}; "
            f"{_code(pa[a].get('file'))})" for a in removed]
    out += [f"- architecture renamed: {_code(o)} -> {_code(n)}" for o, n in renamed]
    verdicts = []
    formats = comparable_formats(prev, cur)
    for a in sorted(set(pa) & set(ca)):
        o, n = pa[a], ca[a]
        if o.get("file") != n.get("file"):
            out.append(f"- {_code(a)} moved: {_code(o.get('file'))} -> {_code(n.get('file'))}")
        if bool(o.get("error")) != bool(n.get("error")):
            out.append(f"- {_code(a)} " + (f"no longer built: {n['error'][:160]}" if n.get("error")
                                            else "now built"))
        elif not o.get("error"):
            verdicts += module_changes(_code(a), o, n) + format_changes(_code(a), o, n, formats)
    if verdicts:
        out.append("- module verdicts changed:")
        out += verdicts
    other_platform = sorted(f for f in set(prev.get("schemes") or {}) & set(cur.get("schemes") or {})
                            if not cur["schemes"][f].get("base") and f not in formats)
    if other_platform:
        out.append("- per-format verdicts not compared (built on another platform than the "
                   f"previous map's): {', '.join(map(_code, other_platform))}")
    out += _dict_changes("speculators format", prev.get("speculators", {}),
                         cur.get("speculators", {}), _format_text)
    old_ref, new_ref = prev.get("speculators_refused", {}), cur.get("speculators_refused", {})
    out += [f"- speculators format refused: {_code(n)}: \"{new_ref[n]}\""
            for n in sorted(set(new_ref) - set(old_ref))]
    out += _dict_changes("serve option",
                         {k: _option(o) for k, o in prev.get("serve_options", {}).items()},
                         {k: _option(o) for k, o in cur.get("serve_options", {}).items()},
                         _option_text)
    return out or ["- nothing the maps record"]


def changes_section(maps: dict[str, dict], versions: list[str]) -> list[str]:
    """One "Changes since the previous release" section per release after the first of
    `versions` (sorted oldest first)."""
    lines = []
    for prev, cur in zip(versions, versions[1:]):
        lines += ["", f"## Changes since the previous release: vLLM {cur} (from {prev})", ""]
        lines += [ln.replace("|", "/") for ln in changes(maps[prev], maps[cur])]
    return lines
