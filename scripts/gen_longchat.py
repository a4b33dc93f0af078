#!/usr/bin/env python3
"""Generates `longchat-dev`, a synthetic second dev set for episodic
retrieval of another kind than LoCoMo: one user talking to an assistant
over many sessions spread across months, with long assistant turns.

No public set of this kind (LongMemEval and the like) can be reached from
the build machines, so this one is written from scratch, deterministically
(seeded RNG, no input files): every sentence comes from the templates and
word lists below, written for this script (same licence as the
repository). It is a *proxy*, not a benchmark others can compare with:

- user turns are short and some carry a personal fact ("we named her
  Biscuit"); assistant turns are long advice answers (700 to 1,900
  characters) built from per-topic sentence banks, some carrying a
  recommendation the user later asks about;
- questions paraphrase the fact ("What did I name my dog?" against "we
  brought home a beagle puppy ... named her Biscuit"), so neither word
  overlap nor embedding alone is enough, but the wording comes from a small
  template set and repeats across conversations;
- kinds of question: a user fact (one evidence turn), an assistant
  recommendation (the long assistant turn), a fact that changed (both
  turns are evidence), a count over two sessions (both turns), and a
  question naming the month the fact was told in;
- distractor sessions talk about the same topics without the facts.

Output, in `--out` (LoCoMo-dev's layout, so `scripts/eval_locomo.py`
reads it): `memories.jsonl` (id, conversation_id, session, timestamp,
speaker, text) and `queries.jsonl` (id, conversation_id, question,
category_name, evidence_ids).

    python3 scripts/gen_longchat.py --out /tmp/longchat-dev
"""

import argparse
import datetime as dt
import json
import os
import random

