#!/usr/bin/env bash
# Mutation testing of the constants that define the papers' quantities (band edges, κ, m, τ, windows, counts):
# cargo-mutants never mutates a `const` item, so this script does, one value at a time, from the table below.
#
#   theory/constants.sh [--again] [CONSTANT | CONSTANT=VALUE ...]
#   theory/constants.sh --summary
#
# With CONSTANTs (names as in the table), only their mutations run; `CONSTANT=VALUE` (the value as the table
# writes it, quoted where it has spaces) selects that one mutation. A mutation whose outcome is already recorded
# for the last commit that changed its file is skipped (so a stopped run resumes where it stopped, and an outcome
# stays valid until its file changes); `--again` runs the selected mutations even so (e.g. after adding a test),
# and the new outcome replaces the old one. `--summary` only writes the summary of the recorded outcomes (e.g. after
# a run was stopped).
#
# The run works on a detached copy of HEAD in a worktree kept in the cache (`kept_copy`, theory/areas.sh; the clone
# is never touched). For each mutation it replaces the constant's value in the copy, touches the file, builds the
# tests that judge the constant's area (src/analysis/: `--test theory --test scan --lib`; src/theory/: `--test
# theory`; src/train/: `--test train --lib`, as theory/mutants.sh chooses them; the tests build the library with the
# `internals` feature through the package's dev-dependency on itself), and runs them under nextest, slow tests
# included, stopping at the first failure. Outcomes: `caught` (a test failed), `missed` (every test passed),
# `unviable` (the build failed), `timeout` (build and tests ran past 3× the area's baseline, at least 300 s; the
# whole process group is killed) and `error` (the build did not recompile the crate, so the tests did not judge the
# mutation, or the value could not be applied). The file is restored, byte for byte, before the next mutation.
#
# Target directory: ~/.cache/ropescope/mutants/constants-target (ROPESCOPE_CACHE overrides the root), seeded
# from theory/mutants.sh's target if that exists, so the dependencies are not built again. Results:
# ~/.cache/ropescope/mutants/constants/: one log per mutation, `results.tsv` (every outcome, with the file's
# commit), and the current outcomes as `caught.txt`, `missed.txt`, `unviable.txt`, `timeout.txt`, `error.txt`
# and `summary.txt`. theory/README.md lists the survivors and how each was answered.
set -euo pipefail

again=0
summary_only=0
if [[ "${1:-}" == --again ]]; then again=1; shift; fi
if [[ "${1:-}" == --summary ]]; then summary_only=1; shift; fi
selected=("$@")

# The mutations: file, constant, replacement value (the text between `=` and `;`). Each is a change a regression
# could plausibly make: an edge moved, a factor doubled or halved, a count off by one, two values swapped. The
# first mutation of every constant comes before the second ones, so a run stopped early has tried each constant.
# Not mutated: train/optim.rs EXAMPLES_PER_UNIT (the size of a summation unit: it fixes the order of the sums
# so that results do not depend on the thread count, and defines no quantity of a paper) and
# analysis/detectors.rs DEFAULT_RANDOM_SEED (which random sequences are drawn, not a quantity).
table='
src/analysis/slash.rs               DEFAULT_SLASH_KAPPA             0.2
src/analysis/fourier.rs             DEFAULT_LOW_BAND_MAX_FREQUENCY  0.02
src/analysis/fourier.rs             DEFAULT_HIGH_BAND_MIN_FREQUENCY 0.2
src/analysis/posym.rs               DEFAULT_BLOCK_COUNT             7
src/analysis/posym.rs               DEFAULT_SWAP_TEMPERATURE        0.2
src/analysis/posym_scan.rs          DEFAULT_KEEP_FIRST              0
src/analysis/ablation.rs            DEFAULT_P_VALUES                [1.0, 0.25, 0.5, 0.75, 0.0]
src/analysis/ablation.rs            DEFAULT_REVERSED_P_VALUES       [0.25, 0.75]
src/analysis/ablation.rs            DEFAULT_DELTA_MAX               15
src/analysis/cauchy_schwarz.rs      DEFAULT_TABLE_POSITIONS         7
src/analysis/cauchy_schwarz.rs      DEFAULT_SUMMARY_START           0
src/analysis/detectors.rs           DEFAULT_RANDOM_SEQUENCES        9
src/analysis/detectors.rs           DEFAULT_RANDOM_LENGTH           49
src/analysis/vector_stats.rs        GRAM_ROWS                       256
src/analysis/detectors/patterns.rs  PATTERNS                        [Pattern::DuplicateToken, Pattern::PreviousToken, Pattern::Induction, Pattern::Diagonal, Pattern::Sink]
src/theory/canonical_tasks.rs       INDEX_KEY                       [0.0, 1.0]
src/train/sdh/mod.rs                DEFAULT_KAPPA                   0.25
src/train/canonical/mod.rs          DEFAULT_SCORE_BLOCKS            3
src/train/canonical/mod.rs          DEFAULT_SCORE_TAU               0.1
src/analysis/slash.rs               DEFAULT_SLASH_KAPPA             0.05
src/analysis/fourier.rs             DEFAULT_LOW_BAND_MAX_FREQUENCY  0.005
src/analysis/fourier.rs             DEFAULT_HIGH_BAND_MIN_FREQUENCY 0.05
src/analysis/posym.rs               DEFAULT_BLOCK_COUNT             9
src/analysis/posym.rs               DEFAULT_SWAP_TEMPERATURE        0.05
src/analysis/posym_scan.rs          DEFAULT_KEEP_FIRST              2
src/analysis/ablation.rs            DEFAULT_P_VALUES                [0.0, 0.75, 0.5, 0.25, 1.0]
src/analysis/ablation.rs            DEFAULT_REVERSED_P_VALUES       [0.75, 0.5]
src/analysis/ablation.rs            DEFAULT_DELTA_MAX               32
src/analysis/cauchy_schwarz.rs      DEFAULT_TABLE_POSITIONS         9
src/analysis/cauchy_schwarz.rs      DEFAULT_SUMMARY_START           2
src/theory/canonical_tasks.rs       INDEX_KEY                       [2.0, 0.0]
src/train/sdh/mod.rs                DEFAULT_KAPPA                   1.0
src/train/canonical/mod.rs          DEFAULT_SCORE_BLOCKS            8
src/train/canonical/mod.rs          DEFAULT_SCORE_TAU               0.025
'

