#!/usr/bin/env bash
# Mutation testing of the theory code with cargo-mutants: does every change to a construction or a measurement
# make some test fail?
#
#   theory/mutants.sh AREA [SHARD [MODULE...]]
#
# AREA is `theory` (src/theory/, checked by tests/theory/*.rs), `analysis` (src/analysis/, by the theory and
# analysis tests) or `train` (src/train/, by tests/train/*.rs). SHARD (`k/n`, default `0/1`: every mutant)
# runs every n-th mutant from the k-th, round robin, so a shard is an even sample of the area. MODULEs (file
# names in the area, without `.rs`, each with its submodule directory if it has one) restrict the run to those
# files, e.g. the measurements the theory checks use:
# `theory/mutants.sh analysis 0/1 cone fourier posym rank slash softmax`.
#
# The run works on a detached copy of HEAD in a worktree kept in the cache (the clone is never touched). Its target
# directory, ~/.cache/ropescope/mutants/target (ROPESCOPE_CACHE overrides the root), is shared by every run, so only
# the first builds the dependencies (in Cargo.toml's `mutants` profile: the test build without line tables); results
# go to a directory per area and shard beside it, one `part-N/` per run. A shard is resumable: a second run of the
# same shard lists the shard's mutants and tests only those no earlier part has run (matched by their full names,
# file, line, column and change, so a part counts only while the mutated files are unchanged; a mutant that timed
# out counts as run only after its second timeout, since a loaded machine can time out a mutant the tests would have
# caught; nor does a mutant whose build failed to link, below). `train` and the other crate-private modules are
# declared through `internal_mod!` in src/lib.rs, which cargo-mutants does not expand, so the copy's declarations
# are first written out as plain `pub mod` lines (the tests build with the `internals` feature, where they are
# public anyway). Results: mutants.out/ in that cache directory; the survivors (`missed.txt`) are printed at the
# end. Install the tool once with `cargo install --locked cargo-mutants`. theory/README.md lists the survivors of
# the last run and why each is acceptable.
set -euo pipefail

area="${1:?usage: theory/mutants.sh theory|analysis|train [k/n [module...]]}"
shard="${2:-0/1}"
modules=("${@:3}")
# The test targets each area's mutants are judged by (theory/areas.sh); given to the build too, so that a mutant
# rebuilds only them. The slow tests (`#[ignore = "slow: …"]`, the training claims among them) judge mutants too
# (`--run-ignored=all`). The tests run under nextest, which stops a mutant's run at its first failing test
# (`--max-fail=1:immediate`); cargo test would finish every test of the failing binary first.
source "$(dirname "$0")/areas.sh"
targets="$(area_tests "$area")" || { echo "unknown area '$area': theory, analysis or train" >&2; exit 2; }
tests=()
for t in $targets; do tests+=("--cargo-arg=$t"); done
command -v cargo-mutants >/dev/null || { echo "cargo-mutants is not installed: cargo install --locked cargo-mutants" >&2; exit 2; }
command -v cargo-nextest >/dev/null || { echo "cargo-nextest is not installed: cargo install --locked cargo-nextest" >&2; exit 2; }

