"""The tiny Laguna target and the Laguna DFlash draft: shapes, the draft's forward, training, and the
checkpoint layout vLLM 0.32 loads (vllm/model_executor/models/laguna_dflash.py).

The draft forward here mirrors vLLM, read from its source:
- context (laguna_dflash.py `combine_hidden_states`): the target's residual stream after each layer
  in `dflash_config.target_layer_ids` (eagle3_utils.get_eagle3_aux_layers_from_config adds 1: id i is
  the stream AFTER layer i, in layer order), each slice RMS-normed by `aux_hidden_norms.i`,
  concatenated, `fc`, then `hidden_norm`;
- context K/V (`_project_context_kv`): per draft layer, that layer's `input_layernorm` on the
  context, the k/v rows of the fused `qkv_proj`, `k_norm` on K, RoPE at the context positions;
- queries (v1/spec_decode/dflash.py + utils._copy_and_expand_dflash_inputs): the bonus token at
  position p followed by K `mask_token_id`s at p+1..p+K; the outputs at the K mask slots are the
  drafts for positions p+1..p+K (same position, no shift);
- attention: non-causal (qwen3_dflash._dflash_layer_causal: full-attention layer_types, no
  `causal` override) over the context positions 0..p-1 and the whole query block;
- layers: laguna.py LagunaDecoderLayer (fused add+RMSNorm residual, q/k norm, neox RoPE, per-head
  softplus gate from `g_proj`, o_proj, SiLU MLP with separate gate/up/down), then `norm` and the
  TARGET's lm_head and embed_tokens (the draft ships neither).
Errors: plain exceptions (this is test tooling); nothing here talks to vLLM.
"""

from __future__ import annotations

import dataclasses
import json
import math
import time
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

EPS = 1e-6
ROPE_THETA = 10000.0


@dataclasses.dataclass(frozen=True)
class Shapes:
    """Every Linear is a multiple of 128 in and out except the per-head g_proj (out = heads)."""
    vocab: int = 2048
    hidden: int = 256
    heads: int = 4
    kv_heads: int = 2
    head_dim: int = 64
    intermediate: int = 512
    target_layers: int = 2
    draft_layers: int = 1
    target_layer_ids: tuple = (0, 1)
    block_size: int = 7          # anchor + 6 masks: num_speculative_tokens = block_size - 1


def rope_parameters() -> dict:
    # Full rotary (partial_rotary_factor 1.0) on both flavours: only full_attention is used.
    one = {"rope_type": "default", "rope_theta": ROPE_THETA, "partial_rotary_factor": 1.0}
    return {"full_attention": dict(one), "sliding_attention": dict(one)}


def laguna_config(s: Shapes, layers: int, eos: int):
    """A dense (no MoE) Laguna config: vLLM's LagunaDecoderLayer builds LagunaMLP when
    mlp_layer_types[i] is "dense", so no expert shape rules apply."""
    from transformers import LagunaConfig
    return LagunaConfig(
        vocab_size=s.vocab, hidden_size=s.hidden, intermediate_size=s.intermediate,
        num_hidden_layers=layers, num_attention_heads=s.heads, num_key_value_heads=s.kv_heads,
        head_dim=s.head_dim, num_attention_heads_per_layer=[s.heads] * layers,
        layer_types=["full_attention"] * layers, mlp_layer_types=["dense"] * layers,
        num_experts=0, num_experts_per_tok=1, moe_intermediate_size=128,
        shared_expert_intermediate_size=0, gating=True, rope_parameters=rope_parameters(),
        sliding_window=512, max_position_embeddings=2048, tie_word_embeddings=False,
        rms_norm_eps=EPS, bos_token_id=eos, eos_token_id=eos, pad_token_id=eos)


# ---- the draft ----------------------------------------------------------------------------------
def rms(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """vLLM RMSNorm: fp32 statistics, weight applied in the input dtype."""
    xf = x.float()
    return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + EPS)).to(x.dtype) * w


