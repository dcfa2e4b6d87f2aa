"""The module-map generator's source-derived name rules on small model files (no vLLM needed).

- A regex rewrite a model's load_weights applies to checkpoint names (DeepSeek-V4 DSpark's
  mtp.N.* -> model.layers.N.*, its mtp.N.attn.wkv copied into context_wkv_proj), in a function
  it hands the weights or each name to, even one imported from another model file, is read
  back into the checkpoint's names (scan.checkpoint_renames, load_probe.renamed).
- A stacked_params_mapping tuple whose param has several name parts applies to the modules whose
  path ends with them (scan.stacked_entries).
- A load_weights that renames `.weight_packed` to `.weight` is recorded with its guard, for the
  model's own classes only (scan.weight_packed_renames).
"""
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))


# Imported by REWRITING_MODEL from another model file (as V4.1's DSpark takes V4's).
COPYING_MODEL = '''
import re

_WKV_RE = re.compile(r"^mtp\\.(\\d+)\\.attn\\.wkv\\.(.+)$")


def _copy(weights):
    for name, w in weights:
        match = _WKV_RE.fullmatch(name)
        if match is not None:
            yield f"context_wkv_proj.{match.group(2)}", w
'''
REWRITING_MODEL = '''
import re
from vllm.other_model import _copy


class M:
    def load_weights(self, weights):
        weights = _copy(weights)
        for name, w in weights:
            name = self._remap(name)

    def _remap(self, name):
        m = re.match(r"mtp\\.(\\d+)\\.(.*)", name)
        stage = int(m.group(1))
        rest = m.group(2)
        if rest.startswith("main_proj."):
            return f"model.{rest}"
        return f"model.layers.{stage}.{rest}"
'''


def test_checkpoint_names_undo_a_regex_rewrite(tmp_path):
    # DeepSeek-V4 DSpark's load_weights maps mtp.N.* to model.layers.N.* (or model.* for its
    # head stack) and copies each mtp.N.attn.wkv into context_wkv_proj (shard N): the checkpoint
    # names are read back into the pattern, a layer number the rewrite drops tried as each.
    from tools.vllm_module_map.load_probe import renamed
    from tools.vllm_module_map.scan import checkpoint_renames
    (tmp_path / "m.py").write_text(REWRITING_MODEL)
    (tmp_path / "vllm").mkdir()
    (tmp_path / "vllm" / "other_model.py").write_text(COPYING_MODEL)
    r = checkpoint_renames(["m.py"], tmp_path)
    assert r["rewrites"] == [[r"mtp\.(\d+)\.(.*)", ["model.layers.", 1, ".", 2]],
                             [r"mtp\.(\d+)\.(.*)", ["model.", 2]],
                             [r"^mtp\.(\d+)\.attn\.wkv\.(.+)$", ["context_wkv_proj.", 2]]]
    assert renamed(["model.layers.1.attn.wq_a"], r, "weight_packed", [0, 1]) == [
        "mtp.1.attn.wq_a", "mtp.0.layers.1.attn.wq_a", "mtp.1.layers.1.attn.wq_a"]
    assert renamed(["context_wkv_proj", "model.main_proj"], r, "weight", [0, 1]) == [
        "mtp.0.attn.wkv", "mtp.1.attn.wkv", "mtp.0.main_proj", "mtp.1.main_proj"]


def test_a_stacked_tuple_of_several_name_parts_maps_its_shards():
    # DeepSeek-V4's ("attn.fused_wqa_wkv", "attn.wq_a", 0) loads model.layers.0.attn.wq_a into
    # model.layers.0.attn.fused_wqa_wkv; a one-part tuple is matched by the last part as before.
    from tools.vllm_module_map.scan import stacked_entries
    stacked = [{"param": "attn.fused_wqa_wkv", "shard": "attn.wq_a", "shard_id": 0},
               {"param": ".gate_up_proj", "shard": ".gate_proj", "shard_id": 0},
               {"param": "compressor.fused_wkv_wgate", "shard": "compressor.wkv", "shard_id": 0}]
    got = stacked_entries(stacked, "model.layers.0.attn.fused_wqa_wkv")
    assert [(e["shard"], e["shard_id"]) for e in got] == [("wq_a", 0)]
    got = stacked_entries(stacked, "model.layers.0.mlp.gate_up_proj")
    assert [e["shard"] for e in got] == ["gate_proj"]


KIMI_LIKE_MODEL = '''
class Target:
    def load_weights(self, weights):
        for name, w in weights:
            name = name.replace(".weight_packed", ".weight")


class Mtp:
    def load_weights(self, weights):
        unpacked = not any(n.endswith("w13_weight_packed") for n in self.params)
        for name, w in weights:
            if unpacked and name.endswith(".weight_packed"):
                name = name.replace(".weight_packed", ".weight")
            name = name.replace(".weight_scale_inv", ".weight_scale")
'''


def test_a_load_weights_renaming_weight_packed_is_recorded_with_its_guard(tmp_path):
    # Kimi-K3 MTP: the rename (and then a silent skip) happens when its experts are unpacked;
    # the target class's load_weights in the same file is not the draft's.
    from tools.vllm_module_map.scan import weight_packed_renames

    class Mtp:  # stands in for the built model: only its classes' names are read
        def modules(self):
            return [self]
    (tmp_path / "m.py").write_text(KIMI_LIKE_MODEL)
    assert weight_packed_renames(Mtp(), ["m.py"], tmp_path) == {"weight_packed_renamed": [{
        "file": "m.py", "line": 13, "code": "name.replace('.weight_packed', '.weight')",
        "guard": "unpacked and name.endswith('.weight_packed')"}]}
