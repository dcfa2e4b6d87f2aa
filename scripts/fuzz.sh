#!/usr/bin/env bash
# Builds every libFuzzer target with clang (ASan+UBSan) and runs each for SECONDS (default 20).
# Seeds come from tests/fuzz/corpus/<target>/ when present; new inputs go to a temporary folder, so the
# repository is not touched. A crash fails the script and leaves the reproducer in build-fuzz/crashes/.
# Usage: scripts/fuzz.sh [SECONDS]
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-20}
CC=clang CXX=clang++ cmake -S . -B build-fuzz -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSPK_FUZZ=ON \
  -DSPK_TESTS=OFF -DSPK_BENCH=OFF >/dev/null
cmake --build build-fuzz -j"$(nproc)" --target fuzzers
mkdir -p build-fuzz/crashes
failed=0
for fuzzer in build-fuzz/fuzz/*; do
  name=$(basename "$fuzzer")
  work=$(mktemp -d)
  seeds=()
  [ -d "tests/fuzz/corpus/$name" ] && seeds=("tests/fuzz/corpus/$name")
  if "$fuzzer" -max_total_time="$seconds" -artifact_prefix="build-fuzz/crashes/$name-" \
      "$work" "${seeds[@]}" >"build-fuzz/$name.log" 2>&1; then
    echo "fuzz $name: $(grep -o 'Done [0-9]* runs' "build-fuzz/$name.log" | tail -1) in ${seconds}s, no crash"
  else
    echo "fuzz $name: FAILED (see build-fuzz/$name.log)"; tail -20 "build-fuzz/$name.log"; failed=1
  fi
  rm -rf "$work"
done
exit $failed
