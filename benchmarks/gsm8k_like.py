"""GSM8K-style word problems for the real-size GRPO benchmarks: about GSM8K's length, '#### N' answers."""

import random

NAMES_POOL = ["Natalia", "Weng", "Betty", "Julie", "James", "Albert", "Mark", "Tina", "Randy", "Alexis"]
TEMPLATES = [
    ("{n} sold clips to {a} of her friends in April, and then she sold half as many clips in May. How many "
     "clips did {n} sell altogether in April and May?", lambda a, b: a + a // 2),
    ("{n} earns ${a} an hour for babysitting. Yesterday, she just did {b} hours of babysitting and was paid for "
     "every one of them. How much did she earn in total?", lambda a, b: a * b),
    ("{n} is saving money for a new wallet which costs ${a}. She has only half of the money she needs. Her "
     "parents decided to give her ${b} for that purpose. How much more money does she need to buy the wallet?",
     lambda a, b: a - a // 2 - b),
    ("{n} is reading a {a}-page book. Yesterday, she was able to read {b} pages and today, she read twice as "
     "many pages as yesterday. How many pages are left for her to read tomorrow?", lambda a, b: a - 3 * b),
    ("{n} writes a {b}-page letter to 2 different friends twice a week. The letters are {a} pages long in "
     "total over a month of 4 weeks. How many pages does he write a year if he keeps this pace?",
     lambda a, b: a * 12),
    ("{n} has a garden with flowers. He planted {a} yellow flowers, and there are {b} more purple flowers than "
     "yellow ones. How many yellow and purple flowers does he have in his garden altogether?",
     lambda a, b: 2 * a + b),
]


def problems(n: int = 48, seed: int = 0) -> list[dict]:
    """GSM8K-style word problems (about GSM8K's length) with '#### N' answers."""
    rng = random.Random(seed)
    rows = []
    for i in range(n):
        template, solve = TEMPLATES[i % len(TEMPLATES)]
        a, b = rng.randrange(40, 400, 2), rng.randrange(2, 12)
        rows.append({"question": template.format(n=rng.choice(NAMES_POOL), a=a, b=b), "answer": f"#### {solve(a, b)}"})
    return rows
