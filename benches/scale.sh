#!/usr/bin/env bash
# ropescope at the papers' sizes, on random-weight files of real layouts: time and peak memory of writing them
# (`synth`), of the streaming scan, and of the float64 reference of one 512-token prompt.
#
#   benches/scale.sh [dense|moe|all] [BINARY]   (default: all, target/release/ropescope; cargo build --release)
#
# dense: the 7B/8B files (Qwen2 7B from the real header, `--quant keep`; `llama-3.1-8b --quant Q4_K`).
# moe:   the mixtures of experts `gpt-oss-20b --quant MXFP4_MOE` and `qwen3-30b-a3b --quant Q4_K_M`, and the
#        dense `smollm3-3b --quant Q4_K_M` they are compared with; beside the scan and the reference, the logits
#        of every position of the same 512 ids, ropescope's f32 pass without capture (`bench-forward --capture
#        none --repeat 1`) against llama.cpp's (`benches/peers/compare.py`'s llama.cpp worker, llama-cpp-python
#        from the reference environment, `fixtures/reference-venv.sh`), each one warm-up and one timed pass.
#
# Files (4–18 GB each) go to $ROPESCOPE_CACHE/synth (default ~/.cache/ropescope/synth) and are reused when
# present; outputs to a temporary directory, but the scans' to $ROPESCOPE_SCALE_KEEP when set (for opening their
# reports, e.g. `ROPESCOPE_REPORT_DIR=DIR/scan-NAME cargo test --test report browser`). Prints one line per step: wall seconds, peak RSS (GNU time), the
# file size, and peak RSS minus the file size (the bounds: scan ≤ 2 GiB, reference ≤ 4 GiB over it), and for the
# logits passes the timed pass of each side. Needs GNU time (/usr/bin/time, Debian package `time`).
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
set_name="${1:-all}"
case "$set_name" in dense | moe | all) ;; *) echo "usage: benches/scale.sh [dense|moe|all] [BINARY]" >&2; exit 2 ;; esac
bin="${2:-$here/target/release/ropescope}"
cache="${ROPESCOPE_CACHE:-$HOME/.cache/ropescope}"
synth_dir="$cache/synth"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
mkdir -p "$synth_dir"
scans="${ROPESCOPE_SCALE_KEEP:-$work}"
mkdir -p "$scans"

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
        printf "%-34s %8.1f s   peak RSS %6.2f GiB   file %5.2f GiB   RSS - file %6.2f GiB\n",
            n, s, k / 1048576, f / 2^30, (k * 1024 - f) / 2^30 }'
}

# ids FILE: the first 512 ids of benches/peers/text.txt (repeated) in FILE's tokenizer, as $work/ids.txt (a
# comma-separated list).
ids() {
    for _ in 1 2 3 4 5; do cat "$here/benches/peers/text.txt"; done >"$work/text.txt"
    "$bin" tokenize "$1" --file "$work/text.txt" --json >"$work/ids.json"
    python3 -c "import json,sys; print(','.join(map(str, json.load(open(sys.argv[1]))['ids'][:512])))" \
        "$work/ids.json" >"$work/ids.txt"
}

analyses=slash,intrinsic,rank,fourier,frequency,cone
# measure FILE: the scan and the f64 reference.
measure() {
    local f="$1" name
    name="$(basename "$f" .gguf)"
    step "scan $name" "$f" "$bin" scan "$f" --out "$scans/scan-$name" --count 2 --length 512 --analyses "$analyses"
    ids "$f"
    step "reference f64 $name" "$f" "$bin" reference "$f" --ids "$(cat "$work/ids.txt")" --layers 0 \
        --out "$work/ref-$name"
}

# beside_llama FILE: the logits of every position of the same 512 ids, ropescope's f32 pass and llama.cpp's.
beside_llama() {
    local f="$1" name py
    name="$(basename "$f" .gguf)"
    ids "$f"
    py="$("$here/fixtures/reference-venv.sh")"
    "$py" -c "import numpy as np,sys; np.save(sys.argv[2], np.array([int(i) for i in open(sys.argv[1]).read().split(',')], dtype=np.int64))" \
        "$work/ids.txt" "$work/ids.npy"
    step "logits f32 $name" "$f" "$bin" --threads 2 bench-forward "$f" --ids "$work/ids.npy" --repeat 1 \
        --capture none
    python3 -c "import json,sys; r=json.loads(open(sys.argv[1]).read().strip().splitlines()[-1]); print('    ropescope timed pass %.1f s' % r['forward_s'][0])" "$work/out"
    step "logits llama.cpp $name" "$f" "$py" "$here/benches/peers/compare.py" --worker llama.cpp \
        --worker-model "$f" --worker-ids "$work/ids.npy" --threads 2 --repeat 1
    python3 -c "import json,sys; r=json.loads(open(sys.argv[1]).read().strip().splitlines()[-1]); print('    llama.cpp timed pass %.1f s' % r['forward_s'][0])" "$work/out"
}

if [[ "$set_name" != dense ]]; then
    for spec in "gpt-oss-20b MXFP4_MOE gpt-oss-20b-mxfp4" "qwen3-30b-a3b Q4_K_M qwen3-30b-a3b-q4km" \
        "smollm3-3b Q4_K_M smollm3-3b-q4km"; do
        read -r shape quant file <<<"$spec"
        f="$synth_dir/$file.gguf"
        [[ -f "$f" ]] || step "synth $shape ($quant)" "$f" \
            "$bin" synth --quiet --like "$shape" --quant "$quant" --out "$f"
        measure "$f"
        beside_llama "$f"
    done
fi
[[ "$set_name" != moe ]] || exit 0

models="$("$here/fixtures/models.sh" --path)"
qwen="$synth_dir/qwen7b-q4km.gguf"
llama="$synth_dir/llama-3.1-8b-q4k.gguf"
[[ -f "$qwen" ]] || step "synth qwen2 7B (keep)" "$qwen" \
    "$bin" synth --quiet --like "$models/DeepSeek-R1-Distill-Qwen-7B-Q4_K_M.head.gguf" --out "$qwen"
[[ -f "$llama" ]] || step "synth llama-3.1-8b (Q4_K)" "$llama" \
    "$bin" synth --quiet --like llama-3.1-8b --quant Q4_K --out "$llama"

for f in "$qwen" "$llama"; do
    measure "$f"
done
