"""Cheap tests of the Laguna DFlash e2e kind (tests/e2e/laguna*.py), without serving vLLM:
- the draft checkpoint has exactly the tensor names and shapes vLLM 0.32's laguna_dflash.py
  builds (read from the installed source when the vLLM venv exists);
- the trainer's forward agrees with a straightforward per-anchor recomputation (the batched
  block masks do not leak between blocks or from the future context);
- the failure-case transforms (unfused q/k/v, rewritten ignore entries) do what they say;
- `sparkulator check --vllm` prints a patch that applies to the installed laguna_dflash.py
  (`patch --dry-run`), and the helper it adds dequantizes as `sparkulator dequantize` does. These
  and the source check skip only without the vLLM venv (env.site_packages() holds no vllm), which
  fails under SPK_REQUIRE (suite_policy.py); a missing binary fails (conftest's spk_path).
The vLLM runs themselves (acceptance, failure cases, the patched-vLLM proof) are in
tests/e2e/laguna_run.py and docs/e2e-laguna.md; they take many minutes.
"""

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
if not hasattr(transformers, "LagunaConfig"):
    pytest.skip("transformers has no Laguna (needs >= 5.17)", allow_module_level=True)

from tests.e2e import laguna_breaks as breaks  # noqa: E402
from tests.e2e import laguna_model as lm  # noqa: E402
from tests.e2e.laguna import KIND  # noqa: E402
from tests.e2e import env  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
SITE = env.site_packages()  # of $VENV, else the repository's .venv-vllm
LAGUNA_DFLASH = SITE / "vllm/model_executor/models/laguna_dflash.py"


def test_every_quantizable_linear_is_a_multiple_of_128():
    d = lm.LagunaDFlashDraft(lm.Shapes())
    for name, w in d.vllm_state_dict().items():
        if w.ndim != 2:
            continue
        if name.endswith("g_proj.weight"):  # per-head gate: out = heads, kept dense
            assert w.shape == (lm.Shapes().heads, lm.Shapes().hidden)
            continue
        assert w.shape[0] % 128 == 0 and w.shape[1] % 128 == 0, (name, w.shape)


def test_checkpoint_names_are_those_vllm_laguna_dflash_loads():
    names = set(lm.LagunaDFlashDraft(lm.Shapes()).vllm_state_dict())
    assert "layers.0.self_attn.qkv_proj.weight" in names          # fused, stored fused
    assert not any(re.search(r"\.(q|k|v)_proj\.", n) for n in names)
    assert {"aux_hidden_norms.0.weight", "aux_hidden_norms.1.weight", "fc.weight",
            "hidden_norm.weight", "norm.weight"} <= names
    assert not any("embed_tokens" in n or "lm_head" in n for n in names)  # shared with target
    if not LAGUNA_DFLASH.exists():
        pytest.skip(f"vLLM source not found at {LAGUNA_DFLASH}")
    src = LAGUNA_DFLASH.read_text()
    # The module attributes the loader maps these names onto (laguna_dflash.py).
    for attr in ("self.aux_hidden_norms", "self.fc", "self.hidden_norm", "self.norm",
                 "LagunaDecoderLayer("):
        assert attr in src
    # load_weights has no stacked q/k/v mapping: only the fused name can load.
    assert "stacked_params_mapping" not in src and "orig_to_new_stacked" not in src


def test_draft_config_and_num_speculative_tokens(tmp_path):
    s = lm.Shapes()
    cfg = lm.draft_config(s, mask_token_id=1, eos=0)
    assert cfg["architectures"] == ["DFlashLagunaForCausalLM"]
    assert cfg["draft_vocab_size"] == s.vocab and cfg["layer_types"] == ["full_attention"]
    assert cfg["dflash_config"] == {"target_layer_ids": [0, 1], "mask_token_id": 1}
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    spec = KIND.spec_config(tmp_path)
    assert spec["method"] == "dflash" and spec["num_speculative_tokens"] == s.block_size - 1


