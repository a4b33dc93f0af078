#!/usr/bin/env python3
"""Retrieval report of Cairn's episodic search in LongMemEval's terms, with
leave-one-conversation-out cross-validation over one or more dev sets.

Data sets (`--data`, repeatable) have LoCoMo-dev's layout: `memories.jsonl`
(id, conversation_id, session, timestamp, speaker, text) and
`queries.jsonl` (id, conversation_id, question, evidence_ids). The first is
LoCoMo's dev split; the second is normally `longchat-dev` from
`scripts/gen_longchat.py` (synthetic: long assistant turns, sessions over
months).

Per conversation: a fresh home, `cairn memory import-episodic` of
"Speaker: text" rows (created_at = the turn's timestamp, source_ref = the
turn id), then `cairn memory search --queries FILE --json --now <last turn
+ 1 day>`:

- the fixed Cairn systems (this build's default, the previous default,
  `--mode vector`, `--mode keyword`, the `--context` block);
- the candidate dump: this build's candidates with their score breakdown
  (`--limit 1000 --no-mmr` and the ranking additions off), from which the
  grid of ranking choices below is re-scored here, exactly as
  `crates/memory-core/src/episodic/search.rs` scores them (fusion,
  importance × age, speaker match, time window, the session boost, the
  best rows' thread, neighbour propagation, MMR λ 0.6 on word sets), for
  candidate pools up to the dump's 300 per list;
- the baselines, computed here on the same rows: plain top-k cosine with
  the same model (`cairn embed`), Okapi BM25 (k1 1.5, b 0.75, lower-cased
  word tokens, as rank_bm25's BM25Okapi) and RRF of the two (k 60);
- the off-topic prompts (`--offtopic`, and the benign rows of
  `--benign`): `--context` against the same store, for abstention.

Metrics (LongMemEval's), for k in 1, 3, 5, 8, 10, 20, at turn level (the
ranked turns) and session level (the sessions of the ranked turns, first
occurrence kept, from the top 50 turns): recall@k (share of the evidence
in the top k, the figure of earlier rounds), recall_any@k (some evidence
in the top k), recall_all@k (all of it), NDCG@k (binary relevance).

Cross-validation: every conversation of every set is one fold. For a held
out conversation the grid point with the best training score is chosen on
all *other* conversations of *both* sets (training score: the mean over the
sets of the set's mean turn-level (recall@8 + recall@20) / 2) and measured
on it. The abstention floor is chosen the same way: the highest floor whose
on-topic context recall@8 on the training conversations drops by at most
0.01 in each set, scored for off-topic abstention on the even-numbered
prompts; the held-out figures use the odd-numbered prompts.

    cargo build --release --bin cairn
    python3 scripts/gen_longchat.py --out /tmp/longchat-dev
    python3 scripts/eval_locomo.py --cairn target/release/cairn \\
        --data ../shared/evaldata/locomo-dev --data /tmp/longchat-dev \\
        --benign ../shared/evaldata/injection-dev/injection.jsonl --json /tmp/retrieval.json
"""

import argparse
import collections
import contextlib
import datetime as dt
import hashlib
import itertools
import json
import math
import multiprocessing
import os
import pickle
import re
import shutil
import statistics
import subprocess
import sys
import tempfile

KS = (1, 3, 5, 8, 10, 20)
DEPTH = 50
RRF_K = 60
MMR_LAMBDA = 0.6

# The ranking grid re-scored from the candidate dump. Round three's grid
# also had the importance × age prior (0.25), MMR off, RRF (k 10) and
# neighbouring turns (0.6, 0.85); none of them won a fold there, so they are
# fixed at 0, on, the weighted sum and 0 here (`rescore` still takes them).
# POOLS: candidates taken from each of the vector and keyword lists (the dump
# holds DUMP_POOL of each, so a smaller pool is re-scored exactly);
# SESSION_BOOSTS multiply the score of a row written within SESSION_GAP of
# one of the best SESSION_ANCHORS rows.
# THREADS (weight, anchors): each of the best `anchors` rows lifts the same
# speaker's nearest turn before and after it (within THREAD_REACH rows, in
# its sitting) and, when it asks a question, the next row by another speaker
# to at least weight × its score.
# CEILING_SHARES: weighted fusion scales bm25 by max(best hit's bm25, share ×
# the query's bm25 ceiling); round three's grid (0.25 to 0.55, without the
# thread and the floor) chose none above 0; beside the capped thread and the
# floor, 0.1 won every fold against 0, 0.15 and 0.25 (BENCHMARKS.md).
# KEYWORD_FLOORS (floor, strong share): a row whose raw cosine stays under
# the floor gets no keyword score unless its bm25 reaches the strong share of
# the query's ceiling (an exact identifier); 0 turns it off.
# The speaker boost 0.15, the time boost 0.25, a pool of 100 and weighted
# fusion at 0.7 won every fold of the previous rounds and are fixed here.
FUSIONS = ("weighted:0.7",)
# MMR_LAMBDAS: hybrid mode's MMR λ (the specification's pipeline keeps 0.6).
# 0.7 won every fold on the objective when offered (2026-12-07), but held out
# it moved R@3 by +0.022 on locomo-dev and -0.026 on the long chats for
# +0.002 on the objective: not a choice that holds across the two kinds of
# data, so the grid keeps 0.6 (BENCHMARKS.md).
MMR_LAMBDAS = (0.6,)
SPEAKER_BOOSTS = (0.15,)
TIME_BOOSTS = (0.25,)
POOLS = (100,)
SESSIONS = ((0.1, 3),)
CEILING_SHARES = (0.0, 0.1)
THREADS = ((0.0, 1), (0.8, 1), (0.9, 1), (0.8, 3), (0.9, 3))
# THREAD_KEEPS: the thread lifts no row above the row ranked this far (0: no cap).
THREAD_KEEPS = (0, 3, 5)
KEYWORD_FLOORS = ((0.0, 0.0), (0.15, 0.25), (0.2, 0.25))
# SPEAKER_ROLES: whether a question in the first person names the `User`
# speaker of a chat transcript and one in the second person the `Assistant`
# (signals.rs's ROLE_PRONOUNS), for the speaker boost: every fold chose it.
# With it, a boost of 0.2 won 14 folds against 0.1, 0.15 and 0.25, but held
# out it traded ranks within a question or two (locomo-dev R@5 -0.010, the
# long chats' R@8 -0.009 against 0.15), so the boost stays 0.15
# (BENCHMARKS.md).
SPEAKER_ROLES = (False, True)
THREAD_REACH = 2
DUMP_POOL = 300
SESSION_GAP = dt.timedelta(minutes=30)
GRID = list(dict.fromkeys(
    (fusion, 0.0, lam, speaker, 0.0, time, pool, session, anchors, share, thread, thread_anchors, floor,
     strong, keep if thread else 0, roles)
    for fusion, lam, speaker, time, pool, (session, anchors), share, (thread, thread_anchors), (floor, strong), keep,
    roles in itertools.product(FUSIONS, MMR_LAMBDAS, SPEAKER_BOOSTS, TIME_BOOSTS, POOLS, SESSIONS, CEILING_SHARES,
                               THREADS, KEYWORD_FLOORS, THREAD_KEEPS, SPEAKER_ROLES)))
