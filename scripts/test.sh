#!/usr/bin/env bash
# Installs, builds and runs every test, phase by phase (docs/testing.md gives each phase's budget):
#   install      Debian packages, .venv (tests/requirements.txt) and, unless --quick, vLLM's CPU build
#                in .venv-vllm (tests.e2e.env),
#   build        the release build with the Python module,
#   ctest        the C++ unit and end-to-end suites,
#   pytest       the interop suites against the real Python libraries and, unless --quick, the vLLM
#                tier (the e2e smoke on vLLM's CPU build, the EAGLE-3 and Laguna suites),
#   build-asan   one clang build with ASan + UBSan at -O1 that also holds the libFuzzer targets,
#   ctest-asan   the C++ suites under the sanitizers,
#   fuzz         every libFuzzer target for a bounded time (scripts/fuzz.sh, on build-asan),
#   pytest-asan  the Python tests whose verdict depends on the binary (those that use conftest's
#                binary fixtures; tests/python/suite_policy.py), against the sanitizer build.
# It ends with a table of each phase's wall time; pytest prints its slowest tests (--durations).
# Reference results of the Python libraries and trained e2e models are cached by content hash
# (~/.cache/sparkulator/refs, ~/.cache/sparkulator/e2e) and compiles by ccache: a warm run is faster,
# never different.
# Usage: scripts/test.sh [--quick]
#   --quick: install (without vLLM), build, ctest and the Python suites without the vLLM tier.
# Environment: SPK_REQUIRE=vllm (.ci/run sets it): a vLLM that cannot be installed fails the run, and
#   a skipped test outside suite_policy.py's allow-list fails its suite. SPK_FUZZ_SECONDS: per target
#   (default 15). SPK_PYTEST_WORKERS: pytest processes (default: the cores, at most 4). The Python interpreter is .venv's, or $SPK_PYTHON (scripts/python-env.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
quick=0
case "${1:-}" in
  --quick) quick=1 ;;
  "") ;;
  *) echo "usage: scripts/test.sh [--quick]" >&2; exit 2 ;;
esac
jobs=$(nproc)
suite_start=$(date +%s)
phases=()

# phase NAME COMMAND...: runs COMMAND, records its wall time (and "FAILED" when it fails).
phase() {
  local name=$1 start rc=0
  shift
  echo "== $name"
  start=$(date +%s)
  "$@" || rc=$?
  phases+=("$(printf '%-12s %6ss%s' "$name" "$(($(date +%s) - start))" \
    "$([ "$rc" = 0 ] || echo "  FAILED (exit $rc)")")")
  return "$rc"
}

phase_table() {
  local rc=$?
  echo
  echo "== phase times (wall clock; budget per phase: docs/testing.md)"
  printf '%s\n' "${phases[@]}"
  printf '%-12s %6ss\n' "total" "$(($(date +%s) - suite_start))"
  return "$rc"
}
trap phase_table EXIT

# pytest_suites BUILD_DIR PYTEST_ARGS...: the Python suites against the binaries of BUILD_DIR, in
# $SPK_PYTEST_WORKERS processes (default: the cores, at most 4; 1 runs them in this one), each
# group of tests on one worker (tests/python/suite_policy.py rule 4). Skips are listed with their
# reasons (-rs), the 25 slowest tests at the end; "no tests collected" (pytest's exit code 5) is a
# failure too.
pytest_workers=${SPK_PYTEST_WORKERS:-$((jobs < 4 ? jobs : 4))}
pytest_suites() {
  local build=$1 rc=0 workers=()
  shift
  if [ "$pytest_workers" -gt 1 ]; then workers=(-n "$pytest_workers" --dist loadgroup); fi
  SPK_BUILD_DIR="$build" "$SPK_PY" -m pytest -q -rs --durations=25 "${workers[@]}" "$@" || rc=$?
  if [ "$rc" = 5 ]; then echo "error: pytest collected no tests from $*" >&2; fi
  return "$rc"
}

# vllm_venv: vLLM's CPU build in .venv-vllm, which the vLLM tier serves with. Without it the vLLM
# tests skip, which SPK_REQUIRE=vllm turns into failures; a failed install fails the run there.
vllm_venv() {
  if "$SPK_PY" -m tests.e2e.env --ensure-venv; then return 0; fi
  if [[ "${SPK_REQUIRE:-}" == *vllm* ]]; then
    echo "error: vLLM's CPU build could not be installed, and SPK_REQUIRE=$SPK_REQUIRE" >&2
    return 1
  fi
  echo "warning: vLLM's CPU build could not be installed: the vLLM tier will skip" >&2
}