def test_batched_blocks_equal_one_anchor_at_a_time():
    torch.manual_seed(0)
    s = lm.Shapes()
    target = transformers.LagunaForCausalLM(lm.laguna_config(s, s.target_layers, 0)).eval()
    draft = lm.LagunaDFlashDraft(s).eval()
    tokens = torch.randint(2, s.vocab, (2, 40))
    aux = lm.aux_hidden(target, tokens, s.target_layer_ids)
    emb, head = target.model.embed_tokens, target.lm_head
    anchors = torch.tensor([5, 17, 30])
    with torch.no_grad():
        batched = lm.draft_logits(draft, emb, head, aux, tokens, anchors, 1)
        for j, p in enumerate(anchors.tolist()):
            # Only the context before the anchor exists for a lone block: nothing later may leak.
            one = lm.draft_logits(draft, emb, head, [a[:, :p + 1] for a in aux], tokens[:, :p + 1],
                                  torch.tensor([p]), 1)
            torch.testing.assert_close(batched[:, j], one[:, 0], atol=1e-4, rtol=1e-4)


def test_state_dict_round_trip():
    a, b = lm.LagunaDFlashDraft(lm.Shapes()), lm.LagunaDFlashDraft(lm.Shapes())
    b.load_vllm_state_dict(a.vllm_state_dict())
    for (na, pa), (nb, pb) in zip(a.named_checkpoint_params(), b.named_checkpoint_params()):
        assert na == nb and torch.equal(pa.to(torch.bfloat16), pb.to(torch.bfloat16))
    with pytest.raises(KeyError, match="lacks"):
        b.load_vllm_state_dict({})


def test_unfused_copy_splits_qkv_exactly(tmp_path):
    from safetensors.torch import load_file, save_file
    s = lm.Shapes()
    src = tmp_path / "draft"
    src.mkdir()
    sd = lm.LagunaDFlashDraft(s).vllm_state_dict()
    save_file(sd, str(src / "model.safetensors"))
    (src / "config.json").write_text("{}")
    out = load_file(str(breaks.unfuse_qkv(src, tmp_path / "unfused", s.heads * s.head_dim,
                                          s.kv_heads * s.head_dim) / "model.safetensors"))
    assert "layers.0.self_attn.qkv_proj.weight" not in out
    fused = torch.cat([out[f"layers.0.self_attn.{x}_proj.weight"] for x in "qkv"])
    assert torch.equal(fused, sd["layers.0.self_attn.qkv_proj.weight"])


def test_ignore_rewrite_replaces_one_entry_and_rejects_unknown(tmp_path):
    src = tmp_path / "q"
    src.mkdir()
    ignore = [r"re:.*self_attn\.(q|k|v|qkv)_proj$", r"re:.*self_attn\.g_proj$"]
    (src / "config.json").write_text(json.dumps({"quantization_config": {"ignore": ignore}}))
    assert breaks.entry_for(ignore, "qkv_proj") == ignore[0]
    assert breaks.entry_for(ignore, "g_proj") == ignore[1]
    dst = breaks._rewrite_ignore(src, tmp_path / "lit", {ignore[1]: "layers.0.self_attn.g_proj"})
    got = json.loads((dst / "config.json").read_text())["quantization_config"]["ignore"]
    assert got == [ignore[0], "layers.0.self_attn.g_proj"]
    with pytest.raises(ValueError, match="no entry"):
        breaks._rewrite_ignore(src, tmp_path / "bad", {"nope": "x"})