TOPICS = {
    "cooking": [
        "When you cook {dish}, start by prepping every ingredient before the pan gets hot, because the actual cooking goes quickly.",
        "Salt in stages rather than all at the end; a pinch early lets the seasoning reach the inside of the {ingredient}.",
        "A heavy-bottomed pan holds heat better, so the {ingredient} browns instead of steaming in its own liquid.",
        "If the sauce tastes flat, a splash of acid such as lemon juice or vinegar usually brightens it more than extra salt would.",
        "Resting the dish for five to ten minutes after it leaves the heat lets the juices settle and the flavours come together.",
        "For weeknights, batch-cook a base like rice or roasted vegetables on Sunday and build different meals on it during the week.",
        "Taste as you go and adjust: recipes are a starting point, and your stove, your pans and your ingredients all differ.",
        "Fresh herbs go in at the end, while dried herbs need time in the pot to release their aroma.",
        "Keep a small notebook of what worked and what did not, so the next attempt at {dish} starts from your own notes.",
        "Cutting the {ingredient} into even pieces is the simplest way to make sure everything is done at the same time.",
        "Don't overcrowd the tray; give every piece a little space so the hot air can move around it and crisp the edges.",
        "A cheap instant-read thermometer removes most of the guesswork from meat and fish.",
    ],
    "travel": [
        "For a trip to {place}, book the flights first and keep the first and last night's accommodation flexible.",
        "Pack one outfit fewer than you think you need; almost everywhere has laundry, and a lighter bag is easier on trains.",
        "Check whether your passport is valid for at least six months after your return date, since some countries require it.",
        "Travel insurance that covers cancellation is worth comparing, especially if the booking is non-refundable.",
        "Download offline maps of {place} before you leave, so you are not dependent on roaming data.",
        "Try to schedule one unplanned day; the best memories often come from wandering without an itinerary.",
        "Local markets are a good way to eat well on a budget and to see how people in {place} actually live.",
        "Keep digital copies of your documents in a secure place and a paper copy separate from the originals.",
        "Jet lag is easier if you adjust your sleep by an hour a day in the week before departure and get daylight on arrival.",
        "Public transport passes often pay for themselves after three or four rides, so compare them before buying single tickets.",
        "Notify your bank about the travel dates so that card payments abroad are not blocked.",
        "A small first-aid kit with plasters, pain relief and any regular medication saves a frantic pharmacy search.",
    ],
    "fitness": [
        "Consistency matters more than intensity: three moderate sessions a week beat one exhausting session you dread.",
        "Increase your weekly running distance by no more than about ten percent to give tendons time to adapt.",
        "Warm up with five minutes of easy movement and a few dynamic stretches before {exercise}.",
        "Sleep is part of training; most of the adaptation happens while you recover, not while you work out.",
        "If your knees ache after {exercise}, check your shoes and your form before adding more volume.",
        "Strength training twice a week supports running economy and helps prevent injuries.",
        "Keep an easy pace on most runs, easy enough that you could hold a conversation.",
        "Hydrate before you feel thirsty on long sessions, and consider electrolytes when it is hot.",
        "Track how you feel as well as the numbers; fatigue and mood are early signs of overtraining.",
        "A rest week every four to six weeks lets the body catch up with the training load.",
        "Mobility work for the hips and ankles pays off for almost every sport.",
        "Set a goal that is specific and dated, such as a local {exercise} event, so the plan has a shape.",
    ],
    "garden": [
        "Most balcony plants fail from overwatering rather than underwatering, so check the soil with a finger first.",
        "Pots need drainage holes; a saucer underneath is fine as long as the water does not sit there for days.",
        "South-facing spots get the most sun, which suits herbs and tomatoes but can scorch shade plants like {plant}.",
        "Feed container plants lightly every two weeks in the growing season, since nutrients wash out of pots quickly.",
        "Repot when roots circle the bottom of the pot, ideally in spring, going up one pot size at a time.",
        "Deadheading spent flowers encourages many plants to keep blooming for longer.",
        "Aphids can usually be knocked off with a strong spray of water before reaching for any treatment.",
        "Group plants with similar water needs together so one schedule works for all of them.",
        "Mulch on the surface of larger pots keeps the soil from drying out on hot afternoons.",
        "Bring tender plants like {plant} inside before the first frost, and give them the brightest window you have.",
        "Cuttings from a healthy plant root easily in a glass of water on a bright windowsill.",
        "Keep notes of when you sow and when things flower, so next year's plan starts from what happened.",
    ],
    "money": [
        "Start with a simple budget: list fixed costs, then decide what share of the rest goes to savings before spending.",
        "An emergency fund of three to six months of essential expenses protects you from high-interest debt.",
        "Automating a transfer to savings on payday makes saving the default rather than a decision.",
        "Review subscriptions every few months; small recurring charges add up over a year.",
        "Paying off the highest-interest debt first saves the most money overall.",
        "For groceries, planning meals for the week and shopping with a list cuts impulse purchases.",
        "Low-cost index funds are a common long-term choice because fees compound just like returns do.",
        "Keep receipts for larger purchases in one folder; warranties and returns become much easier.",
        "If your income varies, budget on your lowest typical month and treat the rest as a bonus.",
        "Compare insurance quotes once a year, since loyalty rarely earns the best price.",
        "A separate account for irregular costs, like car repairs or gifts, smooths out expensive months.",
        "Write down one money goal with a date, such as a deposit for {goal}, to keep the plan concrete.",
    ],
    "home": [
        "Before drilling into a wall, check for pipes and cables with a detector, especially near sockets and switches.",
        "A dripping tap is usually a worn washer or cartridge, a cheap part once you turn off the water supply.",
        "Bleed the radiators at the start of the heating season if the tops stay cold while the bottoms are warm.",
        "Use painter's tape and a good angled brush for edges; rolling the middle of the wall goes quickly afterwards.",
        "Silicone around a bath should be cut out completely before resealing, not layered over the old bead.",
        "Squeaky floorboards can often be quietened with a screw into the joist below.",
        "Clean the filter of the dishwasher monthly; most bad smells come from there.",
        "Draught-proofing strips on doors and windows are one of the cheapest ways to cut heating bills.",
        "Keep a list of the tools you lend out; they have a habit of not coming back.",
        "Check the smoke alarms every month and replace the batteries once a year.",
        "When you {repair}, take photos of each step so you can put things back the way they were.",
        "A stud finder and a spirit level make shelves straight and safe on the first try.",
    ],
    "music": [
        "Short daily practice beats one long session at the weekend; fifteen focused minutes are enough to make progress.",
        "Record yourself playing {piece} once a week, since you hear timing problems on a recording that you miss while playing.",
        "Practise slowly with a metronome and raise the tempo only when the passage is clean three times in a row.",
        "Warm up with scales or simple exercises before working on pieces, so your hands are loose.",
        "Break a hard piece into small sections and loop the difficult bars rather than always starting from the top.",
        "Learning some music theory helps you memorise pieces because you recognise patterns instead of single notes.",
        "Playing along with recordings builds your sense of rhythm and makes practice more fun.",
        "Rest your hands if they hurt; tension and pain are signs to check your posture, not to push through.",
        "A teacher, even for a few lessons, can spot habits that are hard to unlearn later.",
        "Set a small performance goal, like playing {piece} for a friend, to give your practice a deadline.",
        "Tune before every practice; an out-of-tune instrument trains your ear in the wrong direction.",
        "Keep a practice log with what you worked on and what to do next time.",
    ],
    "career": [
        "Before an interview, prepare three short stories about problems you solved and what changed because of you.",
        "In the first weeks of a new role, listen more than you talk and write down how things are actually done.",
        "Ask your manager early what success in the first three months looks like, so you both agree on it.",
        "Keep a brag document of your wins; it makes reviews and salary conversations much easier.",
        "When negotiating, anchor on the value you bring and the market range rather than your previous salary.",
        "Block focus time in your calendar, since meetings expand to fill whatever space is left.",
        "Build relationships across teams; many problems are solved faster through people than through tickets.",
        "If you feel stuck, list the skills the next role needs and pick one to practise deliberately this quarter.",
        "Feedback lands better when it is specific, timely and about the work rather than the person.",
        "Take your holidays; rested people make better decisions, and the work will still be there.",
        "A mentor outside your company can give you honest perspective on your options.",
        "Write short notes after important meetings so decisions do not get lost.",
    ],
}

