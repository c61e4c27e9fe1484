"""Notebook 9's study over seeds: the runs of ``benchmarks/overoptimisation.py`` (RM + PPO at three settings, DPO at
three β, seeds 0–2 under three CPU-kernel variants) read back, compared at matched KL, and what holds on every run
said in words — so that the notebook claims only what survives the spread.

    seed_study()                     the study's runs: method, seed, variant, the doctor's findings, every series
    kl_and_true(run)                 (KL, r*) along a run: PPO's 5-update means, DPO's evaluations
    matched_kl(runs)                 each DPO run against each PPO run of its seed and variant, at the KL both reached
    by_pairing, ordering, spread     the rows per pairing; whether one side was higher on every run; 'low … high'
    anatomy_line(study, method, at)  a PPO method's completions over the runs (words, hedges, repeats) beside π_ref's
    comparison_sentence(rows)        which orderings held on every run, and which did not
    dpo_sweep(study), sweep_sentence(sweep)   DPO per β: KL, r*, length, the chosen completions' implicit reward
    as_study_run(method, records, kl_key)     one of the notebook's own runs in the study's form
"""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path

from ladder.viz.preference_lab import anatomy_at, displacement, smoothed

STUDY = Path(__file__).resolve().parents[2] / "benchmarks" / "overoptimisation_results.json"


def seed_study(path: Path = STUDY) -> list[dict]:
    """The runs of ``benchmarks/overoptimisation.py`` (seeds 0–2 under each CPU-kernel variant): each with its
    method, seed, variant, the doctor's findings and its series (see that script)."""
    return json.loads(Path(path).read_text())["runs"]


def kl_and_true(run: dict) -> tuple[list[float], list[float]]:
    """(KL, r*) of a study run: PPO's 5-update means of its batches, DPO's evaluations."""
    s = run["series"]
    rows = [i for i, t in enumerate(s["true_reward_mean"]) if t is not None]
    kl, true = [s[run["kl_key"]][i] for i in rows], [s["true_reward_mean"][i] for i in rows]
    if run["kl_key"] == "kl_ref":
        records = [{"kl_ref": k, "true_reward_mean": t} for k, t in zip(kl, true)]
        kl, true = smoothed(records, "kl_ref"), smoothed(records, "true_reward_mean")
    return kl, true


def true_at(kl: list[float], true: list[float], k: float) -> float:
    """r* where the curve's KL first reaches ``k``, interpolated linearly between the two points around it."""
    i = next(i for i, value in enumerate(kl) if value >= k)
    if i == 0 or kl[i] == kl[i - 1]:
        return true[i]
    share = (k - kl[i - 1]) / (kl[i] - kl[i - 1])
    return true[i - 1] + share * (true[i] - true[i - 1])


def start(run: dict) -> float:
    """r* of π_ref's own completions on the run's prompts: PPO's first batch (sampled before any step), DPO's
    evaluation before training. PPO samples training prompts and DPO held-out ones, so each method's gain is
    measured from its own start."""
    if run["kl_key"] == "sample_kl":
        return run["before"]["true_reward_mean"]
    return next(t for t in run["series"]["true_reward_mean"] if t is not None)


def matched_kl(study: list[dict]) -> list[dict]:
    """For each DPO run of the study and each PPO run of the same seed and variant, at the KL both reached (the
    smaller of their last KLs, ``kl_and_true``): each one's true reward where its KL first reached it, and its gain
    over its own start."""
    rows = []
    for dpo in (r for r in study if r["kl_key"] == "sample_kl"):
        kl_dpo, true_dpo = kl_and_true(dpo)
        for ppo in (r for r in study if r["kl_key"] == "kl_ref" and (r["seed"], r["variant"]) ==
                    (dpo["seed"], dpo["variant"])):
            kl_ppo, true_ppo = kl_and_true(ppo)
            k = min(kl_dpo[-1], kl_ppo[-1])
            dpo_true, ppo_true = true_at(kl_dpo, true_dpo, k), true_at(kl_ppo, true_ppo, k)
            rows.append({"seed": dpo["seed"], "variant": dpo["variant"], "dpo": dpo["method"], "ppo": ppo["method"],
                         "kl": k, "dpo_true": dpo_true, "ppo_true": ppo_true, "dpo_gain": dpo_true - start(dpo),
                         "ppo_gain": ppo_true - start(ppo)})
    return rows