def test_check_vllm_patch_applies_to_installed_laguna_dflash(tmp_path, spk_path):
    spk = Path(spk_path)
    if not LAGUNA_DFLASH.exists():
        pytest.skip(f"vLLM not installed at {SITE}")
    if shutil.which("patch") is None:
        pytest.skip("no `patch` program")
    r = subprocess.run([str(spk), "check", "--vllm", str(SITE), "--json"], capture_output=True,
                       text=True)
    findings = json.loads(r.stdout)["findings"]
    mine = [f for f in findings if f["file"].endswith("laguna_dflash.py")]
    assert any(f["code"] == "vllm-dflash-context-kv" for f in mine), findings
    # Copy only the files the diffs touch into a vllm/ tree and apply every diff in order.
    tree = tmp_path / "site"
    for f in mine:
        dst = tree / f["file"]
        dst.parent.mkdir(parents=True, exist_ok=True)
        if not dst.exists():
            shutil.copy(SITE / f["file"], dst)
        for dry in (True, False):
            p = subprocess.run(["patch", "-p1", "--forward"] + (["--dry-run"] if dry else []),
                               input=f["fix"], cwd=tree, capture_output=True, text=True)
            assert p.returncode == 0, p.stdout + p.stderr
    patched = (tree / "vllm/model_executor/models/laguna_dflash.py").read_text()
    assert "a.qkv_proj.weight[" not in patched
    assert "_spk_dense_weight(a.qkv_proj)[a.q_size :]" in patched
    compile(patched, "laguna_dflash.py", "exec")


def test_patch_helper_dequantizes_like_sparkulator_dequantize(tmp_path, spk_path, monkeypatch):
    """The `_spk_dense_weight` the patch adds, run on a quantized qkv_proj's tensors as vLLM holds
    them after load_weights (compressed-tensors layout, before the CPU kernel repacks), gives the
    values `sparkulator dequantize` writes. (On vLLM itself the patched draft loads; its W4A16
    layers cannot run on an AVX2-only host, see docs/e2e-laguna.md.)"""
    import types
    from safetensors.torch import load_file, save_file
    spk = Path(spk_path)
    monkeypatch.setenv("SPARKULATOR", spk_path)  # breaks.quantize runs it through tests.e2e.env
    if not LAGUNA_DFLASH.exists():
        pytest.skip(f"vLLM not installed at {SITE}")
    s = lm.Shapes()
    draft = tmp_path / "draft"
    draft.mkdir()
    torch.manual_seed(0)
    save_file(lm.LagunaDFlashDraft(s).vllm_state_dict(), str(draft / "model.safetensors"))
    (draft / "config.json").write_text(json.dumps(lm.draft_config(s, 1, 0)))
    q = breaks.quantize(draft, tmp_path / "q", "--preset", "none")
    subprocess.run([str(spk), "dequantize", str(q), str(tmp_path / "dq")], check=True,
                   capture_output=True)
    r = subprocess.run([str(spk), "check", "--vllm", str(SITE), "--json"], capture_output=True,
                       text=True)
    fix = next(f["fix"] for f in json.loads(r.stdout)["findings"]
               if f["file"].endswith("laguna_dflash.py") and f["code"] == "vllm-dflash-context-kv")
    added = [line[1:] for line in fix.splitlines() if line.startswith("+") and line[1:2] != "+"]
    start = next(i for i, line in enumerate(added) if line.startswith("def _spk_dense_weight"))
    end = next(i for i, line in enumerate(added) if line.startswith("    return values"))
    helper = "\n".join(added[start:end + 1])
    scope = {"torch": torch}
    exec(helper, scope)
    tensors = load_file(str(q / "model.safetensors"))
    base = "layers.0.self_attn.qkv_proj."
    layer = types.SimpleNamespace(weight_packed=tensors[base + "weight_packed"],
                                  weight_scale=tensors[base + "weight_scale"],
                                  input_size_per_partition=s.hidden)
    got = scope["_spk_dense_weight"](layer)
    want = load_file(str(tmp_path / "dq" / "model.safetensors"))[base + "weight"]
    assert got.shape == want.shape == (s.heads * s.head_dim + 2 * s.kv_heads * s.head_dim, s.hidden)
    assert torch.equal(got.to(torch.bfloat16), want.to(torch.bfloat16))
