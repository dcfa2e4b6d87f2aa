#!/usr/bin/env bash
# Installs, builds and runs every test:
#   1. the C++ unit and end-to-end suites (ctest),
#   2. the interop and end-to-end suites against the real Python libraries (pytest in .venv), with the
#      vLLM CPU smoke run (tests/python/test_vllm_smoke.py: installs vLLM's CPU build into .venv-vllm,
#      about 1 GiB, and serves tiny models; ~12 minutes),
#   3. the C++ suites against an AddressSanitizer + UndefinedBehaviorSanitizer build (clang),
#   4. every libFuzzer target for a bounded time (scripts/fuzz.sh),
#   5. the Python suites against the sanitizer build's binaries.
# Usage: scripts/test.sh [--quick]
#   --quick: steps 1 and 2 without the vLLM smoke run (minutes).
# The Python interpreter is .venv's, or $SPK_PYTHON (scripts/python-env.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
quick=0
case "${1:-}" in
  --quick) quick=1 ;;
  "") ;;
  *) echo "usage: scripts/test.sh [--quick]" >&2; exit 2 ;;
esac
scripts/install-deps.sh
. scripts/python-env.sh
jobs=$(nproc)

# pytest_suites BUILD_DIR PYTEST_ARGS...: the Python suites against the binaries of BUILD_DIR. Skips are
# listed with their reasons (-rs); "no tests collected" (pytest's exit code 5) is a failure too.
pytest_suites() {
  local build=$1 rc=0
  shift
  SPK_BUILD_DIR="$build" "$SPK_PY" -m pytest -q -rs "$@" || rc=$?
  if [ "$rc" = 5 ]; then echo "error: pytest collected no tests from $*" >&2; fi
  return "$rc"
}

echo "== build"
# With the Python module (python/, nanobind from .venv), so that tests/python/test_python_api.py
# imports the package this build made without compiling the core a second time.
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSPK_TESTS=ON -DSPK_BENCH=ON \
  -DSPK_PYTHON_MODULE=ON -DPython_EXECUTABLE="$SPK_PY" \
  -Dnanobind_DIR="$("$SPK_PY" -m nanobind --cmake_dir)" >/dev/null
cmake --build build -j"$jobs"
echo "== C++ tests"
(cd build && ctest --output-on-failure -j"$jobs")
if [ "$quick" = 1 ]; then
  echo "== Python interop and end-to-end tests (--quick: without the vLLM CPU smoke run)"
  SPK_E2E_VLLM=0 pytest_suites "$PWD/build" tests/python --ignore=tests/python/test_vllm_smoke.py
  exit 0
fi
echo "== the vLLM CPU virtual environment (.venv-vllm) that the e2e suites serve with"
# Made before the suites run, so that the EAGLE-3 and Laguna suites (which come before the smoke
# test) find it; when it cannot be installed they and the smoke test say so and skip.
"$SPK_PY" -m tests.e2e.env --ensure-venv || echo "warning: vLLM's CPU build could not be installed"
echo "== Python interop and end-to-end tests, with the vLLM CPU smoke run"
SPK_E2E_VLLM=1 pytest_suites "$PWD/build" tests/python

echo "== C++ tests under ASan + UBSan"
CC=clang CXX=clang++ cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=Debug -DSPK_SANITIZE=ON \
  -DSPK_BENCH=OFF >/dev/null
cmake --build build-asan -j"$jobs"
export ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1
(cd build-asan && ctest --output-on-failure -j"$jobs")
echo "== fuzzing every parser"
scripts/fuzz.sh "${SPK_FUZZ_SECONDS:-15}"
echo "== Python suites against the ASan + UBSan binaries"
# The e2e suites test the harness and vLLM, not the binary: the release pass above covers them. The
# Python module is not built with the sanitizers (it would need ASan preloaded into Python).
pytest_suites "$PWD/build-asan" tests/python --ignore=tests/python/test_vllm_smoke.py \
  --ignore=tests/python/test_e2e_eagle3.py --ignore=tests/python/test_e2e_laguna.py \
  --ignore=tests/python/test_python_api.py
