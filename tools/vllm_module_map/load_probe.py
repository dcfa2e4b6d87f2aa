"""Checkpoint names asked of the model's own load_weights: which names reach which parameter.

For each Linear module of a built model, candidate checkpoint names (candidates()) are fed to the
model's `load_weights`, one `<candidate>.<param>` at a time with a CPU tensor of the parameter's
shape and dtype, while every parameter's `weight_loader` (and `default_weight_loader` in vLLM's
model files, for loads that call it directly) is replaced by a recorder: the recorder notes which
parameter the name reached and the shard id it was loaded with, and copies nothing. A candidate is
kept when it reached `<path>.<param>` of its own module. So every rename the model's code does
(WeightsMappers, stacked_params_mapping, dict literals, string edits such as DeepSeek MTP's
`mtp_block.`) is followed without reading it. Called by build.Builder.describe after the module
entries are recorded; it changes only "checkpoint_names", "checkpoint_shard_ids" and
"checkpoint_names_source".

Error policy: an exception from load_weights rejects that one name unless the recorder was
reached first (a check after the loop is about the whole checkpoint, not the name); a refusal
that names a weight the checkpoint lacks is retried with that weight alongside (reached()); a
model whose load_weights took no candidate at all (or has none: LongCat MTP, whose literal dict
of dense `.weight` names no candidate reaches) keeps the source-derived names
(scan.checkpoint_names) for every module. dense_only asks such a model which parameter names
it takes at all (LongCat MTP: only dense `.weight` and `.weight_scale_inv` names): the map's
"load_weights_takes_only".
"""
from __future__ import annotations

import contextlib
import re
import sys
import traceback


def candidates(path: str, prefix: str, last: str, parts: list[str]) -> list[str]:
    """Names to try for the module at `path` (vLLM prefix `prefix`, last name part `last`): the
    path, or for a fused module (`parts`: its shards) the path with its last part replaced by
    each shard; the same from the prefix and from the prefix with the path's layer numbers;
    each of those also with one name part that is not a
    layer number dropped (a wrapper the model inserts, such as DeepSeek MTP's `mtp_block`, or
    a leading `model`), and with a leading `model.` dropped as well."""
    bases = []
    fulls = [path, prefix]
    p_names, q_names = path.split("."), prefix.split(".")
    if len(p_names) == len(q_names):
        # The prefix's names with the path's layer numbers (a checkpoint numbers a draft's
        # layers from 0 under the name vLLM gives it, such as Qwen4-exp's mtp.layers.0).
        fulls.append(".".join(b if a.isdigit() and b.isdigit() else a
                              for a, b in zip(q_names, p_names)))
    for full in fulls:
        if not full:
            continue
        stem = full[: -len(last)] if full.endswith(last) else full.rsplit(".", 1)[0] + "."
        for b in [stem + p for p in parts] if parts else [full]:
            if b not in bases:
                bases.append(b)
    out: list[str] = []

    def add(name: str) -> None:
        for n in (name, name[len("model."):] if name.startswith("model.") else None):
            if n and n not in out:
                out.append(n)
    for b in bases:
        add(b)
    for b in bases:
        names = b.split(".")
        for i in range(len(names) - 1):
            if not names[i].isdigit():
                add(".".join(names[:i] + names[i + 1:]))
    return out


class Recorder:
    """Stands in for every weight loader: records (parameter names, shard id) and loads nothing.
    A parameter has every name it is reachable by (an MLA attention's o_proj is also its
    wrapper's). With `through` (output_probe.py) it loads too: each call is recorded in `loads`
    (parameter names, the tensor given) and passed on to the parameter's own loader
    (`loaders`, by parameter id; vLLM's default_weight_loader, `default`, for one without:
    the module attribute itself is the Recorder while recording)."""

    def __init__(self, model, through: bool = False):
        self.names: dict[int, set[str]] = {}
        for n, p in model.named_parameters(remove_duplicate=False):
            self.names.setdefault(id(p), set()).add(n)
        self.hits: list[tuple[set[str], object]] = []
        self.through = through
        self.loaders: dict[int, object] = {}
        self.default = None  # vLLM's default_weight_loader (recording() sets it)
        self.inside: set[int] = set()  # parameters whose loader is running
        self.loads: list[tuple[set[str], object, object]] = []
        # reached()'s load_weights calls, and (name fed, error) of each that raised.
        self.calls = 0
        self.errors: list[tuple[str, str]] = []

    def __call__(self, param, *args, **kwargs):
        shard = args[1] if len(args) > 1 else kwargs.get("loaded_shard_id",
                                                          kwargs.get("shard_id"))
        self.hits.append((self.names.get(id(param), set()), shard))
        if self.through:
            if id(param) in self.inside:
                # The parameter's own loader calling vLLM's default one (a module global, this
                # Recorder while recording): the original, recorded once.
                return self.default(param, *args, **kwargs)
            self.loads.append((self.names.get(id(param), set()), param, args[0] if args else
                               kwargs.get("loaded_weight")))
            self.inside.add(id(param))
            try:
                return self.loaders.get(id(param), self.default)(param, *args, **kwargs)
            finally:
                self.inside.discard(id(param))
        return True if kwargs.get("return_success") else None


