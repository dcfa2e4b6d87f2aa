#!/usr/bin/env bash
# Installs everything sparkulator needs to build and test: Debian packages (compiler, libraries) and the
# Python libraries the interop tests run against. Idempotent; needs root (or sudo) for apt-get.
set -euo pipefail
SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO=sudo; fi
export DEBIAN_FRONTEND=noninteractive
DEB_PACKAGES=(build-essential cmake ninja-build pkg-config git
  libhwy-dev nlohmann-json3-dev libcli11-dev libfmt-dev libpcre2-dev
  libgtest-dev libgmock-dev libbenchmark-dev clang clang-format libclang-rt-14-dev
  chromium)  # headless Chromium renders the compare HTML report in tests/python/test_compare.py
missing=()
for p in "${DEB_PACKAGES[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
if [ ${#missing[@]} -gt 0 ]; then
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi
if [ "${1:-}" != "--no-python" ]; then
  # torch 2.13.0 is the CPU build; the pins keep the interop tests on the versions they were written for.
  python3 -m pip install -q --disable-pip-version-check -r "$(dirname "$0")/../tests/requirements.txt"
fi