PREVIOUS = ("weighted:0.7", 0.0, MMR_LAMBDA, 0.0, 0.0, 0.0, 100, 0.0, 3, 0.0, 0.0, 1, 0.0, 0.0, 0, False)
SHIPPED_BEFORE = ("weighted:0.7", 0.0, MMR_LAMBDA, 0.15, 0.0, 0.25, 100, 0.1, 3, 0.0, 0.0, 1, 0.0, 0.0, 0, False)
# The build with the thread alone (weight 0.9 over the best row), for comparison.
THREAD_ONLY = ("weighted:0.7", 0.0, MMR_LAMBDA, 0.15, 0.0, 0.25, 100, 0.1, 3, 0.0, 0.9, 1, 0.0, 0.0, 0, False)
# The thread and the keyword floor without the cap, for comparison.
UNCAPPED = ("weighted:0.7", 0.0, MMR_LAMBDA, 0.15, 0.0, 0.25, 100, 0.1, 3, 0.0, 0.8, 3, 0.2, 0.25, 0, False)
# The thread capped at 3 and the keyword floor, bm25 on the best hit's scale.
CAPPED = ("weighted:0.7", 0.0, MMR_LAMBDA, 0.15, 0.0, 0.25, 100, 0.1, 3, 0.0, 0.8, 3, 0.2, 0.25, 3, False)
# The build before this one: the ceiling share 0.1, chat roles not named by pronouns.
CEILING = ("weighted:0.7", 0.0, MMR_LAMBDA, 0.15, 0.0, 0.25, 100, 0.1, 3, 0.1, 0.8, 3, 0.2, 0.25, 3, False)
# This build's default (constants.rs): checked against the binary's own ranking.
SHIPPED = ("weighted:0.7", 0.0, MMR_LAMBDA, 0.15, 0.0, 0.25, 100, 0.1, 3, 0.1, 0.8, 3, 0.2, 0.25, 3, True)
FLOORS = (0.0, 0.25, 0.275, 0.3, 0.325, 0.35, 0.375, 0.4, 0.425, 0.45)
# The stronger floor of a query naming nobody in a conversation (0: none).
UNNAMED_FLOORS = (0.0, 0.3, 0.325, 0.35, 0.375, 0.4, 0.425, 0.45, 0.475, 0.5)

ADDITIONS_OFF = ["--speaker-boost", "0", "--neighbour-weight", "0", "--time-boost", "0", "--session-boost", "0",
                 "--thread-weight", "0", "--keyword-min-cosine", "0", "--keyword-ceiling-share", "0",
                 "--mmr-lambda", "0.6"]
DEFAULT = "cairn hybrid, this build's default"
PREVIOUS_NAME = "cairn hybrid, previous default (weighted 0.7, prior 0, MMR)"
FIXED = {
    DEFAULT: [],
    PREVIOUS_NAME: ["--fusion", "weighted:0.7", "--prior-weight", "0"] + ADDITIONS_OFF,
    "cairn --mode vector (the specification's pipeline)": ["--mode", "vector"],
    "cairn --mode keyword": ["--mode", "keyword"],
}
CONTEXT = "cairn --context, this build's default (limit 8)"
CONTEXT_PREVIOUS = "cairn --context, previous default (limit 8, no abstention)"
COSINE, BM25, PLAIN_RRF = "baseline: plain cosine (same model)", "baseline: BM25 (Okapi)", "baseline: RRF(cosine, BM25), k 60"
CV = "CV-selected grid point (re-scored candidates)"
SHIPPED_BEFORE_NAME = "grid point of the previous build's default (re-scored)"
SHIPPED_NAME = "grid point of this build's default (re-scored)"
THREAD_ONLY_NAME = "grid point of the thread alone (0.9 over the best row, no keyword floor; re-scored)"
UNCAPPED_NAME = "grid point of the thread uncapped (0.8 over 3) and the keyword floor (re-scored)"
CAPPED_NAME = "grid point of the thread capped at 3 and the keyword floor, no ceiling share (re-scored)"
CEILING_NAME = "grid point of the previous build's default (ceiling share 0.1, no chat roles; re-scored)"


