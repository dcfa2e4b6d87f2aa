"""Building each architecture the way vLLM does and recording what vLLM decided for its modules.

Builder (in the generator's child process, one vLLM per process) writes a tiny config.json per
model, makes vLLM's ModelConfig / SpeculativeConfig / VllmConfig, runs initialize_model on the meta
device with CompressedTensorsConfig.get_quant_method hooked (each prefix asked and the method
returned) and describes the finished module tree (scan.py for the source-derived fields).
generate() returns one release's map.

Error policy: an architecture that cannot be built is recorded, not dropped: its entry keeps the
exception text ("error"), the innermost vLLM frame ("error_at") and the last module asked
("error_module"); VLLM_MODULE_MAP_TRACEBACK=1 prints the traceback. A target's failed
as_draft_model is recorded in that sub-entry. VllmConfig's V1-model-runner refusal is recorded in
"notes" and skipped. Failures outside a model build (vLLM does not import) propagate.
"""
from __future__ import annotations

import contextlib
import io
import json
import os
import pathlib
import re
import sys
import tempfile
import traceback

from tools.vllm_module_map.configs import (CHECKPOINT_ARCH, MODEL_DIRS, MTP_OWN_CHECKPOINT,
                                           NO_RECIPE, SCHEMA_VERSION, SCHEME_CONFIGS,
                                           BASE_FORMAT, QUANT_IGNORE, RECIPES, TARGET_EXTRA,
                                           TARGET_LAYERS,
                                           TARGETS, TINY, method_of, mtp_architectures,
                                           derive_recipe, override_sources, recipe,
                                           recipe_options, renamed_from)
from tools.vllm_module_map.fake_cuda import fake_cuda
from tools.vllm_module_map.load_probe import dense_only, probe, unstored_refusal
from tools.vllm_module_map.schemes import module_verdicts
from tools.vllm_module_map.stand_ins import stand_in_torchvision
from tools.vllm_module_map.scan import (checkpoint_names, checkpoint_renames, class_file,
                                        mapper_dict, rel_file, rel_file_path, rename_dict_keys,
                                        stacked_entries, stacked_mappings, weight_packed_renames,
                                        weight_reads)
from tools.vllm_module_map.speculators import config_dict as spec_config_dict
from tools.vllm_module_map.serving import (draft_model_prefix, release_serve_options,
                                           serve_options_of_draft)
from tools.vllm_module_map.speculators import format_for, formats, split_refused