FILL = {
    "dish": ["risotto", "a curry", "lasagne", "stir-fried noodles", "shakshuka", "a stew"],
    "ingredient": ["onion", "chicken", "aubergine", "potato", "mushroom", "tofu"],
    "place": ["Lisbon", "Kyoto", "Vancouver", "Marrakesh", "Oslo", "Buenos Aires", "Edinburgh", "Hanoi"],
    "exercise": ["a long run", "cycling", "swimming", "a leg workout", "a 10k race"],
    "plant": ["a fern", "a fuchsia", "a begonia", "a lemon tree", "a hibiscus"],
    "goal": ["a flat", "a new car", "a sabbatical", "a wedding"],
    "repair": ["replace a light fitting", "fix the cistern", "rehang a door", "change a socket cover"],
    "piece": ["a Chopin nocturne", "a jazz standard", "a folk tune", "a Bach minuet"],
}

USER_ASKS = {
    "cooking": ["Any tips for making {dish} on a weeknight?", "How do I stop my {ingredient} from going soggy?", "What should I cook this week?"],
    "travel": ["I'm thinking about a trip to {place}, what should I plan for?", "How do I pack light for two weeks?", "Any advice on beating jet lag?"],
    "fitness": ["How should I build up my running?", "My knees ache after {exercise}, what should I do?", "How often should I train?"],
    "garden": ["Why are the leaves on my balcony plants turning yellow?", "How do I keep {plant} alive over winter?", "When should I repot?"],
    "money": ["How do I start a budget?", "Should I pay off debt or save first?", "How can I save for {goal}?"],
    "home": ["How do I {repair} safely?", "My radiators are cold at the top, why?", "How do I hang shelves properly?"],
    "music": ["How do I practise {piece} more effectively?", "I keep rushing the tempo, any advice?", "Is theory worth learning?"],
    "career": ["I have an interview next week, how do I prepare?", "How do I ask for a raise?", "How do I settle into a new team?"],
}

