"""Planted wrong implementations of the preference exercises (26, 27): each is the solution with one line changed the
way a learner might get it wrong. ``PLANTED_PREFERENCES[stem][label]``; every one must fail its grader."""

from __future__ import annotations

from planted_bugs_loop import _planted

PLANTED_PREFERENCES = {
    "ex26_bradley_terry": _planted("ex26_bradley_terry", "bradley_terry_loss", {
        "chosen and rejected swapped: r_l − r_w": ("difference = chosen_rewards - rejected_rewards",
                                                   "difference = rejected_rewards - chosen_rewards"),
        "log(sigmoid(·)): −inf where σ underflows": ("return -F.logsigmoid(difference).mean()",
                                                      "return -(difference.sigmoid().log()).mean()"),
        "the margin added, not subtracted": ("difference = difference - margin", "difference = difference + margin"),
        "the margin ignored": ("difference = difference - margin", "difference = difference"),
        "summed over the pairs, not averaged": ("return -F.logsigmoid(difference).mean()",
                                                "return -F.logsigmoid(difference).sum()"),
        "the sign lost: log σ maximised the wrong way": ("return -F.logsigmoid(difference).mean()",
                                                         "return F.logsigmoid(difference).mean()"),
        "σ instead of log σ": ("return -F.logsigmoid(difference).mean()", "return -difference.sigmoid().mean()"),
        "the scores detached: no gradient": ("difference = chosen_rewards - rejected_rewards",
                                             "difference = (chosen_rewards - rejected_rewards).detach()"),
    }),
    "ex27_dpo_loss": _planted("ex27_dpo_loss", "dpo_loss", {
        "π_ref left out: β·(log π_θ(y_w) − log π_θ(y_l))": (
            "chosen_reward = beta * (chosen_logp - ref_chosen_logp)", "chosen_reward = beta * chosen_logp"),
        "π_ref's log-probs added, not subtracted": ("beta * (rejected_logp - ref_rejected_logp)",
                                                    "beta * (rejected_logp + ref_rejected_logp)"),
        "β outside the σ: −β·mean log σ(Δ)": ("return -F.logsigmoid(chosen_reward - rejected_reward).mean()",
                                               "return -beta * F.logsigmoid((chosen_reward - rejected_reward) / beta)"
                                               ".mean()"),
        "β left out": ("chosen_reward = beta * (chosen_logp - ref_chosen_logp)",
                       "chosen_reward = beta * (chosen_logp - ref_chosen_logp) / beta"),
        "chosen and rejected swapped": ("return -F.logsigmoid(chosen_reward - rejected_reward).mean()",
                                        "return -F.logsigmoid(rejected_reward - chosen_reward).mean()"),
        "the references crossed: y_w against π_ref(y_l)": (
            "chosen_reward = beta * (chosen_logp - ref_chosen_logp)",
            "chosen_reward = beta * (chosen_logp - ref_rejected_logp)"),
        "log(sigmoid(·)): −inf where σ underflows": (
            "return -F.logsigmoid(chosen_reward - rejected_reward).mean()",
            "return -(chosen_reward - rejected_reward).sigmoid().log().mean()"),
        "summed over the pairs": ("return -F.logsigmoid(chosen_reward - rejected_reward).mean()",
                                  "return -F.logsigmoid(chosen_reward - rejected_reward).sum()"),
        "the ratio, not the log-ratio: β·(π_θ/π_ref) in σ": (
            "chosen_reward = beta * (chosen_logp - ref_chosen_logp)",
            "chosen_reward = beta * (chosen_logp - ref_chosen_logp).exp()"),
        "π_θ's log-probs detached: no gradient": ("chosen_reward = beta * (chosen_logp - ref_chosen_logp)",
                                                  "chosen_reward = beta * (chosen_logp.detach() - ref_chosen_logp)"),
    }),
}
