#!/usr/bin/env bash
# Runs every libFuzzer target (ASan+UBSan, clang) for SECONDS (default 20), two at a time on two or
# more cores. With BUILD_DIR (scripts/test.sh passes its sanitizer build, configured with
# -DSPK_FUZZ=ON) the targets are built there; without it, in build-fuzz, configured here.
# Seeds come from tests/fuzz/corpus/<target>/ when present; new inputs go to a temporary folder, so the
# repository is not touched. A crash fails the script and leaves the reproducer in BUILD_DIR/crashes/.
# Usage: scripts/fuzz.sh [SECONDS] [BUILD_DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-20}
build=${2:-}
if [ -z "$build" ]; then
  build=build-fuzz
  CC=clang CXX=clang++ cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DSPK_FUZZ=ON -DSPK_TESTS=OFF -DSPK_BENCH=OFF >/dev/null
fi
cmake --build "$build" -j"$(nproc)" --target fuzzers
mkdir -p "$build/crashes"
lanes=$(( $(nproc) >= 2 ? 2 : 1 ))

# fuzz_one TARGET: runs one target for SECONDS; prints one line, exit 1 on a crash.
fuzz_one() {
  local fuzzer=$1 name work seeds=() rc=0
  name=$(basename "$fuzzer")
  work=$(mktemp -d)
  [ -d "tests/fuzz/corpus/$name" ] && seeds=("tests/fuzz/corpus/$name")
  if "$fuzzer" -max_total_time="$seconds" -artifact_prefix="$build/crashes/$name-" \
      "$work" "${seeds[@]}" >"$build/$name.log" 2>&1; then
    echo "fuzz $name: $(grep -o 'Done [0-9]* runs' "$build/$name.log" | tail -1) in ${seconds}s, no crash"
  else
    echo "fuzz $name: FAILED (see $build/$name.log)"; tail -20 "$build/$name.log"; rc=1
  fi
  rm -rf "$work"
  return "$rc"
}

failed=0
pids=()
for fuzzer in "$build"/fuzz/*; do
  fuzz_one "$fuzzer" &
  pids+=($!)
  if [ ${#pids[@]} -ge "$lanes" ]; then wait "${pids[0]}" || failed=1; pids=("${pids[@]:1}"); fi
done
for pid in "${pids[@]}"; do wait "$pid" || failed=1; done
exit $failed
