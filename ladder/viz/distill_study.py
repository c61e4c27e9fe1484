"""Notebook 10's comparison over seeds: the runs of ``benchmarks/distill_compare.py`` (SFT on the teacher's samples,
on-policy distillation at γ = 1 and γ = 0, GRPO, distillation then GRPO; seeds 0–2 under three CPU-kernel variants)
read back, and what holds on every run said in words — so that the notebook claims only what survives the spread.

    seed_study()                      the study's arms and runs (each: arm, seed, variant, records, probe)
    curve(run)                        (GFLOPs spent, held-out accuracy, updates) at each evaluation
    reached(run, level)               the GFLOPs at the first evaluation at or above ``level`` (None: never)
    spread(values)                    'low … high' (one value: itself)
    arm_table(study)                  one row per arm: accuracy at the end, GFLOPs to ``LEVEL``, the probe, over runs
    held_everywhere(study, key, ...)  the pairs of arms one of which was lower on ``key`` in every seed and variant
    drift_rows(study)                 each arm's fit to the teacher's samples against the teacher's view of its own
    figure(runs)                      accuracy against GFLOPs (a line per run), and the probe per arm
"""

from __future__ import annotations

import json
from pathlib import Path

STUDY = Path(__file__).resolve().parents[2] / "benchmarks" / "distill_compare_results.json"
LEVEL = 0.9  # the held-out accuracy the study asks each arm to reach
COLOURS = ("tab:orange", "tab:blue", "tab:cyan", "tab:green", "tab:purple")


def seed_study(path: Path = STUDY) -> dict:
    """``{"arms": {key: label}, "runs": [...]}`` as ``benchmarks/distill_compare.py`` wrote it."""
    return json.loads(Path(path).read_text())


def curve(run: dict) -> tuple[list[float], list[float], list[int]]:
    """(GFLOPs spent, held-out accuracy, updates done) at each evaluation of a run (its summary's ``evals``), the one
    before training at 0 FLOPs."""
    flops = {0: 0.0, **{r["step"]: r["compute/flops"] / 1e9 for r in run["records"] if "compute/flops" in r}}
    return ([flops[step] for step, _ in run["evals"]], [accuracy for _, accuracy in run["evals"]],
            [step for step, _ in run["evals"]])


def reached(run: dict, level: float = LEVEL) -> float | None:
    """GFLOPs at the first evaluation whose accuracy is ≥ ``level`` (None: no evaluation got there)."""
    for flops, accuracy, _ in zip(*curve(run), strict=True):
        if accuracy >= level:
            return flops
    return None


def spread(values: list[float], digits: int = 2) -> str:
    """'low … high' of the values (one value when they agree to ``digits``)."""
    low, high = f"{min(values):.{digits}f}", f"{max(values):.{digits}f}"
    return low if low == high else f"{low} … {high}"


def _runs_of(study: dict, arm: str) -> list[dict]:
    return [r for r in study["runs"] if r["arm"] == arm]


def arm_table(study: dict) -> list[dict]:
    """Per arm, over every seed and variant: the accuracy at the end, the GFLOPs to ``LEVEL`` (how many runs got
    there), the GFLOPs spent in all, and the probe (NLL on the teacher's samples, reverse KL on its own)."""
    rows = []
    for arm, label in study["arms"].items():
        runs = _runs_of(study, arm)
        ends = [curve(r)[1][-1] for r in runs]
        reach = [g for g in (reached(r) for r in runs) if g is not None]
        rows.append({"arm": arm, "label": label, "runs": len(runs), "end": spread(ends),
                     "reached": f"{len(reach)}/{len(runs)}", "gflops_to_level": spread(reach, 0) if reach else "—",
                     "gflops_total": spread([curve(r)[0][-1] for r in runs], 0),
                     "nll_teacher_samples": spread([r["probe"]["teacher_samples_student_nll"] for r in runs], 3),
                     "reverse_kl_own_samples": spread([r["probe"]["student_samples_reverse_kl"] for r in runs], 3)})
    return rows


