#!/usr/bin/env python3
"""What vLLM quantizes, asked of vLLM itself: one module map per vLLM release.

For every architecture of the release's speculative-decoding registry
(`_SPECULATIVE_DECODING_MODELS` in vllm/model_executor/models/registry.py) and a few common targets,
this builds the model the way vLLM does (a tiny config.json on disk, vLLM's ModelConfig,
SpeculativeConfig and VllmConfig, then model_loader.utils.initialize_model, the call
BaseModelLoader.create_model makes) on the meta device, with a compressed-tensors W4A16 quantization
config (targets ["Linear"], ignore ["lm_head"]), and records what vLLM decided for each module.

Release procedure: a new release's map is one command (release.py: it downloads the wheel,
unpacks it into a cache keyed by the wheel's sha256, makes a venv there with the wheel's own
pins, CPU torch substituted and CUDA-only packages stood in, then runs this file with
--release V=SRC --environment FILE --docs and prints the time and disk it took):

    .venv/bin/python tools/vllm_module_map/release.py 0.34.0

The installed CPU build's map (.venv-vllm holds vLLM 0.32.0's CPU build):

    .venv-vllm/bin/python tools/vllm_module_map/generate.py --release 0.32.0 --docs

`--release V` runs the installed vLLM (it must be version V); `--release V=DIR` puts DIR first on
sys.path and fakes the CUDA platform (capability --cc, default 90) where that vLLM has no CPU build.
Each release runs in a subprocess of its own (one vLLM per process), and again once per other
compressed-tensors format of configs.SCHEME_CONFIGS (FP8, W8A8 int, NVFP4, MXFP4, MXFP8: only the
module verdicts, merged by schemes.py). `--reuse-base` keeps a committed map's base (W4A16) part
and builds only those verdicts. `--docs` alone rewrites docs/draft-kinds.md from the committed
maps; `--print` writes one map to stdout (the test uses it; with
`--tree DIR`, of vLLM's Python code in DIR, CUDA faked).

The code: this file is the command line; configs.py the hand-written inputs (quantization config,
tiny configs, method rules), fake_cuda.py the faked platform for V=DIR, stand_ins.py the stand-ins
for absent modules, build.py the model builds and what is recorded, scan.py the model files'
source and source-derived checkpoint names, load_probe.py the names load_weights accepts,
kernel_probe.py the "kernels" section, host.py the CPU held fixed (as without AMX) on every host,
docs.py the page, changes.py its "Changes since the previous release" sections; release.py the
release procedure, wheel.py the wheel (cache, pins), release_env.py the release's venv.

Error policy: a release whose child process fails, or whose vLLM is not version V, stops the run
(exit 1, with the tail of the child's stderr) before its map is written; maps written for earlier
releases stay and the page is not rewritten. An architecture vLLM cannot build is no failure: its
entry records why ("error", see below).

Only the tiny configs (TINY, RECIPES: a base model_type and the keys a family's code reads, a
release's or an architecture's own where one recipe cannot serve) are written by hand; what is
recorded comes from vLLM. Where torchvision is absent (CI's .venv-vllm, the unzipped wheel), a
stand-in package answers every import of it (stand_ins.py): only image processors use it, and
model files that import a vision model's processing code (Qwen3.5, Qwen4-exp, Step5) could not
be inspected without it. With V=DIR, vLLM's compiled extensions are
absent: empty stand-in modules and ops answer False, fake-kernel registrations for missing ops
are skipped, triton.Config of vLLM's Triton placeholder holds its arguments (its tl.extra is a
stand-in), the MoE aux stream is None, FlashInfer's sampler (FlashInfer is absent) is not
supported, a vLLM module that imports CuTe DSL (a CUDA-only pin) unguarded is stood in and,
where no CUDA attention backend validates,
TRITON_MLA / FLASH_ATTN is named (none of these changes what a Linear gets). VllmConfig's
V1-model-runner check (this CPU build has no Triton, so it falls back to V1) is recorded in
"notes" and skipped, so that the model is built.

How each field is obtained:
- "schemes" (top level) and "scheme_verdicts" (per built architecture): vLLM's verdict under each
  other compressed-tensors format where it differs from the base's (schemes.py says how).
- "schema_version" (top level, an int, configs.SCHEMA_VERSION): the maps' format; the C++ reader
  refuses a map without it. Every field keeps its JSON type across releases.
- "environment" (top level, only in maps release.py made): the wheel ({"name", "sha256"}), the
  environment's "kind" and "python", the pins installed as the wheel pins them ("pinned"), those
  substituted ({"torch==2.14.0": "torch==2.13.0+cpu"}), stood in (CUDA-only, not installed:
  "stood_in"), and pins that would not install or import ({pin: pip's or Python's last line}).
- "registry": module and class from the registry dict; "file": that module's file in the tree.
- "methods": the speculative method that loads this architecture, from vLLM's naming rules:
  DSpark in the name -> dspark; EAGLEConfig's Eagle3<arch>/<arch>Eagle3 -> eagle3, Eagle<arch>
  -> eagle (transformers_utils/configs/eagle.py); written by SpeculativeConfig.hf_config_override
  (its source parsed) or named *MTP -> mtp; else by the registry module's name (METHOD_OF).
  Targets: "target" and "draft_model" (any causal LM serves as one). "methods_source" says
  which rule gave it. A draft hf_config_override renames from another (its
  `initial_architecture == ...` test) takes that architecture's method.
- "built": what vLLM resolved (draft_model_config.architectures, the model class), the method and
  the target it was built against, and the tiny config's extra keys ("recipe_derived" where the
  draft has no recipe of its own, configs.derive_recipe: the base class whose recipe it took and
  the hf_config_override rule its config was named by). An MTP draft is the
  target's checkpoint (SpeculativeConfig model=None), except one that ships as its own
  (configs.MTP_OWN_CHECKPOINT: Gemma4's assistant, model_type gemma4_assistant); such a draft's
  "checkpoint_model_types" are the model_types hf_config_override rewrites to it (its source
  parsed: the `if hf_config.model_type in (...)` that writes its architectures), by which a
  checkpoint that names no registry architecture is found. An MTP layer's target is the
  recipe's, else transformers' causal-LM class of the model_type, else the first checkpoint
  architecture hf_config_override tests for (Step3p5ForCausalLM). A draft whose
  tiny config resolves to another architecture is an error, not a silent substitute. A draft
  that a plain config.json cannot reach but a speculators format names (PEAGLE: EAGLEConfig
  renames a plain one Eagle3Peagle... and vLLM refuses it) is built from a speculators config
  of that format:
  "config_format" ("speculators peagle"), "speculative_config" (what the format serves it with)
  and "plain_config_error" (vLLM's refusal of the plain one) say so.
- "speculators" (top level): every format of vLLM's transformers_utils/configs/speculators, asked
  of its own functions (speculators.py): the architecture per transformer_layer_config model_type
  and the --speculative-config fields the format fixes. "speculators_refused" (top level, an
  object, {} when none): a format still registered that vLLM refuses for every model_type and
  for its speculative config, with vLLM's refusal (0.34's peagle); it is not in "speculators".
- "as_draft_model" (targets): the same architecture built as a method="draft_model" draft, with
  the draft VllmConfig DraftModelProposer._create_draft_vllm_config makes (0.34 moved the
  proposer to the V2 model runner's standalone_ar/speculator.py: serving.DRAFT_MODEL_PROPOSERS);
  "module_prefix" is the prefix its get_model call builds the draft under ("draft_model."), which every module name
  carries when vLLM's compressed-tensors config matches targets and ignore entries.
- "refuses_unstored" (only where it refuses): after the load probe, the model's load_weights is
  fed every parameter but those the KV-cache method registers on its attention layers (k/v/q
  scales and zero points, which no checkpoint without a kv_cache_scheme stores), each under the
  name that reaches it; the parameters it then asks for ("params") and its first refusal
  ("error", the parameter written {param}): Step3p5MTP's MTP completeness check
  (load_probe.unstored_refusal).
- "load_weights_takes_only" (only where it holds): for a model whose load_weights took no
  candidate, the keys of the rename dicts in its files' load_weights (scan.rename_dict_keys:
  LongCat MTP's new_to_old_names_mapping) are fed to it, each probed Linear given a stand-in for
  every parameter those names end in; a name that reaches `<path>.<param>` is the module's
  checkpoint name. Then each of the module's own (quantized) parameters is fed under that name.
  Recorded when every module reached refused all of its own: "params" the parameter names
  load_weights took (["weight", "weight_scale_inv"]), "error" its refusal of the first module's
  first parameter and "error_at" the innermost vLLM frame (load_probe.dense_only).
- "load_fails" (only where it fails): vLLM's error when the model's load_weights raised for every
  name the load probe fed it and took none, and the errors that name no part of the name fed are
  one error: no checkpoint loads, dense or quantized (0.33.0's EagleMistralLarge3ForCausalLM,
  whose model never sets the attribute DeepseekV2Model.load_weights reads; load_probe.probe).
- "notes": checks vLLM would refuse on this build and that were skipped (see above).
- "modules": every module vLLM asked the quantization config about (a hook on
  CompressedTensorsConfig.get_quant_method records the prefix it was asked with and what it
  returned) and every LinearBase or torch.nn.Linear, asked or not (a layer built with
  quant_config=None, or a plain torch.nn.Linear such as an MTP eh_proj, is never asked:
  "asked": false). "prefix" is vLLM's module name used for ignore/targets matching (it carries a
  draft's layer offset, and is "" for a module built without one); the key is the prefix, or
  the path where the prefix is empty; "path" is the module's place in the module tree
  (the parameter names load_weights fills). "quant_method"/"scheme" are the class names vLLM
  chose (a MoE method sets no scheme); "params" the parameters the module registered;
  "quantized": it registered packed W4A16 weights (a parameter named *weight_packed).
- "fused": for a module whose last name part is in the model's packed_modules_mapping, the
  shards in order with their position. "checkpoint_names": the names the model's own load_weights
  accepts for the module (load_probe.py), "checkpoint_names_source" "load_weights": candidates
  (the path, or for a fused module the path with its last part replaced by each shard (shards
  of a WeightsMapper's orig_to_new_stacked too, the fused name kept beside them); the same
  from the prefix, and from the prefix with the path's layer numbers; each also with one name part
  that is not a layer number dropped, and without a leading "model.") are fed to load_weights one
  `<candidate>.<param>` at a time, every weight loader replaced by a recorder, and kept when they
  reach `<path>.<param>`; "checkpoint_shard_ids" the shard id they are loaded with. So a rename
  in the model's code (DeepSeek MTP's `mtp_block.`, an EAGLE head's `model.` prefix, Qwen3.5's
  `mtp.`) is followed. Where load_weights passes the weights through a function of the model's
  files that edits names (removeprefix, name[len(P):], replace(".<part>.", ".")), the candidates
  are also tried with those edits undone and, when one reaches the module, only those are kept
  (MiniMax-M3 DSpark: language_model.model.dspark.layers.N.decoder_layer.*); so are a regex
  rewrite's (an f-string of a `re.match` group's, in a function load_weights hands the weights
  or each name to: DeepSeek-V4 DSpark's mtp.N.* -> model.layers.N.*), read back into the
  pattern, a layer number it drops tried as each of the model's. A stacked_params_mapping
  entry whose param has several name parts (("attn.fused_wqa_wkv", "attn.wq_a", 0)) applies to
  a module whose path ends with them. A torch Linear
  (never asked) gets names only this way. Where load_weights
  takes none of a model's candidates (LongCat MTP: a dict literal of dense `.weight` names), the
  fallback: candidates kept when one of the model's WeightsMappers maps `<candidate>.<param>` onto
  `<path>.<param>` ("hf_to_vllm_mapper"), else the stacked_params_mapping tuples of the model
  files ("stacked_params_mapping"), else the path ("path", unverified); a module of a model whose
  load_weights took others' but none of its own has that source with " (load_weights took no
  candidate)".
- "hf_to_vllm_mapper": the top-level class's mapper (prefix/substr/suffix/stacked maps).
- "packed_modules_mapping": the model class attribute; "quant_config_packed_modules_mapping": the
  mapping the quantization config held when vLLM asked it about the Linear modules (a list when
  they were asked of configs holding different ones; a draft's own quant config may hold none).
- "quant_config_from" (drafts): whose quantization config vLLM asked about the Linear modules:
  "draft" (the draft checkpoint's own, get_draft_quant_config), "target" (the VllmConfig's, which
  is the target checkpoint's: the draft's own quantization_config is then never read), "both";
  null when no Linear was asked. The tiny target and draft carry the same W4A16 config; the
  record is which config object vLLM passed, not what it held.
- "layer_offset" (drafts): vLLM's layer number minus the module tree's over the non-attention
  modules, one number when the same for all (a DFlash/EAGLE draft's layer i is vLLM's layer
  T + i); attention layers may differ (Laguna DFlash offsets only its attention layers).
- "weight_reads": lines of the model's own files (every class in the built module tree defined
  under vllm/model_executor/models or vllm/models) whose code tokens (not strings or comments)
  read `<name>.weight`, <name> the last name part of one of the model's Linear modules; the
  line may sit in a branch for the dense case: "guard" gives the condition of the innermost `if`
  whose true branch holds it when that condition tests for a dense layer (names
  UnquantizedLinearMethod or calls hasattr); the module's "weight_read_directly" is true when its
  last name part is read so outside any such guard.
- "weight_packed_renamed" (only where found): a load_weights of the model's own classes that
  renames a checkpoint's `.weight_packed` to `.weight` (scan.weight_packed_renames: file, line,
  code, and the `if` it sits under). Kimi-K3 MTP does so when its routed experts registered no
  w13_weight_packed (experts kept dense, or a MoE method that keeps them unpacked) and then skips
  each name no parameter has: every quantized Linear's weight_packed is dropped without a word.
- "asked_not_in_model": prefixes vLLM asked the quant config about for modules that are not
  in the finished model (built and dropped during construction).
- "other_params": parameters not under any recorded module (norms, embeddings of drafts...).
- "kernels" (top level): "wna16_batch_invariant": whether VLLM_BATCH_INVARIANT=1 lets a
  compressed-tensors WNA16 Linear that no kernel takes (3 bits) load without kernel selection
  ("loads_without_kernel", with the file:line that skips it or vLLM's error as "evidence"), and
  vLLM's refusal of it without the variable ("refused"); kernel_probe.py.
- "error": the exception text when the model cannot be built (the entry is kept); "error_at"
  the innermost vLLM frame; "error_module" the last module the quant config was asked about
  before it failed (a Linear's create_weights, where the kernel is chosen, runs right after).
"""
from __future__ import annotations

