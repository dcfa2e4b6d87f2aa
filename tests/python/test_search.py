"""`sparkulator quantize --method search` end to end: the checkpoint is the same pack-quantized
format (compressed-tensors validates the config and decompresses every tensor), the codes are in
range and the scales positive and finite (the format's contract), every tensor's error in the
search's objective is at most RTN's and the total is clearly lower, the method is recorded outside
quantization_config, and RTN stays the default. The objective is the squared error weighted by
1 + 16 (w / group absmax)^4 (src/quant/search.h, kPeakWeight)."""

import json
from pathlib import Path

import pytest
import torch
from compressed_tensors.compressors.pack_quantized.base import PackedQuantizationCompressor
from compressed_tensors.compressors.pack_quantized.helpers import unpack_from_int32
from compressed_tensors.quantization import QuantizationConfig
from conftest import load_dir



def quantize(spk, src: Path, dst: Path, *flags):
    spk("quantize", src, dst, "--json", *flags)
    config = json.loads((dst / "config.json").read_text())
    qc = QuantizationConfig.model_validate(config["quantization_config"])
    return config, qc.config_groups["group_0"], load_dir(dst)


PEAK_WEIGHT = 16.0


def importance(w: torch.Tensor, group: int) -> torch.Tensor:
    """The symmetric search's per-weight importance, 1 + 16 (w / absmax of its group)^4."""
    g = w.float().reshape(w.shape[0], -1, group)
    r = g / g.abs().amax(-1, keepdim=True).clamp_min(1e-30)
    return (1 + PEAK_WEIGHT * r ** 4).reshape(w.shape)


def errors(source: dict, scheme, tensors: dict, weighted: bool = False) -> dict:
    """{module: sum of squared error of compressed-tensors' decompressed weight}, each weighted by
    importance() when `weighted`."""
    out = {}
    bits = scheme.weights.num_bits
    for name in tensors:
        if not name.endswith(".weight_packed"):
            continue
        module = name[: -len(".weight_packed")]
        state = {k[len(module) + 1:]: v for k, v in tensors.items()
                 if k.startswith(module + ".weight_")}
        scale = state["weight_scale"]
        assert torch.isfinite(scale.float()).all() and (scale.float() > 0).all(), module
        q = unpack_from_int32(state["weight_packed"], bits, torch.Size(state["weight_shape"]))
        assert int(q.min()) >= -(1 << (bits - 1)) and int(q.max()) <= (1 << (bits - 1)) - 1
        weight = PackedQuantizationCompressor.decompress(state, scheme)["weight"]
        w = source[module + ".weight"]
        assert weight.dtype == w.dtype and weight.shape == w.shape, module
        sq = (weight.float() - w.float()) ** 2
        if weighted:
            sq = sq * importance(w, scheme.weights.group_size)
        out[module] = float(sq.sum())
    return out


@pytest.fixture(scope="module")
def example(tmp_path_factory, spk):
    src = tmp_path_factory.mktemp("search") / "llm"
    spk("example", src, "--family", "llm", "--hidden", "256", "--intermediate", "512")
    return src


@pytest.mark.parametrize("scheme,bound", [("w4a16", 0.90), ("w4a16-asym", 1.0),
                                          ("w8a16", 1.0), ("w8a16-asym", 1.0)])
def test_search_decompresses_and_beats_rtn(spk, example, tmp_path, scheme, bound):
    source = load_dir(example)
    cfg_rtn, sch_rtn, t_rtn = quantize(spk, example, tmp_path / "rtn", "--scheme", scheme)
    cfg_s, sch_s, t_s = quantize(spk, example, tmp_path / "search", "--scheme", scheme,
                                 "--method", "search")
    assert cfg_rtn["sparkulator"]["method"] == "rtn"
    assert cfg_s["sparkulator"]["method"] == "search"
    assert "sparkulator" not in json.dumps(cfg_s["quantization_config"])
    assert cfg_s["quantization_config"] == cfg_rtn["quantization_config"]
    assert sorted(t_s) == sorted(t_rtn)  # same tensors, same format
    for name in t_s:
        assert t_s[name].dtype == t_rtn[name].dtype and t_s[name].shape == t_rtn[name].shape
    e_rtn = errors(source, sch_rtn, t_rtn, weighted=True)
    e_s = errors(source, sch_s, t_s, weighted=True)
    assert e_rtn and e_rtn.keys() == e_s.keys()
    for module in e_rtn:
        assert e_s[module] <= e_rtn[module], module
    total = sum(e_s.values()) / sum(e_rtn.values())
    assert total < bound, f"search / RTN = {total:.3f}"
    if bound == 1.0:
        assert total < 0.999, f"search found nothing better than RTN ({total:.4f})"
    if scheme == "w4a16":  # the plain squared error is lower too, by less
        plain = sum(errors(source, sch_s, t_s).values()) / sum(errors(source, sch_rtn, t_rtn).values())
        assert plain < 0.99, f"plain squared error search / RTN = {plain:.3f}"


def test_rtn_stays_default_and_bit_exact(spk, example, tmp_path):
    quantize(spk, example, tmp_path / "default")
    quantize(spk, example, tmp_path / "rtn", "--method", "rtn")
    for f in sorted((tmp_path / "default").glob("*.safetensors")):
        assert f.read_bytes() == (tmp_path / "rtn" / f.name).read_bytes(), f.name


def test_search_is_deterministic_across_threads(spk, example, tmp_path):
    quantize(spk, example, tmp_path / "a", "--method", "search", "--threads", "1")
    quantize(spk, example, tmp_path / "b", "--method", "search", "--threads", "3")
    for f in sorted((tmp_path / "a").glob("*.safetensors")):
        assert f.read_bytes() == (tmp_path / "b" / f.name).read_bytes(), f.name


def test_unknown_method_is_a_usage_error(spk, example, tmp_path):
    proc = spk("quantize", example, tmp_path / "x", "--method", "gptq", expect=2)
    assert "unknown --method 'gptq'" in proc.stderr
    assert not (tmp_path / "x").exists()