def _by_run(study: dict, arm: str, value) -> dict:
    """(seed, variant) → value(run) of the arm's runs."""
    return {(r["seed"], r["variant"]): value(r) for r in _runs_of(study, arm)}


def held_everywhere(study: dict, value, lower_is: str, margin: float = 0.1) -> list[str]:
    """The sentences 'A … than B on every one of n runs' for each pair of arms where A's ``value(run)`` was lower
    than B's by more than ``margin`` of B's at every seed and variant both ran (a run whose value is None counts
    against the claim; B's None, never reached, for it)."""
    sentences, arms = [], list(study["arms"])
    for a in arms:
        for b in arms:
            mine, theirs = _by_run(study, a, value), _by_run(study, b, value)
            shared = sorted(set(mine) & set(theirs))
            if a == b or not shared:
                continue
            if all(mine[k] is not None and (theirs[k] is None or mine[k] < theirs[k] * (1 - margin))
                   for k in shared):
                sentences.append(f"{study['arms'][a]} {lower_is} than {study['arms'][b]} on every one of "
                                 f"{len(shared)} runs")
    return sentences


def drift_rows(study: dict) -> list[dict]:
    """Per arm and over its runs: the student's NLL per token on the teacher's samples (how well it imitates the
    teacher where the teacher leads) beside the reverse KL per token on its own samples (how far the teacher finds
    it where it leads itself), and the share of each side's temperature-1 samples that are correct."""
    rows = []
    for arm, label in study["arms"].items():
        probes = [r["probe"] for r in _runs_of(study, arm)]
        rows.append({"label": label,
                     "nll_teacher_samples": spread([p["teacher_samples_student_nll"] for p in probes], 3),
                     "reverse_kl_own_samples": spread([p["student_samples_reverse_kl"] for p in probes], 3),
                     "own_samples_correct": spread([p["student_samples_correct"] for p in probes]),
                     "own_gap": min(p["student_samples_reverse_kl"] - p["teacher_samples_reverse_kl"]
                                    for p in probes)})
    return rows


def figure(runs: list[dict], arms: dict):
    """Held-out accuracy against GFLOPs (each seed a thin line in its arm's colour, the teacher dotted) and, after
    training, each run's NLL on the teacher's samples and reverse KL on its own."""
    import matplotlib.pyplot as plt
    fig, (left, right) = plt.subplots(1, 2, figsize=(12, 4.2), gridspec_kw={"width_ratios": [3, 2]})
    for i, (arm, label) in enumerate(arms.items()):
        mine = [r for r in runs if r["arm"] == arm]
        for j, run in enumerate(mine):
            flops, accuracy, _ = curve(run)
            left.plot(flops, accuracy, color=COLOURS[i], alpha=0.7, lw=1.1, label=label if j == 0 else None)
        for k, key in enumerate(("teacher_samples_student_nll", "student_samples_reverse_kl")):
            xs = [k * (len(arms) + 1) + i + 0.3 * (j / max(len(mine) - 1, 1) - 0.5) for j in range(len(mine))]
            right.scatter(xs, [r["probe"][key] for r in mine], color=COLOURS[i], s=14)
    teacher = runs[0]["teacher_accuracy"]
    left.axhline(teacher, color="k", ls=":", lw=1, label=f"teacher ({teacher:.2f})")
    left.set(xlabel="training compute (GFLOPs: sampling, scoring, training)", ylabel="held-out greedy accuracy",
             title="accuracy per unit of compute (a line per run)")
    left.legend(fontsize=8, loc="lower right")
    middle = (len(arms) - 1) / 2
    right.set_xticks([middle, len(arms) + 1 + middle], ["student's NLL per token\non the teacher's samples",
                                                        "reverse KL per token\non the student's own samples"])
    right.set(ylabel="nats per token", title="after training (held-out problems)")
    fig.tight_layout()
    return fig
