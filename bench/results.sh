# bench/results.sh - sourced by bench/run.sh and bench/echo.sh: reading
# recorded figures and judging them. Both keep their lines
#   name=<what> impl=<who> value=<number> unit=<unit>
# in the file named by $results.

# val NAME IMPL: the recorded value, or nothing.
val() {
    awk -v n="name=$1" -v i="impl=$2" \
        '$1 == n && $2 == i { sub(/^value=/, "", $3); v = $3 } END { if (v != "") print v }' \
        "$results"
}

# quotient A B: A / B to three places ("inf" when B is 0).
quotient() {
    awk -v a="$1" -v b="$2" 'BEGIN { if (b == 0) print "inf"; else printf "%.3f", a / b }'
}

# target WHAT VALUE OP LIMIT: a line "target ... ok|MISSED" (OP: <= or >=).
target() {
    local ok
    ok=$(awk -v v="$2" -v t="$4" -v op="$3" 'BEGIN {
        if (op == "<=") r = (v + 0 <= t + 0); else r = (v + 0 >= t + 0)
        print r ? "ok" : "MISSED" }')
    echo "target $1 $2 $3 $4 $ok"
}

# best_of FIG: records "name=FIG impl=goro" as the smallest of the figures
# FIG1, FIG2 ... (rounds of one figure, run --as FIG<round>), in their unit.
best_of() {
    local best
    best=$(awk -v p="^name=$1[0-9]\$" '$1 ~ p && $2 == "impl=goro" {
               unit = $4; sub(/^value=/, "", $3); if (b == "" || $3 + 0 < b) b = $3 + 0 }
               END { if (b != "") print b, unit }' "$results")
    [[ -n $best ]] && echo "name=$1 impl=goro value=${best% *} ${best#* }" | tee -a "$results"
}

# target_val NAME IMPL OP LIMIT: target for the recorded value, if there is one.
target_val() {
    local v
    v=$(val "$1" "$2")
    [[ -n $v ]] && target "$1" "$v" "$3" "$4"
}
