"""`sparkulator compare`: per-layer error of a quantized checkpoint against its source.

- golden JSON reports (tests/golden/compare_*.json) for our own quantize outputs: the numbers are
  deterministic (fixed example, fixed seed for X), so any change in the quantizer or the metrics shows;
  regenerate with SPK_UPDATE_GOLDEN=1 after a deliberate change;
- the metrics agree with an independent computation in torch from compressed-tensors' own
  decompression;
- every scheme quantize writes works, and 8 bits beat 4 bits;
- the HTML report renders in headless Chromium with its SVG charts.
"""

import json
import math
import os
import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from test_quant_interop import reference

GOLDEN = Path(__file__).resolve().parents[1] / "golden"
SCHEMES = [("w4a16", 128), ("w4a16-asym", 128), ("w8a16", 128), ("w8a16-asym", 128),
           ("w4a16", -1), ("w4a16", 32)]


@pytest.fixture(scope="module")
def llm(tmp_path_factory, spk):
    root = tmp_path_factory.mktemp("compare")
    spk("example", root / "llm", "--family", "llm")
    return root


def quantized(spk, root, scheme, group):
    dst = root / f"q_{scheme}_{group}"
    if not dst.exists():
        spk("quantize", root / "llm", dst, "--scheme", scheme, "--group-size", group)
    return dst


def compare_json(spk, src, dst, *flags):
    return json.loads(spk("compare", src, dst, "--json", *flags).stdout)


def assert_close(ours, golden, path="$"):
    if isinstance(golden, dict):
        assert list(ours) == list(golden), path
        for k in golden:
            assert_close(ours[k], golden[k], f"{path}.{k}")
    elif isinstance(golden, list):
        assert len(ours) == len(golden), path
        for i, (a, b) in enumerate(zip(ours, golden)):
            assert_close(a, b, f"{path}[{i}]")
    elif isinstance(golden, float):
        # 1e-6: libm may differ in the last ulp between platforms (the random inputs use log/cos).
        assert ours == pytest.approx(golden, rel=1e-6, abs=1e-12), path
    else:
        assert ours == golden, path


@pytest.mark.parametrize("scheme,group", [("w4a16", 128), ("w8a16-asym", 128)])
def test_golden_reports(llm, spk, scheme, group):
    report = compare_json(spk, llm / "llm", quantized(spk, llm, scheme, group))
    for key in ("source", "quantized"):
        report.pop(key)
    golden = GOLDEN / f"compare_llm_{scheme}_g{group}.json"
    if os.environ.get("SPK_UPDATE_GOLDEN"):
        golden.write_text(json.dumps(report, indent=2) + "\n")
    assert_close(report, json.loads(golden.read_text()))


def test_metrics_match_an_independent_torch_computation(llm, spk):
    dst = quantized(spk, llm, "w4a16-asym", 128)
    report = compare_json(spk, llm / "llm", dst)
    src = load_file(str(llm / "llm" / "model.safetensors"))
    layers = {l["module"]: l for l in report["layers"]}
    assert len(layers) == 14
    for module in ("model.layers.0.self_attn.q_proj", "model.layers.1.mlp.down_proj"):
        w = src[f"{module}.weight"]
        _, scale, zp, _, deq, _ = reference(w, 4, False, 128)
        a, b = w.double(), deq.double()
        e = a - b
        ours = layers[module]
        assert ours["rel_fro"] == pytest.approx((e.norm() / a.norm()).item(), rel=1e-9)
        assert ours["snr_db"] == pytest.approx(10 * math.log10((a.norm() ** 2 / e.norm() ** 2).item()),
                                               rel=1e-9)
        cos = (a * b).sum() / (a.norm() * b.norm())
        assert ours["cosine"] == pytest.approx(cos.item(), rel=1e-9)
        assert ours["max_abs"] == pytest.approx(e.abs().max().item(), rel=1e-12)
        t = w.float() / scale.float().repeat_interleave(128, dim=1) + \
            zp.float().repeat_interleave(128, dim=1)
        clipped = ((t > 7.5) | (t < -8.5)).double().mean().item()
        assert ours["clipped_fraction"] == pytest.approx(clipped, abs=1e-9)
        assert 0 < ours["output_rel_error"] < 1
    # worst first, and the summary names the worst layer
    errs = [l["rel_fro"] for l in report["layers"]]
    assert errs == sorted(errs, reverse=True)
    assert report["summary"]["worst_layer"] == report["layers"][0]["module"]


