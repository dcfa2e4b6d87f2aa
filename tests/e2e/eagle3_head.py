"""A 1-layer EAGLE-3 head for the tiny Qwen3 target: its checkpoint layout, a torch forward that mirrors
vLLM 0.32's, its training, and a simulation of vLLM's greedy draft-and-verify loop.

What it mirrors (vLLM 0.32 source, read, not imported):
- vllm/model_executor/models/qwen3_eagle3.py, `Eagle3Qwen3ForCausalLM`: `combine_hidden_states` is
  `fc` over the concatenated target states of `eagle_config.eagle_aux_hidden_state_layer_ids`; the single
  decoder layer concatenates `input_layernorm(embed)` with `hidden_norm(hidden)` (residual = the
  un-normed hidden: `norm_before_residual` false), runs Qwen3 attention (q/k RMSNorm per head, neox
  RoPE) and the MLP, and the model norm returns (normed, pre-norm); `lm_head` gives draft-vocab logits
  that `d2t` (offsets: target id = draft id + d2t[id]) scatters into the target vocab. Checkpoint keys
  `midlayer.*` load as `model.layers.0.*`; `t2d` is skipped; no `embed_tokens` in the checkpoint means
  the target's embedding is shared (llm_base_proposer._maybe_share_embeddings), so training freezes it.
- vllm/model_executor/models/interfaces.py `_maybe_add_hidden_state`: aux id 0 is the embedding output,
  id k the residual stream after target layer k-1 (hidden + residual, before the final norm).
- vllm/v1/spec_decode/llm_base_proposer.py `propose`: the first pass feeds position i the token i+1 and
  the target's state at i (positions unchanged); each further step feeds the previous draft token, the
  draft's own pre-norm output, and position + 1, attending to the first pass's keys plus its own chain.
Training is EAGLE-3's training-time test over `ttt_steps` such steps, with exactly that attention mask.

Errors: a target folder without the expected config keys raises KeyError naming the key.
"""
from __future__ import annotations

import dataclasses
import json
import math
import pathlib
import time

import torch
import torch.nn.functional as F
from torch import nn

# vLLM aux ids for the 2-layer target: 0 = embeddings, 1 = after layer 0, 2 = after layer 1 (pre-norm).
# Three distinct states, so fc's input is 3 x hidden = 768, as vLLM assumes when no ids are given.
AUX_LAYER_IDS = (0, 1, 2)
DRAFT_VOCAB = 1024
ARCHITECTURE = "Eagle3Qwen3ForCausalLM"
_COPIED_KEYS = ("hidden_size", "intermediate_size", "num_attention_heads", "num_key_value_heads",
                "head_dim", "rms_norm_eps", "max_position_embeddings", "vocab_size", "hidden_act",
                "attention_bias", "bos_token_id", "eos_token_id")


def head_config(target_cfg: dict, aux_ids=AUX_LAYER_IDS, draft_vocab: int = DRAFT_VOCAB) -> dict:
    """config.json of the head: the target's Qwen3 shapes, 1 layer, a draft vocab, the aux ids."""
    cfg = {k: target_cfg[k] for k in _COPIED_KEYS}
    rope = target_cfg.get("rope_parameters") or {"rope_theta": target_cfg["rope_theta"],
                                                 "rope_type": "default"}
    cfg.update(architectures=[ARCHITECTURE], model_type="qwen3", num_hidden_layers=1,
               layer_types=["full_attention"], rope_parameters=rope, tie_word_embeddings=False,
               draft_vocab_size=draft_vocab, target_hidden_size=target_cfg["hidden_size"],
               torch_dtype="bfloat16",
               eagle_config={"eagle_aux_hidden_state_layer_ids": list(aux_ids),
                             "use_aux_hidden_state": True})
    return cfg


