"""`sparkulator quantize` from GPTQ and AWQ int sources (quant_method "gptq" / "awq"), decoded on
the fly.

The decode is proven through the bytes against the libraries' own code (gptq_references.py:
GPTQModel 7.7.0 and AutoAWQ 0.2.9 from their published sources):

- GPTQ: the reference decode is GPTQModel's checkpoint dequantizer `convert_gptq_file` (to the
  scales' dtype: F16 as published, BF16 in one case), the same arithmetic as its
  TorchQuantLinear.dequantize_weight. (It also casts the dense tensors to that dtype; sparkulator
  keeps them as stored, so the reference folder holds them as stored.) The sources are
  packed with GPTQModel's own `pack_cols` (qweight packs along the input dim: pack_cols of the
  transpose, the inverse of the `unpack_rows` its dequantizer reads with) and, for v1
  (checkpoint_format "gptq"), its own v2-to-v1 zero shift `_revert_gptq_v1_qzeros_correction`;
  the codes, zeros, scales and g_idx are drawn at random (zeros of 0 and 2^bits - 1 included, the
  v1 wrap-around), not computed by a GPTQ run: the decode does not depend on how they were found.
- AWQ: the source is packed by AutoAWQ's WQLinear_GEMM.from_linear from a weight that is exactly
  (q - z) * s, and the reference decode is AutoAWQ's dequantize_gemm. (GPTQModel 7.7.0's
  checkpoint dequantizer `convert_awq_file` reads the columns without AutoAWQ's interleave, so it
  is not the AWQ reference.)

- The layout vLLM serves: vLLM's own packers (gptq_pack, pack_cols, awq_pack, in the vLLM CPU venv)
  pack random codes and zeros, and the decoded weights must be (q - z) * s rounded to F16.

Each source must quantize to exactly the bytes its reference decode, saved dense, quantizes to;
the decoded weights kept dense must equal the reference; inspect and compare see the decoded
weights. A source described only by AutoGPTQ's quantize_config.json or AutoAWQ's quant_config.json
decodes to the bytes of the same tensors with the quantization_config that file stands for in
config.json (AutoAWQ's own AwqConfig.to_transformers_dict for the AWQ keys), and to the reference. Bad sources (a part missing, misshapen, of the wrong dtype, g_idx out of range, a
non-finite scale, a variant not decoded) fail naming the file and tensor, and a side file that
cannot be decoded naming the file and the key; nothing is written.
"""
import json
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file, save_file

import gptq_references
from test_quantized_sources import broken_copy, edit_shard, tensors_of

HIDDEN, KV, INTER = 256, 128, 384
L0 = "model.layers.0."
SHAPES = {"self_attn.q_proj": (HIDDEN, HIDDEN), "self_attn.k_proj": (KV, HIDDEN),
          "self_attn.v_proj": (KV, HIDDEN), "self_attn.o_proj": (HIDDEN, HIDDEN),
          "mlp.gate_proj": (INTER, HIDDEN), "mlp.up_proj": (INTER, HIDDEN),
          "mlp.down_proj": (HIDDEN, INTER)}
# name: bits, group_size, desc_act (shuffled g_idx), checkpoint_format, sym.
GPTQ_CASES = {
    "v1-sym": (4, 64, False, "gptq", True),
    "v1-asym-act": (4, 64, True, "gptq", False),
    "v2-asym-act": (4, 64, True, "gptq_v2", False),
    "v1-channel": (4, -1, False, "gptq", False),
    "v1-8bit-act": (8, 64, True, "gptq", False),
    "v2-2bit": (2, 32, False, "gptq_v2", False),
    "v2-bf16-scales": (4, 128, True, "gptq_v2", False),
    "v2-by-format": (4, 64, True, "gptq_v2", False),  # GPTQModel's `format` key, as it loads it
}
SCALE_DTYPE = {"v2-bf16-scales": torch.bfloat16}  # else F16, as published
AWQ_CONFIG = {"quant_method": "awq", "bits": 4, "group_size": 64, "version": "gemm",
              "zero_point": True, "modules_to_not_convert": ["down_proj"]}


