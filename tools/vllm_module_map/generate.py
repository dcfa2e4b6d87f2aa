#!/usr/bin/env python3
"""What vLLM quantizes, asked of vLLM itself: one module map per vLLM release.

For every architecture of the release's speculative-decoding registry
(`_SPECULATIVE_DECODING_MODELS` in vllm/model_executor/models/registry.py) and a few common targets,
this builds the model the way vLLM does (a tiny config.json on disk, vLLM's ModelConfig,
SpeculativeConfig and VllmConfig, then model_loader.utils.initialize_model, the call
BaseModelLoader.create_model makes) on the meta device, with a compressed-tensors W4A16 quantization
config (targets ["Linear"], ignore ["lm_head"]), and records what vLLM decided for each module.

Regenerate every committed map and docs/draft-kinds.md (one command, from the repository root;
vLLM 0.32.0's CPU build in /work/main/.venv-vllm, vLLM 0.33.0's Python code unzipped from its CUDA
wheel into /work/vllm033/src: `pip download --no-deps vllm==0.33.0 -d /work/vllm033` and
`unzip -q vllm-0.33.0-*.whl -x '*.so' -d /work/vllm033/src`):

    nice -n 15 /work/main/.venv-vllm/bin/python tools/vllm_module_map/generate.py \
        --release 0.32.0 --release 0.33.0=/work/vllm033/src --docs

`--release V` runs the installed vLLM (it must be version V); `--release V=DIR` puts DIR first on
sys.path and fakes the CUDA platform (capability --cc, default 90) where that vLLM has no CPU build.
Each release runs in a subprocess of its own (one vLLM per process). `--docs` alone rewrites
docs/draft-kinds.md from the committed maps; `--print` writes one map to stdout (the test uses it).

Only the tiny configs (TINY, RECIPES: a base model_type and the keys a family's code reads) are
written by hand; what is recorded comes from vLLM. With V=DIR, vLLM's compiled extensions are
absent: empty stand-in modules and ops answer False, fake-kernel registrations for missing ops
are skipped, triton.Config of vLLM's Triton placeholder holds its arguments, the MoE aux
stream is None and, where no CUDA attention backend validates,
TRITON_MLA / FLASH_ATTN is named (none of these changes what a Linear gets). VllmConfig's
V1-model-runner check (this CPU build has no Triton, so it falls back to V1) is recorded in
"notes" and skipped, so that the model is built.

How each field is obtained:
- "registry": module and class from the registry dict; "file": that module's file in the tree.
- "methods": the speculative method that loads this architecture, from vLLM's naming rules:
  DSpark in the name -> dspark; EAGLEConfig's Eagle3<arch>/<arch>Eagle3 -> eagle3, Eagle<arch>
  -> eagle (transformers_utils/configs/eagle.py); written by SpeculativeConfig.hf_config_override
  (its source parsed) or named *MTP -> mtp; else by the registry module's name (METHOD_OF).
  Targets: "target" and "draft_model" (any causal LM serves as one). "methods_source" says
  which rule gave it.
- "built": what vLLM resolved (draft_model_config.architectures, the model class), the method and
  the target it was built against, and the tiny config's extra keys. A draft whose tiny config
  resolves to another architecture is an error, not a silent substitute.
- "as_draft_model" (targets): the same architecture built as a method="draft_model" draft, with
  the draft VllmConfig DraftModelProposer._create_draft_vllm_config makes.
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
  shards in order with their position. "checkpoint_names": candidates (the path, or for a fused
  module the path with its last part replaced by each shard, each also without "model.") kept
  when one of the model's WeightsMappers (hf_to_vllm_mapper, vLLM's own name mapping) maps
  `<candidate>.<param>` onto `<path>.<param>`; "checkpoint_shard_ids" the shard id it gives.
  Without a mapper that does, the stacked_params_mapping tuples found in the model files' code
  ("stacked_params_mapping"), else the path itself ("path", unverified). Renames a model's
  load_weights does in its own code (dict literals, string edits) are not followed.
- "hf_to_vllm_mapper": the top-level class's mapper (prefix/substr/suffix/stacked maps).
- "packed_modules_mapping": the model class attribute; "quant_config_packed_modules_mapping": the
  mapping the quantization config held when vLLM asked it about the Linear modules (a list when
  they were asked of configs holding different ones; a draft's own quant config may hold none).
- "layer_offset" (drafts): vLLM's layer number minus the module tree's over the non-attention
  modules, one number when the same for all (a DFlash/EAGLE draft's layer i is vLLM's layer
  T + i); attention layers may differ (Laguna DFlash offsets only its attention layers).
- "weight_reads": lines of the model's own files (every class in the built module tree defined
  under vllm/model_executor/models or vllm/models) whose code tokens (not strings or comments)
  read `<name>.weight`, <name> the last name part of one of the model's Linear modules; the
  line may sit in a branch for the dense case (read it); the module's "weight_read_directly" is
  true when its last name part is read so.
- "asked_not_in_model": prefixes vLLM asked the quant config about for modules that are not
  in the finished model (built and dropped during construction).
- "other_params": parameters not under any recorded module (norms, embeddings of drafts...).
- "error": the exception text when the model cannot be built (the entry is kept); "error_at"
  the innermost vLLM frame; "error_module" the last module the quant config was asked about
  before it failed (a Linear's create_weights, where the kernel is chosen, runs right after).
"""
from __future__ import annotations

import argparse
import ast
import contextlib
import functools
import inspect
import io
import json
import os
import pathlib
import re
import subprocess
import sys
import tempfile
import traceback

REPO = pathlib.Path(__file__).resolve().parents[2]
DATA = REPO / "data" / "vllm_module_map"
DOCS = REPO / "docs" / "draft-kinds.md"

QUANT_CONFIG = {
    "quant_method": "compressed-tensors",
    "format": "pack-quantized",
    "ignore": ["lm_head"],
    "config_groups": {"group_0": {
        "targets": ["Linear"],
        "weights": {"num_bits": 4, "type": "int", "symmetric": True, "strategy": "group",
                    "group_size": 128, "dynamic": False, "actorder": None, "observer": "minmax"},
        "input_activations": None, "output_activations": None}},
}