NAMES = ["Biscuit", "Juniper", "Pepper", "Mochi", "Clover", "Ziggy", "Hazel", "Rufus", "Nori", "Waffles"]
BREEDS = ["beagle", "border collie", "dachshund", "labrador", "whippet", "corgi"]
CATS = ["tabby", "Siamese", "ginger", "tuxedo", "calico"]
CARS = ["hatchback", "pickup truck", "electric SUV", "station wagon", "minivan"]
COLORS = ["red", "dark green", "silver", "navy blue", "white"]
SIBLINGS = ["Priya", "Elena", "Marta", "Hannah", "Chloe", "Ines"]
CITIES = ["Denver", "Rotterdam", "Melbourne", "Toronto", "Porto", "Seoul", "Austin", "Dublin"]
CLASSES = ["pottery", "watercolour painting", "salsa dancing", "woodworking", "Italian conversation", "photography"]
WEEKDAYS = ["Monday", "Tuesday", "Wednesday", "Thursday"]
ALLERGENS = ["peanuts", "sesame", "shellfish", "eggs", "kiwi"]
BOOKS = ["The Left Hand of Darkness", "Middlemarch", "Piranesi", "The Remains of the Day", "Station Eleven", "Kindred"]
COMPANIES = ["a logistics startup", "the city hospital", "a solar installer", "a publishing house", "a game studio"]
ROLES = ["data analyst", "project coordinator", "office manager", "UX researcher", "operations lead"]
INSTRUMENTS = ["the cello", "the ukulele", "jazz piano", "the trumpet", "classical guitar"]
RECS = {
    "cooking": ("I'd especially recommend a {x} as your go-to", ["one-pan lemon chickpea bake", "miso-glazed salmon traybake", "black bean chilli", "spinach and ricotta cannelloni"],
                "Which weeknight dish did you suggest I make my staple?"),
    "travel": ("For your stay, I'd recommend basing yourself in {x}", ["the old harbour district", "a guesthouse near the central station", "the university quarter", "a quiet neighbourhood by the river"],
               "Where did you suggest I stay on my trip?"),
    "fitness": ("A good plan for you would be {x}", ["the couch-to-5k programme", "a three-day full-body strength split", "a Pilates class twice a week", "hill repeats every Thursday"],
                "What training programme did you recommend to me?"),
    "money": ("The account I'd point you to is {x}", ["a high-yield easy-access savings account", "a tracker index fund with low fees", "a separate sinking-fund account", "a cash ISA"],
              "What kind of account did you advise me to open?"),
    "music": ("For your level I'd recommend the book {x}", ["Hanon's virtuoso exercises", "the Real Book volume one", "Progressive Method for beginners", "the Suzuki book two"],
              "Which practice book did you point me to?"),
}
OPENERS = ["", "Hi again!", "Quick question.", "Following up on last time:", "Okay, another one.", "Hey.",
           "I was wondering about something.", "Morning!", "Sorry, one more thing.", "Back again with a question."]
CONTEXTS = ["", "It's been a busy week.", "I only have the evening free.", "My partner asked me to check.",
            "I read conflicting advice online.", "I'm trying to be more organised this year.", "No rush on this."]
MONTHS = ["January", "February", "March", "April", "May", "June", "July", "August", "September", "October", "November", "December"]


def fill(rng, template, **fixed):
    out = template
    for key, values in FILL.items():
        while "{" + key + "}" in out:
            out = out.replace("{" + key + "}", fixed.get(key) or rng.choice(values), 1)
    return out


def advice(rng, topic, extra=None, target=(700, 1850)):
    """A long assistant answer: sentences of the topic's bank, with `extra` somewhere inside."""
    bank = TOPICS[topic][:]
    rng.shuffle(bank)
    size = rng.randint(*target)
    sentences, length = [], 0
    for sentence in bank:
        sentence = fill(rng, sentence)
        if length + len(sentence) > size and sentences:
            break
        sentences.append(sentence)
        length += len(sentence) + 1
    if extra:
        sentences.insert(rng.randint(1, max(1, len(sentences) - 1)), extra)
    opener = rng.choice(["Good question.", "Happy to help.", "Here is what I would do.", "A few thoughts.", "Sure."])
    text = opener + " " + " ".join(sentences)
    return text[:1900]


