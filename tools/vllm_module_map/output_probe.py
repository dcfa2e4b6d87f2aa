"""Proof on a vLLM release without a CPU build: the release's own load_weights takes sparkulator's
output (issue 37 item 6).

Run in a release's environment (release.py's venv), CUDA faked as for the map (generate.py's
child: the release's unpacked code first on sys.path), one process per release and mode:

    output_probe.py --src SRC [--cc 90] shapes JOBS.json   (prints {arch: result})
    output_probe.py --src SRC [--cc 90] load JOBS.json     (prints [verdict, ...])

Each architecture is built by build.Builder itself (its recipe, method, speculators format and
ignore retry; Builder.run), with describe() replaced by the job:
- shapes: the model built under the map's own quantization config (configs.QUANT_CONFIG) on the
  meta device, as the map was; for each checkpoint name of a Linear the job names (with the
  module path and shard id of the committed map) its dense shape [out (the shard's rows), in],
  and for each plain parameter the job names its shape and the checkpoint name that reaches it
  (load_probe.name_reaching; its own name where none does); for a Linear the job asks to
  reach, the name load_weights sends to its module (linear_name_reaching); and the tensors
  load_weights refuses to go without and copies itself (required_extras). The test writes a
  synthetic checkpoint with those shapes, and `sparkulator quantize` makes the outputs.
- load: the model built under the OUTPUT's quantization_config (its config.json, as sparkulator
  wrote it) on the CPU device (Builder.device); the output's tensors are fed
  to the model's own `load_weights` with the parameters' real weight loaders (CPU copies),
  each call recorded (load_probe.recording with through=True). It stops there: vLLM's loader
  runs process_weights_after_loading next (Marlin repacking and the other kernels' CUDA-only
  weight transforms), which this faked platform cannot run: every verdict says so
  ("stopped_before").

A load verdict (per release, architecture, scheme) lists: "unconsumed" (stored tensors no loader
was given), "misplaced" (stored tensors of a Linear that reached a parameter outside the module
the map names for that checkpoint name), "not_loaded" (parameters of the map's modules that no
stored tensor reached; other than the weight's own, such as a bias, only where the checkpoint
stores it), "shard_incomplete" (a
checkpoint name of a Linear, a fused module's shard, whose tensors left one of the module's
parameters unfilled: its rows stay unloaded though the parameter was loaded), "dtype_mismatch" (a tensor loaded into a parameter of another kind:
integer, FP8 or float, or another integer/FP8 type), "float_casts" (F16 into BF16 and the like:
information), "copied_by_load_weights" (stored tensors of the job's "extras", which load_weights
copies itself with no loader: information, not unconsumed), "returned_missing" (stored tensors whose parameter load_weights left out of the
names it returned, where it returns them), and "error" (load_weights raised: a loader refused
a shape, a name, or needed CUDA). "ok" is true when all of those are empty.

A tensor is attributed to the stored name whose storage the loader was given (the loaders
narrow and view, they do not copy first); a loader given a new tensor (a model that permutes or
converts before loading) to a stored tensor of the same shape and dtype whose checkpoint name the
map gives the parameter's module, else to the name load_weights took last.

Error policy: an architecture that cannot be built, or whose load raises, is a verdict with
"error" (the test fails it), never an exception of the probe; a failure outside a model (vLLM
does not import, a job file that does not parse) propagates and the process exits non-zero.
"""
from __future__ import annotations

import argparse
import contextlib
import json
import os
import pathlib
import sys
import traceback

REPO = pathlib.Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

STOPPED_BEFORE = ("process_weights_after_loading (the kernels' weight transforms, CUDA-only "
                  "on this faked platform)")