def config(quantization: dict | None) -> dict:
    c = {"architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3", "hidden_size": HIDDEN,
         "intermediate_size": INTER, "num_hidden_layers": 1, "num_attention_heads": 2,
         "num_key_value_heads": 1, "head_dim": 128, "vocab_size": 64, "torch_dtype": "float16"}
    if quantization:
        c["quantization_config"] = quantization
    return c


def gptq_config(case: str) -> dict:
    bits, group_size, desc_act, fmt, sym = GPTQ_CASES[case]
    key = "format" if case == "v2-by-format" else "checkpoint_format"
    return {"quant_method": "gptq", "bits": bits, "group_size": group_size, "desc_act": desc_act,
            "sym": sym, key: fmt, "damp_percent": 0.01, "true_sequential": True,
            "static_groups": False, "lm_head": False,
            "dynamic": {r"-:.*o_proj": {}, r"+:.*q_proj": {"bits": bits}}}


def dense(g) -> dict:
    return {"model.embed_tokens.weight": torch.randn(64, HIDDEN, generator=g).half(),
            "lm_head.weight": torch.randn(64, HIDDEN, generator=g).half(),
            L0 + "input_layernorm.weight": torch.ones(HIDDEN, dtype=torch.float16),
            L0 + "self_attn.q_proj.bias": torch.randn(HIDDEN, generator=g).half()}


