"""Helpers of the pre-quantized source tests (test_quantized_sources.py, test_modelopt_sources.py):
read a checkpoint's tensors, copy a source folder, and change one tensor in its shard, keeping the
shard index true."""
import json
from pathlib import Path

from safetensors.torch import load_file, save_file


def tensors_of(d: Path) -> dict:
    """Every tensor of the folder's *.safetensors files, by name."""
    out = {}
    for f in sorted(d.glob("*.safetensors")):
        out.update(load_file(str(f)))
    return out


def broken_copy(src: Path, dst: Path, change=None) -> Path:
    """A copy of the flat folder `src` at `dst`, then change(dst) when given."""
    dst.mkdir()
    for f in src.iterdir():
        (dst / f.name).write_bytes(f.read_bytes())
    if change is not None:
        change(dst)
    return dst


def edit_shard(d: Path, tensor: str, change) -> str:
    """Applies change(tensors) to the shard of sharded folder `d` that holds `tensor`, and drops
    from the index what it removed; returns the shard's file name."""
    index = json.loads((d / "model.safetensors.index.json").read_text())
    f = d / index["weight_map"][tensor]
    tensors = load_file(str(f))
    change(tensors)
    save_file(tensors, str(f), metadata={"format": "pt"})
    index["weight_map"] = {k: v for k, v in index["weight_map"].items()
                           if v != f.name or k in tensors}
    (d / "model.safetensors.index.json").write_text(json.dumps(index))
    return f.name