def shard_rows(mod, shard) -> int:
    """The rows a checkpoint tensor loaded with `shard` fills in the fused Linear `mod` (TP 1):
    MergedColumnParallelLinear's output_sizes, QKVParallelLinear's q/k/v sizes; the whole
    output for no shard id."""
    if shard is None:
        return int(getattr(mod, "output_size", None) or mod.out_features)
    if isinstance(shard, (list, tuple)):
        return sum(shard_rows(mod, s) for s in shard)
    if isinstance(shard, str) and hasattr(mod, "_get_shard_size_mapping"):
        return int(mod._get_shard_size_mapping(shard))
    return int(mod.output_sizes[int(shard)])


# Checkpoint names a model's load_weights renames to a top-level parameter of another name
# (EAGLE-3's d2t/t2d convention, MuseSpark DSpark's draft_id_to_target_id): tried after the
# parameter's own name.
TOP_LEVEL_ALIASES = {"draft_id_to_target_id": ["d2t"], "target_id_to_draft_id": ["t2d"]}


def linear_name_reaching(model, rec, w: dict) -> str | None:
    """The checkpoint name (with .weight) load_weights sends to the module of the Linear job
    `w` (with its shard id), for a module whose map names no load_weights took (a head, which
    the map probes for no name; a model whose load_weights took no candidate: Kimi-K3 MTP,
    whose load_weights renames every .weight_packed to .weight when no routed expert holds a
    w13_weight_packed). Probed by the module's weight, else its weight_scale (a name no model
    renames), from the map's name and from the module path, each with one wrapper part or a
    leading model. dropped (load_probe.candidates)."""
    from tools.vllm_module_map.load_probe import candidates, reached
    params = dict(model.get_submodule(w["path"]).named_parameters(recurse=False))
    pname = "weight" if "weight" in params else "weight_scale" if "weight_scale" in params \
        else None
    if pname is None:
        return None
    base = w["name"].removesuffix(".weight")
    tried = candidates(base, base, base.rsplit(".", 1)[-1], [])
    if w.get("shard") is None:
        tried += [c for c in candidates(w["path"], w["path"], w["path"].rsplit(".", 1)[-1], [])
                  if c not in tried]
    if type(model.get_submodule(w["path"])).__name__ == "ParallelLMHead":
        # An MTP layer's head loaded from the target's own lm_head (HY-V3 MTP's shared_head).
        tried.append("lm_head")
    for c in tried:
        for names, shard in reached(model, rec, f"{c}.{pname}", params[pname],
                                    {id(params[pname])}):
            shard = list(shard) if isinstance(shard, tuple) else shard
            if f"{w['path']}.{pname}" in names and (
                    w.get("shard") is None or str(w["shard"]) == str(shard)):
                return f"{c}.weight"
    return None


def required_extras(model, rec, tensors: dict) -> dict:
    """Checkpoint-only tensors load_weights refuses to go without, which no loader reaches (it
    copies them itself: P-EAGLE's mask_hidden buffer, XPress's raw xpress_head.mix.L folded into
    mix_L), found from its refusals of the planned checkpoint (zeros; the loaders recorded, not
    run; plain tensors only): a dotted or underscored name of the message that ends exactly one
    parameter's or buffer's name ('.' and '_' alike) that no stored tensor's loader reached,
    stored with its shape. {checkpoint name: shape}."""
    import re

    import torch
    named = dict(model.named_parameters())
    named.update(dict(model.named_buffers()))

    def flat(n: str) -> str:
        return n.replace(".", "_")
    fed = {}
    for key, t in tensors.items():
        name, shape = (key, t) if isinstance(t[0], int) else (t[0], t[1])
        fed[name] = torch.zeros(tuple(shape))
    extras: dict[str, list[int]] = {}
    for _ in range(3):
        rec.hits.clear()
        try:
            model.load_weights(list(fed.items()) +
                               [(n, torch.zeros(tuple(s))) for n, s in extras.items()])
            return extras
        except Exception as ex:  # noqa: BLE001 - a refusal names what it lacks
            if "available parameters" in str(ex):
                return extras  # a name without a parameter: the message lists every other one
            loaded = {x for names, _ in rec.hits for x in names}
            found = {}
            for tok in set(re.findall(r"[A-Za-z_][\w.]*[\w]", str(ex))):
                if ("_" not in tok and "." not in tok) or tok in fed or tok in extras:
                    continue
                hits = [n for n in named if n not in loaded and (
                    flat(n) == flat(tok) or flat(n).endswith("_" + flat(tok)))]
                if len(hits) == 1:
                    found[tok] = list(named[hits[0]].shape)
            if not found:
                return extras
            extras.update(found)
    return extras


