"""`quantize --resume` after a run killed with SIGKILL, at several points (issue 25 item 3).

A 4-shard source is quantized once without interruption (the reference). Then runs with --resume
are killed at chosen moments, watched from here through the unfinished folder beside DST
(`.DST.tmp-unfinished`) and its record (`.resume.json`, safetensors/resume_record.h): before any
shard is recorded, in the middle of a shard, and after one or two shards were recorded; a second
--resume run must end with DST byte for byte the reference and say how many shards it took over.
A finished shard damaged while the run was dead is written again (its content hash no longer
matches); a run with other options starts afresh from the same folder; without --resume a run
neither reads nor removes the folder.
"""
import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

import suite_policy
from conftest import assert_same_tree

SHARDS = 4


@pytest.fixture(scope="module")
def source(tmp_path_factory, spk):
    root = tmp_path_factory.mktemp("resume")
    src = root / "src"
    # About 0.6 GiB: a shard takes about 0.15 s with one thread, long enough to stop a run
    # between any two steps. The sanitizer build is several times slower: a quarter of it there.
    hidden, vocab = (1024, 8192) if suite_policy.binary_only() else (2048, 16384)
    spk("example", src, "--family", "llm", "--shards", SHARDS, "--hidden", hidden,
        "--intermediate", 4 * hidden, "--layers", 4, "--vocab", vocab)
    reference = root / "reference"
    spk("quantize", src, reference, "--no-fsync")
    return src, reference


def unfinished(dst: Path) -> Path:
    return dst.parent / f".{dst.name}.tmp-unfinished"


def recorded(dst: Path) -> int:
    try:
        return len(json.loads((unfinished(dst) / ".resume.json").read_text())["shards"])
    except (OSError, ValueError, KeyError):
        return 0


def kill_when(spk_path, src, dst, ready, timeout=60):
    """Starts `quantize --resume` (one thread, so shards finish one by one) and SIGKILLs it as
    soon as ready(dst) holds; returns how many shards the record held then."""
    proc = subprocess.Popen([spk_path, "quantize", str(src), str(dst), "--resume", "--no-fsync",
                             "--threads", "1"], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + timeout
    try:
        while not ready(dst):
            assert proc.poll() is None, "the run ended before the kill point"
            assert time.monotonic() < deadline, "the kill point never came"
            time.sleep(0.0005)
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.wait()
    assert proc.returncode == -signal.SIGKILL
    assert not dst.exists()  # nothing that looks like a checkpoint
    assert unfinished(dst).is_dir()
    return recorded(dst)


def resume(spk, src, dst, *flags) -> dict:
    return json.loads(spk("quantize", src, dst, "--resume", "--no-fsync", "--json", *flags).stdout)


def first_shard_started(dst):
    return (unfinished(dst) / "model-00001-of-00004.safetensors").exists()


def shards_recorded(n):
    return lambda dst: recorded(dst) >= n


@pytest.mark.parametrize("point,ready", [
    ("folder made", lambda dst: unfinished(dst).is_dir()),
    ("first shard started", first_shard_started),
    ("one shard recorded", shards_recorded(1)),
    ("two shards recorded", shards_recorded(2)),
])
def test_a_killed_run_resumes_to_the_same_bytes(source, spk, spk_path, tmp_path, point, ready):
    src, reference = source
    dst = tmp_path / "out"
    at_kill = kill_when(spk_path, src, dst, ready)
    summary = resume(spk, src, dst)
    # Every shard the record held when the run died is taken over, verified; the rest rewritten.
    assert summary["reused_shards"] == at_kill, (point, at_kill, summary["reused_shards"])
    assert summary["shards"] == SHARDS
    assert_same_tree(dst, reference)
    assert not unfinished(dst).exists()
    assert not (dst / ".resume.json").exists()


def test_a_damaged_finished_shard_is_written_again(source, spk, spk_path, tmp_path):
    src, reference = source
    dst = tmp_path / "out"
    at_kill = kill_when(spk_path, src, dst, shards_recorded(2))
    shard = unfinished(dst) / "model-00001-of-00004.safetensors"
    data = bytearray(shard.read_bytes())
    data[-1] ^= 0xFF  # same size, other content: only the hash tells
    shard.write_bytes(bytes(data))
    summary = resume(spk, src, dst)
    assert summary["reused_shards"] == at_kill - 1
    assert_same_tree(dst, reference)


def test_other_options_start_afresh_from_the_same_folder(source, spk, spk_path, tmp_path):
    src, _ = source
    dst = tmp_path / "out"
    kill_when(spk_path, src, dst, shards_recorded(1))
    summary = resume(spk, src, dst, "--scheme", "W8A16")
    assert summary["reused_shards"] == 0 and summary["scheme"] == "w8a16"
    fresh = tmp_path / "fresh"
    spk("quantize", src, fresh, "--scheme", "W8A16", "--no-fsync")
    assert_same_tree(dst, fresh)


def test_without_resume_the_unfinished_folder_is_left_alone(source, spk, spk_path, tmp_path):
    src, reference = source
    dst = tmp_path / "out"
    at_kill = kill_when(spk_path, src, dst, shards_recorded(1))
    spk("quantize", src, dst, "--no-fsync")
    assert_same_tree(dst, reference)
    assert recorded(dst) == at_kill  # still there for a --resume run to continue
