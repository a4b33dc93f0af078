#!/usr/bin/env python3
"""Evidence recall of Cairn's episodic search on LoCoMo-style data, by
leave-one-conversation-out cross-validation.

Drives the `cairn` binary: one fresh home per conversation, `cairn memory
import-episodic` (text "Speaker: text", created_at = the turn's timestamp,
source_ref = the turn id), then `cairn memory search --queries FILE --json`
with `--now` one day after the conversation's last turn, once per ranking
configuration of the grid below. In the same run, on the same rows, it
computes the baselines itself: plain top-k cosine with the same model
(vectors from `cairn embed`), Okapi BM25 (k1 1.5, b 0.75, lower-cased word
tokens, as rank_bm25's BM25Okapi), and reciprocal-rank fusion of the two
(k 60, full lists).

Recall@k of a question = share of its evidence turns among the first k
results. Every number is reported per conversation ("fold") and as the mean
over the folds with the spread (lowest and highest fold).

Cross-validation: for each conversation, the configuration of the grid with
the best mean of R@8 and R@20 over the questions of the *other*
conversations is chosen and measured on the held-out one ("CV-selected").
Fixed systems (the build's default, the baselines) are measured the same way,
so every row of the table is a held-out number. `--context` rows count what
the `[Episodic Memory]` block admits (limit 8, block cap 3,000 characters).

    python3 scripts/eval_locomo.py --cairn target/release/cairn \\
        --data ../shared/evaldata/locomo-dev --model ~/.local/share/cairn/models/all-MiniLM-L6-v2
"""

import argparse
import collections
import datetime as dt
import json
import math
import os
import re
import statistics
import subprocess
import sys
import tempfile

KS = (8, 20)
RRF_K = 60

# The ranking choices cross-validated: fusion (with its one constant),
# the importance × age weight, and MMR.
GRID = [
    (f"{fusion} prior {prior} mmr {'on' if mmr else 'off'}",
     ["--fusion", fusion, "--prior-weight", str(prior)] + ([] if mmr else ["--no-mmr"]))
    for fusion in ("rrf:10", "rrf:30", "rrf:60", "weighted:0.5", "weighted:0.6", "weighted:0.7", "weighted:0.8")
    for prior in (0, 0.25)
    for mmr in (True, False)
]
DEFAULT = "cairn hybrid, this build's default"
FIXED = {
    DEFAULT: ["--mode", "hybrid"],
    "cairn hybrid, previous default (RRF k 60, prior 0.25, MMR)": ["--fusion", "rrf:60", "--prior-weight", "0.25"],
    "cairn --mode vector (the specification's pipeline)": ["--mode", "vector"],
    "cairn --mode keyword": ["--mode", "keyword"],
}
CONTEXT = {
    "cairn --context, default (model's gate + keyword path)": ["--mode", "hybrid"],
    "cairn --context, --mode vector (specification's gate)": ["--mode", "vector"],
}
PLAIN_RRF = "baseline: RRF(cosine, BM25), k 60"


def read_jsonl(path):
    with open(path, encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]


def write_jsonl(path, rows):
    with open(path, "w", encoding="utf-8") as handle:
        for row in rows:
            handle.write(json.dumps(row) + "\n")


def run(cmd, env):
    result = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if result.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed ({result.returncode}):\n{result.stderr}")
    return result.stdout


def tokens(text):
    return re.findall(r"\w+", text.lower())


class Bm25:
    def __init__(self, docs, k1=1.5, b=0.75, epsilon=0.25):
        self.k1, self.b = k1, b
        self.docs = [collections.Counter(doc) for doc in docs]
        self.lengths = [len(doc) for doc in docs]
        self.avgdl = sum(self.lengths) / max(len(docs), 1)
        df = collections.Counter()
        for doc in self.docs:
            df.update(doc.keys())
        n = len(docs)
        idf = {term: math.log(n - freq + 0.5) - math.log(freq + 0.5) for term, freq in df.items()}
        average = sum(idf.values()) / max(len(idf), 1)
        # rank_bm25's BM25Okapi floors negative idf at epsilon × mean idf.
        self.idf = {term: (value if value >= 0 else epsilon * average) for term, value in idf.items()}

    def scores(self, query):
        out = []
        for doc, length in zip(self.docs, self.lengths):
            score = 0.0
            for term in query:
                freq = doc.get(term, 0)
                if freq:
                    score += self.idf[term] * freq * (self.k1 + 1) / (freq + self.k1 * (1 - self.b + self.b * length / self.avgdl))
            out.append(score)
        return out