# Shapes small enough to build fast and large enough for the W4A16 kernels' shape rules
# (in % 128 == 0, out % 64 == 0). Only keys the base config class already has are set.
TINY = {
    "hidden_size": 256, "intermediate_size": 512, "num_attention_heads": 4,
    "num_key_value_heads": 2, "head_dim": 64, "num_hidden_layers": 2, "vocab_size": 512,
    "max_position_embeddings": 512, "moe_intermediate_size": 256, "num_experts": 4,
    "n_routed_experts": 4, "num_local_experts": 4, "num_experts_per_tok": 2,
    "n_shared_experts": 1, "shared_expert_intermediate_size": 256, "first_k_dense_replace": 1,
    "kv_lora_rank": 128, "q_lora_rank": 128, "qk_rope_head_dim": 64, "qk_nope_head_dim": 128,
    "v_head_dim": 128, "n_group": 1, "topk_group": 1, "num_nextn_predict_layers": 1,
    "linear_num_key_heads": 2, "linear_num_value_heads": 4, "linear_key_head_dim": 64,
    "linear_value_head_dim": 64, "decoder_sparse_step": 1, "mlp_only_layers": [],
    "tie_word_embeddings": False,
}
TARGET_LAYERS = 2

# Common targets: architecture -> HF model_type.
TARGETS = {"Qwen3ForCausalLM": "qwen3", "LlamaForCausalLM": "llama",
           "Qwen3MoeForCausalLM": "qwen3_moe"}

# Registry module name (last part) -> the method that loads it; MTP is found separately.
METHOD_OF = [
    (r"eagle3", "eagle3"), (r"eagle", "eagle"), (r"dflash|lilicorr|xpress|beam", "dflash"),
    (r"dspark", "dspark"), (r"^extract_hidden_states$", "extract_hidden_states"),
    (r"^medusa$", "medusa"), (r"mtp|^(deepseek_v32|dots3_note|deepseek_v4|deepseek_v41|minimax_m3|"
                              r"inkling|glm5next|qwen4_exp|interns2_mobius)$", "mtp"),
]

# Registry module name (last part) -> HF model_type of the tiny config, and extra keys.
DFLASH = {"dflash_config": {"target_layer_ids": [0, 1], "mask_token_id": 3, "block_size": 4},
          "block_size": 4, "num_target_layers": TARGET_LAYERS}
# DFlash2 (qwen3_dflash2.py) and LiLiCorr (lilicorr.py) read these dflash_config keys.
DFLASH2 = {**DFLASH, "dflash_config": {**DFLASH["dflash_config"], "conv_kernel_size": 4,
                                        "conv_group_size": 64, "selector_rank": 64,
                                        "selector_top_k": 8}}
LILICORR = {**DFLASH, "dflash_config": {**DFLASH["dflash_config"], "lilicorr_hidden_size": 256,
                                         "lilicorr_candidate_topk": 8, "lilicorr_num_heads": 4,
                                         "lilicorr_mlp_ratio": 2, "lilicorr_factor_dim": 64,
                                         "lilicorr_vector_eps": 1e-6, "lilicorr_logit_scale": 1.0,
                                         "lilicorr_num_layers": 1}}
EAGLE3 = {"eagle_config": {"eagle_aux_hidden_state_layer_ids": [0, 1],
                           "use_aux_hidden_state": True}, "draft_vocab_size": 512}
DSV3 = ("deepseek_v3", "DeepseekV3ForCausalLM")
# An MTP layer after the target's layers is a MoE layer with the tiny config; vLLM 0.32's CPU
# build has no W4A16 MoE kernel, so these keep it dense (first_k_dense_replace past it).
DENSE_MTP = {"first_k_dense_replace": 8}
MLA = {"kv_lora_rank": 128, "q_lora_rank": 128, "qk_rope_head_dim": 64, "qk_nope_head_dim": 128,
       "v_head_dim": 128}
RECIPES = {
    "llama_eagle": ("llama", {}), "llama_eagle3": ("llama", EAGLE3),
    "qwen3_eagle3": ("qwen3", EAGLE3), "llama4_eagle": ("llama4_text", {}),
    "minicpm_eagle": ("llama", {"scale_emb": 1, "dim_model_base": 256, "scale_depth": 1.4}),
    "cohere_eagle": ("cohere2", {}),
    "mistral_eagle": ("mistral", {}), "mistral_large_3_eagle": ("deepseek_v3", DENSE_MTP, DSV3), "deepseek_eagle3": ("llama", {**EAGLE3, **MLA}, DSV3),
    "deepseek_eagle": ("deepseek_v3", DENSE_MTP, DSV3),
    "qwen3_dflash": ("qwen3", DFLASH), "qwen3_dflash2": ("qwen3", DFLASH2),
    "laguna_dflash": ("laguna", {**DFLASH, "draft_vocab_size": 512}), "lilicorr": ("qwen3", LILICORR),
    "qwen3_xpress": ("qwen3", DFLASH), "beam": ("qwen3", DFLASH2),
    "qwen3_dspark": ("qwen3", {**DFLASH, "markov_rank": 64}),
    "deepseek_mtp": ("deepseek_v3", DENSE_MTP),
    "deepseek_v32": ("deepseek_v32", DENSE_MTP), "deepseek_v4": ("deepseek_v4", DENSE_MTP),
    "deepseek_v41": ("deepseek_v4", DENSE_MTP), "dots3_note": ("dots3_note", DENSE_MTP),
    "kimi_k3": ("kimi_k3", DENSE_MTP), "exaone4_5_mtp": ("exaone4", {}),
    "glm_ocr_mtp": ("glm_ocr", {}), "hy_v3_mtp": ("hy_v3", {**DENSE_MTP, "num_nextn_predict_layers": 1}),
    "mimo_v2_mtp": ("mimo_v2_flash", {"layernorm_epsilon": 1e-6}), "qwen4_exp": ("qwen4_exp", {}),
    "gemma4_dspark": ("gemma4_text", {**DFLASH, "target_layer_ids": [0, 1], "markov_rank": 64}), "glm4_moe_mtp": ("glm4_moe", {"head_dim": 64}),
    "glm4_moe_lite_mtp": ("glm4_moe_lite", {"first_k_dense_replace": 1,
                                             "num_nextn_predict_layers": 1}), "qwen3_next_mtp": ("qwen3_next", {}),
    "qwen3_5_mtp": ("qwen3_5_text", {}), "ernie_mtp": ("ernie4_5_moe", {"num_nextn_predict_layers": 1}),
    "mimo_mtp": ("qwen2", {"num_nextn_predict_layers": 1}, ("qwen2", "MiMoForCausalLM")), "longcat_flash_mtp": ("longcat_flash", {"mla_scale_q_lora": True,
                                             "mla_scale_kv_lora": True}),
    "openpangu_mtp": ("pangu_ultra_moe", {}), "exaone_moe_mtp": ("exaone_moe", {}),
    "step3p5_mtp": ("step3p5", {"num_attention_groups": 2}), "gemma4_mtp": ("gemma4_text", {}),
    "nemotron_h_mtp": ("nemotron_h", {}), "extract_hidden_states": ("qwen3", {}),
    "medusa": ("medusa", {}),
}