def facts(rng):
    """(topic, user statement, question, kind) for one user; values drawn per user."""
    dog, cat = rng.sample(NAMES, 2)
    city_a, city_b = rng.sample(CITIES, 2)
    out = [
        ("garden", f"By the way, we finally brought home a {rng.choice(BREEDS)} puppy last weekend, we named her {dog}.", "What did I name my dog?", "user-fact"),
        ("cooking", f"Quick note, my son is allergic to {rng.choice(ALLERGENS)}, so please keep that in mind for recipes.", "Which food does my child react badly to?", "user-fact"),
        ("music", f"I've been learning {rng.choice(INSTRUMENTS)} for a few months now and I love it.", "What instrument have I been taking up?", "user-fact"),
        ("career", f"I started the new job at {rng.choice(COMPANIES)} as a {rng.choice(ROLES)} this Monday.", "What position did I take and where?", "user-fact"),
        ("travel", f"My sister {rng.choice(SIBLINGS)} got a job offer in {city_a}, she's relocating there soon.", "Which city is my sibling moving to for work?", "user-fact"),
        ("home", f"I just traded in my old sedan for a {rng.choice(COLORS)} {rng.choice(CARS)}.", "What vehicle do I drive now?", "user-fact"),
        ("fitness", f"I signed up for a {rng.choice(CLASSES)} class at the community centre on {rng.choice(WEEKDAYS)} evenings.", "Which course did I enrol in at the community centre?", "user-fact"),
        ("travel", f"I finished reading {rng.choice(BOOKS)} on the flight home, the ending was wild.", "Which novel did I get through on the plane?", "user-fact"),
    ]
    moves = (
        ("money", f"We signed the lease on a flat in {city_b}, moving in next month.", f"We changed plans and moved to {rng.choice([c for c in CITIES if c != city_b])} instead, the commute was better."),
        "Where do I live now?",
    )
    cat_fact = ("garden", f"We also adopted a {rng.choice(CATS)} kitten from the shelter and called him {cat}.")
    return out, moves, cat_fact