def rope(x: torch.Tensor, pos: torch.Tensor) -> torch.Tensor:
    """Neox-style RoPE on [..., n, heads, head_dim] at positions [..., n]."""
    d = x.shape[-1]
    inv = 1.0 / (ROPE_THETA ** (torch.arange(0, d, 2, dtype=torch.float32) / d))
    ang = pos.float()[..., None] * inv
    cos, sin = ang.cos()[..., None, :], ang.sin()[..., None, :]
    x1, x2 = x[..., : d // 2].float(), x[..., d // 2:].float()
    return torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin], -1).to(x.dtype)


class DraftLayer(nn.Module):
    def __init__(self, s: Shapes):
        super().__init__()
        self.s = s
        q, kv = s.heads * s.head_dim, s.kv_heads * s.head_dim
        self.input_layernorm = nn.Parameter(torch.ones(s.hidden))
        self.post_attention_layernorm = nn.Parameter(torch.ones(s.hidden))
        self.qkv_proj = nn.Linear(s.hidden, q + 2 * kv, bias=False)
        self.g_proj = nn.Linear(s.hidden, s.heads, bias=False)
        self.o_proj = nn.Linear(q, s.hidden, bias=False)
        self.q_norm = nn.Parameter(torch.ones(s.head_dim))
        self.k_norm = nn.Parameter(torch.ones(s.head_dim))
        self.gate_proj = nn.Linear(s.hidden, s.intermediate, bias=False)
        self.up_proj = nn.Linear(s.hidden, s.intermediate, bias=False)
        self.down_proj = nn.Linear(s.intermediate, s.hidden, bias=False)

    def context_kv(self, ctx: torch.Tensor, pos: torch.Tensor):
        """laguna_dflash._project_context_kv + _normalize_context_k + RoPE: [B, n, kvh, hd]."""
        s, q = self.s, self.s.heads * self.s.head_dim
        kv = F.linear(rms(ctx, self.input_layernorm), self.qkv_proj.weight[q:])
        k, v = kv.view(*ctx.shape[:-1], 2, s.kv_heads, s.head_dim).unbind(-3)
        return rope(rms(k, self.k_norm), pos), v

    def forward(self, x, residual, pos, ctx_k, ctx_v, mask):
        """x, residual: [B, m, hidden] query block; ctx_k/v: [B, n, kvh, hd]; mask: [B, m, n+m]
        (True = may attend)."""
        s = self.s
        residual = x if residual is None else x + residual
        h = rms(residual, self.input_layernorm)
        q, k, v = self.qkv_proj(h).split(
            [s.heads * s.head_dim, s.kv_heads * s.head_dim, s.kv_heads * s.head_dim], -1)
        q = rope(rms(q.unflatten(-1, (s.heads, s.head_dim)), self.q_norm), pos)
        k = rope(rms(k.unflatten(-1, (s.kv_heads, s.head_dim)), self.k_norm), pos)
        v = v.unflatten(-1, (s.kv_heads, s.head_dim))
        keys = torch.cat([ctx_k, k], 1).repeat_interleave(s.heads // s.kv_heads, -2)
        vals = torch.cat([ctx_v, v], 1).repeat_interleave(s.heads // s.kv_heads, -2)
        att = F.scaled_dot_product_attention(q.transpose(1, 2), keys.transpose(1, 2),
                                             vals.transpose(1, 2), attn_mask=mask[:, None])
        gate = F.softplus(self.g_proj(h).float()).to(att.dtype)          # [B, m, heads]
        att = (att.transpose(1, 2) * gate[..., None]).flatten(-2)
        residual = self.o_proj(att) + residual
        h = rms(residual, self.post_attention_layernorm)
        return self.down_proj(F.silu(self.gate_proj(h)) * self.up_proj(h)), residual


class LagunaDFlashDraft(nn.Module):
    def __init__(self, s: Shapes):
        super().__init__()
        self.s = s
        n_aux = len(s.target_layer_ids)
        self.aux_hidden_norms = nn.ParameterList([nn.Parameter(torch.ones(s.hidden))
                                                  for _ in range(n_aux)])
        self.fc = nn.Linear(n_aux * s.hidden, s.hidden, bias=False)
        self.hidden_norm = nn.Parameter(torch.ones(s.hidden))
        self.norm = nn.Parameter(torch.ones(s.hidden))
        self.layers = nn.ModuleList([DraftLayer(s) for _ in range(s.draft_layers)])

    def context(self, aux: list[torch.Tensor]) -> torch.Tensor:
        normed = [rms(a, w) for a, w in zip(aux, self.aux_hidden_norms)]
        return rms(self.fc(torch.cat(normed, -1)), self.hidden_norm)

    def forward(self, ctx, ctx_pos, q_embeds, q_pos, mask):
        """Hidden states at the query slots (final norm applied)."""
        kvs = [layer.context_kv(ctx, ctx_pos) for layer in self.layers]
        x, residual = q_embeds, None
        for layer, (ck, cv) in zip(self.layers, kvs):
            x, residual = layer(x, residual, q_pos, ck, cv, mask)
        return rms(x + residual, self.norm)

    # -- checkpoint layout (laguna_dflash.py names; fused qkv_proj stored fused) --------------------
    def named_checkpoint_params(self) -> list[tuple[str, torch.Tensor]]:
        """(checkpoint tensor name, live parameter): the names vLLM's DFlashLagunaModel loads
        (no `model.` prefix, no layer offset; load_weights adds `model.`)."""
        out = [("fc.weight", self.fc.weight), ("hidden_norm.weight", self.hidden_norm),
               ("norm.weight", self.norm)]
        out += [(f"aux_hidden_norms.{i}.weight", w) for i, w in enumerate(self.aux_hidden_norms)]
        for i, layer in enumerate(self.layers):
            p = f"layers.{i}."
            out += [
                (p + "input_layernorm.weight", layer.input_layernorm),
                (p + "post_attention_layernorm.weight", layer.post_attention_layernorm),
                (p + "self_attn.qkv_proj.weight", layer.qkv_proj.weight),
                (p + "self_attn.g_proj.weight", layer.g_proj.weight),
                (p + "self_attn.o_proj.weight", layer.o_proj.weight),
                (p + "self_attn.q_norm.weight", layer.q_norm),
                (p + "self_attn.k_norm.weight", layer.k_norm),
                (p + "mlp.gate_proj.weight", layer.gate_proj.weight),
                (p + "mlp.up_proj.weight", layer.up_proj.weight),
                (p + "mlp.down_proj.weight", layer.down_proj.weight),
            ]
        return out

    def vllm_state_dict(self) -> dict[str, torch.Tensor]:
        return {k: v.detach().to(torch.bfloat16).contiguous()
                for k, v in self.named_checkpoint_params()}

    def load_vllm_state_dict(self, sd: dict[str, torch.Tensor]) -> None:
        mine = dict(self.named_checkpoint_params())
        missing = set(mine) - set(sd)
        if missing:
            raise KeyError(f"draft checkpoint lacks {sorted(missing)}")
        with torch.no_grad():
            for k, p in mine.items():
                p.copy_(sd[k].to(p.dtype))


def draft_config(s: Shapes, mask_token_id: int, eos: int) -> dict:
    cfg = laguna_config(s, s.draft_layers, eos).to_dict()
    cfg.update({
        "architectures": ["DFlashLagunaForCausalLM"], "torch_dtype": "bfloat16",
        "draft_vocab_size": s.vocab, "block_size": s.block_size,
        "dflash_config": {"target_layer_ids": list(s.target_layer_ids),
                          "mask_token_id": mask_token_id},
    })
    cfg.pop("dtype", None)
    return cfg


# ---- target helpers -----------------------------------------------------------------------------
def aux_hidden(target, ids: torch.Tensor, layer_ids) -> list[torch.Tensor]:
    """The target's residual stream after each listed layer (what vLLM's EagleModelMixin
    collects: hidden_states + residual), captured with forward hooks."""
    got: dict[int, torch.Tensor] = {}
    hooks = [target.model.layers[i].register_forward_hook(
        lambda _m, _i, out, i=i: got.__setitem__(i, out[0] if isinstance(out, tuple) else out))
        for i in layer_ids]
    try:
        with torch.no_grad():
            target(input_ids=ids)
    finally:
        for h in hooks:
            h.remove()
    return [got[i] for i in sorted(layer_ids)]


def train_target(model, ids: torch.Tensor, steps: int, seq: int = 96, batch: int = 8,
                 seed: int = 0, log=None) -> float:
    log = log or (lambda m: print(m, flush=True))
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.0)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=3e-3, total_steps=steps,
                                                pct_start=0.1)
    gen = torch.Generator().manual_seed(seed)
    t0, loss = time.time(), torch.tensor(0.0)
    for step in range(steps):
        starts = torch.randint(0, len(ids) - seq - 1, (batch,), generator=gen)
        x = torch.stack([ids[st:st + seq] for st in starts])
        loss = model(input_ids=x, labels=x).loss
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step()
        if step % 50 == 0 or step == steps - 1:
            log(f"  target step {step} loss {loss.item():.3f} ({time.time() - t0:.0f}s)")
    return float(loss)


