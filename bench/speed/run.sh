#!/usr/bin/env bash
# End-to-end speed and memory of `sparkulator quantize` against copying the same checkpoint on the
# same disk, warm page cache, interleaved runs (the order reverses every round), medians.
#   run.sh SPARKULATOR CHECKPOINT_DIR [ROUNDS]
# Environment: WORK (scratch folder on the same disk, default: beside the checkpoint),
#   SCHEME (default w4a16), METHOD (default rtn), ARMS (default: all of them, see below).
# Arms, each compared with the copy that has the same durability:
#   cp     cp -r                         (returns with the data in the page cache)
#   cps    cp -r, then sync of the copy  (returns with the data on disk)
#   q      quantize, all cores           (default: fsync before the rename, like cps)
#   qn     quantize --no-fsync           (like cp)
#   qn1    quantize --no-fsync --threads 1
#   qn2    quantize --no-fsync --threads 2
#   qp     quantize --no-fsync with SPARKULATOR_READ=pread (source copied with pread, not mapped)
#   floor  cat of every source file to /dev/null: reading the checkpoint once from the page
#          cache, the least any tool that reads it all must spend
#   floorw the I/O floor of a quantizer: floor, then writing as many bytes as quantize's output
#          holds (each output file's size, from /dev/zero, with dd in 4 MiB blocks) into the page
#          cache; the output's sizes come from one quantize run before the rounds
#   floorw2 the same I/O split over two processes, as the two cores can share it: each reads
#          half of every source file (dd, 4 MiB blocks, to /dev/null) and writes half of every
#          output file's bytes into a file of its own (so no inode lock is shared): the least
#          any two-process tool that reads the source and writes the output must spend
# Quantize arms run with SPARKULATOR_READ unset (mapped reads) unless named otherwise.
# Prints one line per run and a summary with the ratios, peak RSS (MiB, /usr/bin/time -v), CPU
# time (user + system, /usr/bin/time -v) and the thread speedup (measured without fsync, so that
# it shows the compute, not the disk).
set -euo pipefail
spk=$(realpath "$1") ckpt=$(realpath "$2") rounds=${3:-5}
work=${WORK:-$(dirname "$ckpt")/bench-work.$$}
scheme=${SCHEME:-w4a16} method=${METHOD:-rtn}
arms=${ARMS:-cp cps q qn qn1 qn2 qp floor floorw floorw2}
mkdir -p "$work"
trap 'rm -rf "$work"' EXIT
command -v /usr/bin/time >/dev/null || { echo "install GNU time (apt-get install time)" >&2; exit 2; }