@contextlib.contextmanager
def recording(model, through: bool = False):
    """Every parameter's weight_loader, and the `default_weight_loader` vLLM's model modules
    imported, replaced by one Recorder (Recorder's `through`) for the duration."""
    from vllm.model_executor.model_loader import weight_utils
    rec = Recorder(model, through)
    # Kept aside: weight_utils' own attribute is replaced too, and restoring the others from it
    # would leave them the Recorder (a later through-Recorder then recursed into this one).
    original = rec.default = weight_utils.default_weight_loader
    saved_params = []
    for _, p in model.named_parameters(remove_duplicate=False):
        has = "weight_loader" in p.__dict__ or hasattr(type(p), "weight_loader")
        saved_params.append((p, has, getattr(p, "weight_loader", None)))
        if has and id(p) not in rec.loaders:
            rec.loaders[id(p)] = p.weight_loader
        p.weight_loader = rec
    saved_globals = []
    for name, mod in list(sys.modules.items()):
        if name.startswith("vllm.") and \
                getattr(mod, "default_weight_loader", None) is original:
            saved_globals.append(mod)
            mod.default_weight_loader = rec
    try:
        yield rec
    finally:
        for mod in saved_globals:
            mod.default_weight_loader = original
        for p, has, loader in saved_params:
            if has:
                p.weight_loader = loader
            else:
                del p.weight_loader


def load(model, weights: list) -> None:
    """model.load_weights(weights) on the built module tree: a module it sets to None because the
    weights lacked it (0.33 DSpark drops its confidence_head when no confidence_head.* name came)
    is put back after the call, so that a later name can still reach it."""
    modules = dict(model.named_modules())
    try:
        model.load_weights(weights)
    finally:
        for path, mod in modules.items():
            parent, _, leaf = path.rpartition(".")
            if path and getattr(modules[parent], leaf, mod) is None:
                setattr(modules[parent], leaf, mod)


def reached(model, rec: Recorder, name: str, param,
            own: set[int]) -> list[tuple[set[str], object]]:
    """The (parameter names, shard id) pairs load_weights sent `name` to. A load_weights that
    refuses a checkpoint lacking a weight it needs (PEAGLE's mask_hidden, a DSpark's own lm_head
    and d2t) before it loads anything is asked again, up to 3 times, with what each refusal
    names alongside: the parameters and buffers with a name part it names (by their module-tree
    names), else the named word itself (a checkpoint-only name such as d2t); never the probed
    module's own (`own`: their ids), so that only `name` can reach it."""
    import torch

    def zeros(t):
        return torch.zeros(tuple(t.shape), dtype=t.dtype, device="cpu")
    named = list(model.named_parameters()) + list(model.named_buffers())
    extra: dict[str, object] = {}
    for _ in range(4):
        rec.hits.clear()
        rec.calls += 1
        try:
            load(model, [(name, zeros(param))] + list(extra.items()))
            return list(rec.hits)
        except Exception as ex:  # noqa: BLE001 - a name load_weights refuses
            rec.errors.append((name, f"{type(ex).__name__}: {ex}"))
            if rec.hits:
                return list(rec.hits)
            words = set(re.findall(r"[A-Za-z_]\w*", str(ex))) - {"weight", "bias", "model"}
        more = {n: zeros(t) for n, t in named
                if id(t) not in own and n not in extra and
                any(p in words for p in n.split("."))}
        if not more:
            more = {w: torch.zeros(1) for w in words
                    if w not in extra and "_" not in w.strip("_") and w.islower() and
                    any(c.isdigit() for c in w)}
        if not more:
            return []
        extra.update(list(more.items())[:8])
    return []


