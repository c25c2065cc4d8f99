#!/usr/bin/env bash
# ropescope at the papers' sizes, on random-weight files of real 7B/8B layouts: time and peak memory of writing
# them (`synth`), of the streaming scan, and of the float64 reference of one 512-token prompt.
#
#   benches/scale.sh [BINARY]        (default: target/release/ropescope; build it with cargo build --release)
#
# Files (about 4.7 GB each) go to $ROPESCOPE_CACHE/synth (default ~/.cache/ropescope/synth) and are reused when
# present; outputs to a temporary directory. Prints one line per step: wall seconds, peak RSS (GNU time), the
# file size, and peak RSS minus the file size (the issue's bounds: scan ≤ 2 GiB, reference ≤ 4 GiB over it).
# Needs GNU time (/usr/bin/time, Debian package `time`).
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
bin="${1:-$here/target/release/ropescope}"
cache="${ROPESCOPE_CACHE:-$HOME/.cache/ropescope}"
models="$("$here/fixtures/models.sh" --path)"
synth_dir="$cache/synth"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
mkdir -p "$synth_dir"

# step NAME FILE CMD...: runs CMD under GNU time and prints its figures.
step() {
    local name="$1" file="$2"
    shift 2
    /usr/bin/time -f '%e %M' -o "$work/time" "$@" >"$work/out" 2>"$work/err" || {
        echo "$name: failed" >&2
        cat "$work/err" >&2
        exit 1
    }
    local secs kib size
    read -r secs kib <"$work/time"
    size=$(stat -c %s "$file")
    awk -v n="$name" -v s="$secs" -v k="$kib" -v f="$size" 'BEGIN {
        printf "%-28s %8.1f s   peak RSS %6.2f GiB   file %5.2f GiB   RSS - file %6.2f GiB\n",
            n, s, k / 1048576, f / 2^30, (k * 1024 - f) / 2^30 }'
}

qwen="$synth_dir/qwen7b-q4km.gguf"
llama="$synth_dir/llama-3.1-8b-q4k.gguf"
[[ -f "$qwen" ]] || step "synth qwen2 7B (keep)" "$qwen" \
    "$bin" synth --quiet --like "$models/DeepSeek-R1-Distill-Qwen-7B-Q4_K_M.head.gguf" --out "$qwen"
[[ -f "$llama" ]] || step "synth llama-3.1-8b (Q4_K)" "$llama" \
    "$bin" synth --quiet --like llama-3.1-8b --quant Q4_K --out "$llama"

analyses=slash,intrinsic,rank,fourier,frequency,cone
for f in "$qwen" "$llama"; do
    name="$(basename "$f" .gguf)"
    step "scan $name" "$f" "$bin" scan "$f" --out "$work/scan-$name" --count 2 --length 512 --analyses "$analyses"
    for _ in 1 2 3 4 5; do cat "$here/benches/peers/text.txt"; done >"$work/text.txt"
    "$bin" tokenize "$f" --file "$work/text.txt" --json >"$work/ids.json"
    python3 -c "import json,sys; print(','.join(map(str, json.load(open(sys.argv[1]))['ids'][:512])))" \
        "$work/ids.json" >"$work/ids.txt"
    step "reference f64 $name" "$f" "$bin" reference "$f" --ids "$(cat "$work/ids.txt")" --layers 0 \
        --out "$work/ref-$name"
done
