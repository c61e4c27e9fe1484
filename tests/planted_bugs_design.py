"""Planted wrong implementations of the design-space exercises (24, 25): each is the solution with one line
changed the way a learner might get it wrong. ``PLANTED_DESIGN[stem][label]``; every one must fail its grader."""

from __future__ import annotations

from planted_bugs_loop import mutant


def _planted(stem: str, function: str, bugs: dict[str, tuple[str, str]]) -> dict:
    return {label: mutant(stem, function, old, new) for label, (old, new) in bugs.items()}


PLANTED_DESIGN = {
    "ex24_soft_gate": _planted("ex24_soft_gate", "soft_gated_surrogate", {
        "τ chosen by the wrong sign: τ_pos where Â < 0": ("torch.where(advantages > 0, temp_pos, temp_neg)",
                                                         "torch.where(advantages < 0, temp_pos, temp_neg)"),
        "τ chosen by the ratio, not by Â": ("torch.where(advantages > 0, temp_pos, temp_neg)",
                                           "torch.where(ratio > 1, temp_pos, temp_neg)"),
        "4/τ left out: the slope at r = 1 is −τ·Â/4, not −Â": ("return -gate * 4.0 / temperature * advantages",
                                                           "return -gate * advantages"),
        "4, not 4/τ": ("return -gate * 4.0 / temperature * advantages", "return -gate * 4.0 * advantages"),
        "the gate on r instead of r − 1": ("torch.sigmoid(temperature * (ratio - 1.0))",
                                           "torch.sigmoid(temperature * ratio)"),
        "the gate on log r instead of r − 1": ("torch.sigmoid(temperature * (ratio - 1.0))",
                                               "torch.sigmoid(temperature * ratio.log())"),
        "the sign flipped: +(4/τ)·σ·Â": ("return -gate * 4.0 / temperature * advantages",
                                        "return gate * 4.0 / temperature * advantages"),
        "the ratio detached: no gradient": ("torch.sigmoid(temperature * (ratio - 1.0))",
                                            "torch.sigmoid(temperature * (ratio.detach() - 1.0))"),
    }),
    "ex25_decoupled_advantages": _planted("ex25_decoupled_advantages", "decoupled_group_relative", {
        "normalised after summing (GRPO's sum_then_normalize)": (
            "    normalised = centred / (grouped.std(dim=1, keepdim=True) + eps)",
            "    summed_first = (grouped * weights).sum(dim=2, keepdim=True)\n"
            "    normalised = (summed_first - summed_first.mean(dim=1, keepdim=True)) / "
            "(summed_first.std(dim=1, keepdim=True) + eps) / weights.sum() * weights.new_ones(F)"),
        "the batch whitening forgotten": ("return (summed - summed.mean()) / (summed.std() + eps)", "return summed"),
        "the weights applied before normalising (they cancel)": (
            "    grouped = per_function.view(-1, group_size, F)",
            "    grouped = (per_function * weights).view(-1, group_size, F)\n    weights = weights.new_ones(F)"),
        "the population std in the group (it cancels but where ε counts)": (
            "grouped.std(dim=1, keepdim=True) + eps", "grouped.std(dim=1, keepdim=True, unbiased=False) + eps"),
        "the population std in the batch whitening": ("(summed.std() + eps)", "(summed.std(unbiased=False) + eps)"),
        "the std without ε: a zero-spread reward gives nan": (
            "centred / (grouped.std(dim=1, keepdim=True) + eps)", "centred / grouped.std(dim=1, keepdim=True)"),
        "the batch's mean instead of the group's": ("centred = grouped - grouped.mean(dim=1, keepdim=True)",
                                                    "centred = grouped - per_function.mean(dim=0)"),
        "groups not adjacent: view(G, -1, F)": ("per_function.view(-1, group_size, F)",
                                                "per_function.view(group_size, -1, F).transpose(0, 1)"),
        "group_size 1 not refused": ("    if group_size < 2:", "    if group_size < 1:"),
        "N not a multiple of G: view's RuntimeError, not ValueError": ("    if N % group_size:", "    if False:"),
    }),
}
