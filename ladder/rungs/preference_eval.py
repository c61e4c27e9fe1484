"""How well scores rank held-out preference pairs: a reward model's r_φ, or DPO's implicit reward r̂ = β·log π_θ/π_ref.

For P pairs with scores r_w (chosen) and r_l (rejected), Δ = r_w − r_l and the model's P(y_w ≻ y_l) = σ(Δ):

    accuracy           share of pairs with Δ > 0 (the labeller's ranking kept)
    margin             mean Δ
    calibration        predicted σ(Δ) against how often the prediction came true, in bins of width 0.1 — each pair
                       read both ways round (σ(Δ), came true; σ(−Δ), did not), so a model that always says ½ is
                       perfectly calibrated and useless; its expected calibration error (ECE) Σ_b (n_b / n)·|p̄_b − f_b|
    score_accuracy     where the pairs carry the true scores (``score_chosen``, ``score_rejected``: the tiny task's
                       r*), the share of pairs whose true order Δ keeps
    length_corr        Pearson's correlation of the score with the completion's length in words, over every
                       completion: what a score pays for length (the tiny task's spurious feature)
"""

from __future__ import annotations

import torch
from torch import Tensor

BINS = 10


def calibration(difference: Tensor, bins: int = BINS) -> list[dict]:
    """Each bin of predicted probability: {"predicted": mean σ, "observed": share that came true, "pairs": count}."""
    predicted = torch.cat([torch.sigmoid(difference), torch.sigmoid(-difference)])
    came_true = torch.cat([torch.ones_like(difference), torch.zeros_like(difference)])
    which = (predicted * bins).long().clamp(max=bins - 1)
    table = []
    for b in range(bins):
        inside = which == b
        if inside.any():
            table.append({"predicted": predicted[inside].mean().item(), "observed": came_true[inside].mean().item(),
                          "pairs": int(inside.sum())})
    return table


def calibration_error(table: list[dict]) -> float:
    """ECE = Σ_b (n_b / n)·|p̄_b − f_b| of a ``calibration`` table."""
    total = sum(row["pairs"] for row in table)
    return sum(row["pairs"] / total * abs(row["predicted"] - row["observed"]) for row in table)


def length_correlation(scores: Tensor, lengths: Tensor) -> float:
    """Pearson's correlation of scores and lengths (0 where either does not vary)."""
    s, n = scores.float() - scores.float().mean(), lengths.float() - lengths.float().mean()
    denominator = (s.norm() * n.norm()).item()
    return (s @ n).item() / denominator if denominator > 0 else 0.0


def words(completion) -> int:
    """A completion's length in words (a conversation's: its messages' contents)."""
    if isinstance(completion, str):
        return len(completion.split())
    return sum(len(message["content"].split()) for message in completion)


def pair_report(chosen: Tensor, rejected: Tensor, pairs: list[dict], prefix: str = "eval_") -> dict:
    """The statistics of the module doc for ``[P]`` scores of held-out ``pairs``, names prefixed."""
    difference = chosen - rejected
    report = {"accuracy": (difference > 0).float().mean().item(), "margin": difference.mean().item(),
              "calibration_error": calibration_error(calibration(difference))}
    truth = [(i, p["score_chosen"] - p["score_rejected"]) for i, p in enumerate(pairs)
             if "score_chosen" in p and p["score_chosen"] != p["score_rejected"]]
    if truth:
        rows = torch.tensor([i for i, _ in truth])
        true_sign = torch.tensor([1.0 if d > 0 else -1.0 for _, d in truth])
        report["score_accuracy"] = (difference[rows] * true_sign > 0).float().mean().item()
    lengths = torch.tensor([words(p["chosen"]) for p in pairs] + [words(p["rejected"]) for p in pairs])
    report["length_corr"] = length_correlation(torch.cat([chosen, rejected]), lengths)
    return {prefix + name: value for name, value in report.items()}
