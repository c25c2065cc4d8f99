# What the mutation scripts (theory/mutants.sh, theory/constants.sh) share, sourced by both: the copy they mutate
# (`kept_copy`) and the test targets that judge each area (`area_tests`).
#
# `area_tests AREA` prints an area's test targets as cargo arguments, one a line, and fails for an unknown area.
# `theory`: src/theory/, by tests/theory/*.rs; `analysis`: src/analysis/, by the theory tests, the scan tests
# (tests/scan/*.rs, which judge the scan's streaming modules) and the unit tests; `train`: src/train/, by
# tests/train/*.rs and the unit tests.
area_tests() {
    case "$1" in
        theory) printf '%s\n' --test=theory ;;
        analysis) printf '%s\n' --test=theory --test=scan --lib ;;
        train) printf '%s\n' --test=train --lib ;;
        *) return 1 ;;
    esac
}

# `kept_copy ROOT PREFIX` sets `copy` to a detached worktree of ROOT's HEAD at PREFIX-<hash of ROOT's path>, kept
# between runs and moved to HEAD for each: the files a commit did not change keep their times, so the first build
# recompiles the crate incrementally (a fresh copy at a new path built it from nothing, 4 to 8 minutes of every
# run), and a file a stopped run left mutated is restored with every tracked file. The copy is locked on file
# descriptor 9 while the calling script runs; it fails if another run holds it.
kept_copy() {
    local root="$1"
    copy="$2-$(printf '%s' "$root" | sha256sum | cut -c1-12)"
    exec 9>"$copy.lock"
    flock -n 9 || { echo "another mutation run of this clone is using $copy" >&2; return 1; }
    local common=(rev-parse --path-format=absolute --git-common-dir)
    if [[ -d "$copy" && "$(git -C "$copy" "${common[@]}" 2>/dev/null)" == "$(git -C "$root" "${common[@]}")" ]]; then
        git -C "$copy" checkout --quiet --force --detach "$(git -C "$root" rev-parse HEAD)"
    else
        rm -rf "$copy"
        git -C "$root" worktree prune
        git -C "$root" worktree add --detach --quiet "$copy" HEAD
    fi
}
