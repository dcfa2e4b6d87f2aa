"""What vLLM 0.32 does with the 2/3/5/6/7-bit pack-quantized rows (w3a16, w5a16-asym, ...), asked of
vLLM's own kernel chooser, and `sparkulator check`'s no-vllm-kernel finding against it.

vllm_kernel_verdicts.py ("wna16") runs choose_mp_linear_kernel in the vLLM venv ($VENV, else
.venv-vllm; skipped with the reason when absent) with the MPLinearLayerConfig
compressed_tensors_wNa16.py builds: on this CPU as it is, and on a FAKED CUDA platform (Turing to
Blackwell capabilities; the kernels' can_implement code is vLLM's). Asserted: on the CPU every
2/3/5/6/7-bit width, symmetric or not, fails with the error check quotes (4 bits runs, the control);
on CUDA every such width fails too, and the one kernel that would take it is Humming, absent
("Humming is not installed"); 4 and 8 bits run (the control). Serving a W3A16 and a W5A16-asym model
on vLLM's CPU build shows the same error at start-up (docs/e2e.md); serving is not repeated here.
A 3-bit weight packed in the layout of compressed-tensors before 0.17 is refused by vLLM's weight
loader ("wna16-load") and named by check (weight-packed-legacy-layout).
"""
import json
import re
import sys
from pathlib import Path

import pytest
import torch
from safetensors.torch import save_file

import references
from conftest import REPO, on_release

sys.path.insert(0, str(REPO))
from tests.e2e import env  # noqa: E402

VENV_PYTHON = env.venv_dir() / "bin" / "python"


@pytest.fixture(scope="session")
def spk(spk):
    """Judging by the release whose kernels answer here (conftest.on_release)."""
    return on_release(spk, env.SERVED_RELEASE)
ODD_WIDTHS = [2, 3, 5, 6, 7]
GPUS = [75, 80, 89, 90, 100]  # Turing, Ampere, Ada, Hopper, Blackwell


def case(cc, bits: int, symmetric: bool) -> dict:
    return {"rule": "wna16", "cc": cc, "bits": bits, "symmetric": symmetric, "k": 1024, "n": 1024}


CPU_CASES = [case("cpu", b, s) for b in ODD_WIDTHS + [4] for s in (True, False)]
CUDA_CASES = [case(cc, b, s) for cc in GPUS for b in ODD_WIDTHS for s in (True, False)]
CUDA_CONTROLS = [case(80, 4, True), case(80, 8, True), case(90, 4, False), case(90, 8, True)]


@pytest.fixture(scope="module")
def verdicts() -> dict:
    """json(case) -> vLLM's verdict, from one venv process (importing vLLM is most of the cost):
    the CPU cases first, since faking CUDA cannot be undone."""
    if not VENV_PYTHON.exists():
        pytest.skip(f"no vLLM venv at {VENV_PYTHON.parent.parent} (set VENV)")
    cases = CPU_CASES + CUDA_CASES + CUDA_CONTROLS
    try:  # through the reference cache (references.py: keyed by the cases and vLLM's version)
        return dict(zip(map(json.dumps, cases), references.vllm_verdicts(cases)))
    except references.ReferenceFailed as e:
        pytest.fail(str(e), pytrace=False)


def vllm_type(bits: int, symmetric: bool) -> str:
    """compressed_tensors_wNa16.py's scalar type for the width."""
    return f"uint{bits}b{1 << (bits - 1)}" if symmetric else f"uint{bits}"


def write_llm(d: Path) -> None:
    """A one-layer Llama whose projections are all Marlin-legal (256 x 256), BF16."""
    d.mkdir(parents=True)
    g = torch.Generator().manual_seed(0)
    leaves = ["self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj",
              "mlp.gate_proj", "mlp.up_proj", "mlp.down_proj"]
    tensors = {f"model.layers.0.{m}.weight": (torch.randn(256, 256, generator=g) * 0.05).bfloat16()
               for m in leaves}
    tensors["model.embed_tokens.weight"] = torch.randn(64, 256, generator=g).bfloat16()
    tensors["lm_head.weight"] = torch.randn(64, 256, generator=g).bfloat16()
    save_file(tensors, str(d / "model.safetensors"), metadata={"format": "pt"})
    (d / "config.json").write_text(json.dumps({
        "architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 256,
        "intermediate_size": 256, "num_hidden_layers": 1, "num_attention_heads": 4,
        "num_key_value_heads": 4, "vocab_size": 64, "torch_dtype": "bfloat16"}))


