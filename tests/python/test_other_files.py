"""The files a checkpoint keeps besides its tensors: `quantize` and `dequantize` copy every one,
sub-folders included, the way llm-compressor's model_free_ptq does, and refuse a link that leads
outside the source.

The source is a sharded `sparkulator example` LLM dressed as a sentence-transformers model
(modules.json, 1_Pooling/config.json, 2_Dense/config.json), with a nested remote-code folder, the
.cache/ folder and .gitattributes that `huggingface-cli download --local-dir` leaves, and a link to a
file inside the folder. model_free_ptq quantizes the same source; the two output trees must hold the
same files, and every file that neither tool rewrites must have the source's bytes.
"""

import os
import subprocess
from pathlib import Path

import pytest

from conftest import run_model_free_ptq

# Written by the tools themselves, so not byte for byte the source's.
REWRITTEN = {"config.json", "model.safetensors.index.json"}


def tree(folder: Path) -> set[str]:
    return {str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file()}


def kept_files(folder: Path) -> set[str]:
    return {name for name in tree(folder)
            if name not in REWRITTEN and not (name.endswith(".safetensors") and "/" not in name)}


@pytest.fixture(scope="module")
def source(tmp_path_factory, spk):
    root = tmp_path_factory.mktemp("other_files")
    src = root / "src"
    spk("example", src, "--family", "llm", "--shards", "2")
    (src / "modules.json").write_text('[{"idx": 0, "name": "0", "path": "", '
                                      '"type": "sentence_transformers.models.Transformer"}]\n')
    (src / "1_Pooling").mkdir()
    (src / "1_Pooling/config.json").write_text('{"pooling_mode_mean_tokens": true}\n')
    (src / "2_Dense").mkdir()
    (src / "2_Dense/config.json").write_text('{"in_features": 256, "out_features": 128}\n')
    (src / "code/layers").mkdir(parents=True)
    (src / "code/layers/attention.py").write_text("# remote code two folders down\n")
    (src / "tokenizer.json").write_text('{"version": "1.0"}\n')
    os.symlink("tokenizer.json", src / "tokenizer_link.json")  # inside the folder: followed
    (src / ".cache/huggingface").mkdir(parents=True)
    (src / ".cache/huggingface/download.lock").write_text("")
    (src / ".gitattributes").write_text("*.safetensors filter=lfs\n")
    return src


@pytest.fixture(scope="module")
def reference(source, tmp_path_factory):
    pytest.importorskip("llmcompressor")
    out = tmp_path_factory.mktemp("mfp") / "out"
    run_model_free_ptq([(str(source), str(out), "W4A16")],
                       ignore=["lm_head", "re:.*embed_tokens", "re:.*norm"])
    return out


def test_quantize_keeps_the_same_files_as_model_free_ptq(source, reference, spk, tmp_path):
    ours = tmp_path / "q"
    proc = spk("quantize", source, ours, "--json")
    assert tree(ours) == tree(reference)
    assert "1_Pooling/config.json" in tree(ours) and "code/layers/attention.py" in tree(ours)
    assert ".gitattributes" not in tree(ours) and not (ours / ".cache").exists()
    for name in kept_files(ours):
        assert (ours / name).read_bytes() == (source / name).read_bytes(), name
        assert (ours / name).read_bytes() == (reference / name).read_bytes(), name
    assert not (ours / "tokenizer_link.json").is_symlink()  # a copy of the bytes, not a link
    assert "sub-folder" not in proc.stdout  # the old warning is gone


def test_dequantize_keeps_them_too(source, spk, tmp_path):
    spk("quantize", source, tmp_path / "q")
    spk("dequantize", tmp_path / "q", tmp_path / "d")
    assert kept_files(tmp_path / "d") == kept_files(tmp_path / "q")
    assert "1_Pooling/config.json" in kept_files(tmp_path / "d")
    for name in kept_files(tmp_path / "d"):
        assert (tmp_path / "d" / name).read_bytes() == (source / name).read_bytes(), name


@pytest.mark.parametrize("command", ["quantize", "dequantize"])
def test_a_link_out_of_the_source_is_refused_and_nothing_is_written(source, spk, tmp_path,
                                                                  command):
    src = tmp_path / "src"
    if command == "quantize":
        subprocess.run(["cp", "-a", source, src], check=True)
    else:
        spk("quantize", source, src)
    secret = tmp_path / "secret.txt"
    secret.write_text("not part of the model\n")
    (src / "2_Dense").mkdir(exist_ok=True)
    os.symlink(secret, src / "2_Dense/leak.txt")
    proc = spk(command, src, tmp_path / "out", expect=2)
    assert f"{src}/2_Dense/leak.txt: a link to {secret}, outside the source folder" in proc.stderr
    # Refused before anything is written: no output, no temporary folder beside it.
    assert {p.name for p in tmp_path.iterdir()} == {"src", "secret.txt"}
