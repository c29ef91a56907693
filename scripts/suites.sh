# Sourced by scripts/test: run every suite even when one fails, then one line per suite.
#   suite NAME COMMAND [ARGS…]   runs COMMAND, records "ok"/"FAILED  NAME (T s)"
#   suites_summary               prints the lines; returns 1 if any suite failed
results=()
failed=0
suite() {
    local name="$1"
    shift
    local t0=$SECONDS
    if "$@"; then
        results+=("ok      $name ($((SECONDS - t0)) s)")
    else
        results+=("FAILED  $name ($((SECONDS - t0)) s)")
        failed=1
    fi
}
suites_summary() {
    echo
    printf '%s\n' "${results[@]}"
    return "$failed"
}
