"""The EAGLE-3 e2e kind (tests/e2e/eagle3.py, eagle3_head.py).

- Layout tests (torch only): the head's config keys and tensor names/shapes/dtypes are the ones vLLM
  0.32's Eagle3Qwen3ForCausalLM loads, the d2t/t2d vocab mapping, and the training-time-test mask.
- The CI-sized head (eagle3.ci_models: the shared tiny target and a head trained with
  eagle3.SMOKE_PARAMS, under a minute of one thread on a quiet machine here) is built through
  env.cached_model when the cache lacks it, so a fresh machine trains it once and a warm one reads
  it back: nothing here skips for want of a cached head.
- test_served_greedy_request_matches_trainer: one greedy request on a real `vllm serve` with that
  head (method eagle3); vLLM's spec-decode counters must equal the trainer's simulated ones, with
  tokens accepted. Skipped only without the vLLM venv (VENV, default .venv-vllm at the repository
  root) or with SPK_E2E_VLLM=0 (scripts/test.sh --quick: no vLLM), either of which fails under
  SPK_REQUIRE (suite_policy.py). About 75 s here with the head cached.
"""
import json
import os
import pathlib
import subprocess
import sys

import pytest

torch = pytest.importorskip("torch")
ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
from tests.e2e import eagle3, eagle3_head as eh, env  # noqa: E402

VENV = env.venv_dir()  # $VENV, else the repository's .venv-vllm
TARGET_CFG = {"hidden_size": 256, "intermediate_size": 512, "num_attention_heads": 4,
              "num_key_value_heads": 2, "head_dim": 64, "rms_norm_eps": 1e-6,
              "max_position_embeddings": 2048, "vocab_size": 2048, "hidden_act": "silu",
              "attention_bias": False, "bos_token_id": 0, "eos_token_id": 0,
              "rope_parameters": {"rope_theta": 10000.0, "rope_type": "default"},
              "num_hidden_layers": 2, "architectures": ["Qwen3ForCausalLM"]}


def small_head(seed=0):
    gen = torch.Generator().manual_seed(seed)
    cfg = eh.head_config(TARGET_CFG)
    head = eh.Eagle3Head(cfg, torch.randn(2048, 256, generator=gen))
    for p in head.parameters():
        p.data.normal_(0, 0.05, generator=gen)
    return head, cfg


def test_config_names_what_vllm_reads():
    cfg = eh.head_config(TARGET_CFG)
    # EAGLEConfig keeps architectures that start with "Eagle3"; the registry maps this one to
    # qwen3_eagle3.Eagle3Qwen3ForCausalLM.
    assert cfg["architectures"] == ["Eagle3Qwen3ForCausalLM"]
    assert cfg["num_hidden_layers"] == 1 and cfg["model_type"] == "qwen3"
    # gpu_model_runner._get_eagle3_aux_layers_from_config reads eagle_config's ids; without them the
    # target's default (2, L//2, L-3) gives a 2-layer target only 2 distinct layers.
    assert cfg["eagle_config"]["eagle_aux_hidden_state_layer_ids"] == [0, 1, 2]
    assert len(set(cfg["eagle_config"]["eagle_aux_hidden_state_layer_ids"])) == 3
    assert cfg["draft_vocab_size"] == 1024 and cfg["vocab_size"] == 2048
    assert cfg["target_hidden_size"] == 256


def test_checkpoint_tensors_are_the_layout():
    head, cfg = small_head()
    tensors = head.checkpoint_tensors()
    layout = eh.tensor_layout(cfg)
    assert sorted(tensors) == sorted(layout)
    for name, (shape, dtype) in layout.items():
        assert tuple(tensors[name].shape) == shape, name
        assert tensors[name].dtype == dtype, name
    assert layout["fc.weight"][0] == (256, 768)                  # 3 aux states x hidden 256
    assert layout["midlayer.self_attn.q_proj.weight"][0] == (256, 512)   # [embed, hidden] input
    assert "embed_tokens.weight" not in tensors                  # shared from the target by vLLM