def spread(values: list[float], fmt: str = "+.2f") -> str:
    """'lowest … highest' of the values."""
    return f"{min(values):{fmt}} … {max(values):{fmt}}" if values else "—"


def ordering(rows: list[dict]) -> str:
    """Whether PPO's gain in r* at the matched KL is above DPO's on every seed and variant, below on every one, or
    mixed."""
    gaps = [r["ppo_gain"] - r["dpo_gain"] for r in rows]
    return "PPO higher on every run" if min(gaps) > 0 else "DPO higher on every run" if max(gaps) < 0 else "mixed"


def as_study_run(method: str, records: list[dict], kl_key: str, before: dict | None = None) -> dict:
    """A run of this notebook in the study's form (``seed_study``), to compare with ``matched_kl``; ``before``: a
    DPO run's evaluation before training."""
    keys = {"true_reward_mean", kl_key}
    return {"method": method, "seed": 0, "variant": "this machine", "kl_key": kl_key, "before": before or {},
            "series": {k: [r.get(k) if "true_reward_mean" in r else None for r in records] for k in keys}}


def records_of(run: dict) -> list[dict]:
    """A study run's series as records (a key left out where that record has no value)."""
    series = run["series"]
    length = len(next(iter(series.values())))
    return [{k: v[i] for k, v in series.items() if v[i] is not None} for i in range(length)]


def anatomy_of(run: dict, at: str) -> dict[str, float]:
    """``anatomy_at`` of a PPO run of the study, at "start", "peak", "trough" or "end"."""
    return anatomy_at(records_of(run))[at]


def beta_of(method: str) -> float:
    """β of a study method's name ('DPO, β = 0.1' → 0.1)."""
    return float(method.rsplit("= ", 1)[1])


def dpo_sweep(study: list[dict]) -> dict[str, dict[str, list[float]]]:
    """Per DPO β, over the study's runs: the last evaluation's KL, r* and completion tokens, π_ref's tokens (the
    evaluation before training) and the chosen completions' implicit reward over the last 5 updates."""
    sweep: dict[str, dict[str, list[float]]] = {}
    for run in sorted((r for r in study if r["kl_key"] == "sample_kl"), key=lambda r: beta_of(r["method"])):
        row = sweep.setdefault(run["method"], defaultdict(list))
        records = records_of(run)
        evaluated = [r for r in records if "sample_kl" in r]
        row["kl"].append(evaluated[-1]["sample_kl"])
        row["true"].append(evaluated[-1]["true_reward_mean"])
        row["tokens"].append(evaluated[-1]["response_length"])
        row["tokens_before"].append(run["before"]["response_length"])
        row["chosen_reward"].append(displacement(records)["rewards/chosen"][1])
    return sweep


def sweep_sentence(sweep: dict) -> str:
    """What holds on every run of the DPO sweep, in words."""
    methods = sorted(sweep, key=beta_of)
    fell = [m for m in methods if max(sweep[m]["chosen_reward"]) < 0]
    longer = [m for m in methods if min(a - b for a, b in zip(sweep[m]["tokens"], sweep[m]["tokens_before"])) > 0]
    drift = all(min(sweep[a]["kl"]) > max(sweep[b]["kl"]) for a, b in zip(methods, methods[1:]))
    names = lambda ms: ", ".join(f"β = {beta_of(m):g}" for m in ms) or "none of the β"  # noqa: E731
    return (f"On every run: the chosen completions' implicit reward ended below zero (their likelihood below "
            f"π_ref's) at {names(fell)}; the sampled completions ended longer than π_ref's at {names(longer)}; "
            + ("and a smaller β ended further from π_ref, with no overlap between the β." if drift else
               "the KL's order by β is not the same on every run."))


