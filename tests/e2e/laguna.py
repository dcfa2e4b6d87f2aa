"""The Laguna DFlash draft kind for the real-vLLM e2e harness (INTERFACE.md `KIND`).

What sparkulator exists for: poolside's Laguna DFlash draft quantized W4A16 with `qkv_proj` and the
per-head `g_proj` kept dense. Here, at toy size: a 2-layer dense Laguna target (transformers'
LagunaForCausalLM, hidden 256) and a 1-layer DFlash draft in the exact layout vLLM 0.32's
laguna_dflash.py loads (laguna_model.py), both trained in minutes on one thread and cached with
env.cached_model. Text and tokenizer are corpus.py's (its `<|mask|>`, id 1, is DFlash's
mask_token_id). `python -m tests.e2e full` (run.py) serves the arms, benches them, checks
`predict_acceptance` against one greedy request and runs `failure_cases`; laguna_run.py adds the
per-request replay over several requests and the patched-vLLM proof.

Failure cases (what vLLM 0.32's CPU build does with the wrong layout or the wrong quantization):
see `failure_cases`; their expect_error strings were observed on vLLM 0.32.0 (docs/e2e-laguna.md).
Errors: plain exceptions (test tooling).
"""

from __future__ import annotations

import dataclasses
import inspect
import json
import time
from pathlib import Path

from tests.e2e import corpus, env
from tests.e2e import laguna_model as lm
from tests.e2e.cases import FailureCase


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


def _cached(cache: Path, what: str, smoke: bool, parts: list, build, extra: str = "") -> Path:
    """env.cached_model keyed by the source of the functions that decide the weights (only those,
    so that editing e.g. the acceptance replay does not retrain), the shapes, the training
    parameters and the smoke flag."""
    sources = [inspect.getsource(p) for p in [corpus.write_tokenizer, corpus.training_text,
                                              lm.laguna_config, lm.rope_parameters, *parts]]
    params = {"shapes": repr(lm.Shapes()), "training": repr(Training.for_smoke(smoke)),
              "smoke": smoke, "target": extra}
    return env.cached_model(Path(cache), f"laguna-{what}", sources, params, build)


def _torch_threads():
    import torch
    torch.set_num_threads(1)
    torch.manual_seed(0)
    return torch


def _tokenizer(folder: Path):
    from transformers import AutoTokenizer
    tok = AutoTokenizer.from_pretrained(str(folder))
    assert tok.convert_tokens_to_ids(corpus.MASK_TOKEN) == corpus.MASK_ID, folder
    return tok


def _build_target(out: Path, smoke: bool) -> None:
    torch = _torch_threads()
    from transformers import LagunaForCausalLM
    t0 = time.time()
    corpus.write_tokenizer(out)  # the shared BPE: <|mask|> is its id 1, never seen in training
    tok = _tokenizer(out)
    s = lm.Shapes()
    model = LagunaForCausalLM(lm.laguna_config(s, s.target_layers, tok.eos_token_id))
    ids = torch.tensor(tok(corpus.training_text())["input_ids"])
    loss = lm.train_target(model, ids, Training.for_smoke(smoke).target_steps)
    model.to(torch.bfloat16).save_pretrained(str(out), safe_serialization=True)
    lm.save_json(out / "training.json", {"loss": loss, "seconds": round(time.time() - t0, 1),
                                         "tokens": len(ids)})


def _build_draft(out: Path, target: Path, smoke: bool) -> None:
    torch = _torch_threads()
    from safetensors.torch import save_file
    from transformers import LagunaForCausalLM
    t0 = time.time()
    tr, s = Training.for_smoke(smoke), lm.Shapes()
    tok = _tokenizer(target)
    mask_id = corpus.MASK_ID
    tgt = LagunaForCausalLM.from_pretrained(str(target), dtype=torch.float32).eval()
    for p in tgt.parameters():
        p.requires_grad_(False)
    ids = torch.tensor(tok(corpus.training_text())["input_ids"])
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


def predict_acceptance(draft: Path, target: Path, prompt_ids: list[int],
                       output_ids: list[int]) -> dict:
    """The trainer's replay of vLLM's DFlash loop over one greedy request vLLM served (run.py's
    prediction check): the counters vLLM's /metrics should have moved, in measure.py's names."""
    import torch
    from transformers import LagunaForCausalLM
    tgt = LagunaForCausalLM.from_pretrained(str(target), dtype=torch.float32).eval()
    mask_id = json.loads((Path(draft) / "config.json").read_text())["dflash_config"]["mask_token_id"]
    with torch.no_grad():
        got = lm.predicted_acceptance(load_draft(Path(draft)), tgt, list(prompt_ids),
                                      list(output_ids), mask_id)
    return {"drafts": got["num_drafts"], "drafted": got["num_draft_tokens"],
            "accepted": got["num_accepted_tokens"], "per_position": got["accepted_per_pos"],
            "steps": got["steps"]}


class Kind:
    name = "dflash-laguna"
    method = "dflash"
    # run.py's one-request prediction may differ from vLLM by one draft step / accepted token: the
    # mirror runs in fp32, vLLM in BF16, and on run.py's prompt one step accepts with a top-2 logit
    # margin of 0.064 (26/156/21 predicted vs 27/162/20 served, docs/e2e-laguna.md). laguna_run match
    # checks 6 requests for exact equality.
    prediction_tolerance = 1

    def build_target(self, cache: Path, smoke: bool) -> Path:
        return _cached(cache, "target", smoke, [lm.train_target, _build_target],
                       lambda d: _build_target(d, smoke))

    def build_draft(self, cache: Path, target: Path, smoke: bool) -> Path:
        parts = [lm.rms, lm.rope, lm.DraftLayer, lm.LagunaDFlashDraft, lm.draft_config,
                 lm.aux_hidden, lm.block_inputs, lm.draft_logits, lm.train_draft, _build_draft]
        return _cached(cache, "draft", smoke, parts, lambda d: _build_draft(d, Path(target), smoke),
                       extra=Path(target).name)

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
        return breaks.failure_cases(self, Path(work), Path(target), Path(draft))  # spk: env's


KIND = Kind()
