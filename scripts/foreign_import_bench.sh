#!/usr/bin/env bash
# Foreign import at scale, through the CLI: an OpenClaw workspace whose
# memory/ holds 2,000 daily-log entries (100 days x 20), imported with
# `cairn import apply` (episodic embedding deferred, then the import's own
# backfill), against `cairn memory backfill` on the same rows in a second
# home. `cairn memory backfill` is timed by wall clock, so the wall of a
# backfill over an empty home (process start + model load) is subtracted.
#
#   scripts/foreign_import_bench.sh [path/to/cairn]     # default target/release/cairn
#
# Needs python3 and the installed model (`cairn model fetch`; CAIRN_EMBED_MODEL_PATH
# names another). Prints one
# JSON line.
set -euo pipefail
CAIRN=${1:-target/release/cairn}
SCRATCH=$(mktemp -d)
trap 'rm -rf "$SCRATCH"' EXIT
WORKSPACE="$SCRATCH/workspace"

python3 - "$WORKSPACE" <<'PY'
import datetime, os, sys
subjects = ["Ada", "Bo", "the billing team", "the on-call engineer", "Priya", "the design review", "Marek", "the release bot"]
verbs = ["shipped", "reviewed", "rolled back", "profiled", "documented", "rewrote", "benchmarked", "split up"]
objects = ["the coupon parser", "the invoice export", "the checkout latency dashboard", "the refund queue",
           "the search index rebuild", "the nightly staging reset", "the onboarding email flow", "the tax rounding rules"]
details = ["after the regression from last week", "because the p95 doubled on Monday",
           "with a feature flag for the EU shops", "and wrote down the follow-ups in the tracker",
           "so the Thursday train can pick it up", "while pairing with the new hire"]
memory = os.path.join(sys.argv[1], "memory")
os.makedirs(memory)
start = datetime.date(2026, 1, 1)
for day in range(100):
    date = start + datetime.timedelta(days=day)
    lines = [f"# {date}", ""]
    for entry in range(20):
        n = day * 20 + entry
        if entry % 5 == 0:
            lines += ["", f"## {8 + entry // 2:02}:{(entry * 7) % 60:02}"]
        lines.append(f"- Entry {n}: {subjects[n % 8]} {verbs[(n // 8) % 8]} {objects[(n // 3) % 8]} "
                     f"{details[(n // 7) % 6]} (ticket SHOP-{n}).")
    with open(os.path.join(memory, f"{date}.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
PY

now_ms() { date +%s%3N; }
export CAIRN_SKIP_MODEL_DOWNLOAD=1
export CAIRN_EMBED_MODEL_PATH=${CAIRN_EMBED_MODEL_PATH:-$HOME/.local/share/cairn/models/all-MiniLM-L6-v2}

# Home A: import, then the import's backfill (timed inside the command).
"$CAIRN" --home "$SCRATCH/a" import apply --from openclaw --openclaw-workspace "$WORKSPACE" --json >"$SCRATCH/a.json"
start=$(now_ms)
"$CAIRN" --home "$SCRATCH/a2" import apply --from openclaw --openclaw-workspace "$WORKSPACE" --no-backfill --json >/dev/null
import_wall_ms=$(( $(now_ms) - start ))

# Home B: the same rows, then `cairn memory backfill`; an empty home for the fixed cost.
"$CAIRN" --home "$SCRATCH/b" import apply --from openclaw --openclaw-workspace "$WORKSPACE" --no-backfill --json >/dev/null
start=$(now_ms)
"$CAIRN" --home "$SCRATCH/b" memory backfill --json >"$SCRATCH/b.json"
backfill_wall_ms=$(( $(now_ms) - start ))
start=$(now_ms)
"$CAIRN" --home "$SCRATCH/empty" memory backfill --json >/dev/null
empty_wall_ms=$(( $(now_ms) - start ))

python3 - "$SCRATCH/a.json" "$SCRATCH/b.json" "$import_wall_ms" "$backfill_wall_ms" "$empty_wall_ms" <<'PY'
import json, sys
a, b = (json.load(open(path)) for path in sys.argv[1:3])
import_wall, backfill_wall, empty_wall = (int(x) for x in sys.argv[3:6])
ia = a["timing"]["backfill"]
import_rate = ia["embedded"] / (ia["elapsed_ms"] / 1000)
cli_rate = b["embedded"] / ((backfill_wall - empty_wall) / 1000)
print(json.dumps({
    "entries": a["counts"]["episodic"] + a["counts"]["exists"] + a["counts"]["refused"],
    "episodic_written": a["counts"]["episodic"],
    "import_ms_in_command": a["timing"]["import_ms"],
    "import_wall_ms_no_backfill": import_wall,
    "import_backfill": {"embedded": ia["embedded"], "ms": ia["elapsed_ms"], "rows_per_s": round(import_rate, 1)},
    "memory_backfill": {"embedded": b["embedded"], "wall_ms": backfill_wall, "fixed_ms": empty_wall,
                        "rows_per_s": round(cli_rate, 1)},
    "throughput_ratio": round(import_rate / cli_rate, 3),
}))
PY
