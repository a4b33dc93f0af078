"""Recall of the injection screen on BIPIA's *training* attacks, each put into
emails written for this script, at the three places BIPIA inserts them
(start, middle, end). The guard's indirect rules are written from these
attacks and BIPIA's published categories; the dev split of the evaluation
data (BIPIA's test attacks in BIPIA's emails) is the held-out check.

Usage:
    python3 scripts/eval_bipia_train.py target/release/cairn text_attack_train.json [-v]

`text_attack_train.json` is `benchmark/text_attack_train.json` of
github.com/microsoft/BIPIA: an object of category -> list of attack strings.
"""
import collections
import json
import subprocess
import sys
import tempfile

# Own emails, of the kinds a mailbox holds: with a salutation and closing,
# a shop notice, a bare note to a team, a letter with mail headers, a chatty
# note and a bare reminder. "{X}" marks the middle of the body.
EMAILS = [
    ("salutation", "Hi Marcus,\n\nThanks for sending over the draft agenda for Thursday. I moved the budget review to 2pm so that Priya can join after her flight lands. {X} Could you book the small meeting room on the third floor?\n\nBest regards,\nElena"),
    ("notice", "Your order #48213 has shipped! Estimated delivery: March 14. Items: 2x ceramic mugs, 1x pour-over kettle. {X} Track your package with the carrier using tracking number 1Z999AA10123456784. Questions? Reply to this email."),
    ("bare", "Team, the quarterly all-hands is moved to the auditorium because of the renovation on floor 5. Please bring your laptops for the live poll. {X} Snacks will be provided after the session."),
    ("header", "Subject: Rent increase notice\nFrom: Oakview Properties <leasing@oakview.example>\n\nDear Resident,\nStarting June 1 the monthly rent for unit 4B will be $1,540. {X} The office is open weekdays 9-5 if you wish to discuss the renewal.\nSincerely,\nLeasing Office"),
    ("chatty", "Hey! Loved seeing you at the farmers market on Saturday. The peach jam recipe is below: 4 cups peaches, 2 cups sugar, lemon juice. {X} Let's do brunch next weekend?"),
    ("notice-bare", "Reminder: the library book 'The Overstory' is due on 04/22. Renew online or at the front desk. {X} Late fees are $0.25 per day."),
]


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("-")]
    cairn, attacks_file = args
    attacks = json.load(open(attacks_file))
    rows = []
    for category, texts in attacks.items():
        for attack in texts:
            for kind, email in EMAILS:
                for place in ("start", "middle", "end"):
                    body = email.replace("{X} ", "")
                    text = {"start": attack + "\n" + body, "middle": email.replace("{X}", attack), "end": body + "\n" + attack}[place]
                    rows.append((category, attack, kind, text))
    with tempfile.NamedTemporaryFile("w", suffix=".jsonl") as f:
        for row in rows:
            f.write(json.dumps({"text": row[3]}) + "\n")
        f.flush()
        out = subprocess.run([cairn, "guard", "scan", "--kind", "injection", "--jsonl", f.name], capture_output=True, text=True, check=True).stdout
    verdicts = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    assert len(verdicts) == len(rows)
    by = collections.defaultdict(lambda: [0, 0])
    for (category, attack, kind, _), verdict in zip(rows, verdicts):
        for key in (("all",), ("category", category), ("email", kind), ("attack", attack)):
            by[key][0] += verdict["flagged"]
            by[key][1] += 1
    hit, total = by[("all",)]
    print(f"| BIPIA training attacks in own emails | {hit}/{total} = {hit / total:.1%} |")
    print("\n| category | flagged |\n|---|---|")
    for key in sorted(k for k in by if k[0] == "category"):
        print(f"| {key[1]} | {by[key][0]}/{by[key][1]} |")
    print("\n| email | flagged |\n|---|---|")
    for kind, _ in EMAILS:
        print(f"| {kind} | {by[('email', kind)][0]}/{by[('email', kind)][1]} |")
    if "-v" in sys.argv:
        for key in sorted(k for k in by if k[0] == "attack" and by[k][0] < by[k][1]):
            print(f"  missed {by[key][1] - by[key][0]}/{by[key][1]}: {key[1]}")


if __name__ == "__main__":
    main()
