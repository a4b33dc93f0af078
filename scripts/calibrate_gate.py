#!/usr/bin/env python3
"""Relevance-gate thresholds for an embedding model, from human similarity
ratings that have nothing to do with the LoCoMo evaluation data.

Data: the Lee, Pincombe & Welsh (2005) document-similarity corpus, as
shipped inside the `gensim` wheel on PyPI (`gensim/test/test_data/lee.cor`,
50 news stories of 303–742 characters, and `similarities0-1.txt`, the mean
human rating of every pair on a 1–5 scale, stored divided by 5). The wheel
is fetched with `pip download --no-deps gensim==4.4.0` unless
`--gensim-wheel` names one; nothing from it is copied into the repository.

Pairs rated 2 or less are "unrelated", 3 or more "related". The gate's
query is short, so each story's lead sentence stands for a query:

* short texts (≤ 300 characters): lead sentence against lead sentence;
* long texts (> 300 characters): lead sentence against a full story.

A threshold is the 99th percentile of the cosines of unrelated pairs: about
1 % of unrelated texts pass the gate. The share of related pairs that pass
is printed beside it, and the same two rates at the specification's 0.55 /
0.42 (set for Qwen3-Embedding).

    python3 scripts/calibrate_gate.py --cairn target/release/cairn \\
        --model ~/.local/share/cairn/models/all-MiniLM-L6-v2
"""

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import zipfile

RELATED_AT_LEAST = 3.0
UNRELATED_AT_MOST = 2.0


def run(cmd, env):
    result = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if result.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed ({result.returncode}):\n{result.stderr}")
    return result.stdout


def lee_corpus(wheel):
    with zipfile.ZipFile(wheel) as archive:
        documents = archive.read("gensim/test/test_data/lee.cor").decode("latin-1").splitlines()
        matrix = archive.read("gensim/test/test_data/similarities0-1.txt").decode("ascii").splitlines()
    documents = [line.strip() for line in documents if line.strip()]
    ratings = [[float(cell) * 5.0 for cell in row.split()] for row in matrix if row.strip()]
    return documents, ratings


def lead(document):
    # First sentence: up to the first ". " followed by a capital letter or quote.
    match = re.search(r"^(.+?[.!?])\s+(?=[A-Z\"'])", document)
    return match.group(1) if match else document


def embed(cairn, texts, env, workdir, name):
    path = os.path.join(workdir, f"{name}.jsonl")
    with open(path, "w", encoding="utf-8") as handle:
        for i, text in enumerate(texts):
            handle.write(json.dumps({"id": i, "text": text}) + "\n")
    rows = [json.loads(line) for line in run([cairn, "embed", "--jsonl", path], env).splitlines() if line.strip()]
    return [row["vector"] for row in rows]


def dot(a, b):
    return sum(x * y for x, y in zip(a, b))


def percentile(values, share):
    ordered = sorted(values)
    position = share * (len(ordered) - 1)
    low = int(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def rates(threshold, related, unrelated):
    return (sum(c >= threshold for c in related) / len(related), sum(c >= threshold for c in unrelated) / len(unrelated))


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cairn", default="target/release/cairn")
    parser.add_argument("--model", default=os.path.expanduser("~/.local/share/cairn/models/all-MiniLM-L6-v2"))
    parser.add_argument("--gensim-wheel", help="a downloaded gensim wheel (else pip download fetches one)")
    parser.add_argument("--false-admission", type=float, default=0.01,
                        help="share of unrelated pairs allowed through (default 0.01)")
    args = parser.parse_args()
    env = dict(os.environ, CAIRN_EMBED_MODEL_PATH=args.model, CAIRN_SKIP_MODEL_DOWNLOAD="1")
    env.pop("CAIRN_HOME", None)
    with tempfile.TemporaryDirectory() as workdir:
        wheel = args.gensim_wheel
        if wheel is None:
            run([sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary", ":all:", "-d", workdir,
                 "gensim==4.4.0"], env)
            wheel = next(os.path.join(workdir, name) for name in os.listdir(workdir) if name.endswith(".whl"))
        documents, ratings = lee_corpus(wheel)
        leads = [lead(document) for document in documents]
        lead_vectors = embed(args.cairn, leads, env, workdir, "leads")
        document_vectors = embed(args.cairn, documents, env, workdir, "documents")
    n = len(documents)
    print(f"Lee corpus: {n} stories of {min(map(len, documents))}–{max(map(len, documents))} characters, "
          f"leads of {min(map(len, leads))}–{max(map(len, leads))}")
    print(f"| memory texts | related pairs (≥ 3) | unrelated pairs (≤ 2) | threshold ({1 - args.false_admission:.0%} "
          "of unrelated below) | related / unrelated admitted there | specification | related / unrelated admitted there |")
    print("|---|---|---|---|---|---|---|")
    for regime, memories, specification in (("short", lead_vectors, 0.55), ("long", document_vectors, 0.42)):
        related, unrelated = [], []
        for i in range(n):
            for j in range(n):
                # Lead against lead is symmetric: each unordered pair once.
                if i == j or (regime == "short" and j < i):
                    continue
                rating = ratings[min(i, j)][max(i, j)]
                cosine = dot(lead_vectors[i], memories[j])
                if rating >= RELATED_AT_LEAST:
                    related.append(cosine)
                elif rating <= UNRELATED_AT_MOST:
                    unrelated.append(cosine)
        threshold = percentile(unrelated, 1 - args.false_admission)
        tpr, fpr = rates(threshold, related, unrelated)
        spec_tpr, spec_fpr = rates(specification, related, unrelated)
        print(f"| {regime} | {len(related)} | {len(unrelated)} | {threshold:.3f} | {tpr:.2f} / {fpr:.3f} | "
              f"{specification} | {spec_tpr:.2f} / {spec_fpr:.3f} |")


if __name__ == "__main__":
    main()