def read_jsonl(path):
    with open(path, encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]


def write_jsonl(path, rows):
    with open(path, "w", encoding="utf-8") as handle:
        for row in rows:
            handle.write(json.dumps(row) + "\n")


def run(cmd, env, cache=None, key_extra=""):
    """Runs `cmd`; with `cache` (a folder), its output is kept there under a
    key of the command, `key_extra` and the binary's size and mtime."""
    path = None
    if cache:
        stat = os.stat(cmd[0])
        key = json.dumps([cmd[1:], key_extra, stat.st_size, stat.st_mtime_ns])
        path = os.path.join(cache, hashlib.sha256(key.encode()).hexdigest() + ".out")
        if os.path.exists(path):
            with open(path, encoding="utf-8") as handle:
                return handle.read()
    result = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if result.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed ({result.returncode}):\n{result.stderr}")
    if path:
        with open(path + ".tmp", "w", encoding="utf-8") as handle:
            handle.write(result.stdout)
        os.replace(path + ".tmp", path)
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
    return [ids[i] for i in sorted(range(len(ids)), key=lambda i: (-scores[i], i))]


def rrf(*rankings):
    fused = collections.defaultdict(float)
    for ranked in rankings:
        for position, item in enumerate(ranked):
            fused[item] += 1.0 / (RRF_K + position + 1)
    return [item for item, _ in sorted(fused.items(), key=lambda kv: -kv[1])]


def metrics(ranked, evidence, session_of):
    """LongMemEval's metrics of one question, turn and session level."""
    out = {}
    sessions, seen = [], set()
    for turn in ranked:
        if session_of[turn] not in seen:
            seen.add(session_of[turn])
            sessions.append(session_of[turn])
    for level, items, relevant in (("turn", ranked, evidence), ("session", sessions, {session_of[e] for e in evidence})):
        for k in KS:
            top = items[:k]
            found = len(set(top) & relevant)
            dcg = sum(1 / math.log2(i + 2) for i, item in enumerate(top) if item in relevant)
            idcg = sum(1 / math.log2(i + 2) for i in range(min(len(relevant), k)))
            out[f"{level} recall@{k}"] = found / len(relevant)
            out[f"{level} recall_any@{k}"] = float(found > 0)
            out[f"{level} recall_all@{k}"] = float(found == len(relevant))
            out[f"{level} ndcg@{k}"] = dcg / idcg
    return out


def objective(rows):
    return sum((row["turn recall@8"] + row["turn recall@20"]) / 2 for row in rows) / len(rows)


# ---- re-scoring, as crates/memory-core/src/episodic/search.rs does ----

MONTHS = {name: i + 1 for i, name in enumerate(
    ["january", "february", "march", "april", "may", "june", "july", "august", "september", "october", "november", "december"])}


def word_set(text):
    return frozenset(w.lower() for w in re.split(r"[^\w]|_", text) if w)


def speaker(text):
    """The `Name:` prefix of a row (1 to 3 alphanumeric words, ≤ 40 characters), lower case."""
    head, sep, rest = text.partition(":")
    if not rest[:1].isspace():
        return None
    head = head.strip()
    parts = head.split()
    if not sep or not head or len(head) > 40 or len(parts) > 3 or not all(part.isalnum() for part in parts):
        return None
    return " ".join(parts).lower()


MONTH_NAMES = "|".join(MONTHS)


ROLE_PRONOUNS = {"user": {"i", "me", "my", "mine", "myself", "we", "us", "our", "ours", "ourselves"},
                 "assistant": {"you", "your", "yours", "yourself"}}


def names_speaker(words, who, roles):
    """signals.rs's `names_speaker`: every word of the speaker's name, or,
    with `roles`, a chat role's pronoun."""
    return all(part in words for part in who.split()) or (roles and bool(ROLE_PRONOUNS.get(who, set()) & words))


def names_anyone(text, speakers):
    """False for a query that names none of a conversation's speakers
    (signals.rs's `names_nobody`); True where the rows have no speaker.
    The binary reads the speakers of the query's candidates, this the
    whole conversation's; in a two-person conversation both see both."""
    words = set(tokens(text))
    return not speakers or any(names_speaker(words, who, True) for who in speakers)


def time_window(question, now):
    """(start, end) datetimes a question names, or None, as signals.rs's
    `time_window`: a day ± 3 days, a month ± 3 days (without a year the
    last such month before now), a year, `last week/month/year`."""
    text = question.lower()
    year_match = re.search(r"\b(?:19|20)\d\d\b", text)
    year = int(year_match.group(0)) if year_match else None
    month = day = None
    m = re.search(r"\b(\d{1,2})(?:st|nd|rd|th)?\s+(" + MONTH_NAMES + r")\b", text)
    if m:
        day, month = int(m.group(1)), MONTHS[m.group(2)]
    else:
        m = re.search(r"\b(" + MONTH_NAMES + r")\b(?:\s+(\d{1,2})(?:st|nd|rd|th)?\b)?", text)
        if m and (m.group(1) != "may" or re.search(r"\b(?:in|of|on|last|since|during|early|late|mid)\s+may\b|\bmay\s+(?:\d|20)", text)):
            month = MONTHS[m.group(1)]
            day = int(m.group(2)) if m.group(2) and int(m.group(2)) <= 31 else None
    if month:
        if year is None:
            year = now.year if (month, day or 1) <= (now.month, now.day) else now.year - 1
        if day is not None:
            try:
                start = dt.datetime(year, month, day) - dt.timedelta(days=3)
            except ValueError:
                return None
            return start, start + dt.timedelta(days=7)
        start = dt.datetime(year, month, 1)
        end = dt.datetime(year + (month == 12), month % 12 + 1, 1)
        return start - dt.timedelta(days=3), end + dt.timedelta(days=3)
    if year:
        return dt.datetime(year, 1, 1), dt.datetime(year + 1, 1, 1)
    m = re.search(r"\blast (week|month|year)\b", text)
    if m:
        span = {"week": 7, "month": 31, "year": 366}[m.group(1)]
        return now - dt.timedelta(days=2 * span), now
    return None


