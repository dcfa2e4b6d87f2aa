"""A Qwen3-style DFlash draft for the tiny target, trained here, in the layout vLLM 0.32 loads.

vLLM's side (read from vllm/model_executor/models/qwen3_dflash.py and vllm/v1/spec_decode/dflash.py):
- architecture `DFlashDraftModel` -> DFlashQwen3ForCausalLM. Checkpoint names are local (`layers.0...`,
  `fc`, `hidden_norm`, `norm`); vLLM prefixes `model.` and names layer i `model.layers.{T+i}` (T = the
  target's layer count). No `embed_tokens` or `lm_head` here: vLLM shares the target's.
- context: the target's residual stream after the layers in `dflash_config.target_layer_ids` (vLLM
  captures aux layer id+1, i.e. the output of layer id), concatenated, `fc`, then `hidden_norm`; every
  draft layer projects that with its own k_proj/v_proj (no input_layernorm), k_norm, RoPE at the
  context positions, and writes it into its KV cache.
- query: one block of `1 + num_speculative_tokens` tokens, [bonus token, mask, mask, ...] at the
  positions after the context, through ordinary pre-norm Qwen3 layers whose attention sees the
  context K/V and the whole block (non-causal: CPU_ATTN supports it). The mask slots' logits are the
  drafts. So `num_speculative_tokens = BLOCK_SIZE - 1` (dflash.py: num_query_per_req =
  1 + num_speculative_tokens); vLLM 0.32 derives it from block_size only for DSpark, so the spec
  config passes it.

`Mirror` is that forward in plain torch; the trainer trains it on the target's own greedy continuations,
and `predict_acceptance` replays a greedy request with it to predict vLLM's spec-decode counters.

Error policy: training errors propagate (nothing is cached); `KIND` methods raise on a missing target.
"""

from __future__ import annotations

import inspect
import json
import pathlib
import time

from tests.e2e import corpus, env
from tests.e2e.cases import FailureCase

BLOCK_SIZE = 4
NUM_SPECULATIVE_TOKENS = BLOCK_SIZE - 1
TARGET_LAYER_IDS = [0, 1]


def params(smoke: bool) -> dict:
    return {"layers": 1 if smoke else 2, "block_size": BLOCK_SIZE,
            "target_layer_ids": TARGET_LAYER_IDS, "seed": 1, "lr": 2e-3,
            "batch": 8 if smoke else 16, "anchors": 6 if smoke else 8,
            "steps": 150 if smoke else 800, "sequences": 128 if smoke else 512,
            "prompt_tokens": 48, "new_tokens": 80 if smoke else 144, "loss_decay": 0.8,
            "smoke": smoke}