def regex_groups(pattern: str) -> list[str] | None:
    """A pattern without nesting as [literal, group, literal, ..., literal] (literals
    unescaped, groups as written; a leading ^ and trailing $ dropped); None for any other."""
    pattern = pattern.removeprefix("^").removesuffix("$")
    parts = re.split(r"(?<!\\)(\((?!\?)[^()]*\))", pattern)
    for lit in parts[::2]:
        if re.search(r"(?<!\\)[][(){}|?*+^$]|\\[^.\\-]", lit):
            return None  # a literal that is not one (a class, an alternative, ...)
    return [re.sub(r"\\(.)", r"\1", p) if i % 2 == 0 else p for i, p in enumerate(parts)]


def unrewritten(name: str, rewrite: list, layers: list[int]) -> list[str]:
    """`name` (a parameter's full name) as it was before the regex rewrite `rewrite`
    ([pattern, template], scan.name_rewrites) made it: the template read back into the
    pattern's groups; a `\\d+` group the template drops is each of `layers` (DeepSeek-V4
    DSpark's mtp.{i}.attn.wkv, every one duplicated into context_wkv_proj)."""
    parts = regex_groups(rewrite[0])
    if parts is None:
        return []
    groups = parts[1::2]
    read = re.fullmatch("".join(re.escape(t) if isinstance(t, str) else
                                f"(?P<g{t}>{groups[t - 1][1:-1]})" for t in rewrite[1]), name)
    if read is None:
        return []
    values = [[read.group(f"g{i}")] if f"g{i}" in read.groupdict() else
              [str(n) for n in layers] if g == r"(\d+)" else None
              for i, g in enumerate(groups, 1)]
    if None in values:
        return []
    out = [parts[0]]
    for vals, lit in zip(values, parts[2::2]):
        out = [o + v + lit for o in out for v in vals]
    return out


def renamed(names: list[str], renames: dict | None, pname: str = "weight",
            layers: list[int] = ()) -> list[str]:
    """`names` as the checkpoint holds them before the model's rename function edits them
    (scan.checkpoint_renames): each dropped part put back after the layer number, each
    stripped prefix put back, each regex rewrite undone (unrewritten: the names'
    `.<pname>` parameters, the layer numbers `layers`); [] without renames."""
    if not renames:
        return []
    out = [u.removesuffix(f".{pname}") for n in names
           for r in renames.get("rewrites", []) for u in unrewritten(f"{n}.{pname}", r, layers)
           if u.endswith(f".{pname}") and u.removesuffix(f".{pname}") not in names]
    if not (renames["prefixes"] or renames["inserted"]):
        return list(dict.fromkeys(out))
    for n in names:
        parts = n.split(".")
        for part in renames["inserted"]:
            at = next((i for i, p in enumerate(parts) if p.isdigit()), None)
            if at is not None:
                parts = parts[:at + 1] + [part] + parts[at + 1:]
        for prefix in renames["prefixes"] or [""]:
            full = prefix + ".".join(parts)
            if full not in out and full not in names:
                out.append(full)
    return out


def probe(model, probes: list[tuple[dict, object, list[str]]],
          renames: dict | None = None) -> str | None:
    """Each (entry, module, shard parts) of `probes`: the candidates load_weights sends to the
    module's own first parameter become the entry's checkpoint names (source "load_weights"),
    with the shard ids they were loaded with. Entries of a model whose load_weights took no
    candidate keep theirs. Where the model's rename function edits checkpoint names
    (`renames`, scan.checkpoint_renames), the candidates are also tried with those edits
    undone (renamed()); when one of those reaches the module, only those are kept: the model
    renames them, so the checkpoint holds that form (MiniMax-M3 DSpark's
    language_model.model.dspark.layers.N.decoder_layer.*).

    Returns vLLM's error when load_weights took none and raised for every name asked, and the
    errors that name no part of the name fed are one and the same: a failure that no
    checkpoint's names avoid (0.33.0's EagleMistralLarge3Model reads an attribute only
    DeepseekV2Model.__init__ sets, so it loads no checkpoint, dense or quantized; the names its
    AutoWeightsLoader refuses first are refused by name); else None."""
    if not callable(getattr(model, "load_weights", None)) or not probes:
        return None
    found: list[tuple[dict, list[str], dict]] = []
    # The model's layer numbers: a rewrite that drops one is undone with each (unrewritten).
    layers = sorted({int(n) for e, _, _ in probes
                     for n in re.findall(r"(?:^|\.)layers\.(\d+)\.", e["path"])})
    with recording(model) as rec:
        for e, mod, parts in probes:
            params = dict(mod.named_parameters(recurse=False))
            if not params:
                continue
            pname = sorted(params)[0]
            target = f"{e['path']}.{pname}"
            last = e["path"].rsplit(".", 1)[-1]
            names, ids = [], {}
            own = {id(p) for p in params.values()}
            plain = candidates(e["path"], e["prefix"], last, parts)
            undone = renamed(plain, renames, pname, layers)
            for c in undone + plain:
                if c in plain and any(n in undone for n in names):
                    break  # a name with the renames undone reached it: the checkpoint's form
                for hit, shard in reached(model, rec, f"{c}.{pname}", params[pname], own):
                    if target in hit and c not in names:
                        names.append(c)
                        if shard is not None:
                            ids[c] = list(shard) if isinstance(shard, tuple) else shard
            found.append((e, names, ids))
        calls, errors = rec.calls, list(rec.errors)
    if not any(names for _, names, _ in found):
        return error_of_every_name(calls, errors)
    for e, names, ids in found:
        if names:
            e["checkpoint_names"] = names
            e["checkpoint_shard_ids"] = ids or None
            e["checkpoint_names_source"] = "load_weights"
        elif "checkpoint_names" in e:
            e["checkpoint_names_source"] += " (load_weights took no candidate)"
    return None