cat "$ckpt"/* >/dev/null # warm the page cache

now() { date +%s.%N; }
# run_copy SYNC: prints seconds
run_copy() {
  local t0 t1
  sync # nothing of an earlier run left to write back
  t0=$(now)
  cp -r "$ckpt" "$work/cp_out"
  if (($1)); then sync "$work/cp_out"/* "$work/cp_out"; fi
  t1=$(now)
  rm -rf "$work/cp_out"
  echo "$t1 - $t0" | bc -l
}
# run_floor: prints seconds
run_floor() {
  local t0 t1
  sync
  t0=$(now)
  cat "$ckpt"/* >/dev/null
  t1=$(now)
  echo "$t1 - $t0" | bc -l
}
# floorw2_half K: process K (0 or 1) of run_floorw2
floorw2_half() {
  local k=$1 f size name bytes half
  for f in "$ckpt"/*; do
    [[ -f $f ]] || continue
    size=$(stat -c %s "$f") half=$((size / 2))
    if ((k == 0)); then
      dd if="$f" of=/dev/null bs=4M count="$half" iflag=count_bytes status=none
    else
      dd if="$f" of=/dev/null bs=4M skip="$half" iflag=skip_bytes status=none
    fi
  done
  while read -r name bytes; do
    half=$((bytes / 2 + k * (bytes % 2)))
    dd if=/dev/zero of="$work/fw_out/$name.$k" bs=4M count="$half" iflag=count_bytes status=none
  done <"$work/out_sizes"
}
# run_floorw2: prints seconds
run_floorw2() {
  local t0 t1
  sync
  mkdir -p "$work/fw_out"
  t0=$(now)
  floorw2_half 0 &
  floorw2_half 1
  wait
  t1=$(now)
  rm -rf "$work/fw_out"
  echo "$t1 - $t0" | bc -l
}
# run_floorw: prints seconds (the sizes in $work/out_sizes: "NAME BYTES" per output file)
run_floorw() {
  local t0 t1 name bytes
  sync
  mkdir -p "$work/fw_out"
  t0=$(now)
  cat "$ckpt"/* >/dev/null
  while read -r name bytes; do
    dd if=/dev/zero of="$work/fw_out/$name" bs=4M count="$bytes" iflag=count_bytes status=none
  done <"$work/out_sizes"
  t1=$(now)
  rm -rf "$work/fw_out"
  echo "$t1 - $t0" | bc -l
}
# run_q THREADS READ EXTRA_FLAGS...: READ is mmap (the default) or pread (SPARKULATOR_READ=pread);
# prints "seconds rss_mib cpu_seconds"
run_q() {
  local t0 t1 rss cpu threads=$1 read=$2
  local envs=(env -u SPARKULATOR_READ)
  if [[ $read == pread ]]; then envs=(env SPARKULATOR_READ=pread); fi
  shift 2
  sync
  t0=$(now)
  "${envs[@]}" /usr/bin/time -v -o "$work/time.txt" "$spk" quantize "$ckpt" "$work/q_out" \
    --scheme "$scheme" --method "$method" --threads "$threads" "$@" >/dev/null
  t1=$(now)
  rss=$(awk -F: '/Maximum resident set size/ {print $2}' "$work/time.txt")
  cpu=$(awk -F: '/User time|System time/ {s += $2} END {print s}' "$work/time.txt")
  rm -rf "$work/q_out"
  echo "$(echo "$t1 - $t0" | bc -l) $((rss / 1024)) $cpu"
}
median() { sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }

: >"$work/rss"
if [[ " $arms " == *" floorw"* ]]; then # the output's file sizes, for floorw and floorw2
  "$spk" quantize "$ckpt" "$work/sizes_out" --scheme "$scheme" --method "$method" --no-fsync \
    >/dev/null
  (cd "$work/sizes_out" && find . -maxdepth 1 -type f -printf '%f %s\n') >"$work/out_sizes"
  rm -rf "$work/sizes_out"
fi
for arm in $arms; do : >"$work/$arm"; : >"$work/$arm.cpu"; done
for ((i = 1; i <= rounds; ++i)); do
  order=$arms
  if ((i % 2 == 0)); then order=$(echo "$arms" | tr ' ' '\n' | tac | tr '\n' ' '); fi
  for arm in $order; do
    cpu=
    case $arm in
      cp) t=$(run_copy 0) ;;
      cps) t=$(run_copy 1) ;;
      floor) t=$(run_floor) ;;
      floorw) t=$(run_floorw) ;;
      floorw2) t=$(run_floorw2) ;;
      q) read -r t rss cpu < <(run_q 0 mmap) ;;
      qn) read -r t rss cpu < <(run_q 0 mmap --no-fsync) ;;
      qn1) read -r t rss cpu < <(run_q 1 mmap --no-fsync) ;;
      qn2) read -r t rss cpu < <(run_q 2 mmap --no-fsync) ;;
      qp) read -r t rss cpu < <(run_q 0 pread --no-fsync) ;;
      *) echo "unknown arm $arm" >&2; exit 2 ;;
    esac
    echo "$t" >>"$work/$arm"
    case $arm in q*) echo "$rss" >>"$work/rss"; echo "$cpu" >>"$work/$arm.cpu"
        echo "round $i $arm: $t s, CPU $cpu s, peak RSS $rss MiB" ;;
      *) echo "round $i $arm: $t s" ;; esac
  done
done
declare -A m c
for arm in $arms; do
  m[$arm]=$(median <"$work/$arm")
  if [[ -s $work/$arm.cpu ]]; then c[$arm]=$(median <"$work/$arm.cpu"); fi
done
ratio() { [[ -n ${m[$1]:-} && -n ${m[$2]:-} ]] && printf "%.2f" "$(echo "${m[$1]} / ${m[$2]}" | bc -l)"; }
cpu_ratio() { [[ -n ${c[$1]:-} && -n ${c[$2]:-} ]] && printf "%.2f" "$(echo "${c[$1]} / ${c[$2]}" | bc -l)"; }
echo "---"
echo "checkpoint: $ckpt ($(du -sb "$ckpt" | cut -f1) bytes), $(nproc) cores," \
  "scheme $scheme, method $method, $rounds rounds, load average $(cut -d' ' -f1-3 /proc/loadavg)"
for arm in $arms; do
  printf "median %-7s %.3f s" "$arm" "${m[$arm]}"
  if [[ -n ${c[$arm]:-} ]]; then printf ", CPU %.3f s" "${c[$arm]}"; fi
  echo
done
r=$(ratio q cps) && echo "ratio quantize / (cp -r + sync), both on disk: $r"
r=$(ratio qn cp) && echo "ratio quantize --no-fsync / cp -r, both in page cache: $r"
r=$(ratio q cp) && echo "ratio quantize (fsync) / cp -r (no sync): $r"
r=$(ratio qn floor) && echo "ratio quantize --no-fsync / floor (reading the source once): $r"
r=$(ratio qn floorw) && echo "ratio quantize --no-fsync / I/O floor (reading the source, writing the output): $r"
r=$(ratio qn floorw2) && echo "ratio quantize --no-fsync / two-process I/O floor: $r"
r=$(ratio floorw2 cp) && echo "ratio two-process I/O floor / cp -r (no tool that reads the source and writes the output goes below it here): $r"
r=$(ratio qp cp) && echo "ratio quantize --no-fsync (pread) / cp -r: $r"
r=$(ratio qn qp) && echo "ratio mapped / pread reads (quantize --no-fsync), wall: $r"
r=$(cpu_ratio qn qp) && echo "ratio mapped / pread reads (quantize --no-fsync), CPU: $r"
r=$(ratio qn1 qn2) && echo "speedup 2 threads vs 1 (--no-fsync): $r"
echo "peak RSS (max over all quantize runs): $(sort -g "$work/rss" | tail -1) MiB"