# ---- the forward, mirroring vLLM's ----------------------------------------------------------------
def _modules():
    import torch
    from torch import nn

    class RMSNorm(nn.Module):
        """vLLM's RMSNorm.forward_native: normalize in fp32, cast back, then scale."""

        def __init__(self, dim, eps):
            super().__init__()
            self.weight = nn.Parameter(torch.ones(dim))
            self.eps = eps

        def forward(self, x):
            xf = x.float()
            xf = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.eps)
            return xf.to(x.dtype) * self.weight

    class Attention(nn.Module):
        def __init__(self, cfg):
            super().__init__()
            h, hd = cfg["hidden_size"], cfg["head_dim"]
            self.heads, self.kv_heads, self.hd = (cfg["num_attention_heads"],
                                                  cfg["num_key_value_heads"], hd)
            self.q_proj = nn.Linear(h, self.heads * hd, bias=False)
            self.k_proj = nn.Linear(h, self.kv_heads * hd, bias=False)
            self.v_proj = nn.Linear(h, self.kv_heads * hd, bias=False)
            self.o_proj = nn.Linear(self.heads * hd, h, bias=False)
            self.q_norm = RMSNorm(hd, cfg["rms_norm_eps"])
            self.k_norm = RMSNorm(hd, cfg["rms_norm_eps"])

    class Layer(nn.Module):
        def __init__(self, cfg):
            super().__init__()
            h, i = cfg["hidden_size"], cfg["intermediate_size"]
            self.self_attn = Attention(cfg)
            self.mlp = nn.Module()
            self.mlp.gate_proj = nn.Linear(h, i, bias=False)
            self.mlp.up_proj = nn.Linear(h, i, bias=False)
            self.mlp.down_proj = nn.Linear(i, h, bias=False)
            self.input_layernorm = RMSNorm(h, cfg["rms_norm_eps"])
            self.post_attention_layernorm = RMSNorm(h, cfg["rms_norm_eps"])

    class Mirror(nn.Module):
        """The draft's weights (state_dict names = checkpoint names) and vLLM's DFlash forward.
        `embed` and `lm_head` are the target's, frozen, not part of the state_dict."""

        def __init__(self, cfg, embed, lm_head):
            super().__init__()
            h = cfg["hidden_size"]
            self.cfg = cfg
            self.fc = nn.Linear(h * len(cfg["dflash_config"]["target_layer_ids"]), h, bias=False)
            self.hidden_norm = RMSNorm(h, cfg["rms_norm_eps"])
            self.layers = nn.ModuleList(Layer(cfg) for _ in range(cfg["num_hidden_layers"]))
            self.norm = RMSNorm(h, cfg["rms_norm_eps"])
            self._frozen = (embed, lm_head)  # a tuple: kept out of parameters and state_dict
            self.theta = cfg["rope_parameters"]["rope_theta"]

        def rope(self, x, pos):
            """Neox-style RoPE (vLLM get_rope, is_neox_style=True); x [..., n, heads, hd]."""
            hd = x.shape[-1]
            inv = 1.0 / (self.theta ** (torch.arange(0, hd, 2, dtype=torch.float32) / hd))
            ang = pos.float()[..., None] * inv  # [..., n, hd/2]
            cos, sin = ang.cos()[..., None, :], ang.sin()[..., None, :]
            x1, x2 = x[..., : hd // 2].float(), x[..., hd // 2:].float()
            return torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin], -1).to(x.dtype)

        def context_kv(self, aux, pos):
            """precompute_and_store_context_kv: aux [b, S, 2h] target features -> per layer (k, v),
            each [b, S, kv_heads, hd]."""
            ctx = self.hidden_norm(self.fc(aux))
            out = []
            for layer in self.layers:
                a = layer.self_attn
                k = a.k_norm(a.k_proj(ctx).unflatten(-1, (a.kv_heads, a.hd)))
                out.append((self.rope(k, pos), a.v_proj(ctx).unflatten(-1, (a.kv_heads, a.hd))))
            return out

        def forward(self, query_ids, query_pos, aux, ctx_pos, mask):
            """Hidden states of the query tokens. query_ids/query_pos [b, Q]; aux [b, S, 2h];
            mask [b, Q, S + Q] (True = may attend): context keys first, then the query keys."""
            embed, _ = self._frozen
            ctx = self.context_kv(aux, ctx_pos)
            x = embed(query_ids)
            residual = None
            for layer, (ck, cv) in zip(self.layers, ctx):
                residual = x if residual is None else x + residual
                hn = layer.input_layernorm(residual)
                a = layer.self_attn
                q = a.q_norm(a.q_proj(hn).unflatten(-1, (a.heads, a.hd)))
                k = a.k_norm(a.k_proj(hn).unflatten(-1, (a.kv_heads, a.hd)))
                v = a.v_proj(hn).unflatten(-1, (a.kv_heads, a.hd))
                q, k = self.rope(q, query_pos), self.rope(k, query_pos)
                keys = torch.cat([ck, k], 1).transpose(1, 2)
                vals = torch.cat([cv, v], 1).transpose(1, 2)
                rep = a.heads // a.kv_heads
                att = torch.nn.functional.scaled_dot_product_attention(
                    q.transpose(1, 2), keys.repeat_interleave(rep, 1),
                    vals.repeat_interleave(rep, 1), attn_mask=mask[:, None])
                x = a.o_proj(att.transpose(1, 2).flatten(-2))
                residual = x + residual
                hn = layer.post_attention_layernorm(residual)
                m = layer.mlp
                x = m.down_proj(torch.nn.functional.silu(m.gate_proj(hn)) * m.up_proj(hn))
            return self.norm(x + residual)

        def logits(self, hidden):
            return self._frozen[1](hidden)

    return Mirror


