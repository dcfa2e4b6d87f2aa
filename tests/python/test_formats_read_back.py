"""The formats sparkulator writes but does not read back yet (FP8, INT8, NVFP4, MXFP4, MXFP8, W4AFP8):
`dequantize` and `compare` refuse them with a message naming config.json and the scheme, exit 2 and
leave nothing behind, instead of copying FP8 tensors as if they were dense or failing on a missing
weight_shape; `check` says their tensors are not verified (format-not-checked) instead of judging them
by pack-quantized's rules."""
import json
import subprocess

import pytest

from conftest import spk_bin

UNREAD = ["FP8_DYNAMIC", "FP8_BLOCK", "W8A8", "NVFP4A16", "MXFP4A16", "MXFP8A16", "W4AFP8"]


def spk(*args):
    return subprocess.run([spk_bin(), *map(str, args)], capture_output=True, text=True, timeout=120)


@pytest.fixture(scope="module")
def source(tmp_path_factory):
    src = tmp_path_factory.mktemp("fmt") / "src"
    assert spk("example", src, "--family", "llm").returncode == 0
    return src


@pytest.mark.parametrize("preset", UNREAD)
def test_dequantize_and_compare_refuse_what_they_cannot_read(source, tmp_path, preset):
    q = tmp_path / "q"
    r = spk("quantize", source, q, "--scheme", preset, "--no-fsync")
    assert r.returncode == 0, r.stderr
    scheme = json.loads((q / "config.json").read_text())["quantization_config"]
    assert scheme["format"] != "pack-quantized"
    d = tmp_path / "d"
    r = spk("dequantize", q, d)
    assert r.returncode == 2, r.stderr
    assert "config.json" in r.stderr and "pack-quantized checkpoints only" in r.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["q"], "dequantize left something behind"
    r = spk("compare", source, q)
    assert r.returncode == 2 and "pack-quantized checkpoints only" in r.stderr, r.stderr

    r = spk("check", q, "--json")
    codes = {f["code"] for f in json.loads(r.stdout)["findings"]}
    assert "format-not-checked" in codes
    assert not codes & {"weight-packed-shape", "unknown-scheme", "weight-scale-shape"}, codes
