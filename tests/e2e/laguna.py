"""The Laguna DFlash draft kind for the real-vLLM e2e harness (INTERFACE.md `KIND`).

What sparkulator exists for: poolside's Laguna DFlash draft quantized W4A16 with `qkv_proj` and the
per-head `g_proj` kept dense. Here, at toy size: a 2-layer dense Laguna target (transformers'
LagunaForCausalLM, hidden 256) and a 1-layer DFlash draft in the exact layout vLLM 0.32's
laguna_dflash.py loads (laguna_model.py), both trained in minutes on one thread and cached.

Failure cases (what vLLM 0.32's CPU build does with the wrong layout or the wrong quantization):
see `failure_cases`; their expect_error strings were observed on vLLM 0.32.0 (docs/e2e-laguna.md).
Errors: plain exceptions (test tooling).
"""

from __future__ import annotations

import dataclasses
import hashlib
import inspect
import json
import os
import shutil
import time
from pathlib import Path

from tests.e2e import laguna_corpus as corpus
from tests.e2e import laguna_model as lm

try:  # branch e2e defines FailureCase once; until it is merged, the same dataclass here.
    from tests.e2e.cases import FailureCase
except ImportError:  # STAND-IN: replaced by the import above when branch e2e is merged.
    @dataclasses.dataclass
    class FailureCase:
        name: str
        what: str
        target: Path
        draft: Path | None
        spec_config: dict | None
        check_args: list
        probe_request: bool = True
        expect_vllm_loaded: bool = False
        expect_error: str = ""
        extra_env: dict = dataclasses.field(default_factory=dict)
        extra_args: list = dataclasses.field(default_factory=list)


@dataclasses.dataclass(frozen=True)
class Training:
    target_steps: int = 150
    draft_steps: int = 400
    draft_prompts: int = 96       # greedy continuations the draft is distilled on
    prompt_tokens: int = 32
    new_tokens: int = 64
    seed: int = 0

    @classmethod
    def for_smoke(cls, smoke: bool) -> "Training":
        return cls(target_steps=150, draft_steps=200, draft_prompts=64) if smoke else cls()


def default_cache() -> Path:
    return Path(os.environ.get("SPK_E2E_CACHE", Path.home() / ".cache/sparkulator/e2e"))


def cache_key(what: str, smoke: bool, extra: str = "") -> str:
    """Hash of the source that decides the weights (only the functions that do, so that editing
    e.g. the acceptance replay does not retrain), the training parameters and the smoke flag."""
    h = hashlib.sha256()
    parts = [corpus, lm.laguna_config, lm.rope_parameters]
    if what == "target":
        parts += [lm.train_target, _build_target]
    else:
        parts += [lm.rms, lm.rope, lm.DraftLayer, lm.LagunaDFlashDraft, lm.draft_config,
                  lm.aux_hidden, lm.block_inputs, lm.draft_logits, lm.train_draft, _build_draft]
    for part in parts:
        h.update(inspect.getsource(part).encode())
    h.update(repr((what, lm.Shapes(), Training.for_smoke(smoke), smoke, extra)).encode())
    return f"laguna-{what}-{h.hexdigest()[:12]}"