def test_d2t_offsets_map_draft_ids_to_target_ids():
    labels = torch.tensor([[5, 5, 5, 9, 9, 2047, 3]])
    d2t, t2d, coverage = eh.draft_vocab(labels, 2048, 3)
    head, _ = small_head()
    head.d2t = d2t
    # vLLM: targets = arange(draft_vocab) + draft_id_to_target_id
    assert head.to_target(torch.arange(3)).tolist() == [5, 9, 2047]
    assert t2d.nonzero().flatten().tolist() == [5, 9, 2047]
    assert coverage == pytest.approx(6 / 7)


def test_chain_attention_is_causal_then_diagonal():
    head, _ = small_head()
    gen = torch.Generator().manual_seed(1)
    tokens = [torch.randint(0, 2048, (1, 6), generator=gen) for _ in range(2)]
    aux = torch.randn(1, 6, 768, generator=gen)
    with torch.no_grad():
        base = head.chain(tokens, aux)
        # A different step-2 token at index 2 changes step 2 at index 2 only: step-2 queries see the
        # first pass's keys and their own chain, not other indices' step-2 keys.
        t2 = tokens[1].clone()
        t2[0, 2] = (t2[0, 2] + 1) % 2048
        moved = head.chain([tokens[0], t2], aux)
        # A different aux state at index 4 leaves every earlier index of both steps alone.
        aux2 = aux.clone()
        aux2[0, 4] += 1.0
        later = head.chain(tokens, aux2)
    assert torch.equal(moved[0], base[0])
    changed = (moved[1] - base[1]).abs().amax(-1)[0]
    assert changed[2] > 0 and torch.all(changed[[0, 1, 3, 4, 5]] == 0)
    for step in range(2):
        assert torch.equal(later[step][0, :4], base[step][0, :4])
        assert not torch.equal(later[step][0, 4], base[step][0, 4])


@pytest.fixture(scope="module")
def ci_head():
    """(head, target): the CI-sized head and its target, trained when the cache lacks them."""
    target, head = eagle3.ci_models()
    return head, target


def test_cached_head_files_have_the_layout(ci_head):
    head_dir, _ = ci_head
    from safetensors.torch import load_file
    cfg = json.loads((head_dir / "config.json").read_text())
    tensors = load_file(str(head_dir / "model.safetensors"))
    layout = eh.tensor_layout(cfg)
    assert {k: (tuple(v.shape), v.dtype) for k, v in tensors.items()} == layout
    d2t = tensors["d2t"]
    assert torch.equal((torch.arange(len(d2t)) + d2t).sort().values,
                       tensors["t2d"].nonzero().flatten())


def test_served_greedy_request_matches_trainer(tmp_path, ci_head, vllm_venv):
    """vllm_venv: skips without the venv (a failure under SPK_REQUIRE), and puts the test in the
    vLLM-served worker group (suite_policy.py rule 4), never beside another vLLM server."""
    if os.environ.get("SPK_E2E_VLLM") == "0":
        pytest.skip("SPK_E2E_VLLM=0: no vLLM server in this tier (scripts/test.sh --quick)")
    head_dir, target_dir = ci_head
    port = int(os.environ.get("SPK_E2E_EAGLE3_PORT", "18150"))
    # The real harness: server.Server (process group, fresh VLLM_CACHE_ROOT, always stopped) and
    # run.py's prediction prompt, compared by eagle3.match_request.
    script = (
        "import json, pathlib, sys\n"
        "from tests.e2e import eagle3, measure\n"
        "from tests.e2e.server import Server\n"
        "h, t, work = map(pathlib.Path, sys.argv[1:4])\n"
        "spec = json.dumps(eagle3.KIND.spec_config(h))\n"
        "with Server('eagle3-match', t, int(sys.argv[4]), work, args=['--speculative-config', spec]) as srv:\n"
        "    if not srv.wait_healthy(900):\n"
        "        sys.exit(f'vllm serve did not come up: {srv.root_cause()} (log {srv.log})')\n"
        "    r = eagle3.match_request(srv, h, t, measure.held_out_prompts(1, 800)[0], 48)\n"
        "print(json.dumps(r))\n")
    proc = subprocess.run([str(VENV / "bin" / "python"), "-c", script, str(head_dir), str(target_dir),
                           str(tmp_path), str(port)], cwd=ROOT, capture_output=True,
                          text=True, timeout=1200)
    assert proc.returncode == 0, proc.stderr[-4000:]
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result["served"]["drafted"] > 0
    assert result["served"]["accepted"] > 0, result
    assert result["equal"], result


