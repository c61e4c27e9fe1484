"""What the notebook tests share: the shape of a closing self-check."""

import re


def closing_self_check_questions(cells: list[dict]) -> list[str]:
    """The closing self-check of a notebook's cells ({"type", "text"}): a "## Self-check" heading, a cell that asks
    predictions and reasons (each ``name.answer = None`` for the learner to fill in), and a cell that computes each
    answer and checks it, then tallies them all. Returns the questions' names."""
    (heading, ask, check) = cells[-3:]
    assert heading["type"] == "markdown" and "## Self-check" in heading["text"]
    assert ask["type"] == "code" and check["type"] == "code"
    asked = re.findall(r"^(\w+) = viz\.(Predict|Reason)\(", ask["text"], flags=re.M)
    names = [name for name, _ in asked]
    assert 3 <= len(names) <= 5 and {"Predict", "Reason"} <= {kind for _, kind in asked}, asked
    assert "SelfCheck(" not in ask["text"] + check["text"]    # no question answered by copying a printed number
    for name in names:
        assert f"{name}.answer = None" in ask["text"], name        # the learner answers before the check runs
        assert re.search(rf"^{name}\.check\(", check["text"], flags=re.M), name   # checked in the cell after
    asks_all = r"^for question in \(" + ", ".join(names) + r"\):\n    question\.ask\(\)$"
    assert re.search(asks_all, ask["text"], flags=re.M)
    # the tally counts these, and may count first the questions asked and checked earlier in the notebook
    tally = re.fullmatch(r"viz\.tally\((.*)\)", check["text"].rstrip().splitlines()[-1])
    assert tally, check["text"]
    tallied = [name.strip() for name in tally.group(1).split(",")]
    earlier, own = tallied[:len(tallied) - len(names)], tallied[len(tallied) - len(names):]
    assert own == names, tallied
    before = "\n".join(c["text"] for c in cells[:-3] if c["type"] == "code")
    for name in earlier:
        assert re.search(rf"^{name} = viz\.(Predict|Reason)\(", before, flags=re.M), name
        assert f"{name}.answer = None" in before, name
        assert re.search(rf"^{name}\.check\(", before + "\n" + check["text"], flags=re.M), name
    return names
