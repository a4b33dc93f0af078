"""Runs `cairn guard scan` over the evaluation sets and prints the tables in BENCHMARKS.md.

Usage: python3 scripts/eval_guard.py target/release/cairn [EVALDATA_DIR] [-v]
EVALDATA_DIR defaults to ../shared/evaldata beside the checkout. -v lists misses
and changed benign rows.
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
