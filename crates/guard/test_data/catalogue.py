"""Recall of the guard on synthetic credentials generated from the public
rule catalogues: gitleaks' rules (`catalogue_rules.GITLEAKS`, secrets wrapped
in the assignment syntaxes of gitleaks' own `GenerateSampleSecrets`) and
detect-secrets' plugins (`catalogue_rules.DETECT_SECRETS`). Values come from
a seeded generator over each rule's secret shape; none is a real credential.

    cargo build -p cairn-guard --example redact_jsonl
    python3 crates/guard/test_data/catalogue.py [--per-rule] [--misses RULE]

Prints recall per rule and overall. Reads no evaluation data.
"""
import json
import os
import random
import re
import subprocess
import sys

try:
    import re._parser as sre_parse  # Python 3.11+
    from re._constants import (ANY, AT, BRANCH, CATEGORY, IN, LITERAL, MAX_REPEAT, MIN_REPEAT, NEGATE,
                               NOT_LITERAL, RANGE, SUBPATTERN, CATEGORY_DIGIT, CATEGORY_WORD, CATEGORY_SPACE)
except ImportError:  # pragma: no cover
    import sre_parse
    from sre_constants import (ANY, AT, BRANCH, CATEGORY, IN, LITERAL, MAX_REPEAT, MIN_REPEAT, NEGATE,
                               NOT_LITERAL, RANGE, SUBPATTERN, CATEGORY_DIGIT, CATEGORY_WORD, CATEGORY_SPACE)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import catalogue_rules  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
TARGET = os.environ.get("CARGO_TARGET_DIR", os.path.join(HERE, "../../../target"))
BINARY = os.path.join(TARGET, "debug/examples/redact_jsonl")

rng = random.Random(0xCA7A106)

CATEGORIES = {
    CATEGORY_DIGIT: "0123456789",
    CATEGORY_WORD: "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_",
    CATEGORY_SPACE: " ",
}


def _class(items):
    chars = []
    for op, arg in items:
        if op == LITERAL:
            chars.append(chr(arg))
        elif op == RANGE:
            chars.extend(chr(c) for c in range(arg[0], arg[1] + 1))
        elif op == CATEGORY:
            chars.extend(CATEGORIES[arg])
        elif op == NEGATE:
            raise ValueError("negated classes are not generated")
    return chars


def _emit(parsed, out):
    for op, arg in parsed:
        if op == LITERAL:
            out.append(chr(arg))
        elif op == NOT_LITERAL or op == ANY:
            out.append("x")
        elif op == IN:
            out.append(rng.choice(_class(arg)))
        elif op in (MAX_REPEAT, MIN_REPEAT):
            low, high, sub = arg
            high = min(high, low + 40) if high > 10_000 else high
            for _ in range(rng.randint(low, high)):
                _emit(sub, out)
        elif op == SUBPATTERN:
            _emit(arg[-1], out)
        elif op == BRANCH:
            _emit(rng.choice(arg[1]), out)
        elif op == AT:
            pass
        else:
            raise ValueError(f"unsupported regex op {op}")


def generate(pattern):
    """A random string matching `pattern` (as gitleaks' `secrets.NewSecret`
    does for its tests)."""
    parsed = sre_parse.parse(pattern)
    for _ in range(50):
        out = []
        _emit(parsed, out)
        value = "".join(out)
        # Like a real random token: not a run of one character class when the
        # format allows letters and digits (gitleaks' entropy floors).
        if re.fullmatch(pattern, value):
            return value
    raise ValueError(pattern)