def draft_config(target_cfg: dict, layers: int) -> dict:
    """config.json of the draft: the target's shapes, DFlash's keys."""
    keep = ["hidden_size", "intermediate_size", "num_attention_heads", "num_key_value_heads",
            "head_dim", "rms_norm_eps", "vocab_size", "max_position_embeddings", "hidden_act",
            "rope_parameters", "bos_token_id", "eos_token_id"]
    cfg = {k: target_cfg[k] for k in keep if k in target_cfg}
    cfg.setdefault("rope_parameters", {"rope_type": "default",
                                       "rope_theta": target_cfg.get("rope_theta", 1e6)})
    cfg.update({"architectures": ["DFlashDraftModel"], "model_type": "qwen3",
                "num_hidden_layers": layers, "num_target_layers": target_cfg["num_hidden_layers"],
                "tie_word_embeddings": False, "torch_dtype": "bfloat16", "block_size": BLOCK_SIZE,
                "dflash_config": {"target_layer_ids": TARGET_LAYER_IDS,
                                  "mask_token_id": corpus.MASK_ID, "block_size": BLOCK_SIZE,
                                  "causal": False}})
    return cfg


def load_target(target: pathlib.Path):
    import torch
    from transformers import AutoModelForCausalLM
    model = AutoModelForCausalLM.from_pretrained(str(target), dtype=torch.float32)
    model.eval().requires_grad_(False)
    return model


def target_features(model, ids):
    """The residual stream after each layer in TARGET_LAYER_IDS, concatenated: [b, S, 2h]
    (what vLLM's Qwen3 model captures as aux hidden states for DFlash)."""
    captured = {}
    hooks = [model.model.layers[i].register_forward_hook(
        lambda _m, _i, out, i=i: captured.__setitem__(i, out[0] if isinstance(out, tuple) else out))
        for i in TARGET_LAYER_IDS]
    try:
        model(input_ids=ids)
    finally:
        for h in hooks:
            h.remove()
    import torch
    return torch.cat([captured[i] for i in TARGET_LAYER_IDS], -1)


def load_mirror(draft: pathlib.Path, target_model):
    """The Mirror with the weights of a (BF16) draft checkpoint folder."""
    import torch
    from safetensors.torch import load_file
    cfg = json.loads((draft / "config.json").read_text())
    mirror = _modules()(cfg, target_model.model.embed_tokens, target_model.lm_head)
    state = {k: v.float() for k, v in load_file(str(draft / "model.safetensors")).items()}
    mirror.load_state_dict(state, strict=True)
    return mirror.eval().requires_grad_(False).to(torch.float32)


# ---- training ---------------------------------------------------------------------------------------
def _greedy_sequences(model, p: dict):
    """The target's own greedy continuations of training-text prompts: what the draft sees in vLLM."""
    import torch
    from transformers import AutoTokenizer
    tok = AutoTokenizer.from_pretrained(model.name_or_path)
    ids = torch.tensor(tok(corpus.training_text())["input_ids"])
    gen = torch.Generator().manual_seed(p["seed"])
    starts = torch.randint(0, len(ids) - p["prompt_tokens"], (p["sequences"],), generator=gen)
    prompts = torch.stack([ids[s:s + p["prompt_tokens"]] for s in starts])
    out = []
    with torch.no_grad():
        for chunk in prompts.split(64):
            out.append(model.generate(chunk, attention_mask=torch.ones_like(chunk),
                                      max_new_tokens=p["new_tokens"],
                                      min_new_tokens=p["new_tokens"], do_sample=False,
                                      pad_token_id=corpus.EOS_ID))
    return torch.cat(out)