def error_of_every_name(calls: int, errors: list[tuple[str, str]]) -> str | None:
    """The one error, naming no part of the name fed, that load_weights raised across `calls`
    calls that all raised ((name fed, error) each); None otherwise."""
    if not calls or calls != len(errors):
        return None
    unnamed = {e for name, e in errors
               if not any(f"'{part}'" in e or f"'{name}'" in e for part in name.split("."))}
    return unnamed.pop() if len(unnamed) == 1 else None


def name_reaching(model, rec: Recorder, path: str, pname: str, param) -> str | None:
    """The first candidate checkpoint name (candidates() of the module at `path`) that
    load_weights sends to that module's parameter `pname`."""
    last = path.rsplit(".", 1)[-1]
    for c in candidates(path, path, last, []):
        hits = reached(model, rec, f"{c}.{pname}", param, {id(param)})
        if any(f"{path}.{pname}" in names for names, _ in hits):
            return f"{c}.{pname}"
    return None


def unstored_refusal(model, modules: dict) -> dict | None:
    """Whether the model's load_weights refuses a checkpoint that holds every parameter except
    those a quant config's KV-cache method registers on an attention layer (k/v/q scales and
    zero points, which no checkpoint without a kv_cache_scheme stores: Step3p5MTP's MTP
    completeness check spares only some of them). The checkpoint is fed under the names that
    reach each parameter (the probed Linears' checkpoint names, and for every other parameter
    the first candidate that reaches it); each refusal that names an unstored parameter is
    recorded and that parameter fed too, until load_weights takes it. Returns None when it takes
    the checkpoint, or refuses for a reason that names none of them (a parameter the probe found
    no name for: not a finding about what checkpoints store), else {"params": the unstored
    parameters it asked for, "error": its first refusal, the parameter it named as {param}}."""
    unstored = {f"{m['path']}.{p}" for m in modules.values()
                if "KVCache" in (m.get("quant_method") or "") for p in m["params"]}
    if not unstored or not callable(getattr(model, "load_weights", None)):
        return None
    import torch

    params = dict(model.named_parameters())
    owner = {n: tuple(n.rsplit(".", 1)) if "." in n else ("", n) for n in params}
    fed: dict[str, object] = {}
    linear_paths = set()
    for m in modules.values():
        if m.get("checkpoint_names_source") == "load_weights":
            linear_paths.add(m["path"])
            for cn in m["checkpoint_names"]:
                for p in m["params"]:
                    fed[f"{cn}.{p}"] = params.get(f"{m['path']}.{p}")
    asked, first_error = [], None
    with recording(model) as rec:
        for n, p in params.items():
            path, pname = owner[n]
            if n in unstored or path in linear_paths:
                continue
            # A parameter of the model itself (MuseSpark DSpark's mask_hidden) by its own name.
            name = name_reaching(model, rec, path, pname, p) if path else n
            if name is None:
                return None
            fed[name] = p
        for _ in range(len(unstored) + 1):
            rec.hits.clear()
            try:
                load(model, [(k, torch.zeros(tuple(t.shape), dtype=t.dtype))
                             for k, t in fed.items() if t is not None])
                break
            except Exception as ex:  # noqa: BLE001 - the refusal is what is recorded
                named = sorted(u for u in unstored - set(asked)
                               if re.search(re.escape(u) + r"\b", str(ex)))
                if not named:
                    return None
                # Which one it names is a set's order: the map keeps the message with {param}.
                first_error = first_error or \
                    f"{type(ex).__name__}: {ex}".replace(named[0], "{param}")
                asked.append(named[0])
                path, pname = owner[named[0]]
                name = name_reaching(model, rec, path, pname, params[named[0]])
                if name is None:
                    break
                fed[name] = params[named[0]]
    return {"params": sorted(asked), "error": first_error} if asked else None


