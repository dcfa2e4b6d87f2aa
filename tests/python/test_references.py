"""The reference cache itself (references.py), on real files in a fresh cache root per test:
a hit does not recompute (in a later run, nor twice in one run); a changed input byte, a changed
library version or changed producing code misses; an entry that fails its manifest (a changed,
missing or extra file) is recomputed; an interrupted compute (an exception, or the process killed
with SIGKILL) leaves no entry, and the next run sweeps its temporary folder. Then the real producers:
model_free_ptq in the one worker interpreter (a batch, a failing job that leaves nothing and the
worker serving on), and the vLLM venv's version in the verdicts' key.

The toy kinds below are real kinds (their results are files, counted in a file); nothing of the
cache is replaced.
"""
import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import references
from references import Cache, Kind, ref


def toy_compute(cache, jobs, done):
    """Writes out/result.txt = the parameters and the inputs' bytes; counts each compute in
    <root>/../computes.txt."""
    for i, (r, out) in enumerate(jobs):
        data = [Path(p).joinpath("data.bin").read_bytes().hex() for p in r.inputs]
        (out / "result.txt").write_text(json.dumps([r.args, data]))
        (out / "sub").mkdir()
        (out / "sub" / "more.txt").write_text("more")
        with open(cache.root.parent / "computes.txt", "a") as f:
            f.write(r.params + "\n")
        done(i)


def toy_kind(site: Path = None, code: str = "toy v1") -> Kind:
    return Kind("toy", ("spk-ref-test-lib",), lambda: code, toy_compute,
                library_path=(lambda: [site]) if site else None)


def computes(tmp_path: Path) -> int:
    f = tmp_path / "computes.txt"
    return len(f.read_text().splitlines()) if f.exists() else 0


@pytest.fixture
def inputs(tmp_path):
    d = tmp_path / "input"
    d.mkdir()
    (d / "data.bin").write_bytes(b"\x00\x01\x02")
    return d


def fake_library(site: Path, version: str) -> Path:
    """A distribution spk-ref-test-lib of `version` in the site folder `site` (its dist-info)."""
    for old in site.glob("spk_ref_test_lib-*.dist-info"):
        for f in old.iterdir():
            f.unlink()
        old.rmdir()
    meta = site / f"spk_ref_test_lib-{version}.dist-info"
    meta.mkdir(parents=True)
    (meta / "METADATA").write_text(f"Metadata-Version: 2.1\nName: spk-ref-test-lib\n"
                                   f"Version: {version}\n")
    return site


def test_a_hit_does_not_recompute(tmp_path, inputs):
    kind = toy_kind()
    r = ref(kind, {"n": 1}, [inputs])
    first = Cache(tmp_path / "cache")
    (entry,) = first.ensure([r])
    assert computes(tmp_path) == 1 and first.computed == [entry.name]
    assert first.ensure([r, r]) == [entry, entry] and computes(tmp_path) == 1  # twice in a run
    second = Cache(tmp_path / "cache")  # a later run
    assert second.ensure([r]) == [entry] and second.computed == [] and computes(tmp_path) == 1
    copy = second.copy_to(r, tmp_path / "copy")
    assert json.loads((copy / "result.txt").read_text()) == [{"n": 1}, ["000102"]]
    (copy / "result.txt").write_text("a test may change its copy")
    assert Cache(tmp_path / "cache").valid(entry.name)  # the entry is untouched
    manifest = json.loads((entry / "manifest.json").read_text())
    assert set(manifest["files"]) == {"result.txt", "sub/more.txt"}


def test_a_batch_computes_each_miss_once(tmp_path, inputs):
    kind = toy_kind()
    refs = [ref(kind, {"n": n}, [inputs]) for n in (1, 2, 1, 3)]
    cache = Cache(tmp_path / "cache")
    entries = cache.ensure(refs)
    assert entries[0] == entries[2] and len(set(entries)) == 3
    assert computes(tmp_path) == 3 and len(cache.computed) == 3