def _block_batch(seqs, prompt_len: int, p: dict, gen):
    """Random anchors in the continuation part. Anchor a: context = tokens 0..a, block = [x[a+1],
    mask...] at positions a+1..a+B, labels x[a+2..a+B]. Returns query ids/pos, labels, and the
    attention mask (context j <= a, and the block's own keys)."""
    import torch
    b, S = seqs.shape
    B, A = p["block_size"], p["anchors"]
    anchors = torch.randint(prompt_len - 1, S - B, (b, A), generator=gen)       # [b, A]
    offs = torch.arange(B)
    pos = anchors[..., None] + 1 + offs                                          # [b, A, B]
    ids = torch.full((b, A, B), corpus.MASK_ID)
    ids[..., 0] = torch.gather(seqs, 1, anchors + 1)
    labels = torch.gather(seqs, 1, pos[..., 1:].reshape(b, -1)).reshape(b, A, B - 1)
    ctx_ok = torch.arange(S)[None, None, None, :] <= anchors[..., None, None]    # [b, A, 1, S]
    ctx_ok = ctx_ok.expand(b, A, B, S).reshape(b, A * B, S)
    block = torch.arange(A).repeat_interleave(B)
    own = (block[:, None] == block[None, :]).expand(b, A * B, A * B)
    mask = torch.cat([ctx_ok, own], -1)
    return ids.reshape(b, -1), pos.reshape(b, -1), labels, mask


def train_draft(out: pathlib.Path, target: pathlib.Path, p: dict) -> None:
    import torch
    from safetensors.torch import save_file
    torch.manual_seed(p["seed"])
    torch.set_num_threads(1)
    t0 = time.time()
    model = load_target(target)
    seqs = _greedy_sequences(model, p)
    with torch.no_grad():  # the target is frozen: its features once, not per step
        feats = torch.cat([target_features(model, chunk) for chunk in seqs.split(32)])
    print(f"  dflash data: {tuple(seqs.shape)} greedy tokens ({time.time() - t0:.0f}s)", flush=True)
    cfg = draft_config(json.loads((target / "config.json").read_text()), p["layers"])
    mirror = _modules()(cfg, model.model.embed_tokens, model.lm_head)
    opt = torch.optim.AdamW(mirror.parameters(), lr=p["lr"], weight_decay=0.0)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=p["lr"], total_steps=p["steps"],
                                                pct_start=0.1)
    gen = torch.Generator().manual_seed(p["seed"])
    B = p["block_size"]
    weights = torch.tensor([p["loss_decay"] ** k for k in range(B - 1)])
    for step in range(p["steps"]):
        rows = torch.randint(0, len(seqs), (p["batch"],), generator=gen)
        x, aux = seqs[rows], feats[rows]
        ids, pos, labels, mask = _block_batch(x, p["prompt_tokens"], p, gen)
        hidden = mirror(ids, pos, aux, torch.arange(x.shape[1]).expand_as(x), mask)
        hidden = hidden.unflatten(1, (p["anchors"], B))[:, :, 1:]
        logits = mirror.logits(hidden)
        ce = torch.nn.functional.cross_entropy(logits.flatten(0, 2), labels.flatten(),
                                               reduction="none").view_as(labels)
        loss = (ce * weights).sum(-1).mean() / weights.sum()
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step()
        if step % 50 == 0 or step == p["steps"] - 1:
            acc = (logits.argmax(-1) == labels).float().mean(dim=(0, 1))
            print(f"  dflash step {step} loss {loss.item():.3f} per-position accuracy "
                  f"{[round(a, 3) for a in acc.tolist()]} ({time.time() - t0:.0f}s)", flush=True)
    state = {k: v.detach().to(torch.bfloat16).contiguous() for k, v in mirror.state_dict().items()}
    save_file(state, str(out / "model.safetensors"), metadata={"format": "pt"})
    (out / "config.json").write_text(json.dumps(cfg, indent=2))
    for f in target.iterdir():  # the tokenizer travels with the draft (vLLM reads the target's)
        if f.name.startswith(("tokenizer", "special_tokens")):
            (out / f.name).write_bytes(f.read_bytes())