def dense_shapes(model, job: dict) -> dict:
    """{"tensors": {weight: its dense shape, or [checkpoint name, shape] where it is stored
    under another name (a plain parameter under the name that reaches it, a Linear's where the
    job asks to reach it: linear_name_reaching)}, "unreached": [plain parameters, and Linears
    the job asks to reach, no checkpoint name reaches]}."""
    from tools.vllm_module_map.load_probe import name_reaching, reached, recording
    tensors: dict[str, list] = {}
    unreached, linears_unreached = [], []
    with recording(model) as rec:
        for w in job["linears"]:
            mod = model.get_submodule(w["path"])
            own = dict(mod.named_parameters(recurse=False)).get("weight")
            if own is not None and w.get("shard") is None:
                shape = list(own.shape)  # dense under the map's config (lm_head)
            else:
                cols = int(getattr(mod, "input_size", None) or mod.in_features)
                shape = [shard_rows(mod, w.get("shard")), cols]
            tensors[w["name"]] = shape
            if w.get("reach"):
                name = linear_name_reaching(model, rec, w)
                if name is None:
                    linears_unreached.append(w["name"])
                elif name != w["name"]:
                    tensors[w["name"]] = [name, shape]
        params = dict(model.named_parameters())
        for n in job["plain"]:
            if n not in params:
                unreached.append(n)
                continue
            path, _, pname = n.rpartition(".")
            if path:
                name = name_reaching(model, rec, path, pname, params[n])
            else:
                # A parameter of the model itself: its own name, else a checkpoint alias.
                name = next((c for c in [n] + TOP_LEVEL_ALIASES.get(n, [])
                             if any(n in names for names, _ in
                                    reached(model, rec, c, params[n], {id(params[n])}))), None)
            if name is None:
                unreached.append(n)
            # Keyed by the map's name; stored under the name that reaches it, with its dtype
            # where it is not a float (a vocabulary map's int64 offsets).
            tensors[n] = [name or n, list(params[n].shape)] + (
                [] if params[n].dtype.is_floating_point else [str(params[n].dtype)])
        # The plain tensors only: this model is built under the map's W4A16 config, where a
        # Linear's dense weight has no parameter to go to.
        extras = required_extras(model, rec, {k: tensors[k] for k in job["plain"]
                                              if k in tensors and k not in unreached})
    return {"tensors": tensors, "unreached": unreached, "linears_unreached": linears_unreached,
            "extras": extras}


def read_output(folder: pathlib.Path) -> dict:
    """Every tensor of the output's safetensors files, on the CPU."""
    from safetensors.torch import load_file
    out = {}
    for f in sorted(folder.glob("*.safetensors")):
        out.update(load_file(str(f)))
    return out


def kind(dtype) -> str:
    import torch
    if dtype.is_floating_point:
        return "fp8" if "float8" in str(dtype) else "float"
    return "bool" if dtype == torch.bool else "int"