def test_a_changed_input_byte_misses(tmp_path, inputs):
    kind = toy_kind()
    cache = Cache(tmp_path / "cache")
    (before,) = cache.ensure([ref(kind, {}, [inputs])])
    (inputs / "data.bin").write_bytes(b"\x00\x01\x03")
    (after,) = cache.ensure([ref(kind, {}, [inputs])])  # in the same run, at the same path
    assert after != before and computes(tmp_path) == 2
    later = Cache(tmp_path / "cache")
    assert later.ensure([ref(kind, {}, [inputs])]) == [after] and computes(tmp_path) == 2
    assert json.loads((after / "out" / "result.txt").read_text())[1] == ["000103"]
    # A new file in the folder counts too (its name and bytes), and so does a parameter.
    (inputs / "extra.json").write_text("{}")
    assert Cache(tmp_path / "cache").key(ref(kind, {}, [inputs])) not in (before.name, after.name)
    assert later.key(ref(kind, {"x": 1}, [inputs])) != after.name
    # The same bytes in another folder are the same input: a hit.
    (inputs / "extra.json").unlink()
    other = tmp_path / "elsewhere"
    other.mkdir()
    (other / "data.bin").write_bytes(b"\x00\x01\x03")
    assert Cache(tmp_path / "cache").ensure([ref(kind, {}, [other])]) == [after]
    assert computes(tmp_path) == 2


def test_a_changed_library_version_or_code_misses(tmp_path, inputs):
    site = fake_library(tmp_path / "site", "1.0")
    r = ref(toy_kind(site), {}, [inputs])
    (v1,) = Cache(tmp_path / "cache").ensure([r])
    assert Cache(tmp_path / "cache").versions(r.kind) == {"spk-ref-test-lib": "1.0"}
    fake_library(site, "1.1")
    (v11,) = Cache(tmp_path / "cache").ensure([ref(toy_kind(site), {}, [inputs])])
    assert v11 != v1 and computes(tmp_path) == 2
    assert json.loads((v11 / "manifest.json").read_text())["versions"] == {
        "spk-ref-test-lib": "1.1"}
    # Not installed at all is a version too ("absent"), and the producing code is in the key.
    absent = ref(toy_kind(tmp_path / "empty-site"), {}, [inputs])
    assert Cache(tmp_path / "cache").versions(absent.kind) == {"spk-ref-test-lib": "absent"}
    new_code = ref(toy_kind(site, code="toy v2"), {}, [inputs])
    assert Cache(tmp_path / "cache").key(new_code) != v11.name


@pytest.mark.parametrize("damage", ["change", "remove", "add", "manifest"])
def test_a_corrupted_entry_is_recomputed(tmp_path, inputs, damage):
    r = ref(toy_kind(), {}, [inputs])
    (entry,) = Cache(tmp_path / "cache").ensure([r])
    good = (entry / "out" / "result.txt").read_text()
    if damage == "change":
        (entry / "out" / "result.txt").write_text(good.replace("0", "1"))
    elif damage == "remove":
        (entry / "out" / "sub" / "more.txt").unlink()
    elif damage == "add":
        (entry / "out" / "stray.bin").write_bytes(b"x")
    else:
        (entry / "manifest.json").write_text("{not json")
    later = Cache(tmp_path / "cache")
    assert not later.valid(entry.name)
    assert later.ensure([r]) == [entry] and later.computed == [entry.name]
    assert computes(tmp_path) == 2 and later.valid(entry.name)
    assert (entry / "out" / "result.txt").read_text() == good
    assert not (entry / "out" / "stray.bin").exists()
    assert not list((tmp_path / "cache").glob(".tmp-*"))


def failing_compute(cache, jobs, done):
    r, out = jobs[0]
    (out / "partial.txt").write_text("half")
    done(0)  # the first job completes and is kept
    (jobs[1][1] / "partial.txt").write_text("half")
    raise OSError("disk full, say")


def test_an_interrupted_compute_leaves_no_entry(tmp_path, inputs):
    kind = Kind("failing", (), lambda: "failing v1", failing_compute)
    a, b = ref(kind, {"n": 1}), ref(kind, {"n": 2})
    cache = Cache(tmp_path / "cache")
    with pytest.raises(OSError, match="disk full"):
        cache.ensure([a, b])
    assert cache.valid(cache.key(a)) and not cache.entry(cache.key(b)).exists()
    assert [p.name for p in (tmp_path / "cache").iterdir()] == [cache.key(a)]  # no .tmp left