command -v cargo-nextest >/dev/null || { echo "cargo-nextest is not installed: cargo install --locked cargo-nextest" >&2; exit 2; }
root="$(git -C "$(dirname "$0")" rev-parse --show-toplevel)"
mutants="${ROPESCOPE_CACHE:-$HOME/.cache/ropescope}/mutants"
results="$mutants/constants"
export CARGO_TARGET_DIR="$mutants/constants-target"
mkdir -p "$results"
if [[ ! -d "$CARGO_TARGET_DIR" && -d "$mutants/target" ]]; then cp -a "$mutants/target" "$CARGO_TARGET_DIR"; fi
touch "$results/results.tsv"

tmp="$(mktemp -d)"
# The tests that judge an area (`area_tests`) and the copy that is mutated (`kept_copy`).
source "$(dirname "$0")/areas.sh"

running=""
cleanup() {
    if [[ -n "$running" ]]; then kill -KILL -- "-$running" 2>/dev/null || true; fi
    rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
kept_copy "$root" "$mutants/constants-worktree"
cd "$copy"

# Runs a command in a process group of its own, appending its output to a log, until a deadline (in SECONDS);
# past it the whole group is killed and the status is 124.
limited() {
    local deadline="$1" log="$2"
    shift 2
    setsid "$@" >>"$log" 2>&1 &
    running=$!
    while kill -0 "$running" 2>/dev/null; do
        if ((SECONDS >= deadline)); then
            kill -TERM -- "-$running" 2>/dev/null || true
            sleep 10
            kill -KILL -- "-$running" 2>/dev/null || true
            wait "$running" 2>/dev/null || true
            running=""
            return 124
        fi
        sleep 2
    done
    local status=0
    wait "$running" || status=$?
    running=""
    return "$status"
}

# Baseline of an area: the unmutated copy's build and tests must pass; their time sets the area's timeout.
# Recorded per commit, so a resumed run reuses it.
declare -A limit
baseline() {
    local area="$1" head record seconds start
    head="$(git rev-parse HEAD)"
    record="$results/baseline-$area.txt"
    if [[ -f "$record" && "$(cut -f1 "$record")" == "$head" ]]; then
        seconds="$(cut -f2 "$record")"
    else
        local log="$results/baseline-$area.log"
        : >"$log"
        echo "baseline of $area..."
        start=$SECONDS
        # shellcheck disable=SC2046
        limited $((SECONDS + 7200)) "$log" cargo nextest run $(area_tests "$area") --no-run \
            || { echo "the baseline build of $area failed: $log" >&2; exit 1; }
        # shellcheck disable=SC2046
        limited $((SECONDS + 7200)) "$log" cargo nextest run $(area_tests "$area") --run-ignored all \
            --max-fail=1:immediate || { echo "the baseline tests of $area fail: $log" >&2; exit 1; }
        seconds=$((SECONDS - start))
        printf '%s\t%s\n' "$head" "$seconds" >"$record"
    fi
    limit[$area]=$((3 * seconds > 300 ? 3 * seconds : 300))
    echo "baseline of $area: $seconds s, timeout ${limit[$area]} s"
}

# Replaces the value of constant $2 in file $1 by $3; prints the old value. Exactly one definition must match.
apply() {
    python3 - "$@" <<'EOF'
import re, sys
path, name, value = sys.argv[1:4]
text = open(path).read()
pattern = re.compile(
    r"^(\s*(?:pub(?:\([^)]*\))?\s+)?const\s+" + re.escape(name) + r"\s*:[^=]*=\s*)(.*?)(;[ \t]*$)", re.S | re.M)
found = list(pattern.finditer(text))
if len(found) != 1:
    sys.exit(f"{len(found)} definitions of {name} in {path}")
old = found[0].group(2)
def canonical(v):
    return re.sub(r"\s|,(?=\s*\])", "", v)
if canonical(old) == canonical(value):
    sys.exit(f"{name} is already {value}")
m = found[0]
open(path, "w").write(text[: m.start(2)] + value + text[m.end(2) :])
print(" ".join(old.split()))
EOF
}

# The commit that last changed a file: an outcome stays valid while it is the same.
file_commit() { git log -1 --format=%H HEAD -- "$1"; }

recorded() {
    python3 - "$results/results.tsv" "$@" <<'EOF'
import sys
path, commit, file, name, value = sys.argv[1:6]
for line in open(path):
    f = line.rstrip("\n").split("\t")
    if f[:4] == [commit, file, name, value]:
        sys.exit(0)
sys.exit(1)
EOF
}

# Whether the mutation of constant $1 to value $2 is selected: by the constant's name or as NAME=VALUE.
chosen() {
    local s
    for s in "${selected[@]}"; do
        if [[ "$s" == "$1" || "$s" == "$1=$2" ]]; then return 0; fi
    done
    return 1
}

n=0
while read -r -u 3 file name value; do
    [[ -n "$file" ]] || continue
    ((!summary_only)) || continue
    if ((${#selected[@]})) && ! chosen "$name" "$value"; then continue; fi
    n=$((n + 1))
    commit="$(file_commit "$file")"
    if ((!again)) && recorded "$commit" "$file" "$name" "$value"; then
        echo "[$n] $file $name = $value: already recorded"
        continue
    fi
    area="${file#src/}"
    area="${area%%/*}"
    [[ -n "${limit[$area]:-}" ]] || baseline "$area"
    log="$results/$(echo "$file" | tr / -)-$name-$(echo "$value" | tr -c 'A-Za-z0-9.\n' _ | cut -c1-40).log"
    : >"$log"
    cp "$file" "$tmp/original"
    start=$SECONDS
    deadline=$((SECONDS + ${limit[$area]}))
    if ! old="$(apply "$file" "$name" "$value" 2>>"$log")"; then
        outcome=error
    else
        echo "mutation: $file $name = $old -> $value" | tee -a "$log"
        touch "$file"
        status=0
        # shellcheck disable=SC2046
        limited "$deadline" "$log" cargo nextest run $(area_tests "$area") --no-run || status=$?
        if ((status == 124)); then
            outcome=timeout
        elif ((status != 0)); then
            outcome=unviable
        elif ! grep -q "Compiling ropescope v" "$log"; then
            echo "the build did not recompile the crate: the tests would not judge this mutation" | tee -a "$log"
            outcome=error
        else
            status=0
            # shellcheck disable=SC2046
            limited "$deadline" "$log" cargo nextest run $(area_tests "$area") --run-ignored all \
                --max-fail=1:immediate || status=$?
            case "$status" in
                0) outcome=missed ;;
                124) outcome=timeout ;;
                *) outcome=caught ;;
            esac
        fi
    fi
    cp "$tmp/original" "$file"
    cmp -s "$tmp/original" "$file" && git diff --quiet -- "$file" || { echo "could not restore $file" >&2; exit 1; }
    seconds=$((SECONDS - start))
    echo "[$n] $file $name = $value: $outcome ($seconds s)"
    printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$commit" "$file" "$name" "$value" "$outcome" "$seconds" "$(basename "$log")" \
        >>"$results/results.tsv"
done 3<<<"$table"

# The current outcomes: the last recorded outcome of each mutation of the table, for its file's commit.
while read -r file name value; do
    [[ -n "$file" ]] && printf '%s\t%s\t%s\t%s\n' "$(file_commit "$file")" "$file" "$name" "$value"
done <<<"$table" >"$tmp/current.tsv"
python3 - "$results" "$tmp/current.tsv" <<'EOF'
import sys
results, current = sys.argv[1:3]
latest = {}
for line in open(f"{results}/results.tsv"):
    f = line.rstrip("\n").split("\t")
    latest[tuple(f[:4])] = f[4]
table = [tuple(line.rstrip("\n").split("\t")) for line in open(current) if line.strip()]
lists = {k: [] for k in ("caught", "missed", "unviable", "timeout", "error", "not run")}
for key in table:
    lists[latest.get(key, "not run")].append(f"{key[1]} {key[2]} = {key[3]}")
for k, v in lists.items():
    if k != "not run":
        open(f"{results}/{k}.txt", "w").write("".join(x + "\n" for x in v))
summary = f"{len(table)} mutations: " + ", ".join(f"{len(v)} {k}" for k, v in lists.items())
open(f"{results}/summary.txt", "w").write(summary + "\n")
print(summary)
print("survivors:")
print("".join(x + "\n" for x in lists["missed"]), end="")
EOF