# ---- what vLLM should report for a greedy request --------------------------------------------------
def predict_acceptance(draft: pathlib.Path, target: pathlib.Path, prompt_ids: list[int],
                       output_ids: list[int]) -> dict:
    """Replays vLLM's DFlash loop over a greedy request whose tokens vLLM returned: after the
    prefill the context is the prompt and the bonus token is output[0]; each step drafts K tokens
    from the mask slots, accepts the prefix that equals the target's greedy tokens, and the context
    grows by accepted + 1. Returns the counters vLLM's /metrics would move and the drafts. Only the
    last block looks past vLLM's output, at K target tokens greedily decoded here."""
    import torch
    model = load_target(target)
    mirror = load_mirror(draft, model)
    n, K, total = len(prompt_ids), NUM_SPECULATIVE_TOKENS, len(output_ids)
    seq = torch.tensor([prompt_ids + output_ids])
    with torch.no_grad():
        # vLLM verifies the last block against target tokens past max_tokens (and counts them as
        # accepted before the output is cut): extend the request by K greedy target tokens.
        seq = model.generate(seq, attention_mask=torch.ones_like(seq), max_new_tokens=K,
                             min_new_tokens=K, do_sample=False, pad_token_id=corpus.EOS_ID)
        aux = target_features(model, seq)
    drafts = accepted = 0
    steps = []
    g = 1  # output tokens known so far; the last one is the bonus token
    while g < total:
        ctx_len = n + g - 1
        ids = torch.tensor([[seq[0, ctx_len].item()] + [corpus.MASK_ID] * K])
        pos = torch.arange(ctx_len, ctx_len + K + 1)[None]
        mask = torch.ones(1, K + 1, ctx_len + K + 1, dtype=torch.bool)
        with torch.no_grad():
            hidden = mirror(ids, pos, aux[:, :ctx_len], torch.arange(ctx_len)[None], mask)
            guess = mirror.logits(hidden[:, 1:]).argmax(-1)[0].tolist()
        truth = seq[0, ctx_len + 1:ctx_len + 1 + K].tolist()
        a = 0
        while a < len(truth) and guess[a] == truth[a]:
            a += 1
        drafts += 1
        accepted += a
        steps.append({"context": ctx_len, "drafted": guess, "accepted": a})
        g += a + 1
    return {"drafts": drafts, "drafted": drafts * K, "accepted": accepted, "steps": steps}


# ---- the kind ---------------------------------------------------------------------------------------
class Kind:
    name = "dflash-qwen3"
    method = "dflash"
    # run.py's one-request prediction may differ from vLLM by one draft step / accepted token: the
    # mirror runs in fp32, vLLM in BF16, whose CPU kernels differ by host. Exact on the AVX-512
    # hosts the suite ran on before; on a Sapphire Rapids host (AMX BF16 GEMMs, 2026-12-02) one
    # near-tie flipped: 32/96/16 predicted (drafts/drafted/accepted) vs 33/99/15 served.
    prediction_tolerance = 1

    def build_target(self, cache: pathlib.Path, smoke: bool) -> pathlib.Path:
        from tests.e2e import target
        return target.build_target(cache, smoke)

    def build_draft(self, cache: pathlib.Path, target: pathlib.Path, smoke: bool) -> pathlib.Path:
        p = dict(params(smoke), target=env.file_digest(target / "model.safetensors"))
        # The trainer's source, not the whole module: editing the replay or the cases keeps the cache.
        sources = [inspect.getsource(f) for f in (params, _modules, draft_config, target_features,
                                                  _greedy_sequences, _block_batch, train_draft)]
        return env.cached_model(cache, "dflash-qwen3", sources, p,
                                lambda out: train_draft(out, target, p))

    def spec_config(self, draft: pathlib.Path) -> dict:
        return {"method": self.method, "model": str(draft),
                "num_speculative_tokens": NUM_SPECULATIVE_TOKENS}

    def quantize_args(self) -> list[str]:
        return []  # --preset auto detects dflash: q/k/v stay dense (docs/presets.md)

    def failure_cases(self, work: pathlib.Path, target: pathlib.Path, draft: pathlib.Path,
                      spk: pathlib.Path) -> list[FailureCase]:
        from tests.e2e import dflash_qwen3_cases
        return dflash_qwen3_cases.failure_cases(self, work, target, draft)


KIND = Kind()
