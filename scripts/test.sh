#!/usr/bin/env bash
# Installs, builds and runs every test: the C++ unit and end-to-end suites (ctest), the interop suites
# against the real Python libraries (pytest), and the unit tests again under ASan+UBSan.
# Usage: scripts/test.sh [--quick]   (--quick skips the sanitizer build)
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
jobs=$(nproc)

cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build -j"$jobs"
(cd build && ctest --output-on-failure -j"$jobs")

SPK_BIN="$PWD/build/sparkulator" python3 -m pytest -q tests/python

if [ "${1:-}" != "--quick" ]; then
  CC=clang CXX=clang++ cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=Debug -DSPK_SANITIZE=ON \
    -DSPK_BENCH=OFF >/dev/null
  cmake --build build-asan -j"$jobs"
  (cd build-asan && ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
    ctest --output-on-failure -j"$jobs")
fi
