#!/usr/bin/env python3
"""A new vLLM release's module map in one command (the release procedure).

From the repository root, with the project's .venv (any Python with pip and packaging):

    .venv/bin/python tools/vllm_module_map/release.py 0.34.0

1. pip downloads vllm==V's wheel (no dependencies) into the cache (wheel.cache_root());
2. unpacks its Python code (no compiled extensions) into a folder keyed by the wheel's sha256;
3. makes the release's environment there (`--env-only` stops here): a venv with the wheel's own Requires-Dist pins, a
   CPU torch substituted for its CUDA torch and CUDA-only packages stood in (release_env.py);
   `--venv PY` uses an existing venv's interpreter instead (pins not installed, recorded so);
4. runs generate.py --release V=SRC in that environment (CUDA faked, --cc), which writes
   data/vllm_module_map/vllm-V.json with the "environment" object, and rewrites
   docs/draft-kinds.md (its "Changes since the previous release" sections included);
5. prints what each step cost in time and the cache's disk use.

Both the wheel and the venv are reused by a second run with the same wheel (same sha256).

Error policy: a failing step stops the command with its exit status (pip's, or generate.py's:
no map is written for a release whose generator fails); nothing is written into the repository
before step 4.
"""
from __future__ import annotations

import argparse
import json
import pathlib
import subprocess
import sys
import time

REPO = pathlib.Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from tools.vllm_module_map import fake_cuda, release_env, wheel  # noqa: E402

GEN = REPO / "tools" / "vllm_module_map" / "generate.py"


def disk(path: pathlib.Path) -> int:
    return sum(f.lstat().st_size for f in path.rglob("*") if f.is_file() and not f.is_symlink())


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("version", help="the vLLM release, e.g. 0.34.0")
    ap.add_argument("--venv", help="an existing venv's python instead of a venv per release")
    ap.add_argument("--cc", type=int, default=fake_cuda.DEFAULT_CC, help="faked CUDA capability")
    ap.add_argument("--env-only", action="store_true",
                    help="stop after step 3: the release's environment, for the load probe "
                         "(scripts/test.sh's install makes one per mapped release without a CPU "
                         "build); nothing is written into the repository")
    ap.add_argument("--only", action="append", help="architectures to build (debugging)")
    args = ap.parse_args()
    times: dict[str, float] = {}
    t = time.monotonic()
    root = wheel.cache_root()
    whl = wheel.download(args.version, root / "wheels")
    digest = wheel.sha256(whl)
    folder = root / wheel.cache_key(digest)
    times["download"] = time.monotonic() - t
    t = time.monotonic()
    src = wheel.unpack(whl, folder / "src")
    times["unpack"] = time.monotonic() - t
    t = time.monotonic()
    if args.venv:
        ver = subprocess.run([args.venv, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
                             capture_output=True, text=True, check=True).stdout.strip()
        classified = wheel.classify(wheel.pins(wheel.metadata(src), ver))
        python, env = args.venv, release_env.shared_env(args.venv, classified)
    else:
        classified = wheel.classify(wheel.pins(wheel.metadata(src), "%d.%d" % sys.version_info[:2]))
        print(f"environment for {whl.name} in {folder}", file=sys.stderr)
        python, env = release_env.make_env(folder, classified,
                                           log=lambda s: print(s, file=sys.stderr))
    env = {**env, "wheel": {"name": whl.name, "sha256": digest}}
    times["environment"] = time.monotonic() - t
    env_file = folder / "environment.json"
    env_file.write_text(json.dumps(env, indent=1, sort_keys=True) + "\n")
    if args.env_only:
        print(f"environment: {times['environment']:.0f} s ({folder})", file=sys.stderr)
        return 0
    t = time.monotonic()
    cmd = [str(python), str(GEN), "--release", f"{args.version}={src}", "--cc", str(args.cc),
           "--environment", str(env_file), "--docs"]
    for a in args.only or []:
        cmd += ["--only", a]
    rc = subprocess.run(cmd, cwd=REPO).returncode
    times["generate"] = time.monotonic() - t
    for step, s in times.items():
        print(f"{step}: {s:.0f} s", file=sys.stderr)
    print(f"disk: wheel {whl.stat().st_size / 2**20:.0f} MiB, unpacked "
          f"{disk(src) / 2**20:.0f} MiB, venv {disk(folder / 'venv') / 2**20:.0f} MiB "
          f"({folder})", file=sys.stderr)
    return rc


if __name__ == "__main__":
    sys.exit(main())