def gptq_module(dq, g, out: int, inp: int, case: str) -> dict:
    bits, group_size, desc_act, fmt, sym = GPTQ_CASES[case]
    maxq = 2 ** bits - 1
    gs = inp if group_size == -1 else group_size
    groups = -(-inp // gs)
    g_idx = torch.arange(inp, dtype=torch.int32) // gs
    if desc_act:
        g_idx = g_idx[torch.randperm(inp, generator=g)].contiguous()
    q = torch.randint(0, maxq + 1, (inp, out), generator=g, dtype=torch.int32)
    if sym:
        zeros = torch.full((groups, out), (maxq + 1) // 2, dtype=torch.int32)
    else:
        zeros = torch.randint(0, maxq + 1, (groups, out), generator=g, dtype=torch.int32)
        zeros[0, :3] = torch.tensor([0, maxq, 0])
    qzeros = dq.pack_cols(zeros, bits, pack_dtype=torch.int32)
    if fmt == "gptq":
        qzeros = dq._revert_gptq_v1_qzeros_correction(qzeros, bits)
    return {"qweight": dq.pack_cols(q.t().contiguous(), bits, pack_dtype=torch.int32).t().contiguous(),
            "qzeros": qzeros, "g_idx": g_idx,
            "scales": (torch.rand(groups, out, generator=g) * 0.02 + 1e-3).to(
                SCALE_DTYPE.get(case, torch.float16))}


def write(d: Path, tensors: dict, quantization: dict | None, split=None) -> Path:
    """A checkpoint folder; `split` (a name test) puts those tensors in a second shard."""
    d.mkdir(parents=True)
    if split is None:
        save_file(tensors, str(d / "model.safetensors"), metadata={"format": "pt"})
    else:
        second = {k: v for k, v in tensors.items() if split(k)}
        first = {k: v for k, v in tensors.items() if k not in second}
        files = {"model-00001-of-00002.safetensors": first,
                 "model-00002-of-00002.safetensors": second}
        for name, part in files.items():
            save_file(part, str(d / name), metadata={"format": "pt"})
        (d / "model.safetensors.index.json").write_text(json.dumps(
            {"metadata": {}, "weight_map": {k: n for n, part in files.items() for k in part}}))
    (d / "config.json").write_text(json.dumps(config(quantization)))
    return d


def scales_apart(name: str) -> bool:
    """The q_proj's scales and zeros in the other shard than its qweight."""
    return name.startswith(L0 + "self_attn.q_proj.") and name.endswith((".scales", ".qzeros"))


@pytest.fixture(scope="module")
def gptq_sources(tmp_path_factory):
    """Each GPTQ case: (source folder in two shards, its reference decode saved dense)."""
    dq = gptq_references.gptqmodel_dequant()
    root = tmp_path_factory.mktemp("gptq")
    out = {}
    for n, case in enumerate(GPTQ_CASES):
        g = torch.Generator().manual_seed(11 + n)
        t = dense(g)
        for k, (rows, cols) in SHAPES.items():
            for part, v in gptq_module(dq, g, rows, cols, case).items():
                t[f"{L0}{k}.{part}"] = v
        qc = gptq_config(case)
        whole = write(root / case / "whole", t, qc)
        dtype = SCALE_DTYPE.get(case, torch.float16)
        # The dequantizer reads checkpoint_format only; GPTQModel's config loader takes `format`
        # first, so the reference is given the format as the loader reads it.
        ref = dq.convert_gptq_file(whole / "model.safetensors", dtype,
                                   {**qc, "checkpoint_format": qc.get("format",
                                                                      qc.get("checkpoint_format"))},
                                   "cpu")
        assert all(v.dtype == dtype for v in ref.values())
        ref.update(dense(torch.Generator().manual_seed(11 + n)))  # the dense ones as they are
        out[case] = (write(root / case / "src", t, qc, split=scales_apart),
                     write(root / case / "ref", ref, None))
    return out


@pytest.fixture(scope="module")
def awq_source(tmp_path_factory):
    """An AWQ GEMM source packed by AutoAWQ (down_proj left dense: modules_to_not_convert) and
    its reference decode."""
    gemm = gptq_references.autoawq_gemm()
    root = tmp_path_factory.mktemp("awq")
    g = torch.Generator().manual_seed(5)
    gs = AWQ_CONFIG["group_size"]
    t, ref = dense(g), {}
    for k, (rows, cols) in SHAPES.items():
        name = L0 + k
        if k == "mlp.down_proj":
            t[name + ".weight"] = (torch.randn(rows, cols, generator=g) * 0.05).half()
            ref[name + ".weight"] = t[name + ".weight"]
            continue
        q = torch.randint(0, 16, (rows, cols), generator=g)
        zeros = torch.randint(0, 16, (cols // gs, rows), generator=g)
        scales = (torch.rand(cols // gs, rows, generator=g) * 0.02 + 1e-3).half().float()
        linear = torch.nn.Linear(cols, rows, bias=False)
        linear.weight.data = (q - zeros.repeat_interleave(gs, 0).t()) * \
            scales.repeat_interleave(gs, 0).t()
        m = gemm.WQLinear_GEMM.from_linear(linear, 4, gs, scales=scales, zeros=zeros.float())
        t[name + ".qweight"], t[name + ".qzeros"], t[name + ".scales"] = \
            m.qweight, m.qzeros, m.scales
        w = gemm.dequantize_gemm(m.qweight, m.qzeros, m.scales, 4, gs).t().contiguous()
        assert w.dtype == torch.float16 and torch.equal(w, linear.weight.data.half())
        ref[name + ".weight"] = w
    ref.update(dense(torch.Generator().manual_seed(5)))
    return (write(root / "src", t, AWQ_CONFIG, split=scales_apart),
            write(root / "ref", ref, None))


def assert_same_bytes(got: dict, want: dict):
    assert sorted(got) == sorted(want)
    for k in want:
        assert got[k].dtype == want[k].dtype and torch.equal(got[k].view(torch.uint8),
                                                             want[k].view(torch.uint8)), k


def quantizes_as_its_reference(spk, src: Path, ref: Path, tmp_path: Path, scheme: str,
                               quantization: dict):
    spk("quantize", src, tmp_path / "from-src", "--scheme", scheme, "--no-fsync")
    spk("quantize", ref, tmp_path / "from-ref", "--scheme", scheme, "--no-fsync")
    got = tensors_of(tmp_path / "from-src")
    assert_same_bytes(got, tensors_of(tmp_path / "from-ref"))
    assert not any(k.endswith((".qweight", ".qzeros", ".scales", ".g_idx")) for k in got)
    out_config = json.loads((tmp_path / "from-src" / "config.json").read_text())
    ref_config = json.loads((tmp_path / "from-ref" / "config.json").read_text())
    assert out_config["quantization_config"] == ref_config["quantization_config"]
    assert out_config["sparkulator"]["decoded_source"]["quantization_config"] == quantization


@pytest.mark.parametrize("case", list(GPTQ_CASES))
def test_a_gptq_source_quantizes_to_the_bytes_of_gptqmodels_decode(spk, gptq_sources, tmp_path,
                                                                  case):
    src, ref = gptq_sources[case]
    quantizes_as_its_reference(spk, src, ref, tmp_path, "W4A16", gptq_config(case))


@pytest.mark.parametrize("quantization", [
    AWQ_CONFIG,
    # As GPTQModel writes a symmetric AWQ: zero_point false, qzeros still stored and read.
    {**AWQ_CONFIG, "zero_point": False, "format": "gemm", "sym": True},
])
def test_an_awq_source_quantizes_to_the_bytes_of_autoawqs_decode(spk, awq_source, tmp_path,
                                                                quantization):
    src, ref = awq_source
    src = broken_copy(src, tmp_path / "src", lambda d: (d / "config.json").write_text(
        json.dumps(config(quantization))))
    quantizes_as_its_reference(spk, src, ref, tmp_path, "W4A16", quantization)


@pytest.mark.parametrize("scheme", ["NVFP4A16", "FP8_BLOCK"])
def test_other_schemes_from_a_gptq_source(spk, gptq_sources, tmp_path, scheme):
    src, ref = gptq_sources["v1-asym-act"]
    quantizes_as_its_reference(spk, src, ref, tmp_path, scheme, gptq_config("v1-asym-act"))


@pytest.mark.parametrize("case", ["v1-asym-act", "v1-8bit-act", "awq"])
def test_decoded_weights_kept_dense_equal_the_reference(spk, gptq_sources, awq_source, tmp_path,
                                                        case):
    """Every linear layer ignored: the output holds the decoded weights themselves (F16)."""
    src, ref = awq_source if case == "awq" else gptq_sources[case]
    spk("quantize", src, tmp_path / "out", "--scheme", "W4A16", "--no-fsync",
        "--ignore", "re:.*_proj$")
    got, want = tensors_of(tmp_path / "out"), tensors_of(ref)
    for k in SHAPES:
        name = L0 + k + ".weight"
        assert got[name].dtype == torch.float16, name
        assert torch.equal(got[name].view(torch.int16), want[name].view(torch.int16)), name


@pytest.mark.parametrize("case", ["v2-asym-act", "awq"])
def test_dequantize_writes_the_decoded_weights(spk, gptq_sources, awq_source, tmp_path, case):
    """`sparkulator dequantize` of a GPTQ/AWQ source: the same decode, as a dense checkpoint."""
    src, ref = awq_source if case == "awq" else gptq_sources[case]
    spk("dequantize", src, tmp_path / "out", "--no-fsync")
    got, want = tensors_of(tmp_path / "out"), tensors_of(ref)
    assert not any(k.endswith((".qweight", ".qzeros", ".scales", ".g_idx")) for k in got)
    for k in SHAPES:
        name = L0 + k + ".weight"
        assert got[name].dtype == torch.float16, name
        assert torch.equal(got[name].view(torch.int16), want[name].view(torch.int16)), name
    assert "quantization_config" not in json.loads((tmp_path / "out" / "config.json").read_text())


def test_inspect_and_compare_read_the_decoded_weights(spk, gptq_sources, tmp_path):
    src, ref = gptq_sources["v2-asym-act"]
    report = spk("inspect", src).stdout
    assert "decoded from quant_method gptq" in report, report
    assert "qweight" not in report and "g_idx" not in report, report
    plan = json.loads(spk("quantize", src, tmp_path / "x", "--dry-run", "--json").stdout)
    by_name = {x["name"]: x for x in plan["tensors"]}
    assert by_name[L0 + "mlp.down_proj.weight"]["dtype"] == "F16"
    assert by_name[L0 + "mlp.down_proj.weight"]["action"] == "quantize"
    q = tmp_path / "q"
    spk("quantize", src, q, "--scheme", "W4A16", "--no-fsync")
    got = json.loads(spk("compare", src, q, "--json").stdout)
    want = json.loads(spk("compare", ref, q, "--json").stdout)
    assert got["layers"] and got["layers"] == want["layers"]


# ---- quantization described in a side file only ----------------------------------------------

# quantize_config.json as AutoGPTQ writes it (no quant_method nor checkpoint_format in its early
# releases, is_marlin_format in some) and with quant_method and checkpoint_format gptq_v2 (as
# GPTQModel can write it): case -> the file.
AUTOGPTQ_FILE = {"bits": 4, "group_size": 64, "damp_percent": 0.01, "desc_act": True,
                 "static_groups": False, "sym": False, "true_sequential": True,
                 "model_name_or_path": None, "model_file_base_name": "gptq_model-4bit-64g"}
QUANTIZE_CONFIG_JSON = {
    "v1-asym-act": AUTOGPTQ_FILE,
    "v1-8bit-act": {**AUTOGPTQ_FILE, "bits": 8, "is_marlin_format": False},
    "v2-asym-act": {**AUTOGPTQ_FILE, "quant_method": "gptq", "checkpoint_format": "gptq_v2"},
}
AUTOAWQ_FILE = {"zero_point": True, "q_group_size": 64, "w_bit": 4, "version": "GEMM"}


def side_source(d: Path, shards: Path, side: str, content: dict | str,
                shard_name: str | None = None) -> Path:
    """A copy of `shards` (the safetensors, and the index if any) with a config.json without
    quantization_config and `side` holding `content`."""
    d.mkdir()
    for f in shards.iterdir():
        if f.suffix == ".safetensors" or f.name.endswith(".index.json"):
            (d / (shard_name or f.name)).write_bytes(f.read_bytes())
    (d / "config.json").write_text(json.dumps(config(None)))
    (d / side).write_text(content if isinstance(content, str) else json.dumps(content))
    return d


def decodes_as_config_json(spk, side: Path, same: Path, tmp_path: Path, file: str, qc: dict):
    """`side` (quantization in `file` only) quantizes, and keeps its weights dense, to the bytes of
    `same` (the same tensors with quantization_config `qc` in config.json); the output records the
    file and `qc`, and holds no side file."""
    for name, extra in (("q", []), ("dense", ["--ignore", "re:.*_proj$"])):
        for src in (side, same):
            spk("quantize", src, tmp_path / f"{name}-{src.name}", "--scheme", "W4A16",
                "--no-fsync", *extra)
        got, want = tmp_path / f"{name}-{side.name}", tmp_path / f"{name}-{same.name}"
        assert_same_bytes(tensors_of(got), tensors_of(want))
        assert sorted(p.name for p in got.iterdir()) == sorted(p.name for p in want.iterdir())
        assert not (got / file).exists()
        out, ref = (json.loads((d / "config.json").read_text()) for d in (got, want))
        assert out["quantization_config"] == ref["quantization_config"]
        assert out["sparkulator"]["decoded_source"] == {"quantization_config": qc, "from": file}
        assert ref["sparkulator"]["decoded_source"] == {"quantization_config": qc}
    return tensors_of(tmp_path / f"dense-{side.name}")


@pytest.mark.parametrize("case", list(QUANTIZE_CONFIG_JSON))
def test_a_quantize_config_json_alone_decodes_as_its_quantization_config(spk, gptq_sources,
                                                                         tmp_path, case):
    """AutoGPTQ's weights file (named by model_file_base_name) and its quantize_config.json,
    no quantization_config: decoded as with {"quant_method": "gptq", ...the file} in config.json,
    and to what GPTQModel's dequantizer gives reading the file's own keys."""
    file = QUANTIZE_CONFIG_JSON[case]
    whole = gptq_sources[case][0].parent / "whole"
    side = side_source(tmp_path / "side", whole, "quantize_config.json", file,
                       shard_name="gptq_model-4bit-64g.safetensors")
    qc = {"quant_method": "gptq", **{k: v for k, v in file.items() if k != "is_marlin_format"}}
    same = write(tmp_path / "same", load_file(str(whole / "model.safetensors")), qc)
    (same / "model.safetensors").rename(same / "gptq_model-4bit-64g.safetensors")
    got = decodes_as_config_json(spk, side, same, tmp_path, "quantize_config.json", qc)
    want = gptq_references.gptqmodel_dequant().convert_gptq_file(
        whole / "model.safetensors", torch.float16, file, "cpu")
    same_weights(got, want)


def same_weights(got: dict, want: dict):
    for k in SHAPES:
        name = L0 + k + ".weight"
        assert got[name].dtype == torch.float16, name
        assert torch.equal(got[name].view(torch.int16), want[name].view(torch.int16)), name


def test_an_autoawq_quant_config_json_alone_decodes_as_its_quantization_config(spk, awq_source,
                                                                               tmp_path):
    """AutoAWQ's quant_config.json ({zero_point, q_group_size, w_bit, version "GEMM"}) stands for
    AutoAWQ's own AwqConfig.to_transformers_dict of it; decoded as AutoAWQ's dequantize_gemm."""
    src, ref = awq_source
    side = side_source(tmp_path / "side", src, "quant_config.json", AUTOAWQ_FILE)
    full = gptq_references.autoawq_config().AwqConfig(**AUTOAWQ_FILE).to_transformers_dict()
    qc = {k: v for k, v in full.items() if v is not None}  # modules_to_not_convert: None
    same = broken_copy(src, tmp_path / "same", lambda d: (d / "config.json").write_text(
        json.dumps(config(qc))))
    got = decodes_as_config_json(spk, side, same, tmp_path, "quant_config.json", qc)
    same_weights(got, tensors_of(ref))
    spk("dequantize", side, tmp_path / "dq", "--no-fsync")
    same_weights(tensors_of(tmp_path / "dq"), tensors_of(ref))
    assert not (tmp_path / "dq" / "quant_config.json").exists()


@pytest.mark.parametrize("file,content,words", [
    ("quantize_config.json", {**AUTOGPTQ_FILE, "bits": 3},
     ["quant_method gptq with bits 3", "2, 4 and 8"]),
    ("quantize_config.json", {**AUTOGPTQ_FILE, "checkpoint_format": "marlin"},
     ["checkpoint_format marlin"]),
    ("quantize_config.json", {**AUTOGPTQ_FILE, "is_marlin_format": True},
     ["is_marlin_format true"]),
    ("quantize_config.json", {k: v for k, v in AUTOGPTQ_FILE.items() if k != "bits"},
     ["no bits"]),
    ("quant_config.json", {k: v for k, v in AUTOAWQ_FILE.items() if k != "q_group_size"},
     ["no group_size (AutoAWQ's q_group_size)"]),
    ("quant_config.json", {**AUTOAWQ_FILE, "version": "GEMV"},
     ["quant_method awq with version gemv"]),
    ("quant_config.json", {**AUTOAWQ_FILE, "w_bit": 8}, ["quant_method awq with bits 8"]),
    ("quantize_config.json", '{"bits": 4, "group_size": 64', ["invalid JSON"]),
])
def test_a_side_file_that_cannot_be_decoded_is_refused_naming_file_and_key(
        spk, gptq_sources, tmp_path, file, content, words):
    bad = side_source(tmp_path / "bad", gptq_sources["v1-asym-act"][0].parent / "whole", file,
                      content)
    r = spk("quantize", bad, tmp_path / "out", "--scheme", "W4A16", expect=None)
    assert r.returncode != 0 and "Traceback" not in r.stderr
    for w in [f"{bad}/{file}: "] + words:
        assert w in r.stderr, (w, r.stderr)
    assert not (tmp_path / "out").exists()


# ---- bad sources ---------------------------------------------------------------------------

Q = L0 + "self_attn.q_proj"


def edit(name, fn):
    def change(t):
        t[name] = fn(t[name].clone())
    return change


def drop(name):
    def change(t):
        del t[name]
    return change


def set_at(index, value):
    def fn(x):
        x[index] = value
        return x
    return fn


def fails_naming(spk, src: Path, tmp_path: Path, tensor: str, change, words, file_named=True):
    shard = edit_shard(broken_copy(src, tmp_path / "bad", lambda d: None), tensor, change)
    r = spk("quantize", tmp_path / "bad", tmp_path / "out", "--scheme", "W4A16", "--no-fsync",
            expect=None)
    assert r.returncode != 0 and "Traceback" not in r.stderr
    for w in words + ([shard] if file_named else []):
        assert w in r.stderr, (w, r.stderr)
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("tensor,change,words", [
    (Q + ".qzeros", drop(Q + ".qzeros"), [Q + ".qweight", "without its", Q + ".qzeros"]),
    (Q + ".scales", drop(Q + ".scales"), [Q + ".qweight", "without its", Q + ".scales"]),
    (Q + ".g_idx", drop(Q + ".g_idx"), [Q + ".qweight", "without its", Q + ".g_idx"]),
    (Q + ".qweight", drop(Q + ".qweight"),
     ["a gptq tensor whose", Q + ".qweight is not in the checkpoint"]),
    (Q + ".scales", edit(Q + ".scales", lambda x: x[:, :128].contiguous()),
     [Q + ".scales", "shape [4, 128]", "needs [4, 256]"]),
    (Q + ".qzeros", edit(Q + ".qzeros", lambda x: x[:2].contiguous()),
     [Q + ".qzeros", "shape [2, 32]", "needs [4, 32]"]),
    (Q + ".scales", edit(Q + ".scales", lambda x: x.to(torch.int16)), [Q + ".scales", "dtype I16"]),
    (Q + ".qweight", edit(Q + ".qweight", lambda x: x.to(torch.int16)),
     [Q + ".qweight", "I16 [32, 256]", "I32"]),
    (Q + ".g_idx", edit(Q + ".g_idx", lambda x: x.long()), [Q + ".g_idx", "dtype I64"]),
    (Q + ".g_idx", edit(Q + ".g_idx", set_at(7, 99)),
     [Q + ".g_idx", "group 99 at input column 7 outside [0, 4)"]),
    (Q + ".g_idx", edit(Q + ".g_idx", set_at(3, -1)), [Q + ".g_idx", "group -1 at input column 3"]),
    (Q + ".scales", edit(Q + ".scales", set_at((1, 0), float("inf"))),
     [Q + ".scales", "non-finite scale inf at [1, 0]", Q + ".weight"]),
    (Q + ".scales", edit(Q + ".scales", set_at((2, 200), float("nan"))),
     [Q + ".scales", "non-finite scale nan at [2, 200]"]),
])
def test_a_bad_gptq_source_fails_naming_the_file_and_tensor(spk, gptq_sources, tmp_path, tensor,
                                                           change, words):
    fails_naming(spk, gptq_sources["v1-asym-act"][0], tmp_path, tensor, change, words,
                 file_named="without its" not in words)


@pytest.mark.parametrize("tensor,change,words", [
    (Q + ".qzeros", drop(Q + ".qzeros"), [Q + ".qweight", "without its", Q + ".qzeros"]),
    (Q + ".qzeros", edit(Q + ".qzeros", lambda x: x[:2].contiguous()),
     [Q + ".qzeros", "shape [2, 32]", "needs [4, 32]"]),
    (Q + ".scales", edit(Q + ".scales", lambda x: x[:3].contiguous()),
     [Q + ".scales", "3 groups where 256 input rows in groups of 64 need 4"]),
    (Q + ".scales", edit(Q + ".scales", set_at((0, 5), float("-inf"))),
     [Q + ".scales", "non-finite scale -inf at [0, 5]"]),
])
def test_a_bad_awq_source_fails_naming_the_file_and_tensor(spk, awq_source, tmp_path, tensor,
                                                          change, words):
    fails_naming(spk, awq_source[0], tmp_path, tensor, change, words,
                 file_named="without its" not in words)


@pytest.mark.parametrize("quantization,words", [
    ({**gptq_config("v1-sym"), "bits": 3}, ["quant_method gptq with bits 3", "2, 4 and 8"]),
    ({**gptq_config("v1-sym"), "checkpoint_format": "marlin"},
     ["checkpoint_format marlin", "gptq (v1) and gptq_v2"]),
    ({**gptq_config("v1-sym"), "format": "gptq_v2"},
     ["format gptq_v2 but checkpoint_format gptq"]),
    ({**gptq_config("v1-sym"), "dynamic": {r"+:.*down_proj": {"bits": 8}}},
     ["dynamic bits 8 for '+:.*down_proj'"]),
    ({**AWQ_CONFIG, "version": "gemv"}, ["quant_method awq with version gemv", "gemm"]),
    ({**AWQ_CONFIG, "version": "exllama"}, ["version exllama"]),
    ({**AWQ_CONFIG, "bits": 8}, ["quant_method awq with bits 8"]),
    ({**AWQ_CONFIG, "format": "gemv_fast"}, ["version gemm but format gemv_fast"]),
])
def test_a_variant_not_decoded_is_refused_saying_which(spk, gptq_sources, tmp_path, quantization,
                                                       words):
    bad = broken_copy(gptq_sources["v1-sym"][0], tmp_path / "bad",
                      lambda d: (d / "config.json").write_text(json.dumps(config(quantization))))
    r = spk("quantize", bad, tmp_path / "out", "--scheme", "W4A16", expect=None)
    assert r.returncode != 0 and "already quantized" in r.stderr
    for w in words:
        assert w in r.stderr, (w, r.stderr)
    assert not (tmp_path / "out").exists()


def test_a_gptq_config_over_dense_weights_is_refused(spk, gptq_sources, tmp_path):
    bad = broken_copy(gptq_sources["v1-sym"][1], tmp_path / "bad", lambda d: (
        d / "config.json").write_text(json.dumps(config(gptq_config("v1-sym")))))
    r = spk("quantize", bad, tmp_path / "out", "--scheme", "W4A16", expect=None)
    assert r.returncode != 0 and "no tensor is a packed X.qweight" in r.stderr, r.stderr
    assert not (tmp_path / "out").exists()


# ---- the layout vLLM serves: packed by vLLM's own packers -----------------------------------

VLLM_PACK = """
import sys, torch
from safetensors.torch import load_file, save_file
from vllm.model_executor.layers.quantization.utils.quant_utils import awq_pack, gptq_pack, pack_cols
t = load_file(sys.argv[1])
out = {}
for name in {k.rsplit(".", 1)[0] for k in t}:
    q, z = t[name + ".q"], t[name + ".z"]
    (k, n), groups = q.shape, z.shape[0]
    out[name + ".gptq_qweight"] = gptq_pack(q, 4, k, n)
    out[name + ".gptq_qzeros"] = pack_cols(z, 4, groups, n)
    out[name + ".awq_qweight"] = awq_pack(q, 4, k, n)
    out[name + ".awq_qzeros"] = awq_pack(z, 4, groups, n)
save_file(out, sys.argv[2])
"""


def test_sources_packed_by_vllms_packers_decode_to_q_minus_z_times_s(spk, vllm_venv, tmp_path):
    """vLLM's gptq_pack / pack_cols / awq_pack (the layouts its GPTQ and AWQ kernels load) pack
    random codes and zeros; the decoded weights, kept dense, are (q - z) * s rounded to F16."""
    import subprocess
    g = torch.Generator().manual_seed(9)
    codes, want = {}, {}
    for k, (rows, cols) in SHAPES.items():
        codes[k + ".q"] = torch.randint(0, 16, (cols, rows), generator=g, dtype=torch.int32)
        codes[k + ".z"] = torch.randint(0, 16, (cols // 64, rows), generator=g, dtype=torch.int32)
    save_file(codes, str(tmp_path / "codes.safetensors"))
    subprocess.run([str(vllm_venv), "-c", VLLM_PACK, tmp_path / "codes.safetensors",
                    tmp_path / "packed.safetensors"], check=True)
    packed = load_file(str(tmp_path / "packed.safetensors"))
    for method, qc in (("gptq", {**gptq_config("v2-asym-act"), "desc_act": False}),
                       ("awq", {**AWQ_CONFIG, "modules_to_not_convert": None})):
        t = dense(g)
        for k, (rows, cols) in SHAPES.items():
            s = (torch.rand(cols // 64, rows, generator=g) * 0.02 + 1e-3).half()
            t[f"{L0}{k}.qweight"] = packed[f"{k}.{method}_qweight"]
            t[f"{L0}{k}.qzeros"] = packed[f"{k}.{method}_qzeros"]
            t[f"{L0}{k}.scales"] = s
            if method == "gptq":
                t[f"{L0}{k}.g_idx"] = torch.arange(cols, dtype=torch.int32) // 64
            q, z = codes[k + ".q"], codes[k + ".z"].repeat_interleave(64, 0)
            want[k] = ((q - z).float() * s.float().repeat_interleave(64, 0)).half().t()
        src = write(tmp_path / method, t, qc)
        spk("quantize", src, tmp_path / f"{method}-out", "--scheme", "W4A16", "--no-fsync",
            "--ignore", "re:.*_proj$")
        got = tensors_of(tmp_path / f"{method}-out")
        for k in SHAPES:
            assert torch.equal(got[f"{L0}{k}.weight"].view(torch.int16),
                               want[k].contiguous().view(torch.int16)), (method, k)
