"""The plan's vLLM kernel rules (src/vllm/kernel_rules.h) against vLLM 0.32's own code, on both
sides of every boundary: for each fused GEMM of a checkpoint, `sparkulator inspect --scheme S --tp N`
quantizes its members exactly when vLLM's shape check (validate_fp8_block_shape for FP8_BLOCK, the
W4A8 kernel chooser for W4AFP8 on a Hopper GPU) takes the same partition. vLLM runs in its own venv
($VENV, else .venv-vllm; skipped with the reason when it is absent) through vllm_kernel_verdicts.py,
which says what it fakes (the CUDA platform, for the W4A8 chooser). Then `check` must flag what
llm-compressor's model_free_ptq writes for a GEMM that breaks the W4A8 rule, naming module and kernel.
"""
import json
from pathlib import Path

import pytest
import torch
from safetensors.torch import save_file

import references
from formats_sources import layout_flags
from conftest import REPO, run_model_free_ptq

import sys
sys.path.insert(0, str(REPO))
from tests.e2e import env  # noqa: E402

VENV_PYTHON = env.venv_dir() / "bin" / "python"
ROW_PARALLEL = ("o_proj", "down_proj")
FUSED = {"q_proj": "qkv_proj", "k_proj": "qkv_proj", "v_proj": "qkv_proj",
         "gate_proj": "gate_up_proj", "up_proj": "gate_up_proj"}
ORDER = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]
PART = {"q_proj": "self_attn", "k_proj": "self_attn", "v_proj": "self_attn", "o_proj": "self_attn",
        "gate_proj": "mlp", "up_proj": "mlp", "down_proj": "mlp"}

# layer -> {leaf: (out, in)}. Each layer sits on one side of a boundary of the scheme's rule.
W4AFP8_LAYERS = [
    # q/k/v rows 1152 and gate/up 640 are whole 128-tiles though k, v, gate and up are not.
    {"q_proj": (1024, 1024), "k_proj": (64, 1024), "v_proj": (64, 1024), "o_proj": (1024, 1024),
     "gate_proj": (320, 1024), "up_proj": (320, 1024), "down_proj": (1024, 640)},
    # 1088, 960, 576 and 1088 rows: no tile of 128 fits.
    {"q_proj": (960, 1024), "k_proj": (64, 1024), "v_proj": (64, 1024), "o_proj": (960, 1024),
     "gate_proj": (320, 1024), "up_proj": (256, 1024), "down_proj": (1088, 640)},
]
FP8_BLOCK_LAYERS = [
    {"q_proj": (1024, 1024), "k_proj": (192, 1024), "v_proj": (192, 1024), "o_proj": (192, 1024),
     "gate_proj": (192, 1024), "up_proj": (128, 1024), "down_proj": (192, 1024)},
    {"q_proj": (1024, 1024), "k_proj": (128, 1024), "v_proj": (192, 1024), "o_proj": (1024, 1024),
     "gate_proj": (128, 1024), "up_proj": (192, 1024), "down_proj": (1024, 1024)},
    {"q_proj": (1024, 1024), "k_proj": (256, 1024), "v_proj": (256, 1024), "o_proj": (1024, 1024),
     "gate_proj": (256, 1024), "up_proj": (512, 1024), "down_proj": (1024, 1024)},
]


def write_layers(d: Path, layers: list) -> Path:
    d.mkdir(parents=True)
    g = torch.Generator().manual_seed(0)
    tensors = {}
    for i, layer in enumerate(layers):
        for leaf, shape in layer.items():
            tensors[f"model.layers.{i}.{PART[leaf]}.{leaf}.weight"] = (
                torch.randn(*shape, generator=g) * 0.02).to(torch.bfloat16)
    tensors["model.embed_tokens.weight"] = torch.randn(64, 1024, generator=g).to(torch.bfloat16)
    save_file(tensors, str(d / "model.safetensors"), metadata={"format": "pt"})
    config = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 1024,
              "intermediate_size": 640, "num_hidden_layers": len(layers),
              "num_attention_heads": 8, "num_key_value_heads": 1, "vocab_size": 64,
              "torch_dtype": "bfloat16"}
    (d / "config.json").write_text(json.dumps(config))
    return d