import argparse
import json
import os
import pathlib
import subprocess
import sys
import tempfile

REPO = pathlib.Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from tools.vllm_module_map import fake_cuda  # noqa: E402
from tools.vllm_module_map.configs import BASE_FORMAT, SCHEMA_VERSION, SCHEME_CONFIGS  # noqa: E402
from tools.vllm_module_map.docs import DATA, DOCS, docs_text, load_maps  # noqa: E402
from tools.vllm_module_map.schemes import merge  # noqa: E402


def generate(cc: int | None, only: set[str] | None, fmt: str = BASE_FORMAT) -> dict:
    """One release's map under SCHEME_CONFIGS[fmt], from the vLLM this process imports (vLLM is
    imported here, not above): the whole map under the base format, the verdicts under another."""
    import logging
    logging.disable(logging.WARNING)
    if cc is None:  # the running vLLM: as on a host without AMX (host.py)
        from tools.vllm_module_map.host import as_on_a_host_without_amx
        as_on_a_host_without_amx()
    from tools.vllm_module_map.build import Builder
    data = Builder(cc, fmt).run(only)
    if fmt == BASE_FORMAT:
        data["kernels"] = kernels(cc)
    return data


def version_of(data: dict) -> str:
    return str(data.get("vllm_version", "unknown"))


