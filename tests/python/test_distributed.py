"""One quantize job split across machines (issue 25 item 2): `quantize --part I/N` and
`sparkulator merge`, through the two scripts of scripts/distributed/ on what they drive for real:
- a real Slurm (Debian's slurmctld and slurmd, one node on this host, with munge), started here
  in a temporary folder with its own slurm.conf, munge key and ports: slurm-quantize.sh submits a
  job array of N = 3 parts and a merge job that waits for them (afterok);
- xargs -P (xargs-quantize.sh), for those without a scheduler;
and by hand for NVFP4A16, whose q/k/v and gate/up partners share a global scale computed over
partners that sit in other parts. Every result is byte for byte the single-machine output. merge
refuses, naming the part and the file, parts of another job, a part given twice or missing, and a
shard changed after its part wrote it, and writes nothing then.
"""
import getpass
import json
import os
import signal
import socket
import subprocess
import time
from pathlib import Path

import pytest

from conftest import assert_same_tree

ROOT = Path(__file__).resolve().parents[2]
SCRIPTS = ROOT / "scripts" / "distributed"
PARTS = 3


@pytest.fixture(scope="module")
def source(tmp_path_factory, spk):
    """A 5-shard source (more shards than parts: one part writes two) and its single-machine
    W4A16 output; absolute paths, as config.json records the source path given."""
    root = tmp_path_factory.mktemp("distributed")
    src = root / "src"
    spk("example", src, "--family", "llm", "--shards", 5, "--hidden", 512, "--intermediate",
        1536, "--layers", 5, "--vocab", 4096)
    single = root / "single"
    spk("quantize", src, single, "--no-fsync")
    return src, single


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def tool(name: str) -> str:
    for folder in ("/usr/sbin", "/usr/bin"):
        if Path(folder, name).exists():
            return str(Path(folder, name))
    pytest.fail(f"{name} not found: install Debian's slurm-wlm and munge "
                "(scripts/install-deps.sh does)", pytrace=False)


@pytest.fixture(scope="module")
def slurm(tmp_path_factory):
    """A one-node Slurm cluster on this host, its environment for sbatch/squeue (SLURM_CONF)."""
    t = tmp_path_factory.mktemp("slurm")
    (t / "state").mkdir()
    (t / "spool").mkdir()
    key = t / "munge.key"
    key.write_bytes(os.urandom(1024))
    key.chmod(0o600)
    host, user = socket.gethostname().split(".")[0], getpass.getuser()
    subprocess.run([tool("munged"), f"--socket={t}/munge.sock", f"--key-file={key}",
                    f"--pid-file={t}/munged.pid", f"--log-file={t}/munged.log",
                    f"--seed-file={t}/munge.seed", "--force"], check=True)
    conf = t / "slurm.conf"
    conf.write_text("\n".join([
        "ClusterName=spktest", f"SlurmctldHost={host}", f"SlurmUser={user}", f"SlurmdUser={user}",
        "AuthType=auth/munge", f"AuthInfo=socket={t}/munge.sock", "CredType=cred/munge",
        f"StateSaveLocation={t}/state", f"SlurmdSpoolDir={t}/spool",
        f"SlurmctldPidFile={t}/slurmctld.pid", f"SlurmdPidFile={t}/slurmd.pid",
        f"SlurmctldPort={free_port()}", f"SlurmdPort={free_port()}",
        "ProctrackType=proctrack/linuxproc", "TaskPlugin=task/none",
        "SchedulerType=sched/builtin", "SelectType=select/cons_tres",
        "SelectTypeParameters=CR_Core", "ReturnToService=2", "MpiDefault=none",
        "JobAcctGatherType=jobacct_gather/none", "AccountingStorageType=accounting_storage/none",
        f"SlurmctldLogFile={t}/slurmctld.log", f"SlurmdLogFile={t}/slurmd.log",
        f"NodeName={host} CPUs={os.cpu_count()} State=UNKNOWN",
        f"PartitionName=debug Nodes={host} Default=YES MaxTime=INFINITE State=UP", ""]))
    env = dict(os.environ, SLURM_CONF=str(conf))
    subprocess.run([tool("slurmctld"), "-c", "-f", str(conf)], check=True, env=env)
    subprocess.run([tool("slurmd"), "-f", str(conf)], check=True, env=env)
    try:
        deadline = time.monotonic() + 30
        while True:
            state = subprocess.run(["sinfo", "-h", "-o", "%t"], capture_output=True, text=True,
                                   env=env).stdout.strip()
            if state == "idle":
                break
            assert time.monotonic() < deadline, (
                f"the Slurm node never became idle (sinfo: {state!r})\n" +
                "\n".join((t / f).read_text(errors="replace")[-2000:]
                          for f in ("slurmctld.log", "slurmd.log") if (t / f).exists()))
            time.sleep(0.2)
        yield env
    finally:
        for daemon in ("slurmd", "slurmctld", "munged"):
            pid_file = t / f"{daemon}.pid"
            if pid_file.exists():
                try:
                    os.kill(int(pid_file.read_text().split()[0]), signal.SIGTERM)
                except (ProcessLookupError, ValueError):
                    pass