def gemms(layers: list, tp: int):
    """vLLM's Linear layers: (layer, fused leaf, members, K and per-member rows on one rank)."""
    for i, layer in enumerate(layers):
        groups = {}
        for leaf in ORDER:
            groups.setdefault(FUSED.get(leaf, leaf), []).append(leaf)
        for fused, members in groups.items():
            row = fused in ROW_PARALLEL
            k = layer[members[0]][1] // (tp if row else 1)
            rows = [layer[m][0] // (1 if row else tp) for m in members]
            yield i, fused, members, k, rows, row


def w4afp8_case(k, rows, row, cc=90):
    return {"rule": "w4afp8", "k": k, "n": sum(rows), "cc": cc}


def fp8_block_case(tp):
    return lambda k, rows, row: {"rule": "fp8-block", "k": k, "partition_sizes": rows, "tp": tp,
                                 "row_parallel": row}


OFF_HOPPER = [w4afp8_case(1024, [1024], False, cc) for cc in (80, 89, 90, 100, 120)]


def every_case() -> list:
    """The cases of every test below, so that vLLM is imported once for the module."""
    cases = list(OFF_HOPPER)
    for tp in (1, 2):
        for layers, case_of in ((W4AFP8_LAYERS, w4afp8_case), (FP8_BLOCK_LAYERS, fp8_block_case(tp))):
            cases += [case_of(k, rows, row) for *_, k, rows, row in gemms(layers, tp)]
    return cases + wna16_grid_cases() + w4a16_check_cases()


@pytest.fixture(scope="module")
def vllm_says():
    """vLLM's verdict on a case: one run of vllm_kernel_verdicts.py in the venv for all of them,
    through the reference cache (references.py: keyed by the cases and vLLM's version)."""
    if not VENV_PYTHON.exists():
        pytest.skip(f"no vLLM venv at {VENV_PYTHON.parent.parent} (set VENV)")
    cases = every_case()
    try:
        answers = dict(zip(map(json.dumps, cases), references.vllm_verdicts(cases)))
    except references.ReferenceFailed as e:
        pytest.fail(str(e), pytrace=False)
    return lambda batch: [answers[json.dumps(c)] for c in batch]


def plan_actions(spk, src: Path, scheme: str, tp: int) -> dict:
    proc = spk("inspect", src, "--scheme", scheme, "--tp", tp, "--preset", "none", "--json",
               *layout_flags(scheme))
    return {t["name"]: (t["action"], t["reason"]) for t in json.loads(proc.stdout)["tensors"]}


def agree(tmp_path, spk, vllm_says, scheme: str, layers: list, tp: int, case_of, expected: list):
    src = write_layers(tmp_path / "src", layers)
    actions = plan_actions(spk, src, scheme, tp)
    found = list(gemms(layers, tp))
    verdicts = vllm_says([case_of(k, rows, row) for _, _, _, k, rows, row in found])
    assert [v["ok"] for v in verdicts] == expected, verdicts
    for (i, fused, members, k, rows, _), verdict in zip(found, verdicts):
        ours = [actions[f"model.layers.{i}.{PART[m]}.{m}.weight"] for m in members]
        where = f"layer {i} {fused} K={k} rows={rows} --tp {tp}: vLLM says {verdict}, we say {ours}"
        assert all(a == ("quantize" if verdict["ok"] else "keep") for a, _ in ours), where


W4AFP8_CASES = [
    (1, [True] * 4 + [False] * 4),
    # --tp 2: q/k/v 576 and gate/up 320 rows per rank; o_proj K 512 is whole, down_proj K 320 not.
    (2, [False, True, False, False, False, False, False, False]),
]


@pytest.mark.parametrize("tp,expected", W4AFP8_CASES)
def test_w4afp8_tiles_agree_with_vllms_w4a8_kernel_chooser(tmp_path, spk, vllm_says, tp, expected):
    """vLLM 0.32 on Hopper: CutlassW4A8LinearKernel is the only kernel for W4AFP8, and it needs K and
    the fused N per rank in multiples of 128; otherwise "Failed to find a kernel that can implement
    the WNA16 linear layer"."""
    agree(tmp_path, spk, vllm_says, "w4afp8", W4AFP8_LAYERS, tp, w4afp8_case, expected)


def test_w4afp8_has_no_kernel_off_hopper(vllm_says):
    """The table's claim that only Hopper runs W4AFP8: Ampere, Ada and Blackwell get vLLM's error
    for a shape Hopper takes."""
    verdicts = vllm_says(OFF_HOPPER)
    assert [v["ok"] for v in verdicts] == [False, False, True, False, False], verdicts
    assert verdicts[2]["kernel"] == "CutlassW4A8LinearKernel"
    assert "CUTLASS W4A8 requires compute capability of 90 (Hopper)" in verdicts[3]["error"]


FP8_BLOCK_CASES = [
    # per layer: q/k/v, o_proj, gate/up, down_proj
    (1, [False, True, False, True] + [True] * 8),
    # --tp 2 splits the rows of q/k/v and gate/up only: o_proj's 192 rows stay whole on each rank.
    (2, [False, True, False, True] * 2 + [True] * 4),
]


@pytest.mark.parametrize("tp,expected", FP8_BLOCK_CASES)
def test_fp8_block_rows_agree_with_validate_fp8_block_shape(tmp_path, spk, vllm_says, tp, expected):
    agree(tmp_path, spk, vllm_says, "fp8-block", FP8_BLOCK_LAYERS, tp, fp8_block_case(tp), expected)


def test_check_flags_a_w4afp8_gemm_that_breaks_the_cutlass_tiles(tmp_path, spk):
    """model_free_ptq quantizes the second layer of W4AFP8_LAYERS (q/k/v 1088 rows, o_proj 960, gate/up
    576, down_proj 1088) anyway; check names each member, its vLLM
    module, the kernel and vLLM's message; sparkulator's own output of the same source checks clean."""
    pytest.importorskip("llmcompressor")
    src = write_layers(tmp_path / "src", W4AFP8_LAYERS[1:])
    ref = tmp_path / "ref"
    run_model_free_ptq([(str(src), str(ref), "W4AFP8")], ignore=["lm_head", "re:.*embed_tokens"])
    proc = spk("check", ref, "--json", expect=None)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    hits = [f for f in json.loads(proc.stdout)["findings"] if f["code"] == "kernel-rule"]
    modules = sorted(h["module"] for h in hits)
    assert modules == sorted(f"model.layers.0.{PART[m]}.{m}" for m in ORDER), hits
    k = next(h for h in hits if h["module"].endswith("k_proj"))
    assert "model.layers.0.self_attn.qkv_proj" in k["message"]
    assert "CutlassW4A8LinearKernel" in k["message"]
    assert "K and N must be divisible by 128, got (1024, 1088)" in k["message"]
    ours = tmp_path / "ours"
    q = spk("quantize", src, ours, "--scheme", "w4afp8", "--preset", "none", "--no-fsync",
            "--allow-unloadable", expect=None)
    assert q.returncode == 0, q.stderr
    # No kernel-rule finding is left; the one error is the layout no vLLM loads (kernel_rules.cc).
    clean = json.loads(spk("check", ours, "--json", expect=None).stdout)
    assert [f["code"] for f in clean["findings"] if f["severity"] == "error"] == \
        ["layout-loads-nowhere"], clean["findings"]


# ---- Pack-quantized W4A16/W8A16 (WNA16) ------------------------------------------------------
# (bits, symmetric, group, out, in per rank, full in, row-parallel, CUDA ok, CPU ok): the cases of
# src/vllm/kernel_rules_test.cc kWna16Grid, whose table rows must give the same verdicts.
WNA16_GRID = [
    (4, True, 128, 48, 256, 256, True, True, False),
    (4, True, 128, 64, 256, 256, True, True, True),
    (4, True, 128, 96, 256, 256, True, True, True),
    (4, True, -1, 128, 96, 96, False, True, True),
    (4, True, -1, 128, 128, 128, False, True, True),
    (4, True, -1, 128, 80, 80, False, True, False),
    (4, True, 128, 128, 192, 384, True, False, False),
    (4, True, 16, 128, 256, 256, True, False, True),
    (4, True, 256, 128, 256, 256, True, True, True),
    (8, True, 128, 48, 256, 256, True, True, False),
    (8, False, 128, 128, 256, 256, True, True, False),
    (8, False, 128, 64, 256, 256, True, False, False),
    (4, False, 128, 48, 256, 256, True, True, False),
]
CUDA_GPUS = (80, 90)  # Ampere (Marlin, Triton) and Hopper (Machete first)


def wna16_case(bits, sym, group, out, k, k_full, row, cc, layer="model.layers.0.self_attn.o_proj"):
    return {"rule": "wna16-layer", "cc": cc, "bits": bits, "sym": sym, "group": group, "layer": layer,
            "n_full": out, "k_full": k_full, "parts": [out], "k": k, "tp": k_full // k}


def wna16_grid_cases() -> list:
    return [wna16_case(*g[:7], cc) for g in WNA16_GRID for cc in ("cpu",) + CUDA_GPUS]


# The checkpoint llm-compressor's model_free_ptq writes (W4A16, group 128): o_proj rows 48, 96
# and 64, down_proj in 256 and 384 (which --tp 2 splits into 192, straddling a group).
W4A16_LAYERS = [{"o_proj": (48, 256), "down_proj": (64, 256)},
                {"o_proj": (96, 256), "down_proj": (128, 384)}]


def w4a16_check_cases() -> list:
    cases = []
    for tp in (1, 2):
        for i, layer in enumerate(W4A16_LAYERS):
            for leaf, (out, k_full) in layer.items():
                name = f"model.layers.{i}.{PART[leaf]}.{leaf}"
                cases += [wna16_case(4, True, 128, out, k_full // tp, k_full, True, cc, name)
                          for cc in ("cpu",) + CUDA_GPUS]
    return cases


def test_wna16_grid_agrees_with_vllms_create_weights(vllm_says):
    """vLLM 0.32's own CompressedTensorsWNA16.create_weights (kernel chooser, then whole groups per
    rank) on the CPU build and on faked Ampere/Hopper: CUDA takes a shape when either GPU does."""
    cases = wna16_grid_cases()
    verdicts = iter(vllm_says(cases))
    for g in WNA16_GRID:
        cpu, *gpus = [next(verdicts) for _ in range(1 + len(CUDA_GPUS))]
        assert (any(v["ok"] for v in gpus), cpu["ok"]) == (g[7], g[8]), (g, cpu, gpus)
        if cpu["ok"]:
            assert cpu["kernel"] == "CPUWNA16LinearKernel", cpu


def test_out_48_is_refused_by_the_cpu_build_with_this_message(vllm_says):
    cpu = vllm_says([wna16_case(4, True, 128, 48, 256, 256, True, "cpu")])[0]
    assert "CPUWNA16LinearKernel cannot implement due to: Output size (48) not supported by " \
           "CPUWNA16, supported sizes are multiples of 32" in cpu["error"], cpu
    ampere = vllm_says([wna16_case(4, True, 128, 48, 256, 256, True, 80)])[0]
    assert ampere == {"ok": True, "kernel": "MarlinLinearKernel"}, ampere


def check_findings(spk, path: Path, *args) -> dict:
    proc = spk("check", path, "--json", *args, expect=None)
    assert proc.returncode in (0, 1), proc.stderr
    return {(f["code"], f["module"]): f for f in json.loads(proc.stdout)["findings"]
            if f["code"].startswith("kernel-rule")}


@pytest.fixture(scope="module")
def w4a16_ref(tmp_path_factory):
    pytest.importorskip("llmcompressor")
    d = tmp_path_factory.mktemp("w4a16")
    src = write_layers(d / "src", W4A16_LAYERS)
    run_model_free_ptq([(str(src), str(d / "ref"), "W4A16")],
                       ignore=["lm_head", "re:.*embed_tokens"])
    return d / "ref"


@pytest.mark.parametrize("tp", [1, 2])
def test_check_at_vllm_032_says_what_vllm_does_per_platform(w4a16_ref, spk, vllm_says, tp):
    """An error where neither a CUDA GPU nor the CPU build loads the module, a warning naming the
    platform where one refuses, nothing where both load it; the message quotes vLLM's reason."""
    found = check_findings(spk, w4a16_ref, "--tp", tp, "--vllm-version", "0.32.0")
    cases = [c for c in w4a16_check_cases() if c["tp"] == tp]
    verdicts = iter(vllm_says(cases))
    for case in cases[::1 + len(CUDA_GPUS)]:
        cpu, *gpus = [next(verdicts) for _ in range(1 + len(CUDA_GPUS))]
        cuda_ok = any(v["ok"] for v in gpus)
        error, warning = found.get(("kernel-rule", case["layer"])), \
            found.get(("kernel-rule-platform", case["layer"]))
        where = f"{case['layer']} --tp {tp}: vLLM cpu {cpu} cuda {gpus}; check {error} {warning}"
        assert (error is not None) == (not cuda_ok and not cpu["ok"]), where
        assert (warning is not None) == (cuda_ok != cpu["ok"]), where
        if warning and not cpu["ok"]:
            reason = cpu["error"].split("CPUWNA16LinearKernel cannot implement due to: ")[1]
            assert reason in warning["message"] and warning["severity"] == "warning", where
        if error:
            assert "Weight input_size_per_partition=192" in cpu["error"], where
            assert "Weight input_size_per_partition=192" in error["message"], where


def test_check_before_vllm_032_keeps_marlins_tile_rule(w4a16_ref, spk):
    """Releases before Marlin's padding (judged from 0.32.0 on; older ones by today's rule, an
    assumption docs/check.md states): out % 64 and in % 128 per rank, else an error."""
    for tp, broken in ((1, {"model.layers.0.self_attn.o_proj", "model.layers.1.self_attn.o_proj"}),
                       (2, {"model.layers.0.self_attn.o_proj", "model.layers.1.self_attn.o_proj",
                            "model.layers.1.mlp.down_proj"})):
        found = check_findings(spk, w4a16_ref, "--tp", tp, "--vllm-version", "0.31.0")
        assert {m for code, m in found if code == "kernel-rule"} == broken, found
        assert not [k for k in found if k[0] == "kernel-rule-platform"], found
        assert "not a multiple of 64 (Marlin)" in \
            found[("kernel-rule", "model.layers.0.self_attn.o_proj")]["message"]


def test_sparkulator_keeps_the_old_tiles_dense(tmp_path, spk):
    """The plan stays with Marlin's old tiles: the o_proj with 48 and 96 rows stay dense."""
    src = write_layers(tmp_path / "src", W4A16_LAYERS)
    actions = plan_actions(spk, src, "w4a16", 1)
    assert actions["model.layers.0.self_attn.o_proj.weight"][0] == "keep"
    assert actions["model.layers.1.self_attn.o_proj.weight"][0] == "keep"
    assert actions["model.layers.0.mlp.down_proj.weight"][0] == "quantize"