def ranking(scores, ids):
    order = sorted(range(len(ids)), key=lambda i: (-scores[i], i))
    return [ids[i] for i in order]


def rrf(*rankings):
    fused = collections.defaultdict(float)
    for ranked in rankings:
        for position, item in enumerate(ranked):
            fused[item] += 1.0 / (RRF_K + position + 1)
    return [item for item, _ in sorted(fused.items(), key=lambda kv: -kv[1])]


def recall(ranked, evidence, k):
    return len(set(ranked[:k]) & evidence) / len(evidence)


def embed(cairn, texts, env, workdir, name):
    path = os.path.join(workdir, f"{name}.jsonl")
    write_jsonl(path, [{"id": i, "text": text} for i, text in enumerate(texts)])
    rows = [json.loads(line) for line in run([cairn, "embed", "--jsonl", path], env).splitlines() if line.strip()]
    return [row["vector"] for row in rows]


def dot(a, b):
    return sum(x * y for x, y in zip(a, b))


def mean_recall(rows):
    """Mean (R@8, R@20) over a list of per-question {k: recall} dicts."""
    return tuple(sum(row[k] for row in rows) / len(rows) for k in KS)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cairn", default="target/release/cairn")
    parser.add_argument("--data", default="../shared/evaldata/locomo-dev")
    parser.add_argument("--model", default=os.path.expanduser("~/.local/share/cairn/models/all-MiniLM-L6-v2"))
    parser.add_argument("--json", help="also write all numbers to this file")
    args = parser.parse_args()

    memories = read_jsonl(os.path.join(args.data, "memories.jsonl"))
    queries = read_jsonl(os.path.join(args.data, "queries.jsonl"))
    env = dict(os.environ, CAIRN_EMBED_MODEL_PATH=args.model, CAIRN_SKIP_MODEL_DOWNLOAD="1")
    env.pop("CAIRN_HOME", None)

    # results[system][conversation] = list of {k: recall}, one per question
    results = collections.defaultdict(dict)
    admitted = collections.defaultdict(dict)
    by_conversation = collections.defaultdict(list)
    for row in memories:
        by_conversation[row["conversation_id"]].append(row)
    conversations = []
    for conversation, rows in sorted(by_conversation.items()):
        conv_queries = [q for q in queries if q["conversation_id"] == conversation]
        if not conv_queries:
            continue
        conversations.append(conversation)
        last = max(dt.datetime.fromisoformat(row["timestamp"]) for row in rows)
        now = (last + dt.timedelta(days=1)).strftime("%Y-%m-%dT%H:%M:%SZ")
        texts = [f"{row['speaker']}: {row['text']}" for row in rows]
        ids = [row["id"] for row in rows]
        evidence = {q["id"]: set(q["evidence_ids"]) for q in conv_queries}
        with tempfile.TemporaryDirectory() as workdir:
            home = os.path.join(workdir, "home")
            import_path = os.path.join(workdir, "rows.jsonl")
            write_jsonl(
                import_path,
                [{"text": text, "created_at": row["timestamp"], "source_ref": row["id"]} for text, row in zip(texts, rows)],
            )
            summary = json.loads(run([args.cairn, "--home", home, "memory", "import-episodic", import_path, "--json"], env))
            print(f"{conversation}: {len(rows)} turns, {len(conv_queries)} questions, import {summary}", file=sys.stderr)
            query_path = os.path.join(workdir, "queries.jsonl")
            write_jsonl(query_path, [{"id": q["id"], "question": q["question"]} for q in conv_queries])

            def search(extra, limit, context=False):
                cmd = [args.cairn, "--home", home, "memory", "search", "--queries", query_path, "--now", now,
                       "--limit", str(limit), "--json"] + extra + (["--context"] if context else [])
                out = {}
                for line in run(cmd, env).splitlines():
                    row = json.loads(line)
                    out[row["id"]] = [hit["source_ref"] for hit in row["hits"]]
                return out

            def score(ranked_by_id):
                return [{k: recall(ranked_by_id[q["id"]], evidence[q["id"]], k) for k in KS} for q in conv_queries]

            for name, extra in list(GRID) + list(FIXED.items()):
                results[name][conversation] = score(search(extra, max(KS)))
            for name, extra in CONTEXT.items():
                hits = search(extra, KS[0], context=True)
                results[name][conversation] = score(hits)
                admitted[name][conversation] = [len(hits[q["id"]]) for q in conv_queries]

            memory_vectors = embed(args.cairn, texts, env, workdir, "memories")
            query_vectors = embed(args.cairn, [q["question"] for q in conv_queries], env, workdir, "queries")
            bm25 = Bm25([tokens(text) for text in texts])
            baselines = collections.defaultdict(dict)
            for q, qv in zip(conv_queries, query_vectors):
                cosine = ranking([dot(qv, mv) for mv in memory_vectors], ids)
                keyword = ranking(bm25.scores(tokens(q["question"])), ids)
                baselines["baseline: plain cosine top-k (same model)"][q["id"]] = cosine
                baselines["baseline: BM25 (Okapi)"][q["id"]] = keyword
                baselines[PLAIN_RRF][q["id"]] = rrf(cosine, keyword)
            for name, ranked_by_id in baselines.items():
                results[name][conversation] = score(ranked_by_id)

    # Leave one conversation out: choose on the others, measure on it.
    chosen = {}
    for held_out in conversations:
        training = [c for c in conversations if c != held_out]

        def training_score(name):
            return sum(mean_recall([row for c in training for row in results[name][c]])) / len(KS)

        best = max((name for name, _ in GRID), key=training_score)  # first of equals in grid order
        chosen[held_out] = best
        results["CV-selected (grid choice on the other two)"][held_out] = results[best][held_out]

    def fold_means(name):
        return {c: mean_recall(results[name][c]) for c in conversations}

    def cell(values):
        return " / ".join(f"{v:.3f}" for v in values)

    order = (["CV-selected (grid choice on the other two)"] + list(FIXED) + list(CONTEXT)
             + ["baseline: plain cosine top-k (same model)", "baseline: BM25 (Okapi)", PLAIN_RRF])
    print("| system | " + " | ".join(f"{c} R@8 / R@20" for c in conversations)
          + " | mean R@8 [min, max] | mean R@20 [min, max] |")
    print("|---|" + "---|" * (len(conversations) + 2))
    table = {}
    for name in order:
        folds = fold_means(name)
        summary = []
        for i, k in enumerate(KS):
            values = [folds[c][i] for c in conversations]
            summary.append(f"{statistics.mean(values):.3f} [{min(values):.3f}, {max(values):.3f}]")
        print(f"| {name} | " + " | ".join(cell(folds[c]) for c in conversations) + " | " + " | ".join(summary) + " |")
        table[name] = folds
    print()
    plain = fold_means(PLAIN_RRF)
    for name in ("CV-selected (grid choice on the other two)", DEFAULT):
        folds = fold_means(name)
        deltas = {c: tuple(folds[c][i] - plain[c][i] for i in range(len(KS))) for c in conversations}
        print(f"{name} minus plain RRF, per fold (R@8 / R@20): "
              + ", ".join(f"{c} {deltas[c][0]:+.3f} / {deltas[c][1]:+.3f}" for c in conversations))
    print("chosen per held-out conversation: " + ", ".join(f"{c}: {chosen[c]}" for c in conversations))
    default_folds = fold_means(DEFAULT)
    context_name = next(iter(CONTEXT))
    context_folds = fold_means(context_name)
    print("admitted-context R@8 minus search R@8 (default): "
          + ", ".join(f"{c} {context_folds[c][0] - default_folds[c][0]:+.3f}" for c in conversations))
    for name, per_conversation in admitted.items():
        counts = [n for c in conversations for n in per_conversation[c]]
        print(f"{name}: mean admitted rows at limit 8 = {sum(counts) / len(counts):.2f}, "
              f"questions with nothing admitted = {sum(1 for n in counts if n == 0)}/{len(counts)}")
    if args.json:
        grid_table = {name: fold_means(name) for name, _ in GRID}
        with open(args.json, "w", encoding="utf-8") as handle:
            json.dump({"table": table, "grid": grid_table, "chosen": chosen}, handle, indent=1)


if __name__ == "__main__":
    main()