def tensor_layout(cfg: dict) -> dict[str, tuple[tuple[int, ...], torch.dtype]]:
    """Every tensor the head's safetensors file holds: name -> (shape, dtype)."""
    h, inter, hd = cfg["hidden_size"], cfg["intermediate_size"], cfg["head_dim"]
    q, kv = cfg["num_attention_heads"] * hd, cfg["num_key_value_heads"] * hd
    n_aux = len(cfg["eagle_config"]["eagle_aux_hidden_state_layer_ids"])
    bf = torch.bfloat16
    layer = {"input_layernorm.weight": (h,), "hidden_norm.weight": (h,),
             "self_attn.q_proj.weight": (q, 2 * h), "self_attn.k_proj.weight": (kv, 2 * h),
             "self_attn.v_proj.weight": (kv, 2 * h), "self_attn.o_proj.weight": (h, q),
             "self_attn.q_norm.weight": (hd,), "self_attn.k_norm.weight": (hd,),
             "post_attention_layernorm.weight": (h,), "mlp.gate_proj.weight": (inter, h),
             "mlp.up_proj.weight": (inter, h), "mlp.down_proj.weight": (h, inter)}
    out = {"fc.weight": ((h, n_aux * cfg["target_hidden_size"]), bf)}
    out.update({f"midlayer.{k}": (s, bf) for k, s in layer.items()})
    out.update({"norm.weight": ((h,), bf), "lm_head.weight": ((cfg["draft_vocab_size"], h), bf),
                "d2t": ((cfg["draft_vocab_size"],), torch.int64),
                "t2d": ((cfg["vocab_size"],), torch.bool)})
    return out


class RMSNorm(nn.Module):
    def __init__(self, n: int, eps: float):
        super().__init__()
        self.weight, self.eps = nn.Parameter(torch.ones(n)), eps

    def forward(self, x):
        x32 = x.float()
        return x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


