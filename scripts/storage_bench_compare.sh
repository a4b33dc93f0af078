#!/usr/bin/env bash
# memory-core's write and recall benches at two commits, alternated round
# by round in one session, then the PostgreSQL rows beside SQLite with the
# second commit's binaries (about 10 minutes on 2 cores once built).
#
#   scripts/storage_bench_compare.sh BEFORE_REV            # 5 rounds
#   ROUNDS=6 scripts/storage_bench_compare.sh c243778
#   CAIRN_BENCH_POSTGRES_URL=postgres://... scripts/storage_bench_compare.sh c243778
#
# BEFORE_REV is built in a worktree beside this checkout (../cairn-bench-<rev>,
# target ../target-bench-<rev>); this checkout is the "after" side. Without
# CAIRN_BENCH_POSTGRES_URL the PostgreSQL rows are skipped. Medians come
# from criterion's estimates.json, in microseconds. Run it on a quiet
# machine: every run prints the load average before and after.
set -euo pipefail
cd "$(dirname "$0")/.."

[[ $# -eq 1 ]] || { echo "usage: $0 BEFORE_REV" >&2; exit 2; }
ROUNDS="${ROUNDS:-5}"
REV=$(git rev-parse --short "$1")
BEFORE_TREE="$PWD/../cairn-bench-$REV"
BEFORE_TARGET="$PWD/../target-bench-$REV"
AFTER_TARGET="${CARGO_TARGET_DIR:-$PWD/target}"
OUT="$(mktemp -d)"

[[ -d "$BEFORE_TREE" ]] || git worktree add --quiet "$BEFORE_TREE" "$REV"
(cd "$BEFORE_TREE" && CARGO_TARGET_DIR="$BEFORE_TARGET" cargo bench --quiet -p cairn-dev --bench memory_core --bench episodic --no-run)
cargo bench --quiet -p cairn-dev --bench memory_core --bench episodic --no-run

newest() { find "$1/release/deps" -maxdepth 1 -type f -executable -name "$2-*" -printf '%T@ %p\n' | sort -n | tail -n 1 | cut -d' ' -f2; }
median() { python3 -c 'import json, sys; print(round(json.load(open(sys.argv[1]))["median"]["point_estimate"] / 1000, 1))' "$1"; }
load() { cut -d' ' -f1 /proc/loadavg; }

run_side() { # side memory_core_binary episodic_binary criterion_home
    local side=$1 writes=$2 recall=$3 home=$4 before after
    before=$(load)
    CRITERION_HOME=$home "$writes" --bench --warm-up-time 2 --measurement-time 8 --noplot semantic_write/accepted_cairn >/dev/null 2>&1
    CRITERION_HOME=$home EPISODIC_BENCH_SIZES=10000 "$recall" --bench --warm-up-time 1 --measurement-time 4 --noplot 'episodic_context/10000' >/dev/null 2>&1
    after=$(load)
    printf '%-7s %s  load %s-%s  write %s  hybrid %s  pure_vector %s\n' "$side" "$(date -u +%H:%M)" "$before" "$after" \
        "$(median "$home/semantic_write/accepted_cairn/new/estimates.json")" \
        "$(median "$home/episodic_context_10000/hybrid/new/estimates.json")" \
        "$(median "$home/episodic_context_10000/pure_vector/new/estimates.json")"
}

# The alternated rounds are SQLite only; the server is used once, at the end.
postgres_url="${CAIRN_BENCH_POSTGRES_URL:-}"
unset CAIRN_BENCH_POSTGRES_URL
echo "before $REV, after $(git rev-parse --short HEAD); medians in µs"
for round in $(seq 1 "$ROUNDS"); do
    echo "round $round"
    run_side before "$(newest "$BEFORE_TARGET" memory_core)" "$(newest "$BEFORE_TARGET" episodic)" "$OUT/before-$round"
    run_side after "$(newest "$AFTER_TARGET" memory_core)" "$(newest "$AFTER_TARGET" episodic)" "$OUT/after-$round"
done

if [[ -n "$postgres_url" ]]; then
    export CAIRN_BENCH_POSTGRES_URL="$postgres_url"
    home="$OUT/postgres"
    before=$(load)
    CRITERION_HOME=$home "$(newest "$AFTER_TARGET" memory_core)" --bench --warm-up-time 2 --measurement-time 8 --noplot semantic_write/accepted_cairn >/dev/null 2>&1
    CRITERION_HOME=$home EPISODIC_BENCH_SIZES=10000 "$(newest "$AFTER_TARGET" episodic)" --bench --warm-up-time 1 --measurement-time 4 --noplot 'episodic_context/10000' >/dev/null 2>&1
    echo "PostgreSQL beside SQLite, after's binaries, $(date -u +%H:%M), load $before-$(load)"
    for estimates in $(find "$home" -path '*/new/estimates.json' | sort); do
        name=${estimates#"$home/"}
        printf '  %-50s %s\n' "${name%/new/estimates.json}" "$(median "$estimates")"
    done
fi