def mmr(pool, limit, cache, lam=MMR_LAMBDA):
    """MMR (λ, word-set Jaccard) over pool = [(score, ref, words)] sorted by score, descending."""
    picks = []
    sims = [0.0] * len(pool)
    taken = [False] * len(pool)
    while len(picks) < min(limit, len(pool)):
        best = None
        for p, (score, _, _) in enumerate(pool):
            if taken[p]:
                continue
            if best is not None and lam * score <= best[1]:
                break
            value = lam * score - (1 - lam) * sims[p]
            if best is None or value > best[1]:
                best = (p, value)
        taken[best[0]] = True
        picks.append(best[0])
        chosen_ref, chosen = pool[best[0]][1], pool[best[0]][2]
        for p, (_, ref, words) in enumerate(pool):
            if not taken[p]:
                key = (ref, chosen_ref) if ref < chosen_ref else (chosen_ref, ref)
                similarity = cache.get(key)
                if similarity is None:
                    union = len(words | chosen)
                    similarity = cache[key] = len(words & chosen) / union if union else 0.0
                if similarity > sims[p]:
                    sims[p] = similarity
    return [pool[p][1] for p in picks]


def in_pool(candidates, pool):
    """The candidates a search taking `pool` of each list would have had."""
    out = []
    for c in candidates:
        vector = c["vector_rank"] is not None and c["vector_rank"] <= pool
        keyword = c["keyword_rank"] is not None and c["keyword_rank"] <= pool
        if vector or keyword:
            out.append(dict(c, vector_rank=c["vector_rank"] if vector else None,
                            keyword_rank=c["keyword_rank"] if keyword else None,
                            bm25=c["bm25"] if keyword else None))
    return out


def rescore(candidates, config, query, store, cache):
    """The ranking of `config` over one question's candidate dump."""
    (fusion, prior_weight, mmr_lambda, speaker_boost, neighbour_weight, time_boost, pool, session_boost, anchors,
     ceiling_share, thread_weight, thread_anchors, keyword_floor, strong_share, thread_keep, roles) = config
    ceiling = next((c["keyword_ceiling"] for c in candidates if c.get("keyword_ceiling") is not None), None)
    candidates = in_pool(candidates, pool)
    best_bm25 = max((c["bm25"] or 0.0 for c in candidates), default=0.0)
    if ceiling_share and ceiling is not None:
        best_bm25 = max(best_bm25, ceiling_share * ceiling)
    names = set(tokens(query["question"]))
    window = time_window(query["question"], store["now_dt"]) if time_boost else None
    scores = {}
    for c in candidates:
        if fusion.startswith("weighted"):
            w = float(fusion.split(":")[1])
            keyword = (c["bm25"] / best_bm25) if c["bm25"] and best_bm25 > 0 else 0.0
            if (keyword_floor and c["cosine"] is not None and c["bm25"] and ceiling is not None
                    and c["cosine"] < keyword_floor and c["bm25"] < strong_share * ceiling):
                keyword = 0.0
            fused = w * max(c["cosine"] or 0.0, 0.0) + (1 - w) * keyword
        else:
            k = float(fusion.split(":")[1])
            fused = sum(1 / (k + r) for r in (c["vector_rank"], c["keyword_rank"]) if r) / (2 / (k + 1))
        prior = (1 - prior_weight) + prior_weight * (0.7 + 0.3 * c["importance"]) * math.exp(-0.03 * c["age_days"])
        score = fused * prior
        who = store["speaker"].get(c["ref"])
        if speaker_boost and who and names_speaker(names, who, roles):
            score *= 1 + speaker_boost
        if window and window[0] <= store["time"][c["ref"]] < window[1]:
            score *= 1 + time_boost
        scores[c["ref"]] = score
    if session_boost:
        ranked = sorted(scores.items(), key=lambda kv: (-kv[1], store["position"][kv[0]]))
        top = [ref for ref, _ in ranked[:anchors]]
        for c in candidates:
            if c["ref"] not in top and any(abs(store["time"][c["ref"]] - store["time"][a]) <= SESSION_GAP for a in top):
                scores[c["ref"]] *= 1 + session_boost
    if thread_weight and fusion.startswith("weighted"):
        lift_threads(scores, store, thread_weight, thread_anchors, thread_keep)
    if neighbour_weight:
        top = sorted(scores.items(), key=lambda kv: -kv[1])[:DEPTH]
        for ref, score in top:
            for neighbour in store["neighbours"].get(ref, ()):
                if scores.get(neighbour, 0.0) < neighbour_weight * score:
                    scores[neighbour] = neighbour_weight * score
    order = sorted(scores.items(), key=lambda kv: (-kv[1], store["position"][kv[0]]))[:1000]
    if mmr_lambda is not None:
        return mmr([(score, ref, store["words"][ref]) for ref, score in order], DEPTH, cache, mmr_lambda)
    return [ref for ref, _ in order[:DEPTH]]


