"""`sparkulator compare`: per-layer error of a quantized checkpoint against its source.

- golden JSON reports (tests/golden/compare_*.json) for our own quantize outputs: the numbers are
  deterministic (fixed example, fixed seed for X), so any change in the quantizer or the metrics shows;
  regenerate with SPK_UPDATE_GOLDEN=1 after a deliberate change;
- the metrics agree with an independent computation in torch from compressed-tensors' own
  decompression;
- every scheme quantize writes works, and 8 bits beat 4 bits;
- the HTML report renders in headless Chromium with its SVG charts;
- with two outputs of one source (`compare SRC RTN SEARCH`): the per-layer, per-kind and total weight
  SSE ratios agree with compressed-tensors' decompression, each side equals the one-output report,
  different schemes are reported side by side and different module sets are refused.
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

from conftest import load_dir

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
        if tag == "rect" and ("class", "bar") in attrs:  # a chart's bar (plot/svg_chart.h)
            self.counts["bar"] = self.counts.get("bar", 0) + 1


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
    assert parsed.counts["bar"] == 14 + 7  # one bar per layer, one per layer type
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        pytest.skip("chromium is not installed (scripts/install-deps.sh installs it)")
    base = [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
            f"--user-data-dir={tmp_path / 'profile'}"]
    dom = subprocess.run(base + ["--dump-dom", html.as_uri()], capture_output=True, text=True,
                         timeout=120).stdout
    rendered = SvgCounter()
    rendered.feed(dom)
    assert rendered.counts.get("svg") == 2 and rendered.counts.get("bar") == 21
    png = tmp_path / "shot.png"
    subprocess.run(base + [f"--screenshot={png}", "--window-size=1000,1400", html.as_uri()],
                   capture_output=True, timeout=120)
    assert png.exists() and png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # The bars are colored: the screenshot holds more than the white page and black text.
    colored = colored_pixels(png.read_bytes())
    assert colored > 2000, f"only {colored} colored pixels: the charts did not render"


def colored_pixels(data: bytes) -> int:
    """Pixels of a PNG whose R, G, B spread more than 60 (the bars' colors). Decoded by Pillow
    (a dependency of llm-compressor) when it is there, else by hand: the same count."""
    try:
        import numpy as np
        from PIL import Image
    except ImportError:
        return colored_pixels_by_hand(data)
    import io
    rgb = np.asarray(Image.open(io.BytesIO(data)).convert("RGB"), dtype=np.int16).reshape(-1, 3)
    return int(((rgb.max(axis=1) - rgb.min(axis=1)) > 60).sum())


def colored_pixels_by_hand(data: bytes) -> int:
    """colored_pixels without Pillow: the PNG's IDAT inflated and its row filters undone here."""
    import struct
    import zlib
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
    return colored


# --- two outputs of the same source: `compare SRC Q Q2` -------------------------------------------

@pytest.fixture(scope="module")
def dflash(tmp_path_factory, spk):
    """A DFlash draft quantized with RTN and with the scale search."""
    root = tmp_path_factory.mktemp("gain")
    spk("example", root / "src", "--family", "dflash")
    for method in ("rtn", "search"):
        spk("quantize", root / "src", root / method, "--method", method)
    return root


def sse_per_module(src: Path, dst: Path) -> dict:
    """{module: sum of squared error} of compressed-tensors' decompression against the source."""
    from compressed_tensors.quantization import QuantizationConfig
    from test_search import errors
    config = json.loads((dst / "config.json").read_text())
    scheme = QuantizationConfig.model_validate(config["quantization_config"]).config_groups["group_0"]
    return errors(load_dir(src), scheme, load_dir(dst))


def test_gain_ratios_match_an_independent_computation(dflash, spk):
    src, rtn, search = dflash / "src", dflash / "rtn", dflash / "search"
    report = json.loads(spk("compare", src, rtn, search, "--json").stdout)
    e_rtn, e_search = sse_per_module(src, rtn), sse_per_module(src, search)
    assert e_rtn and e_rtn.keys() == e_search.keys()
    layers = {l["module"]: l for l in report["layers"]}
    assert layers.keys() == e_rtn.keys()
    for module, l in layers.items():
        assert l["q"]["sse"] == pytest.approx(e_rtn[module], rel=1e-6), module
        assert l["q2"]["sse"] == pytest.approx(e_search[module], rel=1e-6), module
        assert l["sse_ratio"] == pytest.approx(e_search[module] / e_rtn[module], rel=1e-6), module
        assert l["sse_ratio"] <= 1 + 1e-12, module  # the search never loses to RTN
    total_rtn, total_search = sum(e_rtn.values()), sum(e_search.values())
    assert report["q"]["sse"] == pytest.approx(total_rtn, rel=1e-6)
    assert report["q2"]["sse"] == pytest.approx(total_search, rel=1e-6)
    ratio = report["summary"]["sse_ratio"]
    assert ratio == pytest.approx(total_search / total_rtn, rel=1e-6)
    assert ratio < 1, f"search / RTN = {ratio}"
    # Largest gain first; the summary counts and names agree with the rows.
    ratios = [l["sse_ratio"] for l in report["layers"]]
    assert ratios == sorted(ratios)
    s = report["summary"]
    assert s["layers"] == len(layers)
    assert s["largest_gain_layer"] == report["layers"][0]["module"]
    assert s["least_gain_layer"] == report["layers"][-1]["module"]
    assert s["layers_better"] == sum(r < 1 for r in ratios)
    assert s["layers_worse"] == 0
    # Per kind: sums over its layers, then the ratio.
    for k in report["by_kind"]:
        mods = [m for m, l in layers.items() if l["kind"] == k["kind"]]
        assert k["layers"] == len(mods)
        assert k["sse_ratio"] == pytest.approx(
            sum(e_search[m] for m in mods) / sum(e_rtn[m] for m in mods), rel=1e-6)
    assert report["source"] == str(src) and report["q"]["quantized"] == str(rtn)
    assert report["q2"]["quantized"] == str(search)


def test_gain_sides_are_the_one_output_reports(dflash, spk):
    """Each side is exactly what `compare SRC Q` reports for that output (same inputs X), and the
    output ratio is the ratio of the squared output errors."""
    src = dflash / "src"
    report = json.loads(spk("compare", src, dflash / "rtn", dflash / "search", "--json").stdout)
    singles = {side: {l["module"]: l for l in compare_json(spk, src, dflash / name)["layers"]}
               for side, name in (("q", "rtn"), ("q2", "search"))}
    for l in report["layers"]:
        for side in ("q", "q2"):
            one = singles[side][l["module"]]
            for key in ("rel_fro", "snr_db", "output_rel_error"):
                assert l[side][key] == one[key], (l["module"], side, key)
        out, out2 = l["q"]["output_rel_error"], l["q2"]["output_rel_error"]
        assert l["output_se_ratio"] == pytest.approx((out2 / out) ** 2, rel=1e-12)
    single = compare_json(spk, src, dflash / "rtn")["summary"]
    assert report["q"]["overall_rel_fro"] == single["overall_rel_fro"]
    assert report["q"]["mean_output_rel_error"] == single["mean_output_rel_error"]


def test_gain_text_and_html(dflash, spk, tmp_path):
    html = tmp_path / "gain.html"
    out = spk("compare", dflash / "src", dflash / "rtn", dflash / "search", "--top", "2",
              "--html", html).stdout
    report = json.loads(spk("compare", dflash / "src", dflash / "rtn", dflash / "search",
                            "--json").stdout)
    assert f"weight SSE Q2 / Q: {report['summary']['sse_ratio']:.4f}" in out
    assert "largest gain" in out and "by layer type" in out
    rows = [l for l in out.splitlines() if l.startswith("  layers.") or l.startswith("  model.")]
    assert [r.split()[0] for r in rows] == [l["module"] for l in report["layers"][:2]]
    text = html.read_text()
    assert "<script" not in text and "http://" not in text.replace(
        'xmlns="http://www.w3.org/2000/svg"', "")  # self-contained
    parsed = SvgCounter()
    parsed.feed(text)
    n = report["summary"]["layers"]
    assert parsed.counts["svg"] == 2
    assert parsed.counts["bar"] == n + len(report["by_kind"])  # one gain bar per layer and kind
    assert parsed.counts["tr"] == 3 + 1 + n  # totals table (header, Q, Q2) + layer header + rows
    assert f"<b>{report['summary']['sse_ratio']:.4f}</b>" in text


def test_gain_different_schemes_are_reported(dflash, spk, tmp_path):
    w8 = tmp_path / "w8"
    spk("quantize", dflash / "src", w8, "--scheme", "w8a16", "--group-size", "32")
    report = json.loads(spk("compare", dflash / "src", dflash / "rtn", w8, "--json").stdout)
    assert report["q"]["scheme"] != report["q2"]["scheme"]
    assert "w8a16" in report["q2"]["scheme"]
    assert report["summary"]["sse_ratio"] < 0.02  # 8 bits: ~1/256 of the 4-bit squared error
    assert report["summary"]["layers_worse"] == 0


def test_gain_module_sets_must_match(dflash, spk, tmp_path):
    fewer = tmp_path / "fewer"
    spk("quantize", dflash / "src", fewer, "--ignore", "re:.*down_proj")
    proc = spk("compare", dflash / "src", dflash / "rtn", fewer, expect=2)
    assert "down_proj' is quantized there but not in" in proc.stderr
    assert str(dflash / "rtn") in proc.stderr and str(fewer) in proc.stderr
    assert "same ignore list" in proc.stderr
    # The other way round names Q2 as the side with the extra module.
    proc = spk("compare", dflash / "src", fewer, dflash / "rtn", expect=2)
    assert f"{dflash / 'rtn'}: module '" in proc.stderr and "down_proj" in proc.stderr
    # A dense second argument is refused like a dense first one.
    proc = spk("compare", dflash / "src", dflash / "rtn", dflash / "src", expect=2)
    assert "quantization_config" in proc.stderr