def rope(x, pos, theta: float):
    """Neox-style rotary embedding of x [B, T, heads, hd] at integer positions pos [T]."""
    hd = x.shape[-1]
    inv = theta ** (-torch.arange(0, hd, 2, dtype=torch.float32) / hd)
    ang = pos.float()[:, None] * inv[None, :]
    cos, sin = torch.cat([ang.cos()] * 2, -1)[:, None, :], torch.cat([ang.sin()] * 2, -1)[:, None, :]
    x1, x2 = x[..., : hd // 2], x[..., hd // 2:]
    return x * cos + torch.cat([-x2, x1], -1) * sin


class _Attn(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        h, hd = cfg["hidden_size"], cfg["head_dim"]
        self.nh, self.nkv, self.hd = cfg["num_attention_heads"], cfg["num_key_value_heads"], hd
        self.q_proj = nn.Linear(2 * h, self.nh * hd, bias=False)
        self.k_proj = nn.Linear(2 * h, self.nkv * hd, bias=False)
        self.v_proj = nn.Linear(2 * h, self.nkv * hd, bias=False)
        self.o_proj = nn.Linear(self.nh * hd, h, bias=False)
        self.q_norm, self.k_norm = RMSNorm(hd, cfg["rms_norm_eps"]), RMSNorm(hd, cfg["rms_norm_eps"])


class _Layer(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        h, eps = cfg["hidden_size"], cfg["rms_norm_eps"]
        self.input_layernorm, self.hidden_norm = RMSNorm(h, eps), RMSNorm(h, eps)
        self.self_attn = _Attn(cfg)
        self.post_attention_layernorm = RMSNorm(h, eps)
        self.mlp = nn.Module()
        self.mlp.gate_proj = nn.Linear(h, cfg["intermediate_size"], bias=False)
        self.mlp.up_proj = nn.Linear(h, cfg["intermediate_size"], bias=False)
        self.mlp.down_proj = nn.Linear(cfg["intermediate_size"], h, bias=False)


class Eagle3Head(nn.Module):
    """The head; its state_dict (less the frozen shared embedding) is the checkpoint layout."""

    def __init__(self, cfg: dict, embed: torch.Tensor):
        super().__init__()
        self.cfg = cfg
        h = cfg["hidden_size"]
        self.fc = nn.Linear(tensor_layout(cfg)["fc.weight"][0][1], h, bias=False)
        self.midlayer = _Layer(cfg)
        self.norm = RMSNorm(h, cfg["rms_norm_eps"])
        self.lm_head = nn.Linear(h, cfg["draft_vocab_size"], bias=False)
        self.register_buffer("d2t", torch.zeros(cfg["draft_vocab_size"], dtype=torch.int64))
        self.register_buffer("t2d", torch.zeros(cfg["vocab_size"], dtype=torch.bool))
        self.register_buffer("embed", embed.float(), persistent=False)
        self.theta = float(cfg["rope_parameters"]["rope_theta"])

    # -- one decoder step, split around attention so steps can share keys --------------------------
    def _qkv(self, tokens, hidden, pos):
        a, lay = self.midlayer.self_attn, self.midlayer
        x = torch.cat([lay.input_layernorm(self.embed[tokens]), lay.hidden_norm(hidden)], -1)
        b, t, _ = x.shape
        q = a.q_norm(a.q_proj(x).view(b, t, a.nh, a.hd))
        k = a.k_norm(a.k_proj(x).view(b, t, a.nkv, a.hd))
        v = a.v_proj(x).view(b, t, a.nkv, a.hd)
        return rope(q, pos, self.theta), rope(k, pos, self.theta), v

    def _finish(self, attn, residual):
        lay = self.midlayer
        residual = lay.self_attn.o_proj(attn) + residual
        mlp = lay.mlp
        h = lay.post_attention_layernorm(residual)
        prenorm = mlp.down_proj(F.silu(mlp.gate_proj(h)) * mlp.up_proj(h)) + residual
        return self.norm(prenorm), prenorm

    def _attend(self, q, keys, values):
        """q [B,T,nh,hd] at chain step len(keys): causal over keys[0] (the first pass), plus the
        same index of every later step's keys (EAGLE-3's training-time-test mask)."""
        a = self.midlayer.self_attn
        rep = a.nh // a.nkv
        ks = [k.repeat_interleave(rep, dim=2) for k in keys]
        vs = [v.repeat_interleave(rep, dim=2) for v in values]
        scale = 1.0 / math.sqrt(a.hd)
        t = q.shape[1]
        first = torch.einsum("bthd,bshd->bhts", q, ks[0]) * scale
        first = first.masked_fill(~torch.ones(t, t, dtype=torch.bool).tril(), float("-inf"))
        diag = [torch.einsum("bthd,bthd->bht", q, k)[..., None] * scale for k in ks[1:]]
        p = torch.softmax(torch.cat([first, *diag], -1), -1)
        out = torch.einsum("bhts,bshd->bthd", p[..., :t], vs[0])
        for j, v in enumerate(vs[1:]):
            out = out + p[..., t + j, None].transpose(1, 2) * v
        return out.reshape(q.shape[0], t, -1)

    def chain(self, tokens_per_step, aux, start: int = 0, feed_argmax: bool = False):
        """Runs len(tokens_per_step) draft steps over T indices. Step 1 gets tokens_per_step[0] [B,T]
        and fc(aux [B,T,A*H]) at positions start..start+T-1; step k gets tokens_per_step[k-1] (or,
        with feed_argmax, step k-1's draft) and step k-1's pre-norm output, one position later.
        Returns the draft-vocab logits of every step."""
        hidden = self.fc(aux)
        t = aux.shape[1]
        keys, values, logits = [], [], []
        tokens = tokens_per_step[0]
        for step in range(len(tokens_per_step)):
            pos = torch.arange(start + step, start + step + t)
            q, k, v = self._qkv(tokens, hidden, pos)
            keys.append(k)
            values.append(v)
            normed, hidden = self._finish(self._attend(q, keys, values), hidden)
            logits.append(self.lm_head(normed))
            if step + 1 < len(tokens_per_step):
                tokens = (self.to_target(logits[-1].argmax(-1)) if feed_argmax
                          else tokens_per_step[step + 1])
        return logits

    def to_target(self, draft_ids):
        return draft_ids + self.d2t[draft_ids]

    def checkpoint_tensors(self) -> dict[str, torch.Tensor]:
        sd = self.state_dict()
        return {k: (v.to(torch.bfloat16) if v.is_floating_point() else v).contiguous()
                for k, v in sd.items()}


# -- target states --------------------------------------------------------------------------------
def target_states(model, ids: torch.Tensor, aux_ids=AUX_LAYER_IDS):
    """(aux [B,T,A*H] as vLLM passes them, rounded to bf16; greedy next-token ids [B,T])."""
    captured = {}
    hooks = [model.model.embed_tokens.register_forward_hook(
        lambda m, i, o: captured.__setitem__(0, o))]
    for n, layer in enumerate(model.model.layers):
        hooks.append(layer.register_forward_hook(
            lambda m, i, o, n=n: captured.__setitem__(n + 1, o[0] if isinstance(o, tuple) else o)))
    try:
        with torch.no_grad():
            logits = model(input_ids=ids).logits
    finally:
        for h in hooks:
            h.remove()
    aux = torch.cat([captured[i] for i in aux_ids], -1)
    return aux.to(torch.bfloat16).float(), logits.argmax(-1)


@dataclasses.dataclass
class TrainParams:
    sequences: int = 128     # training sequences: a stdlib prefix + the target's greedy continuation
    prefix: int = 32
    continuation: int = 96
    steps: int = 500
    batch: int = 8
    ttt_steps: int = 3       # chain steps trained with the training-time-test mask
    lr: float = 2e-3
    seed: int = 0


def _training_data(model, tok, text: str, p: TrainParams):
    ids = torch.tensor(tok(text)["input_ids"])
    gen = torch.Generator().manual_seed(p.seed + 1)
    starts = torch.randint(0, len(ids) - p.prefix - 1, (p.sequences,), generator=gen)
    prefixes = torch.stack([ids[s:s + p.prefix] for s in starts])
    seqs = []
    with torch.no_grad():
        for chunk in prefixes.split(32):
            seqs.append(model.generate(chunk, attention_mask=torch.ones_like(chunk),
                                       max_new_tokens=p.continuation, min_new_tokens=p.continuation,
                                       do_sample=False, pad_token_id=0))
    seqs = torch.cat(seqs)
    aux, labels = zip(*(target_states(model, s) for s in seqs.split(32)))
    return seqs, torch.cat(aux), torch.cat(labels)


def draft_vocab(labels: torch.Tensor, vocab: int, size: int):
    """The `size` most frequent greedy targets as (d2t offsets, t2d mask), ids ascending."""
    counts = torch.bincount(labels.flatten(), minlength=vocab)
    chosen = counts.argsort(descending=True)[:size].sort().values
    t2d = torch.zeros(vocab, dtype=torch.bool)
    t2d[chosen] = True
    coverage = counts[chosen].sum().item() / counts.sum().item()
    return chosen - torch.arange(size), t2d, coverage


def train_head(target_dir: pathlib.Path, text: str, p: TrainParams, log=print):
    """Trains a head on the target's own greedy text; returns (head, cfg, stats)."""
    from transformers import AutoModelForCausalLM, AutoTokenizer
    torch.manual_seed(p.seed)
    torch.set_num_threads(1)
    t0 = time.time()
    tok = AutoTokenizer.from_pretrained(target_dir)
    model = AutoModelForCausalLM.from_pretrained(target_dir, dtype=torch.float32).eval()
    cfg = head_config(json.loads((target_dir / "config.json").read_text()))
    seqs, aux, labels = _training_data(model, tok, text, p)
    t_data = time.time() - t0
    head = Eagle3Head(cfg, model.model.embed_tokens.weight.detach().to(torch.bfloat16))
    d2t, t2d, coverage = draft_vocab(labels, cfg["vocab_size"], cfg["draft_vocab_size"])
    head.d2t.copy_(d2t)
    head.t2d.copy_(t2d)
    target_to_draft = torch.full((cfg["vocab_size"],), -100, dtype=torch.int64)
    target_to_draft[t2d] = torch.arange(cfg["draft_vocab_size"])
    opt = torch.optim.AdamW([q for q in head.parameters() if q.requires_grad], lr=p.lr)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=p.lr, total_steps=p.steps, pct_start=0.1)
    gen = torch.Generator().manual_seed(p.seed + 2)
    k, n = p.ttt_steps, seqs.shape[1] - p.ttt_steps
    history = []
    for step in range(p.steps):
        b = torch.randint(0, len(seqs), (p.batch,), generator=gen)
        x, a, y = seqs[b], aux[b, :n], labels[b]
        logits = head.chain([x[:, s + 1: s + 1 + n] for s in range(k)], a)
        losses = [F.cross_entropy(lg.flatten(0, 1), target_to_draft[y[:, s + 1: s + 1 + n]].flatten(),
                                  ignore_index=-100) for s, lg in enumerate(logits)]
        loss = sum(0.8 ** s * l for s, l in enumerate(losses))
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step()
        if step % 200 == 0 or step == p.steps - 1:
            history.append({"step": step, "loss_per_ttt_step": [round(l.item(), 3) for l in losses]})
            log(f"  head step {step} losses {history[-1]['loss_per_ttt_step']} ({time.time() - t0:.0f}s)")
    with torch.no_grad():
        logits = head.chain([seqs[:64, s + 1: s + 1 + n] for s in range(k)], aux[:64, :n],
                            feed_argmax=True)
        acc = [(head.to_target(lg.argmax(-1)) == labels[:64, s + 1: s + 1 + n]).float().mean().item()
               for s, lg in enumerate(logits)]
    stats = {"data_seconds": round(t_data, 1), "seconds": round(time.time() - t0, 1),
             "draft_vocab_coverage": round(coverage, 4), "history": history,
             "train_chain_accuracy_per_step": [round(v, 4) for v in acc], "params": dataclasses.asdict(p)}
    return head, cfg, stats


def save_head(head: Eagle3Head, cfg: dict, out: pathlib.Path, stats: dict) -> None:
    from safetensors.torch import save_file
    out.mkdir(parents=True, exist_ok=True)
    save_file(head.checkpoint_tensors(), str(out / "model.safetensors"), metadata={"format": "pt"})
    (out / "config.json").write_text(json.dumps(cfg, indent=2) + "\n")
    (out / "training.json").write_text(json.dumps(stats, indent=2) + "\n")


def load_head(head_dir: pathlib.Path, target_dir: pathlib.Path) -> Eagle3Head:
    from safetensors.torch import load_file
    cfg = json.loads((head_dir / "config.json").read_text())
    embed = load_file(str(next(target_dir.glob("*.safetensors"))))["model.embed_tokens.weight"]
    head = Eagle3Head(cfg, embed)
    sd = load_file(str(head_dir / "model.safetensors"))
    head.load_state_dict({k: v.float() if v.is_floating_point() else v for k, v in sd.items()})
    return head


# -- vLLM's greedy draft-and-verify loop, simulated ----------------------------------------------------
def simulate(head: Eagle3Head, target_model, prompt: list[int], generated: list[int], k: int) -> dict:
    """Replays vLLM's greedy speculative loop for a request whose output was `generated`: after each
    verification the drafter's first pass covers every verified position (target states) and the chain
    proposes k tokens; accepted = the longest prefix equal to the target's tokens. vLLM's last step may
    accept tokens past max_tokens (the output is cut afterwards), so the target's greedy continuation is
    extended by k tokens here. Returns the counters vLLM's /metrics would move."""
    with torch.no_grad():
        full = target_model.generate(torch.tensor([prompt + generated]), max_new_tokens=k,
                                     min_new_tokens=k, do_sample=False, pad_token_id=0)
    seq = full[:, : len(prompt) + len(generated) + k]
    aux, _ = target_states(target_model, seq)
    n_prompt, total = len(prompt), len(prompt) + len(generated)
    known = n_prompt + 1                       # prompt + the token sampled at prefill
    drafts = drafted = accepted = 0
    per_pos = [0] * k
    proposals = []
    with torch.no_grad():
        while known < total:
            n = known - 1                          # target states exist for positions 0..n-1
            tokens = seq[:, 1:known]
            logits = head.chain([tokens] * k, aux[:, :n], feed_argmax=True)
            draft = [int(head.to_target(lg[0, -1].argmax())) for lg in logits]
            proposals.append(draft)
            truth = seq[0, known:known + k].tolist()
            a = 0
            while a < min(k, len(truth)) and draft[a] == truth[a]:
                per_pos[a] += 1
                a += 1
            drafts += 1
            drafted += k
            accepted += a
            known += a + 1
    return {"drafts": drafts, "draft_tokens": drafted, "accepted": accepted, "per_position": per_pos,
            "proposals": proposals}