def conversation(rng, conv_id, start):
    """Sessions over about eight months; returns (turns, queries)."""
    topics = list(TOPICS)
    user_facts, (move_topic_texts, move_question), cat_fact = facts(rng)
    move_topic, move_first, move_second = move_topic_texts
    n_sessions = rng.randint(34, 46)
    days = sorted(rng.sample(range(0, 240), n_sessions))
    # Which session carries which fact (never two in one session).
    plan = {}
    slots = rng.sample(range(n_sessions), len(user_facts) + 4 + len(RECS))
    for i, fact in enumerate(user_facts):
        plan[slots[i]] = ("fact", i)
    base = len(user_facts)
    early, late = sorted(slots[base:base + 2])
    plan[early] = ("move", 0)
    plan[late] = ("move", 1)
    dog_slot = slots[0]
    cat_slot = slots[base + 2]
    plan[cat_slot] = ("cat", 0)
    for j, topic in enumerate(RECS):
        plan[slots[base + 4 + j] if base + 4 + j < len(slots) else slots[base + 3]] = ("rec", topic)
    turns, queries, evidence = [], [], {}
    for s, day in enumerate(days):
        when = start + dt.timedelta(days=day, hours=rng.randint(7, 22), minutes=rng.randint(0, 59))
        kind = plan.get(s)
        topic = rng.choice(topics)
        session = []
        n_exchanges = rng.randint(2, 3)
        fact_at = rng.randrange(n_exchanges)
        asks = rng.sample(USER_ASKS[topic], n_exchanges if n_exchanges <= len(USER_ASKS[topic]) else len(USER_ASKS[topic]))
        for e in range(n_exchanges):
            ask = " ".join(part for part in (rng.choice(OPENERS), rng.choice(CONTEXTS), fill(rng, asks[e % len(asks)])) if part)
            extra = None
            key = None
            if kind and e == fact_at:
                what, index = kind
                if what == "fact":
                    topic = user_facts[index][0]
                    ask = user_facts[index][1] + " " + fill(rng, rng.choice(USER_ASKS[topic]))
                    key = ("user", index)
                elif what == "move":
                    topic = move_topic
                    ask = (move_first if index == 0 else move_second) + " " + fill(rng, rng.choice(USER_ASKS[topic]))
                    key = ("user", f"move{index}")
                elif what == "cat":
                    topic = cat_fact[0]
                    ask = cat_fact[1] + " " + fill(rng, rng.choice(USER_ASKS[topic]))
                    key = ("user", "cat")
                elif what == "rec":
                    topic = index
                    ask = fill(rng, rng.choice(USER_ASKS[topic]))
                    lead, items, _ = RECS[topic]
                    extra = lead.format(x=rng.choice(items)) + "."
                    key = ("assistant", f"rec-{topic}")
            session.append(("User", ask, key if key and key[0] == "user" else None))
            session.append(("Assistant", advice(rng, topic, extra), key if key and key[0] == "assistant" else None))
        for t, (speaker, text, key) in enumerate(session):
            turn_id = f"{conv_id}:S{s + 1}:{t + 1}"
            stamp = when + dt.timedelta(minutes=2 * t)
            turns.append({
                "id": turn_id, "conversation_id": conv_id, "session": s + 1,
                "session_date": when.strftime("%Y-%m-%d %H:%M"), "timestamp": stamp.strftime("%Y-%m-%dT%H:%M:%S"),
                "speaker": speaker, "text": text,
            })
            if key:
                evidence[key[1]] = (turn_id, when)
    q = 0

    def add(question, kind, ids):
        nonlocal q
        queries.append({"id": f"{conv_id}:q{q}", "conversation_id": conv_id, "question": question,
                        "category_name": kind, "evidence_ids": ids})
        q += 1

    for i, (_, _, question, kind) in enumerate(user_facts):
        add(question, kind, [evidence[i][0]])
        if i % 2 == 0:
            month = MONTHS[evidence[i][1].month - 1]
            add(f"What personal news did I share with you back in {month}?", "temporal", [evidence[i][0]])
    add(move_question, "knowledge-update", [evidence["move0"][0], evidence["move1"][0]])
    add("How many pets do we have now, and what are their names?", "multi-session", [evidence[0][0], evidence["cat"][0]])
    for topic, (_, _, question) in RECS.items():
        add(question, "assistant-recommendation", [evidence[f"rec-{topic}"][0]])
    del dog_slot
    return turns, queries


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", required=True)
    parser.add_argument("--conversations", type=int, default=6)
    parser.add_argument("--seed", type=int, action="append",
                        help="repeatable: each seed adds --conversations conversations; those of the second and "
                             "later seeds are named s<seed>-chat-N (default: one seed, 45)")
    args = parser.parse_args()
    seeds = args.seed or [45]
    os.makedirs(args.out, exist_ok=True)
    memories, queries = [], []
    for n, seed in enumerate(seeds):
        rng = random.Random(seed)
        prefix = f"s{seed}-" if n else ""
        for c in range(args.conversations):
            start = dt.datetime(2024, 1, 1) + dt.timedelta(days=rng.randint(0, 300))
            turns, qs = conversation(rng, f"{prefix}chat-{c + 1}", start)
            memories += turns
            queries += qs
    with open(os.path.join(args.out, "memories.jsonl"), "w", encoding="utf-8") as handle:
        handle.writelines(json.dumps(row) + "\n" for row in memories)
    with open(os.path.join(args.out, "queries.jsonl"), "w", encoding="utf-8") as handle:
        handle.writelines(json.dumps(row) + "\n" for row in queries)
    long_turns = [len(row["text"]) for row in memories if row["speaker"] == "Assistant"]
    print(f"{len(memories)} turns ({len(long_turns)} assistant, mean {sum(long_turns) / len(long_turns):.0f} chars), "
          f"{len(queries)} questions, {args.conversations * len(seeds)} conversations")


if __name__ == "__main__":
    main()