@pytest.fixture(scope="module")
def check_messages(tmp_path_factory, spk):
    """(bits, symmetric) -> the text of check's no-vllm-kernel finding on sparkulator's output."""
    root = tmp_path_factory.mktemp("widths-vllm")
    src = root / "src"
    write_llm(src)
    out = {}
    for bits, symmetric in [(3, True), (5, False)]:
        q = root / f"w{bits}{symmetric}"
        name = f"w{bits}a16" if symmetric else f"w{bits}a16-asym"
        spk("quantize", src, q, "--scheme", name, "--preset", "none", "--no-fsync")
        findings = json.loads(spk("check", q, "--json", expect=1).stdout)["findings"]
        assert [f["code"] for f in findings] == ["no-vllm-kernel"], findings
        out[bits, symmetric] = findings[0]["message"]
    return out


def test_cpu_has_no_kernel_for_the_odd_widths_and_check_quotes_vllm(verdicts, check_messages):
    for c in CPU_CASES:
        v = verdicts[json.dumps(c)]
        if c["bits"] == 4:
            assert v == {"ok": True, "kernel": "CPUWNA16LinearKernel"}, (c, v)
            continue
        assert not v["ok"], (c, v)
        assert v["error"].startswith(
            "Failed to find a kernel that can implement the WNA16 linear layer."), v
        assert f"Quant type ({vllm_type(c['bits'], c['symmetric'])}) not supported by CPUWNA16" \
            in v["error"], v
    # Every piece check quotes between the "..." of vLLM's message is vLLM's text for that width.
    for (bits, symmetric), message in check_messages.items():
        error = " ".join(verdicts[json.dumps(case("cpu", bits, symmetric))]["error"].split())
        quoted = re.search(r'"ValueError: (.*?)"', message).group(1)
        for piece in quoted.split(" ... "):
            assert piece.strip() in error, (piece, error)


def test_cuda_runs_the_odd_widths_only_with_humming(verdicts):
    for c in CUDA_CASES:
        v = verdicts[json.dumps(c)]
        assert not v["ok"], (c, v)
        assert "HummingLinearKernel cannot implement due to: Humming is not installed" in \
            v["error"], (c, v)
    for c in CUDA_CONTROLS:
        assert verdicts[json.dumps(c)]["ok"], c


def test_legacy_three_bit_packing_fails_vllms_loader_and_check_names_it(tmp_path, spk):
    """vllm#49893: a W3 checkpoint packed as compressed-tensors before 0.17 did (ten whole values
    per int32 word) fails vLLM's weight loader; check names the layout and the shape vLLM wants.
    The planted weight_packed holds zeros: the loader and check judge its shape only."""
    if not VENV_PYTHON.exists():
        pytest.skip(f"no vLLM venv at {VENV_PYTHON.parent.parent} (set VENV)")
    from safetensors.torch import load_file
    src, q = tmp_path / "src", tmp_path / "w3"
    write_llm(src)
    spk("quantize", src, q, "--scheme", "w3a16", "--preset", "none", "--no-fsync")
    shard = q / "model.safetensors"
    tensors = load_file(str(shard))
    name = "model.layers.0.mlp.gate_proj.weight_packed"
    rows, dense_cols = tensors[name].shape
    legacy_cols = -(-256 // 10)  # 256 input columns, 10 whole int3 values a word
    assert dense_cols == 256 * 3 // 32 and legacy_cols != dense_cols
    tensors[name] = torch.zeros(rows, legacy_cols, dtype=torch.int32)
    save_file(tensors, str(shard), metadata={"format": "pt"})

    findings = json.loads(spk("check", q, "--json", expect=1).stdout)["findings"]
    legacy = [f for f in findings if f["code"] == "weight-packed-legacy-layout"]
    assert [f["module"] for f in legacy] == ["model.layers.0.mlp.gate_proj"], findings
    assert f"[{rows}, {dense_cols}]" in legacy[0]["message"], legacy
    assert not [f for f in findings if f["code"] == "weight-packed-shape"], findings

    cases = [{"rule": "wna16-load", "cc": "cpu", "bits": 3, "n": rows, "k": 256, "cols": cols}
             for cols in (dense_cols, legacy_cols)]
    try:
        dense, old = references.vllm_verdicts(cases)
    except references.ReferenceFailed as e:
        pytest.fail(str(e), pytrace=False)
    assert dense == {"ok": True}, dense
    assert not old["ok"] and old["error"].startswith(
        "AssertionError at vllm/model_executor/parameter.py:"), old
    assert "model_executor/parameter.py" in legacy[0]["message"]
