#!/usr/bin/env bash
# Time of `sparkulator quantize --method search` against `--method rtn` on the same checkpoint, same
# thread count, warm page cache, interleaved runs (the order alternates every round), medians.
#   time.sh SPARKULATOR CHECKPOINT_DIR [ROUNDS] [THREADS]
# Environment: WORK (scratch folder on the same disk, default: beside the checkpoint),
#   SCHEME (default w4a16; any --scheme of quantize, e.g. w4a16-asym, w8a16-asym). Prints one line
#   per run, then the medians of the wall time and of the CPU time (user + sys, bash's `time` in
#   milliseconds: GNU time's 10 ms steps are too coarse for small checkpoints) of each method and the
#   ratios search / RTN.
set -euo pipefail
spk=$(realpath "$1") ckpt=$(realpath "$2") rounds=${3:-5} threads=${4:-0}
work=${WORK:-$(dirname "$ckpt")/time-work.$$}
scheme=${SCHEME:-w4a16}
mkdir -p "$work"
trap 'rm -rf "$work"' EXIT

cat "$ckpt"/* > /dev/null  # warm the page cache

# run METHOD: prints "wall_seconds cpu_seconds"
run() {
  local TIMEFORMAT='%3R %3U %3S'
  { time "$spk" quantize "$ckpt" "$work/out" --scheme "$scheme" --method "$1" \
    --threads "$threads" --force > /dev/null 2> "$work/stderr.txt" ||
    { cat "$work/stderr.txt" >&2; exit 1; }; } 2> "$work/time.txt"
  rm -rf "$work/out"
  awk '{printf "%.3f %.3f\n", $1, $2 + $3}' "$work/time.txt"
}
median() { sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }

: > "$work/rtn"; : > "$work/search"
for ((i = 1; i <= rounds; ++i)); do
  if ((i % 2)); then order="rtn search"; else order="search rtn"; fi
  for m in $order; do
    read -r wall cpu < <(run "$m")
    echo "$wall $cpu" >> "$work/$m"
    echo "round $i $m: wall $wall s, cpu $cpu s"
  done
done
rw=$(cut -d' ' -f1 "$work/rtn" | median); rc=$(cut -d' ' -f2 "$work/rtn" | median)
sw=$(cut -d' ' -f1 "$work/search" | median); sc=$(cut -d' ' -f2 "$work/search" | median)
echo "---"
echo "checkpoint: $ckpt ($(du -sb "$ckpt" | cut -f1) bytes), $(nproc) cores, --threads $threads," \
  "scheme $scheme, $rounds rounds, load $(cut -d' ' -f1-3 /proc/loadavg)"
printf "median wall: rtn %.3f s, search %.3f s, search / rtn %.2f\n" "$rw" "$sw" \
  "$(echo "$sw / $rw" | bc -l)"
printf "median cpu (user+sys): rtn %.3f s, search %.3f s, search / rtn %.2f\n" "$rc" "$sc" \
  "$(echo "$sc / $rc" | bc -l)"
