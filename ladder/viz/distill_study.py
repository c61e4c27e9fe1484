"""Notebook 10's comparison over seeds: the runs of ``benchmarks/distill_compare.py`` (SFT on the teacher's samples,
on-policy distillation at γ = 1 and γ = 0, GRPO, distillation then GRPO; seeds 0–2 under three CPU-kernel variants)
read back, and what holds on every run said in words — so that the notebook claims only what survives the spread.

    seed_study()                      the study's arms and runs (each: arm, seed, variant, records, probe)
    curve(run)                        (GFLOPs spent, held-out accuracy, updates) at each evaluation
    reached(run, level)               the GFLOPs at the first evaluation at or above ``level`` (None: never)
    spread(values)                    'low … high' (one value: itself)
    arm_table(study)                  one row per arm: accuracy at the end, GFLOPs to ``LEVEL``, the probe, over runs
    held_everywhere(study, key, ...)  the pairs of arms one of which was lower on ``key`` in every seed and variant
    paired(study, a, b, value)        run by run, how often a's value was lower than b's, about the same, higher
    drift_rows(study)                 each arm's KL to the teacher on the teacher's samples and on its own
    own_over_teacher(study)           the smallest and largest ratio of the two, over every run
    figure(runs, arms)                accuracy against GFLOPs (a line per run), and the probe per arm
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
    there) and the GFLOPs spent in all."""
    rows = []
    for arm, label in study["arms"].items():
        runs = _runs_of(study, arm)
        ends = [curve(r)[1][-1] for r in runs]
        reach = [g for g in (reached(r) for r in runs) if g is not None]
        rows.append({"arm": arm, "label": label, "runs": len(runs), "end": spread(ends),
                     "reached": f"{len(reach)}/{len(runs)}", "gflops_to_level": spread(reach, 0) if reach else "—",
                     "gflops_total": spread([curve(r)[0][-1] for r in runs], 0)})
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


def paired(study: dict, a: str, b: str, value, margin: float = 0.1) -> dict[str, int]:
    """Run by run (same seed and variant), how often arm a's ``value(run)`` was lower than b's by more than
    ``margin`` of b's, within it, or higher (a value of None, never reached, is higher than any number)."""
    mine, theirs = _by_run(study, a, value), _by_run(study, b, value)
    counts = {"lower": 0, "same": 0, "higher": 0}
    for key in sorted(set(mine) & set(theirs)):
        x, y = mine[key], theirs[key]
        x, y = (float("inf") if x is None else x), (float("inf") if y is None else y)
        counts["lower" if x < y * (1 - margin) else "higher" if x > y * (1 + margin) else "same"] += 1
    return counts


def drift_rows(study: dict) -> list[dict]:
    """Per arm and over its runs, after training: the student's KL per token to the teacher on the teacher's samples
    (forward, Σ log π_teacher/π_θ: how well it imitates where the teacher leads) beside the same on its own samples
    (reverse, Σ log π_θ/π_teacher: how far the teacher finds it where it leads itself), and the share of its own
    temperature-1 samples that are correct (the teacher's: ``teacher_samples_correct``)."""
    rows = []
    for arm, label in study["arms"].items():
        probes = [r["probe"] for r in _runs_of(study, arm)]
        rows.append({"label": label,
                     "forward_kl_teacher_samples": spread([-p["teacher_samples_reverse_kl"] for p in probes], 3),
                     "reverse_kl_own_samples": spread([p["student_samples_reverse_kl"] for p in probes], 3),
                     "own_samples_correct": spread([p["student_samples_correct"] for p in probes])})
    return rows


def figure(runs: list[dict], arms: dict):
    """Held-out accuracy against GFLOPs (each seed a thin line in its arm's colour, the teacher dotted) and, after
    training, each run's KL to the teacher per token on the teacher's samples (forward) and on its own (reverse)."""
    from matplotlib.figure import Figure
    fig = Figure(figsize=(12, 4.2))
    left, right = fig.subplots(1, 2, gridspec_kw={"width_ratios": [3, 2]})
    for i, (arm, label) in enumerate(arms.items()):
        mine = [r for r in runs if r["arm"] == arm]
        for j, run in enumerate(mine):
            flops, accuracy, _ = curve(run)
            left.plot(flops, accuracy, color=COLOURS[i], alpha=0.7, lw=1.1, label=label if j == 0 else None)
        probes = [r["probe"] for r in mine]
        for k, values in enumerate(([-p["teacher_samples_reverse_kl"] for p in probes],
                                    [p["student_samples_reverse_kl"] for p in probes])):
            xs = [k * (len(arms) + 1) + i + 0.3 * (j / max(len(mine) - 1, 1) - 0.5) for j in range(len(mine))]
            right.scatter(xs, values, color=COLOURS[i], s=14)
    teacher = runs[0]["teacher_accuracy"]
    left.axhline(teacher, color="k", ls=":", lw=1, label=f"teacher ({teacher:.2f})")
    left.set(xlabel="training compute (GFLOPs: sampling, scoring, training)", ylabel="held-out greedy accuracy",
             title="accuracy per unit of compute (a line per run)")
    left.legend(fontsize=8, loc="lower right")
    middle = (len(arms) - 1) / 2
    right.set_xticks([middle, len(arms) + 1 + middle], ["on the teacher's samples\n(forward)",
                                                        "on the student's own samples\n(reverse)"])
    right.set(ylabel="KL to the teacher, nats per token", title="after training (held-out problems)")
    fig.tight_layout()
    return fig


def own_over_teacher(study: dict) -> tuple[float, float]:
    """The smallest and the largest, over every run, of the student's KL per token on its own samples (reverse,
    Σ log π_θ/π_teacher) over its KL per token on the teacher's samples (forward, Σ log π_teacher/π_θ)."""
    ratios = [r["probe"]["student_samples_reverse_kl"] / -r["probe"]["teacher_samples_reverse_kl"]
              for r in study["runs"]]
    return min(ratios), max(ratios)
