#!/usr/bin/env bash
# End-to-end speed and memory of `sparkulator quantize` against `cp -r` of the same checkpoint on
# the same disk, warm page cache, interleaved runs (the order alternates every round), medians.
#   run.sh SPARKULATOR CHECKPOINT_DIR [ROUNDS]
# Environment: WORK (scratch folder on the same disk, default: beside the checkpoint),
#   SCHEME (default w4a16). Prints one line per run and a summary with the ratios:
#   quantize/cp wall time (all threads), peak RSS (MiB, /usr/bin/time -v), 1 vs 2 threads.
set -euo pipefail
spk=$(realpath "$1") ckpt=$(realpath "$2") rounds=${3:-5}
work=${WORK:-$(dirname "$ckpt")/bench-work.$$}
scheme=${SCHEME:-w4a16}
mkdir -p "$work"
trap 'rm -rf "$work"' EXIT
command -v /usr/bin/time >/dev/null || { echo "install GNU time (apt-get install time)" >&2; exit 2; }

cat "$ckpt"/* > /dev/null  # warm the page cache

now() { date +%s.%N; }
# run_cp: prints seconds
run_cp() {
  local t0 t1
  t0=$(now); cp -r "$ckpt" "$work/cp_out"; t1=$(now)
  rm -rf "$work/cp_out"
  echo "$t1 - $t0" | bc -l
}
# run_q THREADS: prints "seconds rss_mib"
run_q() {
  local t0 t1 rss
  t0=$(now)
  /usr/bin/time -v -o "$work/time.txt" "$spk" quantize "$ckpt" "$work/q_out" --scheme "$scheme" \
    --threads "$1" > /dev/null
  t1=$(now)
  rss=$(awk -F: '/Maximum resident set size/ {print $2}' "$work/time.txt")
  rm -rf "$work/q_out"
  echo "$(echo "$t1 - $t0" | bc -l) $((rss / 1024))"
}
median() { sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }

: > "$work/cp" ; : > "$work/q0" ; : > "$work/q1" ; : > "$work/q2" ; : > "$work/rss"
for ((i = 1; i <= rounds; ++i)); do
  if ((i % 2)); then order="cp q0 q1 q2"; else order="q2 q1 q0 cp"; fi
  for what in $order; do
    case $what in
      cp) t=$(run_cp); echo "$t" >> "$work/cp"; echo "round $i cp -r: $t s" ;;
      q0) read -r t rss < <(run_q 0); echo "$t" >> "$work/q0"; echo "$rss" >> "$work/rss"
          echo "round $i quantize (all cores): $t s, peak RSS $rss MiB" ;;
      q1) read -r t rss < <(run_q 1); echo "$t" >> "$work/q1"; echo "round $i quantize --threads 1: $t s, $rss MiB" ;;
      q2) read -r t rss < <(run_q 2); echo "$t" >> "$work/q2"; echo "round $i quantize --threads 2: $t s, $rss MiB" ;;
    esac
  done
done
cp_m=$(median < "$work/cp"); q0_m=$(median < "$work/q0"); q1_m=$(median < "$work/q1")
q2_m=$(median < "$work/q2"); rss_max=$(sort -g "$work/rss" | tail -1)
echo "---"
echo "checkpoint: $ckpt ($(du -sb "$ckpt" | cut -f1) bytes), $(nproc) cores, scheme $scheme, $rounds rounds"
printf "median cp -r %.3f s, quantize %.3f s (all cores), %.3f s (1 thread), %.3f s (2 threads)\n" \
  "$cp_m" "$q0_m" "$q1_m" "$q2_m"
printf "ratio quantize/cp -r: %.2f\n" "$(echo "$q0_m / $cp_m" | bc -l)"
printf "speedup 2 threads vs 1: %.2f\n" "$(echo "$q1_m / $q2_m" | bc -l)"
echo "peak RSS (max over all-core runs): $rss_max MiB"
