#!/usr/bin/env bash
# Embedder speed against onnxruntime, alternated in one session, plus the
# fidelity check, printed as one table (about 5 minutes on 2 cores).
#
#   scripts/embed_compare.sh            # 2 rounds of ort then Cairn
#   ROUNDS=3 scripts/embed_compare.sh
#   SKIP_BUILD=1 scripts/embed_compare.sh   # use the programs already built by
#       cargo build --release -p cairn-tools --bin embed_bench --bin embed_fidelity
#   (both read ${CARGO_TARGET_DIR:-target}/release/)
#
# Needs: the model (`cairn model fetch`), the peer venv from
# ../shared/tools/peers/README.md (onnxruntime, tokenizers, numpy, psutil).
# Every run is preceded by `uptime`; run it on a quiet machine.
set -euo pipefail
cd "$(dirname "$0")/.."

MODEL="${CAIRN_EMBED_MODEL_PATH:-$HOME/.local/share/cairn/models/all-MiniLM-L6-v2}"
PEERS="${PEERS:-$PWD/../shared/tools/peers}"
REFS="${REFS:-$PWD/../shared/evaldata/embed-ref}"
PY="${PY:-$HOME/.venvs/cairn-peers/bin/python}"
ROUNDS="${ROUNDS:-2}"
THREADS="${THREADS:-2}"
TARGET="${CARGO_TARGET_DIR:-$PWD/target}"
OUT="$(mktemp -d)"

for need in "$MODEL/model.safetensors" "$PEERS/embed_bench.py" "$PEERS/data/corpus_1k.jsonl" "$REFS/vectors.jsonl" "$PY"; do
    [[ -e "$need" ]] || { echo "missing: $need" >&2; exit 1; }
done

[[ -n "${SKIP_BUILD:-}" ]] || cargo build --quiet --release -p cairn-tools --bin embed_bench --bin embed_fidelity

: >"$OUT/runs.jsonl"
for round in $(seq 1 "$ROUNDS"); do
    load=$(uptime | sed 's/.*load average: //')
    echo "round $round ort   (load $load)" >&2
    (cd "$PEERS" && AGENT_MEMORY_MODEL_DIR="$MODEL" "$PY" embed_bench.py --engine ort --threads "$THREADS" \
        --runs 1 --out "$OUT/ort.jsonl") >"$OUT/ort_$round.out"
    tail -n 1 "$OUT/ort_$round.out" |
        "$PY" -c 'import json,sys; r=json.loads(sys.stdin.read()); print(json.dumps({"engine":"ort","round":'"$round"',"load":"'"$load"'","b1_p50_ms":r["bs1_p50_ms"],"bs_sent_per_s":r["bs32_sent_per_s"],"rss_mb":r["rss_mb"]}))' \
        >>"$OUT/runs.jsonl"
    load=$(uptime | sed 's/.*load average: //')
    echo "round $round cairn (load $load)" >&2
    RAYON_NUM_THREADS="$THREADS" "$TARGET/release/embed_bench" --model "$MODEL" \
        --corpus "$PEERS/data/corpus_1k.jsonl" --runs 1 >"$OUT/cairn_$round.out"
    head -n 1 "$OUT/cairn_$round.out" |
        "$PY" -c 'import json,sys; r=json.loads(sys.stdin.read()); print(json.dumps({"engine":"cairn","round":'"$round"',"load":"'"$load"'","b1_p50_ms":r["b1_p50_ms"],"bs_sent_per_s":r["bs_sent_per_s"],"rss_mb":r["rss_mb"]}))' \
        >>"$OUT/runs.jsonl"
done

"$TARGET/release/embed_fidelity" --model "$MODEL" --refs "$REFS" >"$OUT/fidelity.jsonl"

"$PY" - "$OUT/runs.jsonl" "$OUT/fidelity.jsonl" <<'EOF'
import json, statistics, sys
runs = [json.loads(line) for line in open(sys.argv[1])]
fid = [json.loads(line) for line in open(sys.argv[2])]
print("| round | engine | load (1/5/15 min) | batch-1 p50 ms | batch-32 sentences/s | RSS MB |")
print("|---|---|---|---|---|---|")
for r in runs:
    print(f"| {r['round']} | {r['engine']} | {r['load']} | {r['b1_p50_ms']:.2f} | {r['bs_sent_per_s']:.1f} | {r['rss_mb']:.0f} |")
med = {e: {k: statistics.median(r[k] for r in runs if r["engine"] == e) for k in ("b1_p50_ms", "bs_sent_per_s", "rss_mb")}
       for e in ("ort", "cairn")}
o, c = med["ort"], med["cairn"]
print()
print(f"| median of {len(runs)//2} | onnxruntime | Cairn | ratio | target |")
print("|---|---|---|---|---|")
print(f"| batch-1 p50 | {o['b1_p50_ms']:.2f} ms | {c['b1_p50_ms']:.2f} ms | {c['b1_p50_ms']/o['b1_p50_ms']:.2f}x ort | <= ort, <= 5 ms |")
print(f"| batch-32 throughput | {o['bs_sent_per_s']:.1f}/s | {c['bs_sent_per_s']:.1f}/s | {c['bs_sent_per_s']/o['bs_sent_per_s']:.2f}x ort | >= 1.2x |")
print(f"| RSS | {o['rss_mb']:.0f} MB | {c['rss_mb']:.0f} MB | | <= 200 MB |")
print()
for f in fid:
    print(f"fidelity {f['set']}: {f['rows']} rows, min cosine batch {f['min_cosine_batch32']:.6f}, single {f['min_cosine_single']:.6f}, all >= 0.9999: {f['all_at_least_0.9999']}")
EOF
