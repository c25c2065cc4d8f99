# The test targets that judge each area of the mutation scripts (theory/mutants.sh, theory/constants.sh),
# sourced by both: `area_tests AREA` prints them as cargo arguments, one a line, and fails for an unknown area.
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
