"""The tiny Qwen3 target every draft kind here is paired with.

`Qwen3ForCausalLM`, hidden 256, 2 layers, 4 heads x 64, 2 KV heads, intermediate 512, untied `lm_head`,
the shared BPE tokenizer (corpus.py). Every Linear is a multiple of 128 in and out: legal for Marlin and
for vLLM's CPU kernel (CPUWNA16LinearKernel.can_implement: in % 32 == 0, out % 32 == 0). It is trained
with AdamW on stdlib text so that greedy choices have margins: with random weights W4A16 noise flips the
argmax and greedy agreement measures nothing (13% was measured). Cached per env.cached_model,
keyed by the trainer's source and parameters.

Error policy: training errors propagate (nothing is cached then).
"""

from __future__ import annotations

import inspect
import pathlib
import time

from tests.e2e import corpus, env

HIDDEN = 256
LAYERS = 2


def params(smoke: bool) -> dict:
    """The same target for smoke and full runs, so it is trained once: 150 steps gave a higher
    greedy agreement of W4A16 vs BF16 than 400 (0.76 vs 0.64, docs/e2e.md), and every draft kind is
    trained against it. `smoke` is accepted for the Kind interface."""
    del smoke
    return {"hidden": HIDDEN, "layers": LAYERS, "vocab": corpus.VOCAB, "seed": 0, "batch": 8,
            "seq": 128, "lr": 3e-3, "steps": 150}


def build_target(cache: pathlib.Path, smoke: bool) -> pathlib.Path:
    """The trained BF16 target folder (config, safetensors, tokenizer), built once per parameters."""
    p = params(smoke)
    sources = [inspect.getsource(params), inspect.getsource(_train), inspect.getsource(corpus)]
    return env.cached_model(cache, "qwen3-target", sources, p, lambda out: _train(out, p))


def _train(out: pathlib.Path, p: dict) -> None:
    import torch
    from transformers import AutoTokenizer, Qwen3Config, Qwen3ForCausalLM

    torch.manual_seed(p["seed"])
    torch.set_num_threads(1)
    corpus.write_tokenizer(out)
    tok = AutoTokenizer.from_pretrained(str(out))
    cfg = Qwen3Config(vocab_size=p["vocab"], hidden_size=p["hidden"],
                      intermediate_size=2 * p["hidden"], num_hidden_layers=p["layers"],
                      num_attention_heads=p["hidden"] // 64,
                      num_key_value_heads=max(1, p["hidden"] // 128), head_dim=64,
                      max_position_embeddings=2048, tie_word_embeddings=False,
                      bos_token_id=corpus.EOS_ID, eos_token_id=corpus.EOS_ID)
    model = Qwen3ForCausalLM(cfg)
    ids = torch.tensor(tok(corpus.training_text())["input_ids"])
    opt = torch.optim.AdamW(model.parameters(), lr=p["lr"], weight_decay=0.0)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=p["lr"], total_steps=p["steps"],
                                                pct_start=0.1)
    gen = torch.Generator().manual_seed(p["seed"])
    t0 = time.time()
    for step in range(p["steps"]):
        starts = torch.randint(0, len(ids) - p["seq"] - 1, (p["batch"],), generator=gen)
        x = torch.stack([ids[s:s + p["seq"]] for s in starts])
        loss = model(input_ids=x, labels=x).loss
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step()
        if step % 50 == 0 or step == p["steps"] - 1:
            print(f"  target step {step} loss {loss.item():.3f} ({time.time() - t0:.0f}s)",
                  flush=True)
    model.to(torch.bfloat16).save_pretrained(str(out), safe_serialization=True)