def release_map(label: str, src: str, cc: int, only: list[str] | None,
                base: dict | None = None) -> dict | None:
    """A release's map (the vLLM in `src` with CUDA faked, or the installed one for src ""): the
    base format's, then each other format's verdicts (schemes.py) merged into it, each in a child
    process of its own (one vLLM and one format per process, in turn); None when one failed.
    `base`: that release's base map already made (--reuse-base), so only the verdicts are built."""
    cmd = [sys.executable, __file__, "--_child", f"{src},{cc}" if src else ""]
    for a in only or []:
        cmd += ["--only", a]
    env = dict(os.environ)
    if src:
        env["PYTHONPATH"] = src + os.pathsep + env.get("PYTHONPATH", "")
    maps = {}
    if base is not None:
        maps[BASE_FORMAT] = base
    for fmt in SCHEME_CONFIGS:
        if fmt in maps:
            continue
        out = subprocess.run(cmd + ["--_format", fmt], env=env, capture_output=True, text=True)
        sys.stderr.write(out.stderr[-4000:] if out.returncode else "")
        if out.returncode:
            print(f"release {label} ({fmt}): generator failed ({out.returncode})",
                  file=sys.stderr)
            return None
        maps[fmt] = json.loads(out.stdout)
        # Kept where a later step's failure would otherwise lose minutes of builds.
        keep = pathlib.Path(tempfile.gettempdir()) / \
            f"vllm-module-map-{version_of(maps[fmt])}-{fmt}.json"
        keep.write_text(out.stdout)
    data = maps.pop(BASE_FORMAT)
    return merge(data, maps, data["faked_platform"] or "the installed vLLM's own platform")