def dense_only(model, probes: list[tuple[dict, object, list[str]]],
               names: list[str]) -> dict | None:
    """Whether the model's load_weights takes only dense parameter names for its Linears, for a
    model whose load_weights took none of the probe's candidates, None for any other (LongCat
    MTP: its literal dict renames `.weight` and `.weight_scale_inv` names only, and any other
    name reaches params_dict[name] unrenamed). `names`: checkpoint names with their parameter
    that the model's code spells (scan.rename_dict_keys). Each probed module (`probes`, as
    probe()'s) gets a stand-in parameter for every parameter part of `names` it lacks, and each
    name is fed to load_weights, the loaders recorded: a name that reaches `<path>.<part>` shows
    that load_weights takes `part` for the module, and the name without it is the module's
    checkpoint name. Then, the stand-ins gone, each of the module's own parameters (the
    quantized ones the quant config registered: weight_packed, weight_scale, ...) is fed under
    that checkpoint name. Returns None unless some module was reached and every such module's
    own parameters were all refused, else {"params": the parts load_weights took, "error": its
    refusal of the first module's first own parameter, "error_at": the innermost vLLM frame of
    that refusal}."""
    import torch

    if any(e.get("checkpoint_names_source") == "load_weights" for e, _, _ in probes):
        return None  # load_weights took the probe's candidates: it names its own Linears
    leaves = sorted({n.rsplit(".", 1)[-1] for n in names})
    modules = [(e, mod) for e, mod, _ in probes if dict(mod.named_parameters(recurse=False))]
    if not leaves or not modules or not callable(getattr(model, "load_weights", None)):
        return None
    added: list[tuple[object, str]] = []
    for _, mod in modules:
        for leaf in leaves:
            if leaf in mod._parameters or hasattr(mod, leaf):
                continue
            mod.register_parameter(leaf, torch.nn.Parameter(torch.zeros(1), requires_grad=False))
            added.append((mod, leaf))
    taken: dict[str, set[str]] = {}
    checkpoint_name: dict[str, str] = {}
    try:
        with recording(model) as rec:
            for name in names:
                rec.hits.clear()
                try:
                    model.load_weights([(name, torch.zeros(1))])
                except Exception:  # noqa: BLE001 - a name it does not take
                    pass
                stem, _, leaf = name.rpartition(".")
                for e, _ in modules:
                    if any(f"{e['path']}.{leaf}" in hit for hit, _ in rec.hits):
                        taken.setdefault(e["path"], set()).add(leaf)
                        checkpoint_name.setdefault(e["path"], stem)
    finally:
        for mod, leaf in added:
            del mod._parameters[leaf]
    if not checkpoint_name:
        return None
    first = None
    with recording(model) as rec:
        for e, mod in modules:
            if e["path"] not in checkpoint_name:
                continue
            for pname, p in sorted(mod.named_parameters(recurse=False)):
                rec.hits.clear()
                error = None
                try:
                    model.load_weights([(f"{checkpoint_name[e['path']]}.{pname}",
                                         torch.zeros(tuple(p.shape), dtype=p.dtype))])
                except Exception as ex:  # noqa: BLE001 - the refusal is what is recorded
                    error = ex
                if any(f"{e['path']}.{pname}" in hit for hit, _ in rec.hits):
                    return None  # it takes a quantized parameter of this module
                if first is None and error is not None:
                    from tools.vllm_module_map.scan import rel_file_path
                    frames = traceback.extract_tb(error.__traceback__)
                    first = {"error": f"{type(error).__name__}: {error}",
                             "error_at": next((f"{rel_file_path(f.filename)}:{f.lineno}"
                                               for f in reversed(frames)
                                               if "/vllm/" in f.filename), None)}
    if first is None:
        return None
    return {"params": sorted(set().union(*taken.values())), **first}