def load_verdict(model, job: dict) -> dict:
    """The output's tensors through the model's own load_weights (module docstring)."""
    from tools.vllm_module_map.load_probe import recording
    stored = read_output(pathlib.Path(job["out"]))
    by_storage = {t.untyped_storage().data_ptr(): n for n, t in stored.items() if t.numel()}
    fed: list[str] = []

    def weights():
        for n, t in stored.items():
            fed.append(n)
            yield n, t
    verdict: dict = {"stored": len(stored), "stopped_before": STOPPED_BEFORE, "error": None}
    returned = None
    with recording(model, through=True) as rec:
        try:
            returned = model.load_weights(weights())
        except Exception as ex:  # noqa: BLE001 - the verdict
            verdict["error"] = f"{type(ex).__name__}: {' '.join(str(ex).split())[:400]}"
            where = [f"{pathlib.Path(fr.filename).name}:{fr.lineno}"
                     for fr in traceback.extract_tb(ex.__traceback__)]
            verdict["error_at"] = where[-3:]
    reached: dict[str, set[str]] = {n: set() for n in stored}
    loaded: set[str] = set()
    mismatch, casts = [], set()
    paths = job["linear_paths"]
    for names, param, given in rec.loads:
        src = None
        if given is not None and hasattr(given, "untyped_storage") and given.numel():
            src = by_storage.get(given.untyped_storage().data_ptr())
        if src is None and given is not None and hasattr(given, "shape"):
            # A new tensor (Llama4's q/k permuted for its rotary layout): the stored tensor of
            # the parameter's module with its shape and dtype, one not attributed yet first.
            alike = [n for n in stored if stored[n].shape == given.shape and
                     stored[n].dtype == given.dtype and
                     any(x.startswith(paths.get(n.rsplit(".", 1)[0], "\0") + ".")
                         for x in names)]
            src = next((n for n in alike if not reached[n]), alike[0] if alike else None)
        src = src or (fed[-1] if fed else None)
        if src is None:
            continue
        reached[src] |= names
        loaded |= names
        a, b = stored[src].dtype, param.dtype
        if a != b:
            if kind(a) == kind(b) == "float":
                casts.add(f"{a}->{b}".replace("torch.", ""))
            else:
                mismatch.append(f"{src}: {a} into {sorted(names)[0]} {b}".replace("torch.", ""))
    # Tensors load_weights copies itself, no loader called (required_extras found that it refuses
    # the checkpoint without them): reported apart, not as unconsumed.
    copied = set(job.get("extras", ()))
    verdict["copied_by_load_weights"] = sorted(n for n, r in reached.items()
                                               if not r and n in copied)
    verdict["unconsumed"] = sorted(n for n, r in reached.items() if not r and n not in copied)
    if verdict["error"] is None and len(fed) < len(stored):
        verdict["error"] = f"load_weights stopped after {len(fed)} of {len(stored)} tensors"
    misplaced = []
    for n, r in reached.items():
        prefix = n.rsplit(".", 1)[0]
        path = job["linear_paths"].get(prefix)
        if path is not None and r and not any(x.startswith(path + ".") for x in r):
            misplaced.append(f"{n} -> {sorted(r)[0]} (the map: {path})")
    verdict["misplaced"] = sorted(misplaced)
    params = dict(model.named_parameters())

    def own(path: str, prefix: str) -> set[str]:
        """The module's parameters (last name parts) a checkpoint name must fill: those made
        from its weight (weight*, input_*: what quantize writes), and any other (a bias, a
        router's e_score_correction_bias) only where the checkpoint stores it (the synthetic
        sources store a Linear's weight alone)."""
        leaves = {n[len(path) + 1:] for n in params
                  if n.startswith(path + ".") and "." not in n[len(path) + 1:]}
        return {x for x in leaves if x.startswith(("weight", "input_")) or
                f"{prefix}.{x}" in stored}
    covered: dict[str, set[str]] = {}
    for n, r in reached.items():
        prefix = n.rsplit(".", 1)[0]
        path = job["linear_paths"].get(prefix)
        if path is not None:
            covered.setdefault(prefix, set()).update(
                x[len(path) + 1:] for x in r if x.startswith(path + "."))
    # Each shard of a fused module fills every parameter (its rows of it): a shard that does
    # not leaves those rows unloaded although the parameter was loaded.
    verdict["shard_incomplete"] = sorted(
        f"{prefix}: {leaf}" for prefix, got in covered.items()
        for leaf in own(job["linear_paths"][prefix], prefix) - got)
    verdict["not_loaded"] = sorted(
        f"{p}.{leaf}" for prefix, p in job["linear_paths"].items() for leaf in own(p, prefix)
        if f"{p}.{leaf}" not in loaded)
    verdict["dtype_mismatch"] = sorted(mismatch)
    verdict["float_casts"] = sorted(casts)
    verdict["returned_missing"] = []
    if isinstance(returned, (set, list)):
        got = set(returned)
        verdict["returned_missing"] = sorted(
            n for n, r in reached.items() if r and not r & got)
    verdict["quantized_modules"] = sorted(
        p for p in set(job["linear_paths"].values()) if f"{p}.weight_packed" in params or
        (f"{p}.weight_scale" in params and f"{p}.weight" in params))
    verdict["ok"] = not any(verdict[k] for k in ("error", "unconsumed", "misplaced", "not_loaded",
                                                  "shard_incomplete", "dtype_mismatch",
                                                  "returned_missing"))
    return verdict


