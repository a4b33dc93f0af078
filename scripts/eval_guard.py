"""Runs `cairn guard scan` over the evaluation sets and prints the tables in BENCHMARKS.md.

Usage: python3 scripts/eval_guard.py target/release/cairn [EVALDATA_DIR] [-v]
EVALDATA_DIR defaults to ../shared/evaldata beside the checkout. -v lists misses
and changed benign rows. The last table is the guard's own corpus
(crates/guard/test_data/corpus.jsonl), per family.
"""
import json, subprocess, sys, collections, tempfile, os
B = sys.argv[1]
args = [a for a in sys.argv[2:] if not a.startswith('-')]
E = args[0] if args else os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..', 'shared', 'evaldata')
def scan(kind, rows):
    with tempfile.NamedTemporaryFile('w', suffix='.jsonl', delete=False) as f:
        for r in rows: f.write(json.dumps({'id': r['id'], 'text': r['text']}) + '\n')
    out = subprocess.run([B, 'guard', 'scan', '--kind', kind, '--jsonl', f.name], capture_output=True, text=True, check=True).stdout
    os.unlink(f.name)
    res = [json.loads(l) for l in out.splitlines()]
    assert len(res) == len(rows)
    return res
inj = [json.loads(l) for l in open(f'{E}/injection-dev/injection.jsonl')]
res = scan('injection', inj)
tot = collections.Counter(); hit = collections.Counter()
for r, o in zip(inj, res):
    tot[r['type']] += 1; hit[r['type']] += o['flagged']
print('## injection (--kind injection)')
print('| type | label | rows | flagged | rate |\n|---|---|---|---|---|')
for t in ['jailbreak', 'direct', 'extraction', 'indirect', 'benign-prompt', 'benign-trigger-words', 'benign-document']:
    lab = 'benign' if t.startswith('benign') else 'injection'
    print(f'| {t} | {lab} | {tot[t]} | {hit[t]} | {100*hit[t]/tot[t]:.1f}% |')
de = hit['direct'] + hit['extraction']; dt = tot['direct'] + tot['extraction']
print(f'| direct + extraction | injection | {dt} | {de} | {100*de/dt:.1f}% |')
print()
print('## secrets (--kind secrets)')
print('| file | tp rows | tp flagged | rate | fp rows | fp flagged |\n|---|---|---|---|---|---|')
alltp = allhit = 0
for name in ['gitleaks', 'detect_secrets']:
    rows = [json.loads(l) for l in open(f'{E}/secrets-dev/{name}.jsonl')]
    res = scan('secrets', rows)
    tp = [o for r, o in zip(rows, res) if r['label'] == 'tp']
    fp = [o for r, o in zip(rows, res) if r['label'] == 'fp']
    th = sum(o['flagged'] for o in tp); fh = sum(o['flagged'] for o in fp)
    alltp += len(tp); allhit += th
    print(f'| {name}.jsonl | {len(tp)} | {th} | {100*th/len(tp):.1f}% | {len(fp)} | {fh} |')
    if '-v' in sys.argv:
        for r, o in zip(rows, res):
            if r['label'] == 'tp' and not o['flagged']: print('   MISS', r['rule_id'], r['text'][:120].replace('\n', '\\n'))
print(f'| both | {alltp} | {allhit} | {100*allhit/alltp:.1f}% | | |')
print()
print('## redaction false positives (--kind secrets on benign text)')
print('| corpus | rows | rows changed | clean rate |\n|---|---|---|---|')
benign = [r for r in inj if r['label'] == 0]
loc = [json.loads(l) for l in open(f'{E}/locomo-dev/memories.jsonl')]
for name, rows in [('injection-dev benign rows', benign), ('locomo-dev memories', loc)]:
    res = scan('secrets', rows)
    changed = [(r, o) for r, o in zip(rows, res) if o['redacted'] != r['text']]
    print(f'| {name} | {len(rows)} | {len(changed)} | {100*(1-len(changed)/len(rows)):.2f}% |')
    if '-v' in sys.argv:
        for r, o in changed: print('   CHANGED', o['rules'], r['text'][:200])
print()
print('## own corpus (crates/guard/test_data/corpus.jsonl), per family')
print('| family | kind | positives | caught | near misses | touched | benign | touched |\n|---|---|---|---|---|---|---|---|')
C = os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'crates', 'guard', 'test_data', 'corpus.jsonl')
own = [json.loads(l) for l in open(C, encoding='utf-8') if l.strip()]
verdicts = {}
for kind in ['injection', 'secrets']:
    rows = [r for r in own if r['kind'] in (kind, 'benign')]
    for r, o in zip(rows, scan(kind, [{'id': i, 'text': r['text']} for i, r in enumerate(rows)])):
        verdicts[(kind, id(r))] = o
def caught(r):
    if r['kind'] == 'injection':
        return verdicts[('injection', id(r))]['flagged']
    o = verdicts[('secrets', id(r))]
    return o['flagged'] and r['secret'] not in o['redacted']
def touched(r, kind):
    o = verdicts[(kind, id(r))]
    return o['flagged'] if kind == 'injection' else o['redacted'] != r['text']
families = []
for r in own:
    if r['family'] not in families: families.append(r['family'])
totals = collections.Counter()
for fam in families:
    rows = [r for r in own if r['family'] == fam]
    kind = rows[0]['kind']
    pos = [r for r in rows if r['label'] == 'positive']; near = [r for r in rows if r['label'] == 'near-miss']
    ben = [r for r in rows if r['label'] == 'benign']
    pc = sum(caught(r) for r in pos)
    nt = sum(touched(r, kind) for r in near)
    bt = sum(touched(r, 'injection') or touched(r, 'secrets') for r in ben)
    totals.update(pos=len(pos), pc=pc, near=len(near), nt=nt, ben=len(ben), bt=bt)
    rate = lambda a, b: f'{100*a/b:.0f}%' if b else ''
    print(f"| {fam} | {kind} | {len(pos) or ''} | {rate(pc, len(pos))} | {len(near) or ''} | {rate(nt, len(near))} | {len(ben) or ''} | {rate(bt, len(ben))} |")
    if '-v' in sys.argv:
        for r in pos:
            if not caught(r): print('   MISS', fam, r['text'][:120].replace('\n', '\\n'))
        for r in near:
            if touched(r, kind): print('   TOUCHED', fam, r['text'][:120].replace('\n', '\\n'))
print(f"| all | | {totals['pos']} | {100*totals['pc']/totals['pos']:.1f}% | {totals['near']} | {100*totals['nt']/totals['near']:.1f}% | {totals['ben']} | {100*totals['bt']/totals['ben']:.1f}% |")
