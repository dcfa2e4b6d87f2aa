#!/usr/bin/env bash
# One quantize job split across a Slurm cluster: a job array of N tasks, task I running
# `sparkulator quantize SRC WORK/part-I --part I/N`, and a merge job that starts when every task
# succeeded (afterok), writing DST byte for byte as one machine would (docs/distributed.md).
# SRC, WORK and DST must be on a file system every node sees. A task that fails (a node lost, a
# time limit) is simply submitted again: each part runs with --resume and takes over the shards it
# finished.
#   scripts/distributed/slurm-quantize.sh SRC DST N [quantize flags...]
# Environment: SPARKULATOR (default: sparkulator on PATH), WORK (default DST.parts),
# SBATCH_FLAGS (extra sbatch flags for both jobs, e.g. "--partition=cpu --time=2:00:00").
# Prints the two job ids ("parts JOBID" and "merge JOBID"); `squeue`/`sacct` follow them.
set -euo pipefail
if [ $# -lt 3 ]; then
  echo "usage: $0 SRC DST N [quantize flags...]" >&2
  exit 2
fi
src=$(realpath "$1") dst=$(realpath -m "$2") n=$3
shift 3
spk=$(command -v "${SPARKULATOR:-sparkulator}")
work=$(realpath -m "${WORK:-$dst.parts}")
mkdir -p "$work"
flags=$(printf ' %q' "$@")
# shellcheck disable=SC2086  # SBATCH_FLAGS is a list of flags
parts=$(sbatch --parsable ${SBATCH_FLAGS:-} --job-name=spk-quantize --array="1-$n" \
  --output="$work/part-%a.log" --wrap \
  "$(printf '%q' "$spk") quantize $(printf '%q' "$src") $(printf '%q' "$work")/part-\$SLURM_ARRAY_TASK_ID --part \$SLURM_ARRAY_TASK_ID/$n --resume$flags")
list=""
for i in $(seq 1 "$n"); do list+=" $(printf '%q' "$work/part-$i")"; done
# shellcheck disable=SC2086
merge=$(sbatch --parsable ${SBATCH_FLAGS:-} --job-name=spk-merge --dependency="afterok:$parts" \
  --output="$work/merge.log" --wrap "$(printf '%q' "$spk") merge $(printf '%q' "$dst")$list")
echo "parts $parts"
echo "merge $merge"
