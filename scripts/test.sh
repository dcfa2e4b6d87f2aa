#!/usr/bin/env bash
# Installs, builds and runs every test:
#   1. the C++ unit and end-to-end suites (ctest),
#   2. the interop and end-to-end suites against the real Python libraries (pytest),
#   3. the C++ suites against an AddressSanitizer + UndefinedBehaviorSanitizer build (clang),
#   4. every libFuzzer target for a bounded time (scripts/fuzz.sh),
#   5. the Python suites against the sanitizer build's binaries.
# Usage: scripts/test.sh [--quick]   (--quick stops after step 2)
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
jobs=$(nproc)

echo "== build"
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSPK_TESTS=ON -DSPK_BENCH=ON >/dev/null
cmake --build build -j"$jobs"
echo "== C++ tests"
(cd build && ctest --output-on-failure -j"$jobs")
echo "== Python interop and end-to-end tests (with the vLLM CPU smoke run; SPK_E2E_VLLM=0 skips it)"
SPK_E2E_VLLM=${SPK_E2E_VLLM:-1} SPK_BUILD_DIR="$PWD/build" python3 -m pytest -q tests/python

if [ "${1:-}" = "--quick" ]; then exit 0; fi
echo "== C++ tests under ASan + UBSan"
CC=clang CXX=clang++ cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=Debug -DSPK_SANITIZE=ON \
  -DSPK_BENCH=OFF >/dev/null
cmake --build build-asan -j"$jobs"
export ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1
(cd build-asan && ctest --output-on-failure -j"$jobs")
echo "== fuzzing every parser"
scripts/fuzz.sh "${SPK_FUZZ_SECONDS:-15}"
echo "== Python suites against the ASan + UBSan binaries"
SPK_BUILD_DIR="$PWD/build-asan" python3 -m pytest -q tests/python \
  --ignore=tests/python/test_vllm_smoke.py