def kernels(cc: int | None) -> dict:
    """The map's "kernels" section: what the release's kernel selection does under
    VLLM_BATCH_INVARIANT=1 (kernel_probe.py; each case in a process of its own)."""
    from tools.vllm_module_map import kernel_probe
    return kernel_probe.kernels(cc)


def dump(data: dict) -> str:
    return json.dumps(data, indent=1, sort_keys=True) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--release", action="append", default=[],
                    help="V (the running vLLM) or V=DIR (vLLM's Python code in DIR, CUDA faked)")
    ap.add_argument("--cc", type=int, default=fake_cuda.DEFAULT_CC,
                    help="faked CUDA capability for V=DIR")
    ap.add_argument("--docs", action="store_true", help="rewrite docs/draft-kinds.md")
    ap.add_argument("--print", dest="print_", action="store_true",
                    help="generate for the running vLLM and print the map")
    ap.add_argument("--tree", default="",
                    help="with --print: vLLM's Python code in DIR (CUDA faked, --cc), not the "
                         "installed vLLM (check --vllm DIR of a tree without a CPU build)")
    ap.add_argument("--only", action="append", help="architectures to build (debugging)")
    ap.add_argument("--environment", help="a JSON file: the map's \"environment\" object "
                                          "(release.py writes it)")
    ap.add_argument("--reuse-base", action="store_true",
                    help="keep the committed map's base (W4A16) build and build only the other "
                         "formats' verdicts (schemes.py): for a map whose base part this "
                         "generator would write unchanged")
    ap.add_argument("--_child", help=argparse.SUPPRESS)
    ap.add_argument("--_format", default=BASE_FORMAT, help=argparse.SUPPRESS)
    args = ap.parse_args()
    only = set(args.only) if args.only else None
    if args._child is not None:
        # "DIR,CC", or "DIR" alone for the default capability; "" for the running vLLM.
        src, _, cc = args._child.partition(",")
        cc_val = None
        if src:
            sys.path.insert(0, src)
            cc_val = int(cc) if cc else fake_cuda.DEFAULT_CC
            os.environ["VLLM_MODULE_MAP_FAKED"] = f"CUDA capability {cc_val}"
        sys.stdout.write(dump(generate(cc_val, only, args._format)))
        return 0
    if args.print_:
        data = release_map(args.tree or "(installed)", args.tree, args.cc, args.only)
        if data is None:
            return 1
        sys.stdout.write(dump(data))
        return 0
    for rel in args.release:
        version, _, src = rel.partition("=")
        base = None
        if args.reuse_base:
            base = json.loads((DATA / f"vllm-{version}.json").read_text())
            base["schema_version"] = SCHEMA_VERSION
            base.pop("schemes", None)
            for e in base["architectures"].values():
                e.pop("scheme_verdicts", None)
        data = release_map(version, src, args.cc, args.only, base)
        if data is None:
            return 1
        if args.environment:
            data["environment"] = json.loads(pathlib.Path(args.environment).read_text())
        if data["vllm_version"] != version:
            print(f"release {version}: found vLLM {data['vllm_version']}", file=sys.stderr)
            return 1
        DATA.mkdir(parents=True, exist_ok=True)
        (DATA / f"vllm-{version}.json").write_text(dump(data))
        print(f"wrote {DATA / f'vllm-{version}.json'}", file=sys.stderr)
    if args.docs:
        DOCS.write_text(docs_text(load_maps()))
        print(f"wrote {DOCS}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
