#!/usr/bin/env bash
# The CPU seconds of a cold build of the `sparkulator` target (what scripts/demo.sh compiles), file
# by file (SPK_UNITY=OFF) against the unity build (SPK_UNITY=ON, the default), from empty build
# folders, one after the other on the same machine, with the CPU seconds (user + sys) of every
# translation unit. Prints a Markdown table (the heaviest units of each build and the totals) and
# writes the raw per-unit times to OUT (default: bench/build/out).
#   bench/build/cold_build.sh [OUT]     (JOBS=N sets the parallel compiles, default all cores)
# No ccache: each compile is timed. About 13 CPU-minutes file by file on a 2-core AMD EPYC host.
set -euo pipefail
cd "$(dirname "$0")/../.."
out=$(realpath -m "${1:-bench/build/out}")
jobs=${JOBS:-$(nproc)}
command -v /usr/bin/time >/dev/null || { echo "install GNU time (apt-get install time)" >&2; exit 2; }
mkdir -p "$out"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
for unity in OFF ON; do
  times="$out/unity-$unity.txt"
  : >"$times"
  cmake -S . -B "$work/$unity" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSPK_UNITY=$unity \
    -DCMAKE_CXX_COMPILER_LAUNCHER="$PWD/bench/build/time_compile.sh" >/dev/null
  start=$(date +%s)
  SPK_COMPILE_TIMES="$times" cmake --build "$work/$unity" -j"$jobs" --target sparkulator >/dev/null
  echo "wall $(($(date +%s) - start))" >"$out/unity-$unity.wall"
done
python3 - "$out" <<'PY'
import sys
from pathlib import Path

out = Path(sys.argv[1])
def units(unity):
    rows = []
    for line in (out / f"unity-{unity}.txt").read_text().splitlines():
        user, system, _, obj = line.split(maxsplit=3)
        rows.append((float(user) + float(system), obj.split("CMakeFiles/")[-1]))
    return sorted(rows, reverse=True)
off, on = units("OFF"), units("ON")
total_off, total_on = sum(t for t, _ in off), sum(t for t, _ in on)
wall = {u: (out / f"unity-{u}.wall").read_text().split()[1] for u in ("OFF", "ON")}
print("| build | units | CPU s | wall s |\n|---|---|---|---|")
print(f"| file by file | {len(off)} | {total_off:.0f} | {wall['OFF']} |")
print(f"| unity (default) | {len(on)} | {total_on:.0f} | {wall['ON']} |")
print(f"\nunity / file by file, CPU seconds: {total_on / total_off:.2f}\n")
for name, rows in (("file by file", off), ("unity", on)):
    print(f"Heaviest units, {name}:\n\n| CPU s | unit |\n|---|---|")
    for t, obj in rows[:15]:
        print(f"| {t:.1f} | {obj} |")
    print()
PY
