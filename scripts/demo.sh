#!/usr/bin/env bash
# The main job on a built-in example: installs the build dependencies, builds sparkulator, writes a small
# DFlash-shaped draft, quantizes it to W4A16 (compressed-tensors pack-quantized) and inspects the result.
# Usage: scripts/demo.sh [WORKDIR]   (default: ./demo)
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh --no-python
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build -j"$(nproc)" --target sparkulator
work=${1:-demo}
mkdir -p "$work"
set -x
build/sparkulator example "$work/dflash-draft" --family dflash --force
build/sparkulator inspect "$work/dflash-draft"
build/sparkulator quantize "$work/dflash-draft" "$work/dflash-draft-W4A16" --force
build/sparkulator inspect "$work/dflash-draft-W4A16"
