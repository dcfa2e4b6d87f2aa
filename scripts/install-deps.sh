#!/usr/bin/env bash
# Installs everything sparkulator needs to build and test: Debian packages (compiler, libraries, Python
# with venv) and the Python libraries the interop tests run against (tests/requirements.txt), which go
# into the project's virtual environment .venv (see scripts/python-env.sh for SPK_PYTHON).
# Idempotent; needs root (or sudo) for apt-get.
# Usage: scripts/install-deps.sh [--no-python]   (--no-python: Debian packages only, for building)
set -euo pipefail
cd "$(dirname "$0")/.."
SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO=sudo; fi
export DEBIAN_FRONTEND=noninteractive
DEB_PACKAGES=(build-essential cmake ninja-build pkg-config git ca-certificates
  libhwy-dev nlohmann-json3-dev libcli11-dev libfmt-dev libpcre2-dev libxxhash-dev
  libgtest-dev libgmock-dev libbenchmark-dev clang clang-format libclang-rt-14-dev
  ccache  # scripts/test.sh compiles through it: a second build of the same sources is a cache read
  python3 python3-venv  # the test suites' virtual environment
  python3-dev  # Python.h, for the Python module (python/, pip install .)
  chromium  # headless Chromium renders the compare HTML report in tests/python/test_compare.py
  slurm-wlm munge)  # a one-node Slurm cluster runs scripts/distributed/ in tests/python/test_distributed.py
missing=()
for p in "${DEB_PACKAGES[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
if [ ${#missing[@]} -gt 0 ]; then
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi
if [ "${1:-}" = "--no-python" ]; then exit 0; fi

. scripts/python-env.sh
if [ -z "${SPK_PYTHON:-}" ] && ! "$SPK_PY" -c '' 2>/dev/null; then
  # Missing, or left behind by an interpreter that is gone: link .venv to the shared venv of these
  # pins, made afresh when it does not run (a half-made one is removed first).
  if ! "$SPK_VENV_SHARED/bin/python" -c '' 2>/dev/null; then
    rm -rf "$SPK_VENV_SHARED"
    mkdir -p "$(dirname "$SPK_VENV_SHARED")"
    python3 -m venv "$SPK_VENV_SHARED"
  fi
  rm -rf "$SPK_VENV"
  ln -s "$SPK_VENV_SHARED" "$SPK_VENV"
fi
# The pins keep the interop tests on the versions they were written for. pip takes torch from wherever its
# configuration points (find-links, index); from PyPI alone, torch 2.13.0 is the CUDA build (docs/install.md).
"$SPK_PY" -m pip install -q --disable-pip-version-check -r tests/requirements.txt
