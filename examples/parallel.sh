#!/usr/bin/env bash
# A sharded ropescope scan on one machine with GNU parallel: N shards, JOBS at a time (default: all N), each
# with THREADS threads (default 1), then the merge into OUT/scan, the directory one unsharded scan writes.
#
#   examples/parallel.sh MODEL.gguf OUT N [scan options...]
#
# e.g. JOBS=2 examples/parallel.sh model.gguf runs/smollm2 4 --length 512
# ROPESCOPE names the binary (default: `ropescope` on PATH). On a cluster, examples/slurm/submit.sh does the
# same with a Slurm job array.
set -euo pipefail
[ $# -ge 3 ] || { echo "usage: $0 MODEL OUT N [scan options...]" >&2; exit 2; }
model=$1 out=$2 n=$3
shift 3
case $n in ''|*[!0-9]*|0) echo "N must be a positive integer" >&2; exit 2 ;; esac
bin=${ROPESCOPE:-ropescope}
mkdir -p "$out"
seq 0 $((n - 1)) | parallel --halt now,fail=1 -j "${JOBS:-$n}" -q \
    "$bin" --threads "${THREADS:-1}" scan "$model" --shard "{}/$n" --out "$out/shard-{}" --force --quiet "$@"
shards=()
for ((k = 0; k < n; k++)); do shards+=("$out/shard-$k"); done
"$bin" merge "${shards[@]}" --out "$out/scan" --force --quiet > /dev/null
echo "$out/scan"