# release_envs: an environment per mapped vLLM release that has no CPU build (its map records a
# faked platform: 0.33.0, 0.34.0), made by release.py --env-only (about 3 GiB and 5 minutes each,
# reused by later runs), for the load probe of tests/python/test_load_probe_releases.py.
release_envs() {
  local release
  for release in $("$SPK_PY" -c 'import json, pathlib
for p in sorted(pathlib.Path("data/vllm_module_map").glob("vllm-*.json")):
    m = json.loads(p.read_text())
    if m.get("faked_platform"): print(m["vllm_version"])'); do
    if "$SPK_PY" tools/vllm_module_map/release.py "$release" --env-only; then continue; fi
    if [[ "${SPK_REQUIRE:-}" == *vllm* ]]; then
      echo "error: vLLM $release's environment could not be made, and SPK_REQUIRE=$SPK_REQUIRE" >&2
      return 1
    fi
    echo "warning: vLLM $release's environment could not be made: its load probe will skip" >&2
  done
}

install() {
  scripts/install-deps.sh
  . scripts/python-env.sh
  if [ "$quick" = 0 ]; then vllm_venv && release_envs; fi
}

# configure DIR CMAKE_ARGS...: a Ninja build folder, compiled through ccache when it is installed.
# Paths are hashed relative to the checkout, so a clone in another folder (CI's) hits the same cache.
export CCACHE_BASEDIR="$PWD" CCACHE_NOHASHDIR=1
configure() {
  local dir=$1 launcher=()
  shift
  if command -v ccache >/dev/null; then launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache
    -DCMAKE_C_COMPILER_LAUNCHER=ccache); fi
  cmake -S . -B "$dir" -G Ninja "${launcher[@]}" "$@" >/dev/null
}

build_release() {
  # With the Python module (python/, nanobind from .venv), so that tests/python/test_python_api.py
  # imports the package this build made without compiling the core a second time.
  configure build -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSPK_TESTS=ON -DSPK_BENCH=ON \
    -DSPK_PYTHON_MODULE=ON -DPython_EXECUTABLE="$SPK_PY" \
    -Dnanobind_DIR="$("$SPK_PY" -m nanobind --cmake_dir)"
  cmake --build build -j"$jobs"
}

build_asan() {
  # One sanitizer build for the C++ suites, the fuzzers and the binary-dependent Python tests: clang,
  # ASan + UBSan (no recovery), libFuzzer's coverage hooks, -O1 (asserts stay on). File by file
  # (SPK_UNITY=OFF): the release build is a unity build, so this one is where a source that compiles
  # only on the includes of its batch fails.
  CC=clang CXX=clang++ configure build-asan -DCMAKE_BUILD_TYPE=Debug -DCMAKE_C_FLAGS_DEBUG="-g -O1" \
    -DCMAKE_CXX_FLAGS_DEBUG="-g -O1" -DSPK_SANITIZE=ON -DSPK_FUZZ=ON -DSPK_BENCH=OFF -DSPK_UNITY=OFF
  cmake --build build-asan -j"$jobs" --target all fuzzers
}

ctest_in() { (cd "$1" && ctest --output-on-failure -j"$jobs"); }

# Builds stop the run when they fail; test phases run on, and the run fails at the end if one did.
failed=()
run_tests() { phase "$@" || failed+=("$1"); }
finish() {
  if [ ${#failed[@]} -gt 0 ]; then echo "FAILED phases: ${failed[*]}" >&2; exit 1; fi
  exit 0
}

phase install install
. scripts/python-env.sh
phase build build_release
run_tests ctest ctest_in build
if [ "$quick" = 1 ]; then
  SPK_E2E_VLLM=0 run_tests pytest pytest_suites "$PWD/build" tests/python \
    --ignore=tests/python/test_vllm_smoke.py
  finish
fi
SPK_E2E_VLLM=1 run_tests pytest pytest_suites "$PWD/build" tests/python
phase build-asan build_asan
export ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1
run_tests ctest-asan ctest_in build-asan
run_tests fuzz scripts/fuzz.sh "${SPK_FUZZ_SECONDS:-15}" build-asan
# The tests that use the binary fixtures and no release-only one (suite_policy.py): not the Python
# package's (the module is not built with the sanitizers) nor the vLLM-served ones.
SPK_BINARY_ONLY=1 run_tests pytest-asan pytest_suites "$PWD/build-asan" tests/python
finish
