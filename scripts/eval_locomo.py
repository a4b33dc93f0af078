#!/usr/bin/env python3
"""Evidence recall of Cairn's episodic search on LoCoMo-style data.

Drives the `cairn` binary: one fresh home per conversation, `cairn memory
import-episodic` (text "Speaker: text", created_at = the turn's timestamp,
source_ref = the turn id), then `cairn memory search --queries FILE --json`
with `--now` one day after the conversation's last turn. In the same run, on
the same rows, it computes the baselines itself: plain top-k cosine with the
same model (vectors from `cairn embed`), Okapi BM25 (k1 1.5, b 0.75,
lower-cased word tokens, as rank_bm25's BM25Okapi), and reciprocal-rank
fusion of the two (k 60).

Recall@k of a question = share of its evidence turns among the first k
results; reported overall and per LoCoMo category.

    python3 scripts/eval_locomo.py --cairn target/release/cairn \\
        --data /path/to/locomo-dev --model ~/.local/share/cairn/models/all-MiniLM-L6-v2
"""

import argparse
import collections
import datetime as dt
import json
import math
import os
import re
import subprocess
import sys
import tempfile

KS = (8, 20)
RRF_K = 60


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

    # system name -> list of (category, {k: recall})
    results = collections.defaultdict(list)
    cairn_variants = {
        "cairn hybrid (default: RRF, importance x age, MMR)": ["--mode", "hybrid"],
        "cairn hybrid, weighted-sum fusion": ["--mode", "hybrid", "--fusion", "weighted"],
        "cairn hybrid, spec age factor (prior weight 1)": ["--mode", "hybrid", "--prior-weight", "1"],
        "cairn hybrid, no MMR": ["--mode", "hybrid", "--no-mmr"],
        "cairn vector (spec pipeline: decay + MMR)": ["--mode", "vector"],
        "cairn keyword": ["--mode", "keyword"],
    }
    context_variants = {
        "cairn --context (hybrid: cosine gate + keyword path)": ["--mode", "hybrid"],
        "cairn --context (vector: cosine gate only)": ["--mode", "vector"],
    }
    admitted_counts = collections.defaultdict(list)

    by_conversation = collections.defaultdict(list)
    for row in memories:
        by_conversation[row["conversation_id"]].append(row)
    for conversation, rows in sorted(by_conversation.items()):
        conv_queries = [q for q in queries if q["conversation_id"] == conversation]
        if not conv_queries:
            continue
        last = max(dt.datetime.fromisoformat(row["timestamp"]) for row in rows)
        now = (last + dt.timedelta(days=1)).strftime("%Y-%m-%dT%H:%M:%SZ")
        texts = [f"{row['speaker']}: {row['text']}" for row in rows]
        ids = [row["id"] for row in rows]
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

            evidence = {q["id"]: set(q["evidence_ids"]) for q in conv_queries}
            category = {q["id"]: q["category_name"] for q in conv_queries}

            def search(extra, limit, context=False):
                cmd = [args.cairn, "--home", home, "memory", "search", "--queries", query_path, "--now", now,
                       "--limit", str(limit), "--json"] + extra + (["--context"] if context else [])
                out = {}
                for line in run(cmd, env).splitlines():
                    row = json.loads(line)
                    out[row["id"]] = [hit["source_ref"] for hit in row["hits"]]
                return out

            for name, extra in cairn_variants.items():
                ranked = search(extra, max(KS))
                for qid, refs in ranked.items():
                    results[name].append((category[qid], {k: recall(refs, evidence[qid], k) for k in KS}))
            for name, extra in context_variants.items():
                per_k = {k: search(extra, k, context=True) for k in KS}
                for qid in per_k[KS[0]]:
                    results[name].append(
                        (category[qid], {k: recall(per_k[k][qid], evidence[qid], k) for k in KS}))
                    admitted_counts[name].append(len(per_k[KS[0]][qid]))

            # Baselines on the same rows.
            memory_vectors = embed(args.cairn, texts, env, workdir, "memories")
            query_vectors = embed(args.cairn, [q["question"] for q in conv_queries], env, workdir, "queries")
            bm25 = Bm25([tokens(text) for text in texts])
            for q, qv in zip(conv_queries, query_vectors):
                cosine = ranking([dot(qv, mv) for mv in memory_vectors], ids)
                keyword = ranking(bm25.scores(tokens(q["question"])), ids)
                fused = rrf(cosine, keyword)
                for name, ranked in (("plain cosine top-k (same model)", cosine), ("BM25 (Okapi)", keyword),
                                     ("RRF(cosine, BM25), k=60", fused)):
                    results[name].append((q["category_name"], {k: recall(ranked, evidence[q["id"]], k) for k in KS}))

    categories = sorted({c for rows in results.values() for c, _ in rows})
    header = "| system | n | " + " | ".join(f"R@{k}" for k in KS) + " | " + " | ".join(
        f"{c} R@{k}" for c in categories for k in KS) + " |"
    print(header)
    print("|" + "---|" * (2 + len(KS) + len(categories) * len(KS)))
    table = {}
    for name, rows in results.items():
        overall = {k: sum(r[k] for _, r in rows) / len(rows) for k in KS}
        per_category = {}
        for c in categories:
            subset = [r for cat, r in rows if cat == c]
            per_category[c] = {k: (sum(r[k] for r in subset) / len(subset) if subset else float("nan")) for k in KS}
        table[name] = {"n": len(rows), "overall": overall, "categories": per_category}
        cells = [f"{overall[k]:.3f}" for k in KS] + [f"{per_category[c][k]:.3f}" for c in categories for k in KS]
        print(f"| {name} | {len(rows)} | " + " | ".join(cells) + " |")
    for name, counts in admitted_counts.items():
        print(f"\n{name}: mean admitted rows at limit 8 = {sum(counts) / len(counts):.2f}, "
              f"questions with nothing admitted = {sum(1 for c in counts if c == 0)}/{len(counts)}")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as handle:
            json.dump({"table": table, "admitted": {k: v for k, v in admitted_counts.items()}}, handle, indent=1)


if __name__ == "__main__":
    main()
