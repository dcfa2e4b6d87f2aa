#!/usr/bin/env bash
# One quantize job split into N parts run side by side with xargs -P (one machine, or several
# sharing a file system through a launcher that wraps the command), then merged: the result is
# byte for byte `sparkulator quantize SRC DST ...` (docs/distributed.md).
#   scripts/distributed/xargs-quantize.sh SRC DST N [quantize flags...]
# Environment: SPARKULATOR (default: sparkulator on PATH), PARALLEL (parts at once, default N),
# WORK (where the parts go, default DST.parts; removed after a successful merge).
set -euo pipefail
if [ $# -lt 3 ]; then
  echo "usage: $0 SRC DST N [quantize flags...]" >&2
  exit 2
fi
src=$1 dst=$2 n=$3
shift 3
spk=${SPARKULATOR:-sparkulator}
work=${WORK:-$dst.parts}
mkdir -p "$work"
seq 1 "$n" | xargs -P "${PARALLEL:-$n}" -I{} \
  "$spk" quantize "$src" "$work/part-{}" --part "{}/$n" --resume "$@"
parts=()
for i in $(seq 1 "$n"); do parts+=("$work/part-$i"); done
"$spk" merge "$dst" "${parts[@]}"
rm -rf "$work"