MODEL_DIRS = ("vllm/model_executor/models/", "vllm/models/")


# ---------------------------------------------------------------------------------------------
# In the vLLM process


def fake_cuda(cc: int) -> None:
    """Makes vLLM believe it runs on CUDA at capability `cc` (as tests/python/vllm_kernel_verdicts.py)."""
    import importlib
    import types
    # The wheel's compiled extensions are not unzipped (and would need CUDA): empty stand-ins, so
    # that the Python code imports. Nothing here calls a kernel: the model is built on meta.
    class Anything:
        """Stands for a missing op or name: falsy, callable (answers False), any attribute."""
        def __call__(self, *a, **k):
            return False

        def __bool__(self):
            return False

        def __getattr__(self, attr):
            if attr.startswith("__"):
                raise AttributeError(attr)
            return self
    anything = Anything()

    class Stub(types.ModuleType):
        """A module whose every name is `anything`."""
        def __getattr__(self, attr):
            if attr.startswith("__"):
                raise AttributeError(attr)
            return anything
    for name in ("vllm._C", "vllm._C_stable_libtorch", "vllm._moe_C", "vllm.cumem_allocator",
                 "vllm._flashmla_C", "vllm._flashmla_extension_C", "vllm._rocm_C",
                 "vllm.vllm_flash_attn", "vllm.vllm_flash_attn.flash_attn_interface"):
        try:
            importlib.import_module(name)
        except ImportError:
            sys.modules[name] = Stub(name)
    # Ops of those extensions (torch.ops._C.*) asked at import time, for capability checks: a
    # missing op of a vLLM namespace answers False.
    import torch._ops
    orig_getattr = torch._ops._OpNamespace.__getattr__

    def getattr_or_false(self, op_name):
        try:
            return orig_getattr(self, op_name)
        except AttributeError:
            if self.name.startswith("_") and not op_name.startswith("__"):
                return anything
            raise
    torch._ops._OpNamespace.__getattr__ = getattr_or_false
    # hasattr(torch.ops._C, op) is now true, so vLLM registers fake kernels for ops that do not
    # exist: those registrations are skipped.
    import torch.library
    orig_register_fake = torch.library.register_fake

    def register_fake(op, fn=None, **kw):
        def deco(f):
            try:
                return orig_register_fake(op, f, **kw)
            except (RuntimeError, ValueError):
                return f
        return deco(fn) if fn is not None else deco
    torch.library.register_fake = register_fake
    import vllm.platforms as platforms
    from vllm.platforms.cuda import CudaPlatform
    from vllm.platforms.interface import DeviceCapability
    CudaPlatform.get_device_capability = classmethod(
        lambda c, device_id=0: DeviceCapability(cc // 10, cc % 10))
    CudaPlatform.has_device_capability = classmethod(
        lambda c, capability, device_id=0: (cc >= (capability if isinstance(capability, int)
                                                   else capability[0] * 10 + capability[1])))
    CudaPlatform.get_device_name = classmethod(lambda c, device_id=0: "faked")
    CudaPlatform.get_device_total_memory = classmethod(lambda c, device_id=0: 1 << 36)
    CudaPlatform.is_fully_connected = classmethod(lambda c, ids: True)
    CudaPlatform.num_compute_units = classmethod(lambda c, device_id=0: 132)
    CudaPlatform.is_integrated_gpu = classmethod(lambda c, device_id=0: False)
    # The faked device has no streams: the MoE shared-expert overlap stream is None (its
    # CPU answer). The attention backend does not change what a Linear gets; when no CUDA
    # backend validates here (MLA backends check for their kernels), TRITON_MLA / FLASH_ATTN.
    import vllm.utils.torch_utils as torch_utils
    torch_utils.aux_stream = lambda: None
    orig_backend = CudaPlatform.get_attn_backend_cls.__func__

    def get_attn_backend_cls(c, selected_backend, attn_selector_config, *a, **k):
        try:
            return orig_backend(c, selected_backend, attn_selector_config, *a, **k)
        except ValueError:
            if getattr(attn_selector_config, "use_mla", False):
                return "vllm.v1.attention.backends.mla.triton_mla.TritonMLABackend"
            return "vllm.v1.attention.backends.flash_attn.FlashAttentionBackend"
    CudaPlatform.get_attn_backend_cls = classmethod(get_attn_backend_cls)
    platforms._current_platform = CudaPlatform()
    # Without a usable Triton, vLLM's placeholder makes triton.Config a decorator; the Mamba
    # kernels read num_stages / num_warps / kwargs of their configs at import on capability 9.0.
    import vllm.triton_utils as triton_utils
    if not triton_utils.HAS_TRITON:
        class Config:
            def __init__(self, kwargs=None, num_warps=4, num_stages=1, **extra):
                self.kwargs, self.num_warps, self.num_stages = kwargs or {}, num_warps, num_stages
        triton_utils.triton.Config = Config


def rel_file(obj) -> str | None:
    try:
        f = inspect.getsourcefile(obj)
    except TypeError:
        return None
    if f is None:
        return None
    f = f.replace(os.sep, "/")
    i = f.rfind("/vllm/")
    return f[i + 1:] if i >= 0 else f


def mtp_architectures(speculative_py: str) -> set[str]:
    """The architectures SpeculativeConfig.hf_config_override writes (its source, parsed)."""
    tree = ast.parse(speculative_py)
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and node.name == "hf_config_override":
            for sub in ast.walk(node):
                if isinstance(sub, ast.Dict):
                    for k, v in zip(sub.keys, sub.values):
                        if isinstance(k, ast.Constant) and k.value == "architectures" and \
                                isinstance(v, ast.List):
                            found |= {e.value for e in v.elts if isinstance(e, ast.Constant)}
                        if isinstance(v, ast.Constant) and isinstance(v.value, str) and \
                                "MTP" in v.value:
                            found.add(v.value)
    return found


def method_of(arch: str, module: str, mtp_archs: set[str]) -> tuple[str, str]:
    if "DSpark" in arch:
        return "dspark", "architecture name contains DSpark"
    # EAGLEConfig (transformers_utils/configs/eagle.py) names the draft Eagle3<arch> for eagle3
    # and Eagle<arch> for eagle; hf_config_override also writes some Eagle* names.
    if arch.startswith("Eagle3") or arch.endswith("Eagle3"):
        return "eagle3", "EAGLEConfig's eagle3 naming (Eagle3<arch> / <arch>Eagle3)"
    if arch.startswith("Eagle"):
        return "eagle", "EAGLEConfig's eagle naming (Eagle<arch>)"
    if arch in mtp_archs:
        return "mtp", "speculative.py hf_config_override writes this architecture"
    if re.search(r"MTP(Model)?$|_MTP$", arch):
        return "mtp", "architecture name ends in MTP"
    last = module.split(".")[-1]
    for pattern, method in METHOD_OF:
        if re.search(pattern, last):
            return method, f"registry module {last!r} matches {pattern!r}"
    return "unknown", "no rule"


@functools.lru_cache(maxsize=None)
def parsed(path: pathlib.Path):
    """A file's AST (each model file is read by many architectures: parsed once)."""
    return ast.parse(path.read_text())


@functools.lru_cache(maxsize=None)
def tokens(path: pathlib.Path):
    """A file's code tokens (no strings' insides, comments or layout) and its lines."""
    import tokenize
    text = path.read_text()
    toks = [t for t in tokenize.generate_tokens(io.StringIO(text).readline)
            if t.type not in (tokenize.NL, tokenize.NEWLINE, tokenize.COMMENT,
                              tokenize.INDENT, tokenize.DEDENT)]
    return toks, text.splitlines()


def stacked_mappings(files: list[str], root: pathlib.Path) -> list[dict]:
    """(param, shard, shard_id) tuples assigned to *stacked_params_mapping* in the files' code."""
    out = []
    for f in files:
        try:
            tree = parsed(root / f)
        except (OSError, SyntaxError):
            continue
        for node in ast.walk(tree):
            if not isinstance(node, (ast.Assign, ast.AnnAssign)):
                continue
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names = [t.id if isinstance(t, ast.Name) else getattr(t, "attr", "") for t in targets]
            if not any("stacked_params_mapping" in n for n in names):
                continue
            if not isinstance(node.value, ast.List):
                continue
            for e in node.value.elts:
                if isinstance(e, ast.Tuple) and len(e.elts) == 3 and \
                        all(isinstance(x, ast.Constant) for x in e.elts):
                    p, s, i = (x.value for x in e.elts)
                    out.append({"param": p, "shard": s, "shard_id": i, "file": f,
                                "line": e.lineno})
    return out


def checkpoint_names(path: str, last: str, shards: list[str] | None, entries: list[dict],
                     mappers: list, params: list[str]) -> dict:
    """The checkpoint module names that load into the module at `path`.

    Candidates: the path, and the path with its last part replaced by each shard of
    packed_modules_mapping (or of a stacked_params_mapping entry), each also without a leading
    "model.". A candidate is kept when one of the model's WeightsMappers (hf_to_vllm_mapper, vLLM's
    own name mapping) maps `<candidate>.<param>` to `<path>.<param>` ("hf_to_vllm_mapper", with the
    shard id it gives), or when a stacked_params_mapping entry of the model's files maps it
    ("stacked_params_mapping"); with neither, the path itself ("path", not verified)."""
    param = params[0] if params else "weight"
    stem = path[: -len(last)]
    parts = list(shards or []) + [s["shard"].strip(".") for s in entries]
    cands = []
    for base in ([] if shards else [path]) + [stem + p for p in parts]:
        for c in (base, base[len("model."):] if base.startswith("model.") else None):
            if c and c not in cands:
                cands.append(c)
    found, ids = [], {}
    for c in cands:
        for mp in mappers:
            r = mp._map_name_with_shard(f"{c}.{param}") if hasattr(mp, "_map_name_with_shard") \
                else (mp._map_name(f"{c}.{param}"), None)
            if r is not None and r[0] == f"{path}.{param}":
                if c not in found:
                    found.append(c)
                    if r[1] is not None:
                        ids[c] = r[1] if not isinstance(r[1], tuple) else list(r[1])
                break
    if found == [path]:
        return {"checkpoint_names": found, "checkpoint_names_source": "path (mappers keep it)",
                "checkpoint_shard_ids": None}
    if found:
        return {"checkpoint_names": found, "checkpoint_names_source": "hf_to_vllm_mapper",
                "checkpoint_shard_ids": {k: v for k, v in ids.items()} or None}
    if entries:
        names = []
        for s in entries:
            c = stem + s["shard"].strip(".")
            if c not in names:
                names.append(c)
        return {"checkpoint_names": names, "checkpoint_names_source": "stacked_params_mapping",
                "checkpoint_shard_ids": {stem + s["shard"].strip("."): s["shard_id"]
                                         for s in entries}}
    return {"checkpoint_names": [path], "checkpoint_names_source": "path",
            "checkpoint_shard_ids": None}


def weight_reads(files: list[str], root: pathlib.Path, linear_names: set[str]) -> list[dict]:
    """Code (tokens, so not strings or comments) reading `<name>.weight`, <name> a Linear's name."""
    import tokenize
    out = []
    for f in files:
        try:
            toks, lines = tokens(root / f)
        except (OSError, SyntaxError, tokenize.TokenError):
            continue
        for t0, t1, t2 in zip(toks, toks[1:], toks[2:]):
            if t0.type == tokenize.NAME and t0.string in linear_names and t1.string == "." \
                    and t2.type == tokenize.NAME and t2.string == "weight":
                n = t0.start[0]
                out.append({"name": t0.string, "file": f, "line": n,
                            "code": lines[n - 1].split("#", 1)[0].strip()})
    return out


class Builder:
    def __init__(self, cc: int | None):
        import torch  # noqa: F401
        import vllm
        self.version = vllm.__version__
        self.root = pathlib.Path(vllm.__file__).resolve().parents[1]
        self.tmp = pathlib.Path(tempfile.mkdtemp(prefix="vllm_module_map_"))
        os.environ.setdefault("VLLM_CACHE_ROOT", str(self.tmp / "cache"))
        if cc is not None:
            fake_cuda(cc)
        from vllm.model_executor.models import registry
        # Inspecting a model class runs a subprocess per class in vLLM (to keep CUDA out of the
        # main process); this process builds on the meta device, so it is run in-process.
        self.inspect_errors: list[str] = []

        def in_process(fn):
            try:
                return fn()
            except Exception as ex:  # the registry logs it and raises its own error
                self.inspect_errors.append(f"{type(ex).__name__}: {' '.join(str(ex).split())}")
                raise
        registry._run_in_subprocess = in_process
        self.registry = registry
        from vllm.model_executor.layers.quantization.compressed_tensors import compressed_tensors
        self.records: dict[int, dict] = {}
        orig = compressed_tensors.CompressedTensorsConfig.get_quant_method
        records = self.records

        asking = self.asking = [None]

        def hooked(qc, layer, prefix):
            asking[0] = prefix
            qm = orig(qc, layer, prefix)
            # The layer itself is kept: a strong reference, so that no later module can reuse
            # the id of one vLLM built, asked about and dropped.
            records[id(layer)] = {
                "layer": layer, "prefix": prefix, "quant_method": type(qm).__name__ if qm is not None else None,
                "qc_packed": {k: list(v) for k, v in
                              sorted((getattr(qc, "packed_modules_mapping", None) or {}).items())}}
            return qm
        compressed_tensors.CompressedTensorsConfig.get_quant_method = hooked
        # VllmConfig refuses some drafts on the V1 model runner (the one this build falls back
        # to without Triton); that check is about the runner, not the model: it is recorded in
        # the entry's "notes" and the model is built.
        from vllm.config import VllmConfig
        self.notes: list[str] = []
        orig_v1 = getattr(VllmConfig, "_validate_v1_model_runner", None)
        if orig_v1 is not None:
            notes = self.notes

            def validate_v1(vc):
                try:
                    orig_v1(vc)
                except ValueError as ex:
                    notes.append(f"VllmConfig on this build: {ex} (check skipped to build)")
            VllmConfig._validate_v1_model_runner = validate_v1
        self.dist_ready = False

    def write_config(self, name: str, model_type: str, arch: str, extra: dict,
                     layers: int) -> pathlib.Path:
        from vllm.transformers_utils.config import _CONFIG_REGISTRY
        cls = _CONFIG_REGISTRY[model_type] if model_type in _CONFIG_REGISTRY else None
        if cls is None:
            from transformers import AutoConfig
            cls = type(AutoConfig.for_model(model_type))
        defaults = cls().to_dict()
        over = {k: v for k, v in TINY.items() if k in defaults}
        over["num_hidden_layers"] = layers
        if "layer_types" in defaults:
            over["layer_types"] = None
        cfg = cls(**over).to_dict()
        cfg.update(extra)
        cfg.update({"architectures": [arch], "model_type": model_type, "torch_dtype": "bfloat16",
                    "quantization_config": QUANT_CONFIG})
        d = self.tmp / name
        d.mkdir(parents=True, exist_ok=True)
        (d / "config.json").write_text(json.dumps(cfg, default=str))
        return d

    def model_config(self, path: pathlib.Path):
        from vllm.config import ModelConfig
        return ModelConfig(model=str(path), skip_tokenizer_init=True, dtype="bfloat16",
                           max_model_len=256, enforce_eager=True)

    def init_dist(self, vllm_config):
        """One process group; the model-parallel groups again for each model (vLLM creates the
        expert-parallel group only when the config it is given is a MoE)."""
        from vllm.config import set_current_vllm_config
        from vllm.distributed import (destroy_model_parallel, init_distributed_environment,
                                      initialize_model_parallel)
        with set_current_vllm_config(vllm_config):
            if not self.dist_ready:
                init_distributed_environment(world_size=1, rank=0, local_rank=0,
                                             distributed_init_method=f"file://{self.tmp}/dist",
                                             backend="gloo")
                self.dist_ready = True
            else:
                destroy_model_parallel()
            initialize_model_parallel(1, 1)

    def build(self, vllm_config, model_config):
        import torch
        from vllm.model_executor.model_loader.utils import initialize_model
        self.init_dist(vllm_config)
        self.records.clear()
        with torch.device("meta"):
            return initialize_model(vllm_config=vllm_config, model_config=model_config)

    def describe(self, model, model_cls) -> dict:
        import torch
        from vllm.model_executor.layers.linear import LinearBase
        files = sorted({f for m in model.modules() for c in type(m).__mro__
                        if (f := rel_file(c)) and f.startswith(MODEL_DIRS)})
        linear_names = {n.rsplit(".", 1)[-1] for n, m in model.named_modules()
                        if isinstance(m, (LinearBase, torch.nn.Linear))}
        stacked = stacked_mappings(files, self.root)
        reads = weight_reads(files, self.root, linear_names)
        read_names = {r["name"] for r in reads}
        packed = {k: list(v) for k, v in
                  sorted((getattr(model_cls, "packed_modules_mapping", None) or {}).items())}
        mappers = []
        for _, m in model.named_modules():
            mp = getattr(type(m), "hf_to_vllm_mapper", None)
            if mp is not None and all(mp is not x for x in mappers):
                mappers.append(mp)
        modules = {}
        qc_seen: list = []
        for path, mod in model.named_modules():
            rec = self.records.get(id(mod))
            if rec is not None and rec["layer"] is not mod:
                rec = None
            if rec is None and not isinstance(mod, (LinearBase, torch.nn.Linear)):
                continue
            last = path.rsplit(".", 1)[-1]
            name = rec["prefix"] if rec else getattr(mod, "prefix", path)
            qm = rec["quant_method"] if rec else type(getattr(mod, "quant_method", None)).__name__
            if rec:
                if isinstance(mod, LinearBase) and rec["qc_packed"] not in qc_seen:
                    qc_seen.append(rec["qc_packed"])
            scheme = getattr(mod, "scheme", None)
            e = {"path": path, "prefix": name, "class": type(mod).__name__, "asked": rec is not None,
                 "quant_method": qm,
                 "scheme": type(scheme).__name__ if scheme is not None else None,
                 "params": sorted(n for n, _ in mod.named_parameters(recurse=False))}
            e["quantized"] = any("weight_packed" in p for p in e["params"])
            if isinstance(mod, torch.nn.Linear):
                # torch's own Linear: no quant method at all, vLLM never quantizes it.
                e["quant_method"] = None
                e["weight_read_directly"] = last in read_names
            if isinstance(mod, LinearBase):
                e["weight_read_directly"] = last in read_names
                shards = packed.get(last)
                entries = [s for s in stacked if s["param"].strip(".") == last]
                if shards:
                    e["fused"] = [{"shard": s, "position": i} for i, s in enumerate(shards)]
                e.update(checkpoint_names(path, last, shards, entries, mappers, e["params"]))
            # Keyed by the prefix; a module built without one (prefix "") by its path.
            modules[name or path] = e
        mapper = getattr(model_cls, "hf_to_vllm_mapper", None)
        mapper_d = None
        if mapper is not None:
            mapper_d = {k: {str(a): str(b) for a, b in sorted((getattr(mapper, k) or {}).items())}
                        for k in ("orig_to_new_prefix", "orig_to_new_substr", "orig_to_new_suffix",
                                  "orig_to_new_stacked")
                        if getattr(mapper, k, None)}
        in_tree = {id(m) for m in model.modules()}
        dropped = sorted(r["prefix"] for k, r in self.records.items() if k not in in_tree)
        other = sorted(n for n, _ in model.named_parameters()
                       if not any(n.startswith(m["path"] + ".") for m in modules.values()))
        offsets = set()
        for m in modules.values():
            if "Attention" in m["class"] and "Linear" not in m["class"]:
                continue  # attention layers name KV-cache slots, not what ignore matches
            a = re.search(r"layers\.(\d+)\.", m["prefix"] + ".")
            b = re.search(r"layers\.(\d+)\.", m["path"] + ".")
            if a and b:
                offsets.add(int(a.group(1)) - int(b.group(1)))
        return {"modules": modules, "files": files,
                "layer_offset": offsets.pop() if len(offsets) == 1 else sorted(offsets) or None, "weight_reads": reads,
                "stacked_params_mapping": stacked, "packed_modules_mapping": packed,
                # One mapping when every Linear was asked of configs holding the same one.
                "quant_config_packed_modules_mapping": (qc_seen[0] if len(qc_seen) == 1 else
                                                        qc_seen or None),
                "hf_to_vllm_mapper": mapper_d, "other_params": other,
                "asked_not_in_model": dropped}

    def target_entry(self, arch: str, model_type: str) -> dict:
        from vllm.config import VllmConfig
        d = self.write_config(f"target-{arch}", model_type, arch, {}, TARGET_LAYERS)
        mc = self.model_config(d)
        vc = VllmConfig(model_config=mc)
        model_cls, _ = self.registry.ModelRegistry.resolve_model_cls(
            mc.hf_config.architectures, model_config=mc)
        model = self.build(vc, mc)
        e = {"role": "target", "methods": ["target", "draft_model"],
             "methods_source": "common target; any causal LM serves as a draft_model draft",
             "built": {"architecture": mc.hf_config.architectures[0], "class": model_cls.__name__,
                       "model_type": model_type, "layers": TARGET_LAYERS}}
        e.update(self.describe(model, model_cls))
        e["as_draft_model"] = self.as_draft_model(arch, model_type, mc)
        return e

    def as_draft_model(self, arch: str, model_type: str, target_mc) -> dict:
        """The same architecture as a method="draft_model" draft (1 layer) of the target."""
        from vllm.config import ParallelConfig, SpeculativeConfig, VllmConfig
        try:
            ddir = self.write_config(f"draft_model-{arch}", model_type, arch, {}, 1)
            sc = SpeculativeConfig(method="draft_model", model=str(ddir), num_speculative_tokens=1,
                                   target_model_config=target_mc,
                                   target_parallel_config=ParallelConfig())
            vc = VllmConfig(model_config=target_mc, speculative_config=sc)
            dmc = sc.draft_model_config
            # DraftModelProposer._create_draft_vllm_config (v1/spec_decode/draft_model.py): the
            # draft's model_config in place of the target's, quant_config recomputed from it.
            import dataclasses
            vc = dataclasses.replace(vc, quant_config=None, model_config=dmc)
            model_cls, resolved = self.registry.ModelRegistry.resolve_model_cls(
                dmc.hf_config.architectures, model_config=dmc)
            model = self.build(vc, dmc)
            d = {"built": {"method": sc.method, "architecture": resolved,
                           "class": model_cls.__name__, "target": arch, "layers": 1},
                 "error": None}
            d.update({k: v for k, v in self.describe(model, model_cls).items()
                      if k in ("modules", "quant_config_packed_modules_mapping")})
            return d
        except Exception as ex:  # noqa: BLE001
            return {"error": f"{type(ex).__name__}: {' '.join(str(ex).split())[:400]}"}

    def draft_entry(self, arch: str, module: str, method: str) -> dict:
        from vllm.config import ParallelConfig, SpeculativeConfig, VllmConfig
        last = module.split(".")[-1]
        if last not in RECIPES:
            raise LookupError(f"no tiny-config recipe for registry module {module!r}")
        model_type, extra, *tgt = RECIPES[last]
        if method == "mtp":
            # MTP: the draft is the target's checkpoint (SpeculativeConfig model=None).
            # The target's architecture is the one hf_config_override looks for: the recipe's, or
            # transformers' causal-LM class of the model_type, or (none) the MTP name itself.
            from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES
            target_arch = tgt[0][1] if tgt else MODEL_FOR_CAUSAL_LM_MAPPING_NAMES.get(model_type, arch)
            tdir = self.write_config(f"mtp-{arch}", model_type, target_arch, extra, TARGET_LAYERS)
            ddir = None
        else:
            t_type, target_arch = tgt[0] if tgt else ("qwen3", "Qwen3ForCausalLM")
            tdir = self.write_config(f"target-{target_arch}", t_type, target_arch, {},
                                     TARGET_LAYERS)
            ddir = self.write_config(f"draft-{arch}", model_type, arch, extra, 1)
        mc = self.model_config(tdir)
        sc = SpeculativeConfig(method=method, model=str(ddir) if ddir else None,
                               num_speculative_tokens=1, target_model_config=mc,
                               target_parallel_config=ParallelConfig())
        vc = VllmConfig(model_config=mc, speculative_config=sc)
        dmc = sc.draft_model_config
        if dmc.hf_config.architectures[0] != arch and \
                self.registry._VLLM_MODELS.get(dmc.hf_config.architectures[0]) != \
                self.registry._VLLM_MODELS.get(arch):
            raise LookupError(f"the tiny config resolves to {dmc.hf_config.architectures[0]}, "
                              f"not {arch} (method {sc.method})")
        model_cls, resolved = self.registry.ModelRegistry.resolve_model_cls(
            dmc.hf_config.architectures, model_config=dmc)
        built = {"method": sc.method, "architecture": resolved, "class": model_cls.__name__,
                 "model_type": model_type, "target": target_arch, "target_layers": TARGET_LAYERS,
                 "config_extra": extra}
        model = self.build(vc, dmc)
        e = {"built": built}
        e.update(self.describe(model, model_cls))
        return e

    def run(self, only: set[str] | None) -> dict:
        reg = self.registry
        spec = reg._SPECULATIVE_DECODING_MODELS
        mtp_archs = mtp_architectures((self.root / "vllm/config/speculative.py").read_text())
        archs = {}
        jobs = [(a, "target", TARGETS[a]) for a in TARGETS] + \
               [(a, "draft", spec[a]) for a in sorted(spec)]
        for arch, role, info in jobs:
            if only and arch not in only:
                continue
            print(f"[{self.version}] {arch}", file=sys.stderr, flush=True)
            entry: dict = {}
            self.notes.clear()
            self.inspect_errors.clear()
            self.asking[0] = None
            try:
                with contextlib.redirect_stdout(io.StringIO()):
                    if role == "target":
                        entry = {"role": "target", "methods": ["target"],
                                 "methods_source": "common target"}
                        entry.update(self.target_entry(arch, info))
                    else:
                        module, cls = info
                        method, why = method_of(arch, module, mtp_archs)
                        entry = {"role": "draft", "methods": [method], "methods_source": why,
                                 "registry": {"module": module, "class": cls}}
                        entry.update(self.draft_entry(arch, module, method))
                entry["error"] = None
            except Exception as ex:  # noqa: BLE001 - recorded, not dropped
                if os.environ.get("VLLM_MODULE_MAP_TRACEBACK"):
                    traceback.print_exc()
                tb = traceback.extract_tb(ex.__traceback__)
                where = next((f"{rel_file_path(fr.filename)}:{fr.lineno}" for fr in reversed(tb)
                              if "/vllm/" in fr.filename), None)
                text = " ".join(str(ex).split())
                if self.inspect_errors:
                    text = f"{self.inspect_errors[-1]} (inspecting the model class)"
                text = re.sub(r"0x[0-9a-f]+|/tmp/vllm_module_map_\w+", "...", text)
                entry["error"] = f"{type(ex).__name__}: {text[:400]}"
                entry["error_at"] = where
                if self.asking[0] is not None:
                    # The last module the quant config was asked about: a layer's
                    # create_weights (kernel choice) runs right after it is asked.
                    entry["error_module"] = self.asking[0]
            if self.notes:
                entry["notes"] = sorted(set(self.notes))
            if role == "draft":
                entry.setdefault("registry", {"module": info[0], "class": info[1]})
            entry.setdefault("role", role)
            entry["file"] = self.class_file(arch)
            archs[arch] = entry
        return {"vllm_version": self.version, "generator": "tools/vllm_module_map/generate.py",
                "quantization_config": QUANT_CONFIG, "tiny_config": TINY,
                "faked_platform": os.environ.get("VLLM_MODULE_MAP_FAKED"),
                "architectures": archs}

    def class_file(self, arch: str) -> str | None:
        info = self.registry._VLLM_MODELS.get(arch)
        if info is None:
            return None
        module, _ = info
        name = module if module.startswith("vllm.") else f"vllm.model_executor.models.{module}"
        base = self.root / name.replace(".", "/")
        for f in (base.with_suffix(".py"), base / "__init__.py"):
            if f.exists():
                return f.relative_to(self.root).as_posix()
        return None


def rel_file_path(f: str) -> str:
    f = f.replace(os.sep, "/")
    i = f.rfind("/vllm/")
    return f[i + 1:] if i >= 0 else f


def generate(cc: int | None, only: set[str] | None) -> dict:
    import logging
    logging.disable(logging.WARNING)
    b = Builder(cc)
    return b.run(only)


def dump(data: dict) -> str:
    return json.dumps(data, indent=1, sort_keys=True) + "\n"


# ---------------------------------------------------------------------------------------------
# Docs (from the committed maps)


def dense_modules(entry: dict) -> list[str]:
    """Linear-like modules vLLM left without a scheme, each with why (from the map's fields)."""
    out = []
    for name, m in sorted(entry.get("modules", {}).items()):
        cls = m["class"]
        if m.get("quantized") or "Attention" in cls and "Linear" not in cls:
            continue
        if "Embedding" in cls or cls == "ParallelLMHead":
            if m.get("asked") and m.get("quant_method") is None:
                continue  # lm_head / embeddings: the config's ignore, as expected
            why = "embedding or lm_head, " + ("built without quant_config" if not m.get("asked")
                                              else m.get("quant_method") or "unquantized")
        elif cls == "Linear":
            why = "torch.nn.Linear: no quant method"
        elif not m.get("asked"):
            why = "built with quant_config=None"
        else:
            why = m.get("quant_method") or "no quant method"
        out.append(f"`{name}` ({cls}: {why})")
    return out


def weight_read_notes(entry: dict) -> list[str]:
    reads = {}
    for r in entry.get("weight_reads", []):
        reads.setdefault(r["name"], []).append(f"{r['file'].rsplit('/', 1)[-1]}:{r['line']}")
    out = []
    for name, m in sorted(entry.get("modules", {}).items()):
        last = m["path"].rsplit(".", 1)[-1]
        if m.get("weight_read_directly") and last in reads:
            state = "quantized" if m.get("quantized") else "dense"
            out.append(f"`{name}` ({state}) at {', '.join(sorted(set(reads[last])))}")
    return out


def docs_text(maps: dict[str, dict]) -> str:
    lines = [
        "# Draft kinds: what vLLM quantizes in each speculative draft",
        "",
        "Generated by `tools/vllm_module_map/generate.py --docs` from data/vllm_module_map/*.json",
        "(do not edit by hand; tests/python/test_vllm_module_map.py checks it). Regenerate the maps",
        "and this page with:",
        "",
        "```",
        "nice -n 15 /work/main/.venv-vllm/bin/python tools/vllm_module_map/generate.py \\",
        "    --release 0.32.0 --release 0.33.0=/work/vllm033/src --docs",
        "```",
        "",
        "Each map is made by vLLM's own code: every architecture of the release's speculative-decoding",
        "registry (and three common targets) is built on the meta device from a tiny config.json",
        "through vLLM's ModelConfig, SpeculativeConfig, VllmConfig and initialize_model, with a",
        "compressed-tensors W4A16 config (targets `Linear`, ignore `lm_head`); the map records what",
        "vLLM then decided for each module. The generator's docstring says how each field is",
        "obtained. vLLM 0.33.0 has no CPU build: its Python code runs here with the CUDA platform",
        "faked (capability 90), so kernel choices there are what vLLM's code picks for that device.",
        "",
        "Per release, a cell gives the file that defines the architecture, how many Linear modules",
        "registered packed W4A16 weights, the Linear-like modules left dense and why (lm_head and",
        "embeddings that the ignore list keeps dense are not listed), and where the model's own code",
        "reads a Linear's `.weight` directly (`.weight` does not exist on a quantized module; the",
        "line may sit in a branch for the dense case: read it). \"not built\" gives vLLM's exception:",
        "on 0.32 many come from the CPU build itself (no W4A16 MoE kernel, Linear outputs that are",
        "not a multiple of 32, no Triton), others from the tiny config (no recipe for that family,",
        "or a key the family needs that the tiny config lacks). A kernel-shape refusal can come",
        "from the tiny sizes (4 experts, 4 heads, hidden 256) rather than from the real model's:",
        "\"last module asked\" names the module, and the reason gives the size.",
        "",
    ]
    versions = sorted(maps, key=lambda v: tuple(int(x) for x in re.findall(r"\d+", v)))
    for v in versions:
        m = maps[v]
        n = len(m["architectures"])
        failed = sum(1 for e in m["architectures"].values() if e.get("error"))
        lines.append(f"- vLLM {v}: {n} architectures, {n - failed} built, {failed} not built"
                     + (f" (platform faked: {m['faked_platform']})" if m.get("faked_platform") else ""))
    def cell(e: dict | None) -> str:
        if e is None:
            return "not in registry"
        parts = [f"`{e.get('file') or '?'}`"]
        if e.get("error"):
            err = e["error"]
            if len(err) > 200:
                err = err[:80] + " ... " + err[-110:]
            parts.append("not built: " + err
                         + (f" (last module asked: `{e['error_module']}`)" if e.get("error_module")
                            else ""))
        else:
            q = [k for k, x in e["modules"].items() if x.get("quantized")]
            parts.append(f"{len(q)} modules quantized")
            dense = dense_modules(e)
            if dense:
                parts.append("dense: " + ", ".join(dense))
            if e.get("layer_offset"):
                parts.append(f"vLLM's layer = module tree's + {e['layer_offset']} "
                             f"(the target's {e.get('built', {}).get('target_layers', '?')} layers)")
            if e.get("packed_modules_mapping") and e.get("role") == "draft" and \
                    not e.get("quant_config_packed_modules_mapping"):
                parts.append("its quant config holds no packed_modules_mapping (ignore entries "
                             "must name the fused module)")
            reads = weight_read_notes(e)
            if reads:
                parts.append("`.weight` read: " + ", ".join(reads))
        return "<br>".join(parts).replace("|", "/")

    rows = []
    for a in sorted({a for m in maps.values() for a in m["architectures"]}):
        entries = [maps[v]["architectures"].get(a) for v in versions]
        methods = sorted({x for e in entries if e for x in e.get("methods", [])} - {"draft_model"})
        rows.append((", ".join(methods), a, [cell(e) for e in entries]))
        if any(e and "as_draft_model" in e for e in entries):
            as_draft = [dict(e["as_draft_model"], file=e.get("file"), role="draft_model",
                             weight_reads=e.get("weight_reads", []))
                        if e and "as_draft_model" in e else
                        {"file": e.get("file"), "error": "not tried: the target did not build"}
                        if e else None for e in entries]
            rows.append(("draft_model", f"{a} (as the draft)", [cell(e) for e in as_draft]))
    lines += ["", "| method | architecture | " + " | ".join(f"vLLM {v}" for v in versions) + " |",
              "| --- | --- | " + " | ".join("---" for _ in versions) + " |"]
    for methods, a, cells in sorted(rows):
        lines.append(f"| {methods} | {a} | " + " | ".join(cells) + " |")
    lines.append("")
    return "\n".join(lines)


def load_maps() -> dict[str, dict]:
    return {json.loads(p.read_text())["vllm_version"]: json.loads(p.read_text())
            for p in sorted(DATA.glob("vllm-*.json"))}


# ---------------------------------------------------------------------------------------------


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--release", action="append", default=[],
                    help="V (the running vLLM) or V=DIR (vLLM's Python code in DIR, CUDA faked)")
    ap.add_argument("--cc", type=int, default=90, help="faked CUDA capability for V=DIR")
    ap.add_argument("--docs", action="store_true", help="rewrite docs/draft-kinds.md")
    ap.add_argument("--print", dest="print_", action="store_true",
                    help="generate for the running vLLM and print the map")
    ap.add_argument("--only", action="append", help="architectures to build (debugging)")
    ap.add_argument("--_child", help=argparse.SUPPRESS)
    args = ap.parse_args()
    only = set(args.only) if args.only else None
    if args._child is not None:
        src, cc = args._child.split(",") if args._child else ("", "")
        cc_val = None
        if src:
            sys.path.insert(0, src)
            cc_val = int(cc)
            os.environ["VLLM_MODULE_MAP_FAKED"] = f"CUDA capability {cc_val}"
        sys.stdout.write(dump(generate(cc_val, only)))
        return 0
    if args.print_:
        sys.stdout.write(dump(generate(None, only)))
        return 0
    for rel in args.release:
        version, _, src = rel.partition("=")
        cmd = [sys.executable, __file__, "--_child", f"{src},{args.cc}" if src else ""]
        for a in args.only or []:
            cmd += ["--only", a]
        env = dict(os.environ)
        if src:
            env["PYTHONPATH"] = src + os.pathsep + env.get("PYTHONPATH", "")
        out = subprocess.run(cmd, env=env, capture_output=True, text=True)
        sys.stderr.write(out.stderr[-4000:] if out.returncode else "")
        if out.returncode:
            print(f"release {version}: generator failed ({out.returncode})", file=sys.stderr)
            return 1
        data = json.loads(out.stdout)
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
