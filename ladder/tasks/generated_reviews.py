"""The generated movie reviews: short reviews of both polarities, some mixed, written from word lists — the corpus
the tiny review model is pre-trained on — and the bundled review openings, the prompts of the sentiment task
offline (every one starts sentences of both polarities)."""

from __future__ import annotations

import random

# The generated critic is a little grumpy: 30% of its one-polarity reviews are positive, so the
# tiny model starts slightly negative on average and the climb to positive is plain to see.
POSITIVE_SHARE = 0.3

# Subjects the corpus and the bundled prompts share: (opening, verb forms for the subject).
_SUBJECTS = [
    ("This movie", "sg"), ("This film", "sg"), ("The acting", "sg"), ("The plot", "sg"), ("The story", "sg"),
    ("The ending", "sg"), ("The cast", "sg"), ("The music", "sg"), ("The script", "sg"), ("The director", "sg"),
    ("The characters", "pl"), ("The dialogue", "sg"), ("The soundtrack", "sg"), ("The effects", "pl"),
    ("The first half", "sg"), ("Overall, the film", "sg"), ("Honestly, this movie", "sg"), ("The lead actor", "sg"),
    ("The jokes", "pl"), ("The camera work", "sg"), ("This sequel", "sg"), ("The villain", "sg"),
]
_VERBS = {"sg": ["was", "is", "felt", "seemed", "was really", "is truly", "turned out to be", "was just"],
          "pl": ["were", "are", "felt", "seemed", "were really", "are truly", "turned out to be", "were just"]}
_ADJECTIVES = {
    +1: ["great", "wonderful", "excellent", "brilliant", "amazing", "beautiful", "fantastic", "delightful",
         "superb", "charming", "funny", "moving", "perfect", "fun", "enjoyable", "good", "lovely", "touching",
         "impressive", "hilarious", "smart", "sweet", "fresh", "gorgeous"],
    -1: ["terrible", "awful", "boring", "horrible", "dull", "bad", "stupid", "painful", "weak", "disappointing",
         "ugly", "annoying", "poor", "pathetic", "lame", "sad", "ridiculous", "dreadful", "silly", "messy",
         "tedious", "bland", "cheap", "flat"],
}
_TAILS = {
    +1: ["", "", "", " and I loved it", " and I would watch it again", " from start to finish",
         " and the whole family enjoyed it", ", a real treat", ", highly recommended", " and made me smile",
         ", one of the best this year", " and I laughed a lot"],
    -1: ["", "", "", " and I hated it", " and I wanted my money back", " from start to finish",
         ", a complete waste of time", " and I almost fell asleep", ", avoid it", " and made me angry",
         ", one of the worst this year", " and nobody laughed"],
}
# Openings that go on with a verb phrase ("... and I loved it") or with "was <adjective>".
_AND_OPENINGS = [("I watched this movie and", "I"), ("I saw this film and", "I"), ("We rented this and", "we")]
_IT_OPENINGS = ["My wife and I thought it", "I have to say it", "In the end it"]
_I_VERBS = {+1: ["loved it", "really enjoyed it", "liked it a lot", "was glad", "would recommend it"],
            -1: ["hated it", "really disliked it", "was bored", "regretted it", "would not recommend it"]}

# Review openings used as prompts offline: every one starts sentences of both polarities.
BUNDLED_PROMPTS = [s for s, _ in _SUBJECTS] + [f"{s} {v}" for s, n in _SUBJECTS[:8] for v in _VERBS[n][:2]] + [
    *(o for o, _ in _AND_OPENINGS), *_IT_OPENINGS,
]


def review_sentence(rng: random.Random, polarity: int | None = None) -> str:
    """One short review of the given polarity (+1 / −1; None: either, or a mixed "A but B" review)."""
    if polarity is None:
        if rng.random() < 0.15:  # mixed: a good and a bad half
            first, second = rng.sample([+1, -1], 2)
            subj_a, subj_b = rng.sample(_SUBJECTS, 2)
            verb_a, verb_b = rng.choice(_VERBS[subj_a[1]]), rng.choice(_VERBS[subj_b[1]])
            lower_b = subj_b[0][0].lower() + subj_b[0][1:]
            return (f"{subj_a[0]} {verb_a} {rng.choice(_ADJECTIVES[first])} but {lower_b} {verb_b} "
                    f"{rng.choice(_ADJECTIVES[second])}.")
        polarity = +1 if rng.random() < POSITIVE_SHARE else -1
    if rng.random() < 0.1:
        opening, pronoun = rng.choice(_AND_OPENINGS)
        verb = rng.choice(_I_VERBS[polarity]).replace("was", "were") if pronoun == "we" else rng.choice(
            _I_VERBS[polarity])
        return f"{opening} {pronoun} {verb}."
    if rng.random() < 0.1:
        return f"{rng.choice(_IT_OPENINGS)} was {rng.choice(_ADJECTIVES[polarity])}{rng.choice(_TAILS[polarity])}."
    subject, number = rng.choice(_SUBJECTS)
    adjectives = rng.sample(_ADJECTIVES[polarity], 2)
    body = adjectives[0] if rng.random() < 0.6 else f"{adjectives[0]} and {adjectives[1]}"
    if rng.random() < 0.2:
        body = f"{rng.choice(['very', 'so', 'quite', 'really', 'truly'])} {body}"
    return f"{subject} {rng.choice(_VERBS[number])} {body}{rng.choice(_TAILS[polarity])}."


def review_corpus(n: int, seed: int = 0) -> list[str]:
    """``n`` generated short movie reviews of both polarities (see ``POSITIVE_SHARE``), some mixed."""
    rng = random.Random(seed)
    return [review_sentence(rng) for _ in range(n)]