KILLED = textwrap.dedent("""
    import sys, time
    sys.path.insert(0, sys.argv[1])
    import references
    def slow(cache, jobs, done):
        (jobs[0][1] / "partial.bin").write_bytes(b"half a result")
        print("started", flush=True)
        time.sleep(120)
    kind = references.Kind("slow", (), lambda: "slow v1", slow)
    references.Cache(sys.argv[2]).ensure([references.ref(kind, {})])
""")


def test_a_killed_compute_leaves_no_entry_and_is_swept(tmp_path):
    root = tmp_path / "cache"
    proc = subprocess.Popen([sys.executable, "-c", KILLED, str(Path(__file__).parent), str(root)],
                            stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "started"
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    left = [p.name for p in root.iterdir()]
    assert len(left) == 1 and left[0].startswith(f".tmp-{proc.pid}-"), left  # no entry
    def whole(cache, jobs, done):
        for i, (_, out) in enumerate(jobs):
            (out / "whole.bin").write_bytes(b"all")
            done(i)
    kind = Kind("slow", (), lambda: "slow v1", whole)  # the same kind: the same key
    cache = Cache(root)  # the next run: the dead process's folder is swept
    assert list(root.iterdir()) == []
    (entry,) = cache.ensure([ref(kind, {})])
    assert sorted(p.name for p in (entry / "out").iterdir()) == ["whole.bin"]


def test_cache_root_is_spk_ref_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("SPK_REF_CACHE", str(tmp_path / "elsewhere"))
    assert references.cache_root() == tmp_path / "elsewhere"
    monkeypatch.delenv("SPK_REF_CACHE")
    assert references.cache_root() == Path.home() / ".cache" / "sparkulator" / "refs"


# ---- the real producers ---------------------------------------------------------------------------

def test_model_free_ptq_runs_in_one_worker_and_a_failure_stores_nothing(tmp_path):
    pytest.importorskip("llmcompressor")
    import torch
    from conftest import load_dir
    from formats_sources import write_checkpoint
    src = tmp_path / "src"
    write_checkpoint(src, torch.bfloat16, sharded=False)
    ignore = ["lm_head", "re:.*embed_tokens"]
    good = [references.model_free_ptq_ref(src, s, ignore) for s in ("W8A8", "FP8_DYNAMIC")]
    bad = references.model_free_ptq_ref(src, "NOT_A_SCHEME", ignore)
    cache = Cache(tmp_path / "cache")
    try:
        entries = cache.ensure(good)
        worker = cache.workers["model_free_ptq"]
        with pytest.raises(references.ReferenceFailed, match="NOT_A_SCHEME"):
            cache.ensure([bad])
        assert not cache.entry(cache.key(bad)).exists()
        assert not list(cache.root.glob(".tmp-*"))
        assert cache.workers["model_free_ptq"] is worker and worker.proc.poll() is None
        after = references.model_free_ptq_ref(src, "W4A16", ignore)  # the worker serves on
        cache.ensure([after])
        assert cache.workers["model_free_ptq"] is worker
        assert cache.ensure(good) == entries and len(cache.computed) == 3
    finally:
        cache.close()
    assert worker.proc.poll() == 0  # ended by close(): its stdin closed
    warm = Cache(tmp_path / "cache")
    assert warm.ensure(good) == entries and warm.workers == {}  # no worker started at all
    w8a8 = load_dir(warm.copy_to(good[0], tmp_path / "w8a8"))
    assert w8a8["model.layers.0.mlp.down_proj.weight"].dtype == torch.int8
    assert "model.embed_tokens.weight" in w8a8
    manifest = json.loads((entries[0] / "manifest.json").read_text())
    assert manifest["versions"]["llmcompressor"] == references.installed_version("llmcompressor")


def test_the_vllm_verdicts_key_has_the_venvs_vllm_version(tmp_path):
    sys.path.insert(0, str(references.REPO))
    from tests.e2e import env
    if not (env.site_packages() / "vllm").is_dir():
        pytest.skip(f"no vLLM venv at {env.venv_dir()} (set VENV)")
    versions = Cache(tmp_path / "cache").versions(references.VLLM_VERDICTS)
    assert versions["vllm"].startswith("0.32"), versions
    assert "python" not in versions  # the venv's own interpreter, not this one