def lift_threads(scores, store, weight, anchors, keep=0):
    """signals.rs / search.rs's `lift_threads`: by row id, in the sitting;
    no lift above the row ranked `keep` before it (0: no cap)."""
    ranked = sorted(scores.items(), key=lambda kv: (-kv[1], store["position"][kv[0]]))
    top = ranked[:anchors]
    cap = ranked[keep - 1][1] * (1.0 - 1e-6) if keep and len(ranked) >= keep else math.inf
    for ref, score in top:
        who = store["speaker"].get(ref)
        if who is None:
            continue
        own = store["id"][ref]
        around = []
        for delta in [d for d in range(-THREAD_REACH, THREAD_REACH + 1) if d]:
            other = store["ref_of"].get(own + delta)
            if other is not None and abs(store["time"][other] - store["time"][ref]) <= SESSION_GAP:
                around.append((own + delta, other))
        before = next((o for i, o in reversed(around) if i < own and store["speaker"].get(o) == who), None)
        after = next((o for i, o in around if i > own and store["speaker"].get(o) == who), None)
        answer = next((o for i, o in around if "?" in store["text"][ref] and i == own + 1
                       and store["speaker"].get(o) not in (None, who)), None)
        lifted = min(weight * score, cap)
        for target in {t for t in (before, after, answer) if t is not None}:
            if scores.get(target, 0.0) < lifted:
                scores[target] = lifted


GRID_INPUTS = {}