class Builder:
    # Where models are built: meta (no storage) for the map; output_probe.py builds on the CPU,
    # where the real weight loaders copy into.
    device = "meta"

    def __init__(self, cc: int | None, fmt: str = BASE_FORMAT):
        import torch  # noqa: F401
        import vllm
        self.version = vllm.__version__
        self.root = pathlib.Path(vllm.__file__).resolve().parents[1]
        self.tmp = pathlib.Path(tempfile.mkdtemp(prefix="vllm_module_map_"))
        os.environ.setdefault("VLLM_CACHE_ROOT", str(self.tmp / "cache"))
        if cc is not None:
            fake_cuda(cc)
        # Image processors import torchvision at module level (stand_ins.py): a stand-in where
        # it is absent, so that model classes whose files import them can be inspected.
        stand_in_torchvision()
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
        # The VllmConfig's own quant config (the target checkpoint's) of the model being built:
        # a draft module asked of it is built under the target's config, not the draft's.
        target_qc = self.target_qc = [None]

        def hooked(qc, layer, prefix):
            asking[0] = prefix
            qm = orig(qc, layer, prefix)
            # The layer itself is kept: a strong reference, so that no later module can reuse
            # the id of one vLLM built, asked about and dropped.
            records[id(layer)] = {
                "layer": layer, "prefix": prefix, "quant_method": type(qm).__name__ if qm is not None else None,
                "target_config": qc is target_qc[0],
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
        # The quantization config the tiny configs carry: the format's (SCHEME_CONFIGS), with a
        # recipe's QUANT_IGNORE entries while a draft that refuses the plain one is built
        # (draft_entry). Under another format than the base one only the verdicts are recorded
        # (schemes.py): the rest of the map does not depend on the scheme.
        self.base_config = SCHEME_CONFIGS[fmt]
        self.verdicts_only = fmt != BASE_FORMAT
        self.quant_config = self.base_config

    def tiny_config(self, model_type: str, arch: str, extra: dict, layers: int) -> dict:
        """config.json of a tiny `arch` of `model_type` (TINY's shapes where the config class
        has the key), with `extra` and the W4A16 quantization_config. An extra "text_config"
        naming a model_type is made tiny the same way (a composite config's text model)."""
        extra = dict(extra)
        sub = extra.get("text_config")
        if isinstance(sub, dict) and "model_type" in sub:
            sub = dict(sub)
            extra["text_config"] = {**self.tiny_dict(sub.pop("model_type"), sub, layers),
                                    "model_type": extra["text_config"]["model_type"]}
        cfg = self.tiny_dict(model_type, extra, layers)
        cfg.update({"architectures": [arch], "model_type": model_type, "torch_dtype": "bfloat16",
                    "quantization_config": self.quant_config})
        return cfg

    def tiny_dict(self, model_type: str, extra: dict, layers: int) -> dict:
        from vllm.transformers_utils.config import _CONFIG_REGISTRY
        cls = _CONFIG_REGISTRY[model_type] if model_type in _CONFIG_REGISTRY else None
        if cls is None:
            # The class itself: transformers 5.22's Gemma4 assistant refuses its own defaults.
            from transformers.models.auto.configuration_auto import CONFIG_MAPPING
            if model_type not in CONFIG_MAPPING:
                raise ValueError(f"Unrecognized model identifier: {model_type} (neither vLLM "
                                 "nor transformers registers a config class for it)")
            cls = CONFIG_MAPPING[model_type]
        # A config class that validates its keys at init (K3DSparkConfig: target_layer_ids) is
        # made with the recipe's keys from the start (with its tiny text_config where the
        # class refuses its default one: transformers 5.22's gemma4_assistant).
        # huggingface_hub's strict-dataclass validation error (a transformers config's
        # validator refusing its keys) is no ValueError.
        import huggingface_hub.errors as hf_errors
        refused = (ValueError, TypeError, getattr(hf_errors, "StrictDataclassError", ValueError))
        base = {}
        try:
            defaults = cls().to_dict()
        except refused:
            base = {k: v for k, v in extra.items() if k != "text_config"}
            try:
                defaults = cls(**base).to_dict()
            except refused:
                base = dict(extra)
                defaults = cls(**base).to_dict()
        over = {k: v for k, v in TINY.items() if k in defaults}
        over["num_hidden_layers"] = layers
        if "layer_types" in defaults:
            over["layer_types"] = None
        try:
            made = cls(**{**base, **over})
        except refused:
            # A shape the class refuses with TINY's sizes (GLM-5-Next: as many KV heads as
            # query heads): the recipe's value of that key from the start.
            made = cls(**{**base, **over, **{k: extra[k] for k in over if k in extra}})
        cfg = made.to_dict()
        cfg.update(extra)
        return cfg

    def write_config(self, name: str, model_type: str, arch: str, extra: dict,
                     layers: int) -> pathlib.Path:
        return self.write_dir(name, self.tiny_config(model_type, arch, extra, layers))

    def write_dir(self, name: str, config: dict) -> pathlib.Path:
        # vLLM caches what it read of a directory's config: a config with other ignore entries
        # (draft_entry's retry) gets a directory of its own.
        if self.quant_config is not self.base_config:
            name += "-ignore"
        d = self.tmp / name
        d.mkdir(parents=True, exist_ok=True)
        (d / "config.json").write_text(json.dumps(config, default=str))
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
        self.target_qc[0] = vllm_config.quant_config
        from vllm.utils.torch_utils import set_default_torch_dtype
        # As BaseModelLoader.load_model: the model's dtype is the default while it is built
        # (Step5's DSA attention refuses float32 activations).
        with set_default_torch_dtype(model_config.dtype), torch.device(self.device):
            return initialize_model(vllm_config=vllm_config, model_config=model_config)

    def recorded_modules(self, model):
        """(path, module, record, entry) for every module vLLM asked the quant config about and
        every Linear, asked or not: the entry holds what vLLM decided (path, prefix, class, asked,
        quant_method, scheme, params); the record is the hook's, None when never asked."""
        import torch
        from vllm.model_executor.layers.linear import LinearBase
        for path, mod in model.named_modules():
            rec = self.records.get(id(mod))
            if rec is not None and rec["layer"] is not mod:
                rec = None
            if rec is None and not isinstance(mod, (LinearBase, torch.nn.Linear)):
                continue
            name = rec["prefix"] if rec else getattr(mod, "prefix", path)
            qm = rec["quant_method"] if rec else type(getattr(mod, "quant_method", None)).__name__
            if isinstance(mod, torch.nn.Linear):
                qm = None  # torch's own Linear: no quant method at all, vLLM never quantizes it
            scheme = getattr(mod, "scheme", None)
            yield path, mod, rec, {
                "path": path, "prefix": name, "class": type(mod).__name__,
                "asked": rec is not None, "quant_method": qm,
                "scheme": type(scheme).__name__ if scheme is not None else None,
                "params": sorted(n for n, _ in mod.named_parameters(recurse=False))}

    def describe(self, model, model_cls) -> dict:
        import torch
        from vllm.model_executor.layers.linear import LinearBase
        if self.verdicts_only:
            return {"modules": module_verdicts(self.recorded_modules(model))}
        files = sorted({f for m in model.modules() for c in type(m).__mro__
                        if (f := rel_file(c)) and f.startswith(MODEL_DIRS)})
        linear_names = {n.rsplit(".", 1)[-1] for n, m in model.named_modules()
                        if isinstance(m, (LinearBase, torch.nn.Linear))}
        stacked = stacked_mappings(files, self.root)
        reads = weight_reads(files, self.root, linear_names)
        # A read under a dense-only guard (scan.dense_guard) does not touch a quantized layer.
        read_names = {r["name"] for r in reads if "guard" not in r}
        packed = {k: list(v) for k, v in
                  sorted((getattr(model_cls, "packed_modules_mapping", None) or {}).items())}
        mappers = []
        for _, m in model.named_modules():
            mp = getattr(type(m), "hf_to_vllm_mapper", None)
            if mp is not None and all(mp is not x for x in mappers):
                mappers.append(mp)
        modules = {}
        qc_seen: list = []
        qc_from: set[str] = set()
        probes = []
        for path, mod, rec, e in self.recorded_modules(model):
            last = path.rsplit(".", 1)[-1]
            name = e["prefix"]
            if rec:
                if isinstance(mod, LinearBase) and rec["qc_packed"] not in qc_seen:
                    qc_seen.append(rec["qc_packed"])
                if isinstance(mod, LinearBase):
                    qc_from.add("target" if rec["target_config"] else "draft")
            e["quantized"] = any("weight_packed" in p for p in e["params"])
            if isinstance(mod, torch.nn.Linear):
                e["weight_read_directly"] = last in read_names
                probes.append((e, mod, []))
            if isinstance(mod, LinearBase):
                e["weight_read_directly"] = last in read_names
                shards = packed.get(last)
                entries = stacked_entries(stacked, path)
                if shards:
                    e["fused"] = [{"shard": s, "position": i} for i, s in enumerate(shards)]
                e.update(checkpoint_names(path, last, shards, entries, mappers, e["params"]))
                # A WeightsMapper may stack shards too (Gemma4's assistant: .gate_proj ->
                # (.gate_up_proj, 0)), with no packed_modules_mapping or stacked tuple naming them;
                # the fused name stays a candidate beside them (a checkpoint may ship it fused,
                # as Laguna's DFlash draft does its qkv_proj).
                mapped = [old.strip(".") for mp in mappers
                          for old, (new, _) in (getattr(mp, "orig_to_new_stacked", None) or
                                                {}).items() if new.strip(".") == last]
                if mapped and not shards and not entries:
                    mapped.append(last)
                probes.append((e, mod, list(shards or []) +
                               [s["shard"].strip(".") for s in entries] + mapped))
            # Keyed by the prefix; a module built without one (prefix "") by its path.
            modules[name or path] = e
        # What the model's own load_weights accepts overrules the source-derived names.
        load_fails = probe(model, probes, checkpoint_renames(files, self.root))
        refusal = unstored_refusal(model, modules)
        # A load_weights that took no candidate may rename a closed list of dense names only.
        takes_only = dense_only(model, probes, rename_dict_keys(files, self.root))
        mapper_d = mapper_dict(getattr(model_cls, "hf_to_vllm_mapper", None))
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
                # Whose quant config the Linears were asked of: "draft" (the draft checkpoint's
                # own, get_draft_quant_config), "target" (vllm_config.quant_config), "both".
                "quant_config_from": ("both" if len(qc_from) > 1 else next(iter(qc_from), None)),
                "hf_to_vllm_mapper": mapper_d, "other_params": other,
                "asked_not_in_model": dropped, **weight_packed_renames(model, files, self.root),
                # Only where it refuses: a checkpoint lacking the KV-cache parameters.
                **({"refuses_unstored": refusal} if refusal else {}),
                # Only where it takes dense parameter names alone for its Linears.
                **({"load_weights_takes_only": takes_only} if takes_only else {}),
                # Only where no checkpoint loads, whatever names it holds.
                **({"load_fails": load_fails} if load_fails else {})}

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
        if self.verdicts_only:
            return e
        del e["quant_config_from"]  # a target has only its own
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
                 "error": None, "module_prefix": draft_model_prefix(self.root)}
            d.update({k: v for k, v in self.describe(model, model_cls).items()
                      if k in ("modules", "quant_config_packed_modules_mapping")})
            return d
        except Exception as ex:  # noqa: BLE001
            return {"error": f"{type(ex).__name__}: {' '.join(str(ex).split())[:400]}"}

    def draft_entry(self, arch: str, module: str, method: str) -> dict:
        """The draft built with the plain quantization config or, where vLLM refuses that one and
        the recipe names ignore entries (QUANT_IGNORE: Step5's qkv_indexer_proj, which raises
        on any quant method), with those added; the entry records the refusal and the entries."""
        found = recipe(arch, module, self.version)
        ignore = recipe_options(found[1])[1].get(QUANT_IGNORE) if found else None
        try:
            return self.draft_entry_plain_or_speculators(arch, module, method)
        except Exception as plain_error:  # noqa: BLE001 - tried with the ignore entries, then re-raised
            if not ignore:
                raise
            refused_at = self.asking[0]
            base = self.base_config
            self.quant_config = {**base, "ignore": base["ignore"] + list(ignore)}
            try:
                entry = self.draft_entry_plain_or_speculators(arch, module, method)
            except Exception as retry_error:  # noqa: BLE001 - both are the record
                if os.environ.get("VLLM_MODULE_MAP_TRACEBACK"):
                    traceback.print_exc()
                retried = " ".join(str(retry_error).split())[:200]
                plain_error.args = (f"{plain_error} (built again with ignore {list(ignore)}: "
                                    f"{type(retry_error).__name__}: {retried})",)
                raise plain_error from None
            finally:
                self.quant_config = self.base_config
            text = re.sub(r"0x[0-9a-f]+|/tmp/vllm_module_map_\w+", "...",
                          " ".join(str(plain_error).split()))
            entry["quant_config_ignore_added"] = {
                "ignore": list(ignore), "plain_config_error": f"{type(plain_error).__name__}: "
                                                              f"{text[:400]}",
                "plain_config_error_module": refused_at}
            return entry

    def draft_entry_plain_or_speculators(self, arch: str, module: str, method: str) -> dict:
        """The draft built from a plain config.json or, where vLLM reaches `arch` only through a
        speculators-format config (speculators.py), from one of those."""
        try:
            return self.draft_entry_as(arch, module, method, None)
        except Exception as plain_error:  # noqa: BLE001 - tried the other way, then re-raised
            fmt = format_for(arch, self.speculators)
            if fmt is None:
                raise
            try:
                entry = self.draft_entry_as(arch, module, method, fmt)
            except Exception:  # noqa: BLE001
                raise plain_error from None
            # vLLM's refusal without its list of every supported architecture.
            text = " ".join(str(plain_error).split()).split(" Supported architectures")[0]
            entry["built"]["plain_config_error"] = f"{type(plain_error).__name__}: {text[:300]}"
            return entry

    def draft_entry_as(self, arch: str, module: str, method: str,
                       fmt: tuple[str, str | None] | None) -> dict:
        from vllm.config import ParallelConfig, SpeculativeConfig, VllmConfig
        last = module.split(".")[-1]
        found = recipe(arch, module, self.version)
        if found is None and last in NO_RECIPE:
            raise LookupError(f"no tiny config: {NO_RECIPE[last]}")
        derived = None
        if found is None:
            found, derived = self.derived_recipe(arch, module)
        model_type, extra, *tgt = found
        extra, opts = recipe_options(extra)
        spec_fields = {"method": method}
        if method == "mtp" and last not in MTP_OWN_CHECKPOINT:
            # MTP: the draft is the target's checkpoint (SpeculativeConfig model=None).
            # The target's architecture is the one hf_config_override looks for: the recipe's, or
            # transformers' causal-LM class of the model_type, or the first architecture
            # hf_config_override tests for (Step3p5ForCausalLM, a class of vLLM's own), or (none)
            # the MTP name itself.
            from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES
            tested = self.rewritten_from.get(arch, {}).get("architectures") or [arch]
            target_arch = tgt[0][1] if tgt else \
                MODEL_FOR_CAUSAL_LM_MAPPING_NAMES.get(model_type, tested[0])
            tdir = self.write_config(f"mtp-{arch}", model_type, target_arch, extra, TARGET_LAYERS)
            ddir = None
        else:
            t_type, target_arch = tgt[0] if tgt else ("qwen3", "Qwen3ForCausalLM")
            t_extra = opts.get(TARGET_EXTRA, {})
            tdir = self.write_config(f"target-{target_arch}{'-' + arch if t_extra else ''}",
                                     t_type, target_arch, t_extra, TARGET_LAYERS)
            if fmt is None:
                ddir = self.write_config(f"draft-{arch}", model_type,
                                         opts.get(CHECKPOINT_ARCH, arch), extra, 1)
            else:
                # The speculators format: the draft's own config is transformer_layer_config,
                # the method and its fields are the format's (base.py), as vllm serve takes them.
                name, layer_type = fmt
                model_type = layer_type or model_type
                layer = self.tiny_config(model_type, arch, extra, 1)
                ddir = self.write_dir(f"draft-speculators-{arch}",
                                      spec_config_dict(name, layer, str(tdir), [arch]))
                spec_fields = dict(self.speculators[name]["speculative_config"])
        mc = self.model_config(tdir)
        sc = SpeculativeConfig(**spec_fields, model=str(ddir) if ddir else None,
                               num_speculative_tokens=1, target_model_config=mc,
                               target_parallel_config=ParallelConfig())
        vc = VllmConfig(model_config=mc, speculative_config=sc)
        options = serve_options_of_draft(lambda **kw: SpeculativeConfig(
            **spec_fields, model=str(ddir) if ddir else None, num_speculative_tokens=1,
            target_model_config=mc, target_parallel_config=ParallelConfig(), **kw))
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
        if CHECKPOINT_ARCH in opts:
            built["checkpoint_architecture"] = opts[CHECKPOINT_ARCH]
        if derived is not None:
            built["recipe_derived"] = derived
        if fmt is not None:
            built["config_format"] = f"speculators {fmt[0]}"
            built["speculative_config"] = spec_fields
        model = self.build(vc, dmc)
        e = {"built": built}
        e.update(self.describe(model, model_cls))
        if options:
            for o in options.values():
                # The model class's flag: True makes vLLM share the target's head only when the
                # draft's own equals it (eagle/utils.py _should_share).
                o["has_own_lm_head"] = bool(getattr(type(model), "has_own_lm_head", False))
            e["serve_options"] = options
        return e

    def derived_recipe(self, arch: str, module: str) -> tuple[tuple, dict]:
        """configs.derive_recipe for the registry class of `arch` (imported here)."""
        import importlib
        cls_name = self.registry._VLLM_MODELS[arch][1]
        full = module if module.startswith("vllm.") else f"vllm.model_executor.models.{module}"
        cls = getattr(importlib.import_module(full), cls_name)
        return derive_recipe(cls, arch, self.version, self.renamed.get(arch),
                             self.rewritten_from.get(arch, {}))

    def run(self, only: set[str] | None) -> dict:
        reg = self.registry
        spec = reg._SPECULATIVE_DECODING_MODELS
        speculative_py = (self.root / "vllm/config/speculative.py").read_text()
        mtp_archs = mtp_architectures(speculative_py)
        self.rewritten_from = rewritten_from = override_sources(speculative_py)
        self.renamed = renamed_from(speculative_py)
        self.speculators, self.speculators_refused = split_refused(formats(sorted(
            {r[0] for r in RECIPES.values()} | set(TARGETS.values()))))
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
                        initial = self.renamed.get(arch, {}).get("architectures", [arch])[0]
                        if initial != arch and initial in spec:
                            # A config hf_config_override renames (initial_architecture test)
                            # is loaded by the method of the architecture it renames.
                            method, why = method_of(initial, spec[initial][0], mtp_archs)
                            why = f"hf_config_override renames {initial} to it; {initial}: {why}"
                        entry = {"role": "draft", "methods": [method], "methods_source": why,
                                 "registry": {"module": module, "class": cls}}
                        entry.update(self.draft_entry(arch, module, method))
                        types = rewritten_from.get(arch, {}).get("model_types")
                        if module.split(".")[-1] in MTP_OWN_CHECKPOINT and types:
                            # Its own checkpoint names no registry architecture: vLLM finds it
                            # by model_type (hf_config_override), and so does sparkulator.
                            entry["checkpoint_model_types"] = types
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
            entry["file"] = class_file(self.registry, self.root, arch)
            archs[arch] = entry
        return {"schema_version": SCHEMA_VERSION, "vllm_version": self.version,
                "generator": "tools/vllm_module_map/generate.py",
                "quantization_config": self.base_config, "tiny_config": TINY,
                "faked_platform": os.environ.get("VLLM_MODULE_MAP_FAKED"),
                "serve_options": release_serve_options(self.root),
                "speculators": self.speculators,
                "speculators_refused": self.speculators_refused, "architectures": archs}