def builder_for(cc: int | None):
    """A build.Builder whose describe() runs the current job and whose configs each get a
    folder of their own (vLLM caches what it read of a folder's config)."""
    from tools.vllm_module_map.build import Builder

    class JobBuilder(Builder):
        job = None
        result = None
        folders = 0

        def write_dir(self, name, config):
            JobBuilder.folders += 1
            return super().write_dir(f"{name}-{JobBuilder.folders}", config)

        def build(self, vllm_config, model_config):
            # A load builds on the CPU: storage the real loaders copy into (meta parameters
            # cannot be given storage without losing their weight_loader).
            self.device = "cpu" if self.job is not None and "out" in self.job else "meta"
            return super().build(vllm_config, model_config)

        def describe(self, model, model_cls):
            # Only the first model built for the job (a target's as_draft_model comes after).
            job, self.job = self.job, None
            if job is not None:
                self.result = load_verdict(model, job) if "out" in job else \
                    dense_shapes(model, job)
            return {}

    return JobBuilder(cc)


def run_job(b, job: dict) -> dict:
    """One job: its architecture built by Builder.run with the job's quantization config."""
    from tools.vllm_module_map.configs import QUANT_CONFIG
    b.quant_config = QUANT_CONFIG
    if "out" in job:
        config = json.loads((pathlib.Path(job["out"]) / "config.json").read_text())
        b.quant_config = config.get("quantization_config") or QUANT_CONFIG
    b.job, b.result = job, None
    with contextlib.redirect_stderr(open(os.devnull, "w")):
        entry = b.run({job["arch"]})["architectures"].get(job["arch"], {})
    b.job = None
    if b.result is None:
        return {"error": entry.get("error") or "the model was not built",
                "error_at": entry.get("error_at")}
    if entry.get("error") and "out" in job:
        b.result.setdefault("error", entry["error"])
    return b.result


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--src", required=True, help="the release's unpacked Python code")
    ap.add_argument("--cc", type=int, default=90, help="faked CUDA capability")
    ap.add_argument("mode", choices=["shapes", "load"])
    ap.add_argument("jobs", help="a JSON file: a list of jobs")
    args = ap.parse_args()
    jobs = json.loads(pathlib.Path(args.jobs).read_text())
    sys.path.insert(0, args.src)
    os.environ["VLLM_MODULE_MAP_FAKED"] = f"CUDA capability {args.cc}"
    import logging
    logging.disable(logging.WARNING)
    b = builder_for(args.cc)
    out = []
    for job in jobs:
        with contextlib.redirect_stdout(sys.stderr):
            result = run_job(b, job)
        out.append({**{k: job[k] for k in ("arch", "scheme") if k in job}, **result})
    json.dump(out, sys.stdout, indent=1, sort_keys=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