# ---- draft training -----------------------------------------------------------------------------
def block_inputs(seq_len: int, anchors: torch.Tensor, k: int):
    """Query positions [A, k+1] and the attention mask [A*(k+1), seq_len + A*(k+1)] for anchors
    (positions of the bonus token): a block sees context positions < its anchor and itself."""
    m = k + 1
    q_pos = anchors[:, None] + torch.arange(m)[None]
    n_q = len(anchors) * m
    ctx_ok = torch.arange(seq_len)[None, :] < anchors.repeat_interleave(m)[:, None]
    block = torch.arange(n_q) // m
    self_ok = block[:, None] == block[None, :]
    return q_pos, torch.cat([ctx_ok, self_ok], 1)


def draft_logits(draft, embed, lm_head, aux, tokens, anchors, mask_id):
    """Logits [B, A, k, vocab] for the k mask slots after each anchor. aux: per-layer
    [B, n, hidden] target features; tokens [B, n]; anchors [A] (same for the whole batch)."""
    k = draft.s.block_size - 1
    b, n = tokens.shape
    ctx = draft.context(aux)
    q_pos, mask = block_inputs(n, anchors, k)
    q_ids = torch.full((b, len(anchors), k + 1), mask_id, dtype=torch.long)
    q_ids[:, :, 0] = tokens[:, anchors]
    h = draft(ctx, torch.arange(n).expand(b, n), embed(q_ids.flatten(1)),
              q_pos.flatten().expand(b, -1), mask.expand(b, -1, -1))
    h = h.view(b, len(anchors), k + 1, -1)[:, :, 1:]
    return lm_head(h)