# The assignment syntaxes of gitleaks' `utils.GenerateSampleSecrets`
# (cmd/generate/config/utils/generate.go), {i} = identifier, {s} = secret.
SAMPLE_SYNTAXES = {
    "ini-quoted1": '{i}Token="{s}"',
    "ini-quoted2": '{i}Token = "{s}"',
    "ini-unquoted1": "{i}Token={s}",
    "ini-unquoted2": "{i}Token = {s}",
    "json-string": '{\n    "{i}_token": "{s}"\n}',
    "json-escaped-string": '\\{\n    \\"{i}_token\\": \\"{s}\\"\n\\}',
    "xml-element": "<{i}Token>{s}</{i}Token>",
    "xml-element-multiline": "<{i}Token>\n    {s}\n</{i}Token>",
    "yaml-unquoted": "{i}_token: {s}",
    "yaml-single-quote": "{i}_token: '{s}'",
    "yaml-double-quote": '{i}_token: "{s}"',
    "yaml-literal": "{i}_token: |\n  {s}",
    "yaml-folding": "{i}_token: >\n  {s}",
    "csharp": 'string {i}Token = "{s}";',
    "go-normal": 'var {i}Token string = "{s}"',
    "go-short": '{i}Token := "{s}"',
    "go-backticks": "{i}Token := `{s}`",
    "java": 'String {i}Token = "{s}";',
    "kotlin-notype": 'var {i}Token = "{s}"',
    "php-concat": '${i}Token .= "{s}"',
    "python-single": "{i}Token = '{s}'",
    "python-double": '{i}Token = "{s}"',
    "csv-unquoted": "{i}Token,{s},",
    "logstash": '  "{i}Token" => "{s}"',
    "make-recursive": '{i}_TOKEN = "{s}"',
    "make-simple": '{i}_TOKEN := "{s}"',
    "make-shell": '{i}_TOKEN ::= "{s}"',
    "make-evaluated-shell": '{i}_TOKEN :::= "{s}"',
    "make-conditional": '{i}_TOKEN ?= "{s}"',
    "make-append": '{i}_TOKEN += "{s}"',
    # `GenerateSampleSecret`, the one-line form most rule files use.
    "sample-secret": '{i}_api_token = "{s}"',
}


def fill(template, identifier, secret):
    return template.replace("{i}", identifier).replace("{s}", secret)


def gitleaks_rows(per_rule):
    rows = []
    for rule, identifier, shape in catalogue_rules.GITLEAKS:
        for n in range(per_rule):
            secret = generate(shape)
            for syntax, template in SAMPLE_SYNTAXES.items():
                rows.append({"source": "gitleaks", "rule": rule, "syntax": syntax, "secret": secret,
                             "text": fill(template, identifier, secret)})
    for rule, texts in catalogue_rules.GITLEAKS_LITERAL_FORMS(generate).items():
        for text in texts:
            rows.append({"source": "gitleaks", "rule": rule, "syntax": "literal", "text": text})
    return rows


def detect_secrets_rows(per_rule):
    rows = []
    for plugin, forms in catalogue_rules.DETECT_SECRETS_FORMS(generate, per_rule).items():
        for text in forms:
            rows.append({"source": "detect-secrets", "rule": plugin, "syntax": "plugin", "text": text})
    return rows


def main():
    per_rule = 3
    rows = gitleaks_rows(per_rule) + detect_secrets_rows(per_rule)
    misses_for = sys.argv[sys.argv.index("--misses") + 1] if "--misses" in sys.argv else None
    payload = "\n".join(json.dumps(row) for row in rows)
    result = subprocess.run([BINARY], input=payload, capture_output=True, text=True, check=True)
    verdicts = [json.loads(line) for line in result.stdout.splitlines()]
    by_rule = {}
    by_syntax = {}
    for row in verdicts:
        key = (row["source"], row["rule"])
        found, total = by_rule.get(key, (0, 0))
        by_rule[key] = (found + row["found"], total + 1)
        if row["source"] == "gitleaks":
            found, total = by_syntax.get(row["syntax"], (0, 0))
            by_syntax[row["syntax"]] = (found + row["found"], total + 1)
        if misses_for and (row["rule"] == misses_for or misses_for == "all") and not row["found"]:
            print("MISS", row["rule"], row["syntax"], repr(row["text"]))
    for source in ("gitleaks", "detect-secrets"):
        keys = [key for key in by_rule if key[0] == source]
        if not keys:
            continue
        rows_found = sum(by_rule[k][0] for k in keys)
        rows_total = sum(by_rule[k][1] for k in keys)
        macro = sum(by_rule[k][0] / by_rule[k][1] for k in keys) / len(keys)
        full = sum(1 for k in keys if by_rule[k][0] == by_rule[k][1])
        if "--per-rule" in sys.argv:
            for key in sorted(keys):
                found, total = by_rule[key]
                marker = "" if found == total else "  <--"
                print(f"{source:15} {key[1]:45} {found:4}/{total:<4} {100 * found / total:5.1f} %{marker}")
        print(f"{source}: {len(keys)} rules, rows {rows_found}/{rows_total} ({100 * rows_found / rows_total:.1f} %), "
              f"macro recall {100 * macro:.1f} %, rules fully caught {full}/{len(keys)}")
    if "--per-syntax" in sys.argv:
        for syntax, (found, total) in sorted(by_syntax.items()):
            print(f"  syntax {syntax:22} {found}/{total} ({100 * found / total:.1f} %)")


if __name__ == "__main__":
    main()