def cached(folder: Path, build) -> Path:
    """Returns `folder` if complete, else builds into a temporary sibling and renames it."""
    if (folder / "config.json").exists():
        return folder
    tmp = folder.with_name(folder.name + f".tmp{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    build(tmp)
    tmp.rename(folder)
    return folder


def _torch_threads():
    import torch
    torch.set_num_threads(1)
    torch.manual_seed(0)
    return torch


def _build_target(out: Path, smoke: bool) -> None:
    torch = _torch_threads()
    from transformers import LagunaForCausalLM
    t0 = time.time()
    tok = corpus.build_tokenizer(out)
    s = lm.Shapes()
    model = LagunaForCausalLM(lm.laguna_config(s, s.target_layers, tok.eos_token_id))
    ids = torch.tensor(tok(corpus.train_text())["input_ids"])
    loss = lm.train_target(model, ids, Training.for_smoke(smoke).target_steps)
    model.to(torch.bfloat16).save_pretrained(str(out), safe_serialization=True)
    lm.save_json(out / "training.json", {"loss": loss, "seconds": round(time.time() - t0, 1),
                                         "tokens": len(ids)})


def _build_draft(out: Path, target: Path, smoke: bool) -> None:
    torch = _torch_threads()
    from safetensors.torch import save_file
    from transformers import AutoTokenizer, LagunaForCausalLM
    t0 = time.time()
    tr, s = Training.for_smoke(smoke), lm.Shapes()
    tok = AutoTokenizer.from_pretrained(str(target))
    mask_id = tok.convert_tokens_to_ids(corpus.MASK)
    tgt = LagunaForCausalLM.from_pretrained(str(target), dtype=torch.float32).eval()
    for p in tgt.parameters():
        p.requires_grad_(False)
    ids = torch.tensor(tok(corpus.train_text())["input_ids"])
    gen = torch.Generator().manual_seed(tr.seed)
    starts = torch.randint(0, len(ids) - tr.prompt_tokens, (tr.draft_prompts,), generator=gen)
    prompts = torch.stack([ids[st:st + tr.prompt_tokens] for st in starts])
    with torch.no_grad():
        seqs = torch.cat([tgt.generate(prompts[i:i + 32], max_new_tokens=tr.new_tokens,
                                       do_sample=False, min_new_tokens=tr.new_tokens)
                          for i in range(0, len(prompts), 32)])
    t_gen = time.time() - t0
    draft = lm.LagunaDFlashDraft(s)
    loss = lm.train_draft(draft, tgt, seqs, tr.prompt_tokens, mask_id, tr.draft_steps)
    save_file(draft.vllm_state_dict(), str(out / "model.safetensors"), metadata={"format": "pt"})
    lm.save_json(out / "config.json", lm.draft_config(s, mask_id, tok.eos_token_id))
    lm.save_json(out / "training.json", {"loss": loss, "seconds": round(time.time() - t0, 1),
                                         "generate_seconds": round(t_gen, 1),
                                         "sequences": list(seqs.shape)})


def load_draft(folder: Path):
    """The trainer's draft module with a checkpoint's (dense) weights."""
    import torch
    from safetensors.torch import load_file
    draft = lm.LagunaDFlashDraft(lm.Shapes())
    draft.load_vllm_state_dict(load_file(str(folder / "model.safetensors")))
    return draft.to(torch.float32).eval()


class Kind:
    name = "dflash-laguna"
    method = "dflash"

    def build_target(self, cache: Path, smoke: bool) -> Path:
        return cached(Path(cache) / cache_key("target", smoke), lambda d: _build_target(d, smoke))

    def build_draft(self, cache: Path, target: Path, smoke: bool) -> Path:
        key = cache_key("draft", smoke, Path(target).name)
        return cached(Path(cache) / key, lambda d: _build_draft(d, Path(target), smoke))

    def num_speculative_tokens(self, draft: Path) -> int:
        # DFlash's block is the bonus (anchor) token plus the masked slots it drafts:
        # vLLM's proposer runs 1 + num_speculative_tokens query slots (dflash.py).
        return int(json.loads((Path(draft) / "config.json").read_text())["block_size"]) - 1

    def spec_config(self, draft: Path) -> dict:
        return {"method": self.method, "model": str(draft),
                "num_speculative_tokens": self.num_speculative_tokens(draft)}

    def quantize_args(self) -> list[str]:
        return []  # the default preset detects the Laguna DFlash draft (qkv_proj, g_proj dense)

    def failure_cases(self, work: Path, target: Path, draft: Path, spk: Path) -> list[FailureCase]:
        from tests.e2e import laguna_breaks as breaks
        return breaks.failure_cases(self, Path(work), Path(target), Path(draft), Path(spk))


KIND = Kind()