def by_pairing(matched: list[dict]) -> dict[tuple[str, str], list[dict]]:
    """``matched_kl``'s rows grouped by (DPO run, PPO run)."""
    groups: dict[tuple[str, str], list[dict]] = {}
    for row in sorted(matched, key=lambda r: (beta_of(r["dpo"]), r["ppo"])):
        groups.setdefault((row["dpo"], row["ppo"]), []).append(row)
    return groups


def comparison_sentence(matched: list[dict]) -> str:
    """Markdown: which orderings of DPO and PPO at matched KL held on every seed and variant, and which did not."""
    held, mixed = [], []
    for (dpo, ppo), rows in by_pairing(matched).items():
        verdict = ordering(rows)
        if verdict == "mixed":
            mixed.append(f"{ppo} against {dpo}")
        else:
            gaps = spread([r["ppo_gain"] - r["dpo_gain"] for r in rows])
            held.append(f"* {ppo} against {dpo}: **{verdict.split(' on')[0]}** (PPO's gain − DPO's: {gaps})")
    runs = len({(r["seed"], r["variant"]) for r in matched})
    return (f"Over the {runs} runs of each method, the sign of the difference in gains held on every run for:\n\n"
            + "\n".join(held or ["* none"])
            + "\n\nand not for " + ("; ".join(mixed) if mixed else "any other pairing")
            + " — there, no ordering is claimed.")


def anatomy_line(study: list[dict], method: str, at: str, fell_by: float | None = None) -> str:
    """One line: a PPO method's completions at ``at`` over the study's runs, beside π_ref's (their first batch); with
    ``fell_by``, over the runs whose r* fell at least that much from its peak to its trough, their count said."""
    runs = [r for r in study if r["method"] == method]
    kept = [r for r in runs if fell_by is None or r["true_peak"] - r["true_trough"] >= fell_by]
    here, ref = [anatomy_of(r, at) for r in kept], [anatomy_of(r, "π_ref") for r in kept]

    def both(key: str, fmt: str) -> str:
        return f"{spread([a[key] for a in here], fmt)} (π_ref {spread([a[key] for a in ref], fmt)})"

    commoner = [max(a["hedged_share"], a["padded_share"]) for a in here]
    which = (f"the {len(kept)} of {len(runs)} runs whose r* fell by {fell_by:g} or more after its peak"
             if fell_by is not None else f"{len(runs)} runs")
    return (f"{method}, {at}, {which}: words {both('words_mean', '.1f')}; hedge {both('hedged_share', '.0%')}; "
            f"repeat a word {both('padded_share', '.0%')}; the commoner of the two {spread(commoner, '.0%')}")


def summary_sentence(study: list[dict], fell_by: float = 0.2) -> str:
    """The study's firm findings in words, each with its count of runs."""
    small = [r for r in study if r["method"] == "RM + PPO, β = 0.005"]
    fell = [r for r in small if r["true_peak"] - r["true_trough"] >= fell_by]
    ruled = [r for r in fell if max(anatomy_of(r, "trough")[k] for k in ("hedged_share", "padded_share")) > 0.5]
    large = [r for r in study if r["method"] == "RM + PPO, β = 0.05"]
    unhedged = [r for r in large if anatomy_of(r, "end")["hedged_share"] < anatomy_of(r, "π_ref")["hedged_share"] / 2]
    dpo = [r for r in study if r["kl_key"] == "sample_kl"]
    displaced = [r for r in dpo if displacement(records_of(r))["rewards/chosen"][1] < 0]
    longer = [r for r in dpo if records_of(r)[-1]["response_length"] > r["before"]["response_length"]]
    return (f"What the study shows is narrower and firmer, with its counts: PPO held only loosely by its penalty "
            f"(β = 0.005) saw its true reward fall by {fell_by:g} or more on {len(fell)} of {len(small)} runs, and on "
            f"{len(ruled)} of those {len(fell)} the commoner of a hedge and a repeated word was in most completions at "
            f"the trough; the larger penalty's (β = 0.05) completions hedged less than half as often as π_ref's on "
            f"{len(unhedged)} of {len(large)}; and DPO, with no reward model, ended with the chosen completions less "
            f"likely than under π_ref on {len(displaced)} of its {len(dpo)} runs and with longer completions on "
            f"{len(longer)}.")