def train_draft(draft, target, seqs: torch.Tensor, prompt_len: int, mask_id: int, steps: int,
                batch: int = 4, anchors_per_seq: int = 12, seed: int = 0, log=None) -> float:
    """Distils the draft on the target's own greedy continuations `seqs` [N, n]: every label is the
    target's greedy choice, which is exactly what greedy verification accepts. Position-decayed
    weights as in DFlash training (earlier slots matter more for acceptance)."""
    log = log or (lambda m: print(m, flush=True))
    k = draft.s.block_size - 1
    embed, lm_head = target.model.embed_tokens, target.lm_head
    with torch.no_grad():
        feats = [torch.cat(parts) for parts in zip(*[
            aux_hidden(target, seqs[i:i + 32], draft.s.target_layer_ids)
            for i in range(0, len(seqs), 32)])]
    opt = torch.optim.AdamW(draft.parameters(), lr=2e-3, weight_decay=0.0)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=2e-3, total_steps=steps,
                                                pct_start=0.1)
    weights = torch.tensor([math.exp(-j / 4) for j in range(k)])
    gen = torch.Generator().manual_seed(seed)
    n = seqs.shape[1]
    t0, loss = time.time(), torch.tensor(0.0)
    for step in range(steps):
        rows = torch.randint(0, len(seqs), (batch,), generator=gen)
        anchors = torch.randint(prompt_len - 1, n - k, (anchors_per_seq,), generator=gen)
        logits = draft_logits(draft, embed, lm_head, [f[rows] for f in feats], seqs[rows],
                              anchors, mask_id)
        labels = seqs[rows][:, anchors[:, None] + torch.arange(1, k + 1)[None]]
        ce = F.cross_entropy(logits.flatten(0, 2).float(), labels.flatten(),
                             reduction="none").view(labels.shape)
        loss = (ce * weights).sum(-1).mean() / weights.sum()
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step()
        if step % 50 == 0 or step == steps - 1:
            acc = (logits.argmax(-1) == labels).float().mean(dim=(0, 1))
            log(f"  draft step {step} loss {loss.item():.3f} slot acc "
                f"{[round(a, 2) for a in acc.tolist()]} ({time.time() - t0:.0f}s)")
    return float(loss)


