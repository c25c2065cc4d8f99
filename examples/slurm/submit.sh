#!/usr/bin/env bash
# Submits a sharded ropescope scan to Slurm: a job array of N shards, then a merge that runs when every shard
# has succeeded. Prints the two job ids; the scan directory appears at OUT/scan, the jobs' logs in OUT/logs.
#
#   examples/slurm/submit.sh MODEL.gguf OUT N [scan options...]
#
# e.g. examples/slurm/submit.sh model.gguf runs/smollm2 4 --length 512 --analyses all
# Extra sbatch options (partition, account, time, CPUs per shard) go in SBATCH_* environment variables, which
# sbatch reads: SBATCH_PARTITION=gpu-free SBATCH_TIMELIMIT=2:00:00 examples/slurm/submit.sh ...
set -euo pipefail
[ $# -ge 3 ] || { echo "usage: $0 MODEL OUT N [scan options...]" >&2; exit 2; }
here=$(cd "$(dirname "$0")" && pwd)
model=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
mkdir -p "$2/logs"
out=$(cd "$2" && pwd)
n=$3
shift 3
case $n in ''|*[!0-9]*|0) echo "N must be a positive integer" >&2; exit 2 ;; esac
array=$(sbatch --parsable --array=0-$((n - 1)) --output="$out/logs/shard-%a.out" \
    "$here/scan-shard.sbatch" "$model" "$out" "$n" "$@")
array=${array%%;*}
merge=$(sbatch --parsable --dependency=afterok:"$array" --kill-on-invalid-dep=yes \
    --output="$out/logs/merge.out" "$here/merge.sbatch" "$out" "$n")
merge=${merge%%;*}
echo "$array $merge"