def test_strip_aux_ids_removes_every_copy(tmp_path):
    src = tmp_path / "head"
    src.mkdir()
    cfg = eh.head_config(TARGET_CFG)
    cfg["eagle_aux_hidden_state_layer_ids"] = [0, 1, 2]
    (src / "config.json").write_text(json.dumps(cfg))
    out = eagle3._strip_aux_ids(src, tmp_path / "no-aux")
    stripped = json.loads((out / "config.json").read_text())
    assert "eagle_aux_hidden_state_layer_ids" not in stripped
    assert "eagle_aux_hidden_state_layer_ids" not in stripped["eagle_config"]
    assert stripped["eagle_config"]["use_aux_hidden_state"] is True


def test_root_cause_skips_warnings_and_keeps_the_kernel_reason():
    from tests.e2e.server import root_cause
    # Lines as vLLM 0.32 CPU printed them for the W8A16 head (logs/eagle3-w8a16-on-cpu.log).
    log = "\n".join([
        "(Worker pid=1) WARNING 12-01 08:51:06 [utils.py:597] Failed to create oneDNN linear, fallback "
        "to torch linear. Exception: could not create a primitive descriptor for the matmul primitive.",
        "(Worker pid=1) ERROR 12-01 08:51:09 [multiproc_executor.py:953] ValueError: Failed to find a "
        "kernel that can implement the WNA16 linear layer. Reasons: ",
        "(Worker pid=1) ERROR 12-01 08:51:09 [multiproc_executor.py:953]  Dynamic4bitLinearKernel "
        "cannot implement due to: Unsupported quant type uint8b128",
        "(Worker pid=1) ERROR 12-01 08:51:09 [multiproc_executor.py:953]  CPUWNA16LinearKernel cannot "
        "implement due to: Quant type (uint8b128) not supported by CPUWNA16"])
    cause = root_cause(log)
    assert cause.startswith("ValueError: Failed to find a kernel")
    assert cause.endswith("Quant type (uint8b128) not supported by CPUWNA16")


def test_full_run_calls_this_kind_and_its_prediction():
    # `python -m tests.e2e full` (run.py) discovers the kinds by module name; its prediction step
    # calls the kind module's predict_acceptance when there is one.
    from tests.e2e import run
    kinds, skipped = run.discover_kinds(smoke=False)
    assert eagle3.KIND in kinds and "eagle3" not in skipped
    smoke_kinds, _ = run.discover_kinds(smoke=True)
    assert eagle3.KIND not in smoke_kinds          # its head trains ~30 min here: full only
    assert callable(getattr(eagle3, "predict_acceptance"))
    assert eagle3.KIND.spec_config(pathlib.Path("/h")) == {
        "method": "eagle3", "model": "/h", "num_speculative_tokens": 3}


def test_failure_cases_mark_the_host_ones(tmp_path, ci_head, spk_path):
    # The W4A16-without-plugins and W8A16 cases record this vLLM build's kernels, not a fault of the
    # head: `sparkulator check` is not asked to predict them (cases.FailureCase.checkpoint_fault).
    head_dir, target_dir = ci_head
    spk = pathlib.Path(spk_path)  # a missing binary fails (conftest), never skips
    cases = eagle3.KIND.failure_cases(tmp_path, target_dir, head_dir, spk)
    assert {c.name: c.checkpoint_fault for c in cases} == {
        "eagle3-no-aux-layer-ids": True, "eagle3-w4a16-cpu-kernel": False,
        "eagle3-w8a16-on-cpu": False}
    for c in cases:
        assert c.spec_config["model"] == str(c.draft) and c.check_args[0] == str(c.draft)
        assert (c.draft / "model.safetensors").exists()
    no_aux = json.loads((cases[0].draft / "config.json").read_text())
    assert "eagle_aux_hidden_state_layer_ids" not in no_aux["eagle_config"]
    assert json.loads((cases[2].draft / "config.json").read_text())["quantization_config"][
        "config_groups"]["group_0"]["weights"]["num_bits"] == 8