def rescore_all(config):
    """Every question's metrics under `config`, per conversation."""
    out = {}
    for conversation, (candidates, store, conv_queries, evidence, session_of) in GRID_INPUTS.items():
        out[conversation] = [metrics(rescore(candidates[q["id"]], config, q, store, {}), evidence[q["id"]], session_of)
                             for q in conv_queries]
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cairn", default="target/release/cairn")
    parser.add_argument("--data", action="append", help="a dev set folder (repeatable)")
    parser.add_argument("--model", default=os.path.expanduser("~/.local/share/cairn/models/all-MiniLM-L6-v2"))
    parser.add_argument("--offtopic", default=os.path.join(os.path.dirname(__file__), "data", "offtopic_prompts.txt"))
    parser.add_argument("--benign", help="injection-dev's injection.jsonl: its benign rows are off-topic prompts too")
    parser.add_argument("--json", help="write every number to this file")
    parser.add_argument("--no-grid", action="store_true", help="skip the re-scored grid")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="processes re-scoring the grid")
    parser.add_argument("--state", help="save what the runs gave (pickle) for --from-state")
    parser.add_argument("--from-state", help="re-score and report from a --state file without running cairn")
    parser.add_argument("--workdir", help="keep each conversation's home and command outputs here and reuse them")
    args = parser.parse_args()
    datasets = args.data or ["../shared/evaldata/locomo-dev"]
    env = dict(os.environ, CAIRN_EMBED_MODEL_PATH=args.model, CAIRN_SKIP_MODEL_DOWNLOAD="1")
    env.pop("CAIRN_HOME", None)
    with open(args.offtopic, encoding="utf-8") as handle:
        offtopic = [line.strip() for line in handle if line.strip() and not line.startswith("#")]
    benign = [row["text"] for row in read_jsonl(args.benign) if row["label"] == 0] if args.benign else []

    # per_q[system][conversation] = list of metric dicts; grid_q[config][conversation] likewise
    per_q = collections.defaultdict(dict)
    grid_q = collections.defaultdict(dict)
    # context: on-topic max-cosine and recall@8 of the block; off-topic max-cosine (None = empty block)
    context_rows = {}
    set_of = {}
    imports = {}
    grid_inputs = {}
    if args.from_state:
        with open(args.from_state, "rb") as handle:
            state = pickle.load(handle)
        per_q.update(state["per_q"])
        context_rows, set_of, imports, grid_inputs = (state["context_rows"], state["set_of"], state["imports"],
                                                      state["grid_inputs"])
        datasets = []
    for data in datasets:
        set_name = os.path.basename(os.path.normpath(data))
        memories = read_jsonl(os.path.join(data, "memories.jsonl"))
        queries = read_jsonl(os.path.join(data, "queries.jsonl"))
        by_conversation = collections.defaultdict(list)
        for row in memories:
            by_conversation[row["conversation_id"]].append(row)
        for conversation, rows in sorted(by_conversation.items()):
            conv_queries = [q for q in queries if q["conversation_id"] == conversation and q.get("evidence_ids")]
            if not conv_queries:
                continue
            set_of[conversation] = set_name
            last = max(dt.datetime.fromisoformat(row["timestamp"]) for row in rows)
            now_dt = last + dt.timedelta(days=1)
            now = now_dt.strftime("%Y-%m-%dT%H:%M:%SZ")
            texts = [f"{row['speaker']}: {row['text']}" for row in rows]
            ids = [row["id"] for row in rows]
            session_of = {row["id"]: f"{conversation}:{row['session']}" for row in rows}
            evidence = {q["id"]: set(q["evidence_ids"]) for q in conv_queries}
            store = {
                "now_dt": now_dt,
                "speaker": {i: speaker(t) for i, t in zip(ids, texts)},
                "time": {row["id"]: dt.datetime.fromisoformat(row["timestamp"]) for row in rows},
                "words": {i: word_set(t) for i, t in zip(ids, texts)},
                "position": {i: n for n, i in enumerate(ids)},
                "neighbours": collections.defaultdict(list),
            }
            for a, b in zip(rows, rows[1:]):
                gap = abs((dt.datetime.fromisoformat(b["timestamp"]) - dt.datetime.fromisoformat(a["timestamp"])).total_seconds())
                if gap <= 30 * 60:
                    store["neighbours"][a["id"]].append(b["id"])
                    store["neighbours"][b["id"]].append(a["id"])
            with workspace(args.workdir, set_name, conversation) as (workdir, cache):
                home = os.path.join(workdir, "home")
                import_path = os.path.join(workdir, "rows.jsonl")
                import_rows = [{"text": text, "created_at": row["timestamp"], "source_ref": row["id"]}
                               for text, row in zip(texts, rows)]
                marker = os.path.join(workdir, "imported.json")
                summary = None
                if os.path.exists(marker):
                    with open(marker, encoding="utf-8") as handle:
                        kept = json.load(handle)
                    if kept["rows"] == import_rows:
                        summary = kept["summary"]
                if summary is None:
                    shutil.rmtree(home, ignore_errors=True)
                    write_jsonl(import_path, import_rows)
                    summary = json.loads(run([args.cairn, "--home", home, "memory", "import-episodic", import_path, "--json"], env))
                    if cache:
                        with open(marker, "w", encoding="utf-8") as handle:
                            json.dump({"rows": import_rows, "summary": summary}, handle)
                imports[conversation] = summary
                # Row ids, for the thread rule (rows next to each other by id).
                listed = json.loads(run([args.cairn, "--home", home, "memory", "episodic", "list", "--global",
                                         "--limit", "1000000", "--json"], env, cache, json.dumps(import_rows)))
                store["id"] = {row["source_ref"]: row["id"] for row in listed}
                store["ref_of"] = {row["id"]: row["source_ref"] for row in listed}
                store["text"] = dict(zip(ids, texts))
                print(f"{set_name}/{conversation}: {len(rows)} turns, {len(conv_queries)} questions, import {summary}",
                      file=sys.stderr)

                def search(extra, limit, prompts, context=False):
                    path = os.path.join(workdir, "queries.jsonl")
                    write_jsonl(path, prompts)
                    cmd = [args.cairn, "--home", home, "memory", "search", "--queries", path, "--now", now,
                           "--limit", str(limit), "--json"] + extra + (["--context"] if context else [])
                    return {json.loads(line)["id"]: json.loads(line)["hits"]
                            for line in run(cmd, env, cache, json.dumps(prompts)).splitlines()}

                prompts = [{"id": q["id"], "question": q["question"]} for q in conv_queries]

                def score(ranked_by_id):
                    return [metrics(ranked_by_id[q["id"]], evidence[q["id"]], session_of) for q in conv_queries]

                def refs(hits):
                    return {qid: [hit["source_ref"] for hit in h] for qid, h in hits.items()}

                for name, extra in FIXED.items():
                    per_q[name][conversation] = score(refs(search(extra, DEPTH, prompts)))
                # Context blocks: previous rule (no abstention) with cosines, this build's default.
                open_block = search(["--abstain-below", "0"] + ADDITIONS_OFF + ["--fusion", "weighted:0.7"], 8, prompts, context=True)
                per_q[CONTEXT_PREVIOUS][conversation] = score(refs(open_block))
                default_block = search([], 8, prompts, context=True)
                per_q[CONTEXT][conversation] = score(refs(default_block))
                dump = search(["--no-mmr", "--candidates", str(DUMP_POOL)] + ADDITIONS_OFF, 1000, prompts)
                off_prompts = [{"id": f"off{i}", "question": text} for i, text in enumerate(offtopic)]
                off_prompts += [{"id": f"benign{i}", "question": text} for i, text in enumerate(benign)]
                off_default = search([], 8, off_prompts, context=True)
                # Weighted fusion at 1 without a prior: the first hit is the best cosine.
                off_dump = search(["--fusion", "weighted:1", "--prior-weight", "0", "--no-mmr"] + ADDITIONS_OFF, 1, off_prompts)

                def max_cosine(hits):
                    return max((h["score"]["cosine"] or 0.0 for h in hits), default=0.0)

                speakers = {who for who in store["speaker"].values() if who}
                context_rows[conversation] = {
                    "on": [{"max_cosine": max_cosine(dump[q["id"]]), "named": names_anyone(q["question"], speakers),
                            "recall8": metrics(refs(open_block)[q["id"]], evidence[q["id"]], session_of)["turn recall@8"]}
                           for q in conv_queries],
                    "off": [{"id": p["id"], "max_cosine": max_cosine(off_dump[p["id"]]),
                             "named": names_anyone(p["question"], speakers),
                             "open_block_empty": False, "default_empty": not off_default[p["id"]]} for p in off_prompts],
                    "default_on_empty": sum(1 for q in conv_queries if not default_block[q["id"]]),
                }

                memory_vectors = embed(args.cairn, texts, env, workdir, "memories", cache)
                query_vectors = embed(args.cairn, [q["question"] for q in conv_queries], env, workdir, "queries", cache)
                bm25 = Bm25([tokens(text) for text in texts])
                baselines = collections.defaultdict(dict)
                for q, qv in zip(conv_queries, query_vectors):
                    cosine = ranking([sum(x * y for x, y in zip(qv, mv)) for mv in memory_vectors], ids)
                    keyword = ranking(bm25.scores(tokens(q["question"])), ids)
                    baselines[COSINE][q["id"]] = cosine[:DEPTH]
                    baselines[BM25][q["id"]] = keyword[:DEPTH]
                    baselines[PLAIN_RRF][q["id"]] = rrf(cosine, keyword)[:DEPTH]
                for name, ranked_by_id in baselines.items():
                    per_q[name][conversation] = score(ranked_by_id)

                candidates = {}
                for q in conv_queries:
                    candidates[q["id"]] = [{
                        "ref": h["source_ref"], "cosine": h["score"]["cosine"], "bm25": h["score"]["bm25"],
                        "keyword_ceiling": h["score"].get("keyword_ceiling"),
                        "vector_rank": h["score"]["vector_rank"], "keyword_rank": h["score"]["keyword_rank"],
                        "importance": h["score"]["importance"], "age_days": h["score"]["age_days"],
                    } for h in dump[q["id"]]]
                grid_inputs[conversation] = (candidates, store, conv_queries, evidence, session_of)

    if args.state:
        with open(args.state, "wb") as handle:
            pickle.dump({"per_q": dict(per_q), "context_rows": context_rows, "set_of": set_of, "imports": imports,
                         "grid_inputs": grid_inputs}, handle)
    if not args.no_grid:
        global GRID_INPUTS
        GRID_INPUTS = grid_inputs
        points = GRID + [p for p in dict.fromkeys((PREVIOUS, SHIPPED_BEFORE, THREAD_ONLY, UNCAPPED, CAPPED, CEILING,
                                                   SHIPPED))
                         if p not in GRID]
        with multiprocessing.get_context("fork").Pool(args.jobs) as workers:
            for config, rows in zip(points, workers.imap(rescore_all, points)):
                for conversation, table in rows.items():
                    grid_q[config][conversation] = table
        print(f"grid re-scored ({len(GRID)} points)", file=sys.stderr)

    conversations = list(set_of)
    sets = sorted(set(set_of.values()), key=lambda s: [set_of[c] for c in conversations].index(s))

    def training_score(table, held_out):
        per_set = []
        for s in sets:
            rows = [row for c in conversations if c != held_out and set_of[c] == s for row in table[c]]
            if rows:
                per_set.append(objective(rows))
        return sum(per_set) / len(per_set)

    chosen = {}
    if grid_q:
        for held_out in conversations:
            best = max(GRID, key=lambda config: training_score(grid_q[config], held_out))
            chosen[held_out] = best
            per_q[CV][held_out] = grid_q[best][held_out]
        per_q["grid point of the previous default (re-scored)"] = grid_q[PREVIOUS]
        per_q[SHIPPED_BEFORE_NAME] = grid_q[SHIPPED_BEFORE]
        per_q[THREAD_ONLY_NAME] = grid_q[THREAD_ONLY]
        per_q[UNCAPPED_NAME] = grid_q[UNCAPPED]
        per_q[CAPPED_NAME] = grid_q[CAPPED]
        per_q[CEILING_NAME] = grid_q[CEILING]
        per_q[SHIPPED_NAME] = grid_q[SHIPPED]
        all_best = max(GRID, key=lambda config: training_score(grid_q[config], None))

    # Abstention floor, chosen per fold.
    def abstains(row, floors):
        """The gate's rule: under the floor, or, for a query naming nobody in
        a conversation, under the higher of the two floors; 0 never abstains."""
        floor, unnamed = floors
        return floor > 0 and row["max_cosine"] < (floor if row.get("named", True) else max(floor, unnamed))

    def context_drop(convs, floors):
        """Per set: mean on-topic context recall@8 lost by abstaining under `floors`."""
        out = {}
        for s in sets:
            rows = [row for c in convs if set_of[c] == s for row in context_rows[c]["on"]]
            if rows:
                out[s] = sum(row["recall8"] for row in rows if abstains(row, floors)) / len(rows)
        return out

    def abstention(convs, floors, parity=None, prefix="off"):
        rows = [row for c in convs for row in context_rows[c]["off"] if row["id"].startswith(prefix)
                and (parity is None or int(row["id"][len(prefix):]) % 2 == parity)]
        return sum(1 for row in rows if abstains(row, floors)) / len(rows) if rows else float("nan")

    # Each floor the highest that costs at most 0.01 of on-topic context
    # recall@8 in each training set, ties broken by off-topic abstention on
    # the even-numbered prompts: the model's floor first, then the stronger
    # floor of a query naming nobody in a conversation beside it.
    floor_choice = {}
    for held_out in conversations + [None]:
        training = [c for c in conversations if c != held_out]

        def best(candidates):
            allowed = [f for f in candidates if all(drop <= 0.01 for drop in context_drop(training, f).values())]
            return max(allowed, key=lambda f: (abstention(training, f, parity=0), -f[0], -f[1]))

        floor = best([(f, 0.0) for f in FLOORS])[0]
        floor_choice[held_out] = best([(floor, u) for u in UNNAMED_FLOORS])

    def fold_mean(name, metric):
        return {c: statistics.mean(row[metric] for row in per_q[name][c]) for c in per_q[name]}

    order = ([CV] if grid_q else []) + list(FIXED) + [CONTEXT, CONTEXT_PREVIOUS, COSINE, BM25, PLAIN_RRF] \
        + (["grid point of the previous default (re-scored)", SHIPPED_BEFORE_NAME, THREAD_ONLY_NAME, UNCAPPED_NAME,
            CAPPED_NAME, CEILING_NAME, SHIPPED_NAME]
           if grid_q else [])
    report = {"sets": {}, "chosen": {c: list(v) for c, v in chosen.items()},
              "shipped_choice_on_all": list(all_best) if grid_q else None, "imports": imports,
              "abstention": {}, "floor_choice": {str(k): v for k, v in floor_choice.items()}}
    for s in sets:
        convs = [c for c in conversations if set_of[c] == s]
        nq = sum(len(per_q[PLAIN_RRF][c]) for c in convs)
        print(f"\n## {s}: {len(convs)} conversations, {nq} questions (mean of per-conversation means; each conversation held out)\n")
        for level in ("turn", "session"):
            print(f"### {level} level\n")
            header = ["system"] + [f"R@{k}" for k in KS] + [f"any@{k}" for k in KS] + [f"all@{k}" for k in KS] \
                + [f"NDCG@{k}" for k in KS]
            print("| " + " | ".join(header) + " |")
            print("|---" * len(header) + "|")
            for name in order:
                if not all(c in per_q[name] for c in convs):
                    continue
                cells = []
                for family in ("recall", "recall_any", "recall_all", "ndcg"):
                    for k in KS:
                        folds = fold_mean(name, f"{level} {family}@{k}")
                        value = statistics.mean(folds[c] for c in convs)
                        cells.append(f"{value:.3f}")
                        report["sets"].setdefault(s, {}).setdefault(name, {})[f"{level} {family}@{k}"] = {
                            "mean": value, "folds": {c: folds[c] for c in convs}}
                print(f"| {name} | " + " | ".join(cells) + " |")
            print()
        for name in (DEFAULT, CV) if grid_q else (DEFAULT,):
            for k in (8, 20):
                a = fold_mean(name, f"turn recall@{k}")
                b = fold_mean(PREVIOUS_NAME, f"turn recall@{k}")
                print(f"{name} minus previous default, turn R@{k}, per fold: "
                      + ", ".join(f"{c} {a[c] - b[c]:+.3f}" for c in convs)
                      + f"; mean {statistics.mean(a[c] - b[c] for c in convs):+.3f}")
        held = {c: floor_choice[c] for c in convs}
        drop = {c: context_drop([c], floor_choice[c])[s] for c in convs}
        rate = {c: abstention([c], floor_choice[c], parity=1) for c in convs}
        rate_all = {c: abstention([c], floor_choice[c]) for c in convs}
        benign_rate = {c: abstention([c], floor_choice[c], prefix="benign") for c in convs}
        default_rate = {c: sum(1 for row in context_rows[c]["off"] if row["id"].startswith("off") and row["default_empty"])
                        / sum(1 for row in context_rows[c]["off"] if row["id"].startswith("off")) for c in convs}
        print(f"\nabstention, floor chosen on the other conversations: {held}")
        print(f"  held-out on-topic context R@8 drop: {drop}; mean {statistics.mean(drop.values()):.4f}")
        print(f"  held-out off-topic abstention (odd prompts): {rate}; mean {statistics.mean(rate.values()):.3f}")
        print(f"  (all {len(offtopic)} own prompts: mean {statistics.mean(rate_all.values()):.3f}; "
              f"benign injection-dev prompts: mean {statistics.mean(benign_rate.values()):.3f})")
        default_benign = {c: sum(1 for row in context_rows[c]["off"] if row["id"].startswith("benign")
                                 and row["default_empty"])
                          / max(1, sum(1 for row in context_rows[c]["off"] if row["id"].startswith("benign")))
                          for c in convs}
        print(f"  this build's default block, benign injection-dev prompts, abstained: "
              f"mean {statistics.mean(default_benign.values()):.3f}")
        print(f"  this build's default block, own prompts, abstained: mean {statistics.mean(default_rate.values()):.3f}; "
              f"on-topic questions left empty: {sum(context_rows[c]['default_on_empty'] for c in convs)}/{nq}")
        report["abstention"][s] = {"floor": held, "drop": drop, "offtopic_odd": rate, "offtopic_all": rate_all,
                                   "benign": benign_rate, "default_offtopic_empty": default_rate,
                                   "default_benign_empty": default_benign}
    if grid_q:
        print("\nchosen per held-out conversation: " + ", ".join(f"{c}: {chosen[c]}" for c in conversations))
        print(f"choice on all conversations: {all_best}; abstention floor on all: {floor_choice[None]}")
        print("training score on all conversations of the previous default: "
              f"{training_score(grid_q[PREVIOUS], None):.4f}, of the choice: {training_score(grid_q[all_best], None):.4f}")
    if args.json:
        if grid_q:
            report["grid"] = {" ".join(map(str, config)): {c: objective(grid_q[config][c]) for c in conversations}
                              for config in GRID}
        with open(args.json, "w", encoding="utf-8") as handle:
            json.dump(report, handle, indent=1)


def embed(cairn, texts, env, workdir, name, cache=None):
    path = os.path.join(workdir, f"{name}.jsonl")
    write_jsonl(path, [{"id": i, "text": text} for i, text in enumerate(texts)])
    out = run([cairn, "embed", "--jsonl", path], env, cache, json.dumps(texts))
    return [json.loads(line)["vector"] for line in out.splitlines() if line.strip()]


@contextlib.contextmanager
def workspace(root, set_name, conversation):
    """A conversation's folder and its command cache: kept under `root`
    (`--workdir`) so a re-run reuses the imported home and the outputs of
    unchanged commands; a temporary folder without a cache otherwise."""
    if not root:
        with tempfile.TemporaryDirectory() as workdir:
            yield workdir, None
        return
    workdir = os.path.join(root, set_name, conversation)
    cache = os.path.join(workdir, "cache")
    os.makedirs(cache, exist_ok=True)
    yield workdir, cache


if __name__ == "__main__":
    main()
