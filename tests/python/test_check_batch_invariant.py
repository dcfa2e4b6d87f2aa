"""`sparkulator check --vllm-batch-invariant` on a 3-bit (w3a16) checkpoint, which no stock vLLM
kernel takes: vLLM 0.33 serves it with VLLM_BATCH_INVARIANT=1 (its module map's
kernels.wna16_batch_invariant, from the generator's probe of compressed_tensors_wNa16.py), vLLM 0.32
does not. Without the flag both releases report no-vllm-kernel; 0.33's fix names the variable."""
import json

import pytest

from test_widths_vllm import write_llm


@pytest.fixture(scope="module")
def w3(tmp_path_factory, spk):
    d = tmp_path_factory.mktemp("bi")
    write_llm(d / "src")
    spk("quantize", d / "src", d / "w3", "--scheme", "w3a16", "--preset", "none", "--no-fsync")
    return d / "w3"


def check(spk, ckpt, version, *flags, expect):
    out = spk("check", ckpt, "--vllm-version", version, "--json", *flags, expect=expect)
    return json.loads(out.stdout)["findings"]


def codes(findings):
    return sorted({f["code"] for f in findings if f["severity"] != "info" or
                   f["code"] == "vllm-batch-invariant-no-kernel"})


def test_033_loads_three_bits_without_a_kernel_under_batch_invariant(w3, spk):
    plain = check(spk, w3, "0.33.0", expect=1)
    kernel = [f for f in plain if f["code"] == "no-vllm-kernel"]
    assert kernel and "VLLM_BATCH_INVARIANT=1" in kernel[0]["fix"], plain
    bi = check(spk, w3, "0.33.0", "--vllm-batch-invariant", expect=0)
    assert "no-vllm-kernel" not in codes(bi), bi
    info = [f for f in bi if f["code"] == "vllm-batch-invariant-no-kernel"]
    assert info and info[0]["severity"] == "info", bi
    assert "compressed_tensors_wNa16.py:145" in info[0]["message"], info


def test_032_refuses_three_bits_with_or_without_batch_invariant(w3, spk):
    plain = check(spk, w3, "0.32.0", expect=1)
    kernel = [f for f in plain if f["code"] == "no-vllm-kernel"]
    assert kernel and "VLLM_BATCH_INVARIANT" not in kernel[0]["fix"], plain
    bi = check(spk, w3, "0.32.0", "--vllm-batch-invariant", expect=1)
    assert codes(bi) == codes(plain), (bi, plain)
    kernel = [f for f in bi if f["code"] == "no-vllm-kernel"]
    assert "VLLM_BATCH_INVARIANT=1 is no way around it on vLLM 0.32.0" in kernel[0]["fix"], kernel
    assert "CPUWNA16" in kernel[0]["fix"] or "Failed to find a kernel" in kernel[0]["fix"]