@pytest.mark.parametrize("scheme,group", SCHEMES)
def test_every_scheme(llm, spk, scheme, group):
    report = compare_json(spk, llm / "llm", quantized(spk, llm, scheme, group))
    s = report["summary"]
    assert s["layers"] == 14 and s["dense_tensors"] > 0
    bound = 0.4 if scheme.startswith("w4") else 0.03
    assert 0 < s["overall_rel_fro"] < bound
    assert s["min_cosine"] > (0.9 if scheme.startswith("w4") else 0.999)
    assert {k["kind"] for k in report["by_kind"]} == {
        "q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"}


def test_text_report_and_errors(llm, spk):
    dst = quantized(spk, llm, "w4a16", 128)
    out = spk("compare", llm / "llm", dst, "--top", "3").stdout
    assert "worst layers:" in out and "by layer type:" in out
    assert len([l for l in out.splitlines() if l.startswith("  model.layers.")]) == 3
    # Swapped arguments: the "quantized" one has no quantization_config.
    proc = spk("compare", dst, llm / "llm", expect=2)
    assert "quantization_config" in proc.stderr


class SvgCounter(HTMLParser):
    def __init__(self):
        super().__init__()
        self.counts = {}

    def handle_starttag(self, tag, attrs):
        self.counts[tag] = self.counts.get(tag, 0) + 1


def test_html_report_renders_in_headless_chromium(llm, spk, tmp_path):
    html = tmp_path / "report.html"
    dst = quantized(spk, llm, "w4a16", 128)
    spk("compare", llm / "llm", dst, "--html", html)
    text = html.read_text()
    assert "<script" not in text and "http://" not in text.replace(
        'xmlns="http://www.w3.org/2000/svg"', "")  # self-contained
    parsed = SvgCounter()
    parsed.feed(text)
    assert parsed.counts["svg"] == 2
    assert parsed.counts["rect"] == 14 + 7  # one bar per layer, one per layer type
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        pytest.skip("chromium is not installed (scripts/install-deps.sh installs it)")
    base = [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
            f"--user-data-dir={tmp_path / 'profile'}"]
    dom = subprocess.run(base + ["--dump-dom", html.as_uri()], capture_output=True, text=True,
                         timeout=120).stdout
    rendered = SvgCounter()
    rendered.feed(dom)
    assert rendered.counts.get("svg") == 2 and rendered.counts.get("rect") == 21
    png = tmp_path / "shot.png"
    subprocess.run(base + [f"--screenshot={png}", "--window-size=1000,1400", html.as_uri()],
                   capture_output=True, timeout=120)
    assert png.exists() and png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # The bars are colored: the screenshot holds more than the white page and black text.
    import zlib, struct
    data = png.read_bytes()
    pos, idat, (width, height) = 8, b"", struct.unpack(">II", data[16:24])
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        if kind == b"IDAT":
            idat += data[pos + 8:pos + 8 + length]
        pos += 12 + length
    raw = zlib.decompress(idat)
    bpp = 4 if data[25] == 6 else 3
    # Undo the PNG row filters (types 0..4), then count saturated pixels: the bars' colors.
    stride, prev, colored = width * bpp, bytearray(width * bpp), 0
    for y in range(height):
        f, row = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            a = row[i - bpp] if i >= bpp else 0
            b, c = prev[i], prev[i - bpp] if i >= bpp else 0
            if f == 1: row[i] = (row[i] + a) & 255
            elif f == 2: row[i] = (row[i] + b) & 255
            elif f == 3: row[i] = (row[i] + (a + b) // 2) & 255
            elif f == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                row[i] = (row[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        for x in range(0, stride, bpp):
            r, g, bl = row[x], row[x + 1], row[x + 2]
            if max(r, g, bl) - min(r, g, bl) > 60:
                colored += 1
        prev = row
    assert colored > 2000, f"only {colored} colored pixels: the charts did not render"