root="$(git -C "$(dirname "$0")" rev-parse --show-toplevel)"
mutants="${ROPESCOPE_CACHE:-$HOME/.cache/ropescope}/mutants"
cache="$mutants/$area-${shard//\//-of-}"
# rustc's incremental state can come to name symbols that no object file defines (rust-lang/rust#81280): every
# later build of the crate then fails to link until that state is removed. A baseline that fails so runs again
# once after removing it; a mutant that failed so is reported and not counted as run (a resume tests it again),
# and the state is removed for the next run. The library itself compiled, so cargo holds it fresh: its source is
# touched so that it compiles again, from nothing.
export LINKER_BUG="rust-lld: error: undefined"
forget_incremental() {
    rm -rf "$mutants/target/mutants/incremental"
    touch "$copy/src/lib.rs"
}
files=(-f "src/$area/**/*.rs" -f "src/$area/*.rs")
if ((${#modules[@]})); then
    cache+="-$(IFS=-; echo "${modules[*]}")"
    files=()
    for m in "${modules[@]}"; do
        [[ -f "$root/src/$area/$m.rs" || -d "$root/src/$area/$m" ]] || { echo "no module src/$area/$m" >&2; exit 2; }
        if [[ -f "$root/src/$area/$m.rs" ]]; then files+=(-f "src/$area/$m.rs"); fi
        # A module with submodules: its directory too.
        if [[ -d "$root/src/$area/$m" ]]; then files+=(-f "src/$area/$m/**/*.rs" -f "src/$area/$m/*.rs"); fi
    done
fi
mkdir -p "$cache"
kept_copy "$root" "$mutants/worktree"

# `internal_mod! { a; b; }` -> `pub mod a; pub mod b;`, for cargo-mutants' module walk.
python3 - "$copy/src/lib.rs" <<'EOF'
import re, sys
path = sys.argv[1]
text = open(path).read()
block = re.search(r"^internal_mod! \{\n(.*?)^\}\n", text, re.S | re.M)
names = re.findall(r"(\w+);", block.group(1))
text = text.replace(block.group(0), "".join(f"pub mod {n};\n" for n in names))
open(path, "w").write(text)
EOF

cd "$copy"
select=(--shard "$shard" --sharding round-robin)
if compgen -G "$cache/part-*/mutants.out/outcomes.json" >/dev/null; then
    # Resume: the shard's mutants that no earlier run of the area ran (this shard's or another's), as one regular
    # expression of their escaped full names. (cargo-mutants applies no name filter to its struct-field deletions:
    # those of the named files run again.)
    cargo mutants --list "${files[@]}" "${select[@]}" > "$cache/shard.txt"
    parts=("$mutants/$area"-*/part-*/mutants.out/outcomes.json)
    pattern="$(python3 - "$cache/shard.txt" "${parts[@]}" <<'EOF'
import json, os, re, sys
def link_failed(log):
    return os.path.exists(log) and os.environ["LINKER_BUG"] in open(log, errors="replace").read()
shard = [line.rstrip("\n") for line in open(sys.argv[1]) if line.strip()]
done, timeouts = set(), {}
for path in sys.argv[2:]:
    for o in json.load(open(path))["outcomes"]:
        if isinstance(o["scenario"], dict):
            name = o["scenario"]["Mutant"]["name"]
            if o["summary"] == "Timeout":
                timeouts[name] = timeouts.get(name, 0) + 1
            elif o["summary"] == "Unviable" and link_failed(os.path.join(os.path.dirname(path), o["log_path"])):
                continue
            else:
                done.add(name)
# A timeout may come from a loaded machine rather than the mutant: it runs once more before it counts.
done |= {name for name, n in timeouts.items() if n >= 2}
left = [name for name in shard if name not in done]
print(f"{len(shard) - len(left)} of the shard's {len(shard)} mutants already run", file=sys.stderr)
print("|".join(f"^{re.escape(name)}$" for name in left))
EOF
)"
    [[ -n "$pattern" ]] || { echo "every mutant of shard $shard has run: $cache"; exit 0; }
    select=(--re "$pattern")
fi
# The baseline (the unmutated tree builds and passes its tests) holds for its commit: a run at the commit of an
# earlier part of the area whose baseline passed skips it (4 to 10 minutes on two cores) and keeps the test
# timeout cargo-mutants set from it, five times the baseline's test time. Each part records its commit.
commit="$(git rev-parse HEAD)"
timeout="$(python3 - "$commit" "$mutants/$area"-*/part-*/ <<'EOF'
import json, os, sys
def seconds(d):
    return d["secs"] + d["nanos"] / 1e9 if isinstance(d, dict) else float(d)
for part in sys.argv[2:]:
    try:
        if open(os.path.join(part, "commit")).read().strip() != sys.argv[1]:
            continue
        outcomes = json.load(open(os.path.join(part, "mutants.out", "outcomes.json")))["outcomes"]
    except (OSError, ValueError):
        continue
    for o in outcomes:
        if o["scenario"] == "Baseline" and o["summary"] == "Success":
            test = [seconds(p["duration"]) for p in o["phase_results"] if p["phase"] == "Test"]
            print(round(5 * test[0]))
            sys.exit()
EOF
)"
baseline=()
if [[ -n "$timeout" ]]; then
    echo "the baseline of commit $commit passed in an earlier part: skipped (test timeout ${timeout}s)" >&2
    baseline=(--baseline=skip --timeout="$timeout" --build-timeout=7200)
fi
run_part() {
    # The next number after the highest (not the count: a part removed by hand would leave a gap, and the count
    # would name an existing part, whose results cargo-mutants would move aside).
    local last
    last="$(find "$cache" -maxdepth 1 -name 'part-*' -printf '%f\n' | sed 's/^part-//' | sort -n | tail -1)"
    out="$cache/part-$(( ${last:-0} + 1 ))"
    mkdir -p "$out"
    echo "$commit" > "$out/commit"
    status=0
    CARGO_TARGET_DIR="$mutants/target" cargo mutants --in-place --profile mutants "${files[@]}" "${select[@]}" \
        "${baseline[@]}" -o "$out" --test-tool=nextest "${tests[@]}" -- --max-fail=1:immediate --run-ignored=all ||
        status=$?
}
run_part
if grep -qs "$LINKER_BUG" "$out/mutants.out/log/baseline.log"; then
    echo "the unmutated tree failed to link (stale incremental state): removed, running again" >&2
    rm -rf "$out"
    forget_incremental
    run_part
fi
echo "mutants.out: $out/mutants.out"
unlinked="$(grep -l "$LINKER_BUG" "$out"/mutants.out/log/*.log || true)"
if [[ -n "$unlinked" ]]; then
    echo "failed to link from stale incremental state (not counted as run; the state is removed):" >&2
    echo "$unlinked" >&2
    forget_incremental
fi
echo "survivors:"
cat "$out/mutants.out/missed.txt"
# The target directory is shared, so a mutant is judged only if its build compiled the crate again: a log without
# that line would mean its tests ran an earlier binary.
stale="$(grep -L "Compiling ropescope v" "$out"/mutants.out/log/*.log || true)"
if [[ -n "$stale" ]]; then
    echo "not rebuilt (their outcomes do not count):" >&2
    echo "$stale" >&2
    exit 4
fi
# cargo-mutants exits 2 when mutants survive and 3 on timeouts: the lists above are the result.
exit "$status"