# ---- what vLLM's greedy spec decode should report ------------------------------------------------
@torch.no_grad()
def greedy_extension(target, ids: list[int], count: int) -> list[int]:
    """The target's next `count` greedy tokens after `ids`."""
    out = list(ids)
    for _ in range(count):
        out.append(int(target(input_ids=torch.tensor([out])).logits[0, -1].argmax()))
    return out[len(ids):]


@torch.no_grad()
def predicted_acceptance(draft, target, prompt_ids: list[int], output_ids: list[int],
                         mask_id: int) -> dict:
    """Replays vLLM's DFlash loop on a greedy request whose output (vLLM's) is known: at each step
    the draft sees the target features of every token before the bonus token, drafts k tokens, and
    greedy verification accepts the longest prefix equal to the target's greedy tokens. The last
    step verifies against tokens past max_tokens too (vLLM counts those acceptances and then cuts
    the output), so the truth is extended by k greedy tokens of the target. Returns the counters
    vLLM's /metrics exports (drafts, draft tokens, accepted, accepted per position) and the drafts."""
    k = draft.s.block_size - 1
    truth_ids = prompt_ids + output_ids + greedy_extension(target, prompt_ids + output_ids, k)
    ids = torch.tensor([truth_ids])
    aux = aux_hidden(target, ids, draft.s.target_layer_ids)
    embed, lm_head = target.model.embed_tokens, target.lm_head
    p, end = len(prompt_ids), len(prompt_ids) + len(output_ids)
    per_pos = [0] * k
    drafts_made, accepted, proposals = 0, 0, []
    while p < end - 1:  # the bonus token at p is the last output token: no more steps
        logits = draft_logits(draft, embed, lm_head, [a[:, :p + 1] for a in aux], ids[:, :p + 1],
                              torch.tensor([p]), mask_id)
        guess = logits[0, 0].argmax(-1).tolist()
        truth = truth_ids[p + 1:p + 1 + k]
        a = 0
        while a < k and guess[a] == truth[a]:
            a += 1
        for j in range(a):
            per_pos[j] += 1
        drafts_made += 1
        accepted += a
        proposals.append({"position": p, "draft": guess, "accepted": a})
        p += a + 1
    return {"num_drafts": drafts_made, "num_draft_tokens": drafts_made * k,
            "num_accepted_tokens": accepted, "accepted_per_pos": per_pos, "steps": proposals}


def save_json(path: Path, obj) -> None:
    path.write_text(json.dumps(obj, indent=2) + "\n")