def test_a_slurm_job_array_writes_the_single_machine_bytes(source, slurm, spk_path, tmp_path):
    src, single = source
    dst = tmp_path / "out"
    env = dict(slurm, SPARKULATOR=spk_path)
    out = subprocess.run([str(SCRIPTS / "slurm-quantize.sh"), str(src), str(dst), str(PARTS),
                          "--no-fsync"], capture_output=True, text=True, env=env, check=True)
    jobs = dict(line.split() for line in out.stdout.splitlines())
    assert set(jobs) == {"parts", "merge"}, out.stdout
    deadline = time.monotonic() + 120
    while subprocess.run(["squeue", "-h", "-j", f"{jobs['parts']},{jobs['merge']}"],
                         capture_output=True, text=True, env=env).stdout.strip():
        assert time.monotonic() < deadline, "the Slurm jobs did not finish"
        time.sleep(0.2)
    work = Path(f"{dst}.parts")
    assert dst.is_dir(), (work / "merge.log").read_text(errors="replace")
    # Each array task wrote its part, with its record; the merge job waited for all three.
    for i in range(1, PARTS + 1):
        assert (work / f"part-{i}" / "sparkulator-part.json").is_file()
    assert f"{PARTS} part(s) merged, 5 shard(s)" in (work / "merge.log").read_text()
    assert_same_tree(dst, single)


def test_xargs_writes_the_single_machine_bytes(source, spk_path, tmp_path):
    src, single = source
    dst = tmp_path / "out"
    subprocess.run([str(SCRIPTS / "xargs-quantize.sh"), str(src), str(dst), str(PARTS),
                    "--no-fsync"], env=dict(os.environ, SPARKULATOR=spk_path), check=True,
                   capture_output=True)
    assert_same_tree(dst, single)
    assert not Path(f"{dst}.parts").exists()


def quantize_parts(spk, src, root: Path, *flags) -> list:
    root.mkdir(parents=True, exist_ok=True)
    parts = [root / f"part-{i}" for i in range(1, PARTS + 1)]
    written = []
    for i, part in enumerate(parts, 1):
        summary = spk("quantize", src, part, "--part", f"{i}/{PARTS}", "--no-fsync", "--json",
                      *flags)
        written += json.loads(summary.stdout)["part_shards"]
    assert sorted(written) == [f"model-0000{i}-of-00005.safetensors" for i in range(1, 6)]
    return parts


def test_nvfp4_partners_in_other_parts_share_the_single_machine_global_scale(source, spk,
                                                                             tmp_path):
    src, _ = source
    single = tmp_path / "single"
    spk("quantize", src, single, "--scheme", "NVFP4A16", "--no-fsync")
    parts = quantize_parts(spk, src, tmp_path, "--scheme", "NVFP4A16")
    dst = tmp_path / "merged"
    spk("merge", dst, *reversed(parts), "--no-fsync")
    assert_same_tree(dst, single)


def test_merge_refuses_parts_that_do_not_make_one_job(source, spk, tmp_path):
    src, _ = source
    parts = quantize_parts(spk, src, tmp_path / "w4")
    other = quantize_parts(spk, src, tmp_path / "w8", "--scheme", "W8A16")
    dst = tmp_path / "merged"
    cases = [
        ((parts[0], parts[1]), "part 3 of 3 is missing"),
        ((parts[0], parts[1], parts[1], parts[2]), "part 2 of 3 is given twice"),
        ((parts[0], other[1], parts[2]), "are parts of different jobs"),
        ((parts[0], parts[1], src), "is not a part of a split job"),
    ]
    for given, needle in cases:
        proc = spk("merge", dst, *given, expect=None)
        assert proc.returncode != 0 and needle in proc.stderr, (needle, proc.stderr)
        assert not dst.exists()
    # A shard changed after its part wrote it: same size, other bytes.
    shard = next(parts[1].glob("model-*.safetensors"))
    data = bytearray(shard.read_bytes())
    data[-1] ^= 0xFF
    shard.write_bytes(bytes(data))
    proc = spk("merge", dst, *parts, expect=None)
    assert proc.returncode != 0 and f"{shard} changed after part 2 wrote it" in proc.stderr, \
        proc.stderr
    assert not dst.exists() and not list(tmp_path.glob(".merged*"))


def test_the_old_shard_spelling_writes_the_same_part_and_says_it_is_old(source, spk, tmp_path):
    # --shard I/N was the first name of --part I/N; "shard" is a safetensors file everywhere else.
    src, _ = source
    new = tmp_path / "new"
    spk("quantize", src, new, "--part", f"2/{PARTS}", "--no-fsync")
    old = tmp_path / "old"
    run = spk("quantize", src, old, "--shard", f"2/{PARTS}", "--no-fsync")
    assert "--shard is the old name of --part" in run.stderr
    assert_same_tree(old, new)
    both = spk("quantize", src, tmp_path / "both", "--part", "1/3", "--shard", "1/3", expect=2)
    assert "excludes" in both.stderr and not (tmp_path / "both").exists()
    bad = spk("quantize", src, tmp_path / "bad", "--part", "4/3", expect=2)
    assert "--part 4/3: expected I/N with 1 <= I <= N" in bad.stderr
