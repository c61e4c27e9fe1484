"""A run's vital signs: per rung, the few series a practitioner reads to judge a run, each a ``Vital`` (a panel of
doctor.png) with the thresholds its signatures use (``Thresholds``) as ``Guide``s.

    grpo, agent, TRL   reward, the reward functions, held-out accuracy, KL to π_ref, entropy, clip fraction,
                       the ratio's range, completion length, the cut-off share, zero-spread groups, grad norm,
                       tool calls (agent), the sampler's gap to π_old (when logged)
    cartpole           return, explained variance, value loss, KL to π_old, clip fraction, entropy, grad norm
    ppo-sentiment      r_φ and r_φ − β·KL, the true reward r*, KL to π_ref per completion, β, explained variance,
                       value loss, KL to π_old, clip fraction, entropy, completion length, grad norm
    reward-model       loss, pairs ranked right (batch, held-out, in r*'s order), margin, what the score pays for
                       length, calibration, grad norm
    dpo                loss, pairs ranked right, the implicit reward's margin, the chosen's and rejected's implicit
                       rewards and log-probs, KL to π_ref and r* of sampled completions, their length, grad norm
                       (not kl_ref_token_k3: k3 on the pairs' tokens, which π_θ did not sample, up to 10⁵ per token)
    reinforce          return, entropy, grad norm
    distill            held-out accuracy of the student and the teacher, the reverse KL to the teacher per completion
                       (sampled), the teacher's log-prob of the student's tokens, entropy, clip fraction, the ratio's
                       range, completion length, grad norm

``vitals_of(run)`` keeps the vitals the run logged (a series it did not log: no panel). A guide is a dashed line
(``low`` alone) or a shaded healthy band (``low`` to ``high``); a run's own guides (a tenth of its starting entropy,
its token budget, the KL controller's target, the RLHF critic's loss at ``value_kept`` of its start) come from
``own_guides``. Every KL is labelled with its unit: per token, or per completion (summed over its tokens). A share is
drawn on 0 to 1 at the least (``Vital.at_least``): a flat line stays flat, not zoomed into a drama.
"""

from __future__ import annotations

import fnmatch
import math
import statistics
from dataclasses import dataclass, replace

from ladder.doctor.run_data import Run
from ladder.doctor.signatures import T, thirds
from ladder.rungs import registry


@dataclass(frozen=True)
class Guide:
    """A threshold on a panel: a line at ``low``, or (``high`` given) the healthy band from ``low`` to ``high``."""

    label: str
    low: float
    high: float | None = None


@dataclass(frozen=True)
class Vital:
    """One panel: the series in ``lines`` (exact names, or patterns such as ``rewards/*/mean``) → their legend
    labels ("" for a panel's only line), the y-axis label with its unit, the signatures' thresholds, and the
    series whose findings are marked here as steps (a count of skipped updates on the grad-norm panel)."""

    title: str
    unit: str
    lines: dict[str, str]
    guides: tuple[Guide, ...] = ()
    marks: tuple[str, ...] = ()
    log_scale: bool = False
    at_least: tuple[float | None, float | None] | None = None  # the y range shown at the least (None: the data's)


def _share(value: float) -> str:
    return f"{value:g}"


RETURN = Vital("episode return", "return (steps balanced)",
               {"return": "training episodes", "eval_return_mean": "greedy evaluation"})
REWARD = Vital("reward", "mean per completion", {"reward": ""})
REWARD_FUNCTIONS = Vital("reward functions", "mean per completion", {"rewards/*/mean": "{name}"})
ACCURACY = Vital("held-out accuracy", "share correct (greedy)", {"eval_accuracy": ""}, at_least=(0.0, 1.0))
KL_REF = Vital("KL(π_θ‖π_ref)", "nats per token (log scale)", {"kl_ref": ""},
               (Guide(f"blow-up ≥ {_share(T.kl_high)}", T.kl_high),
                Guide(f"hardly moved < {_share(T.kl_still)}", T.kl_still)), log_scale=True)
KL_OLD = Vital("KL(π_old‖π_θ) in the last pass", "nats (k3 estimate)", {"approx_kl_old_k3": ""})
ENTROPY = Vital("entropy of π_θ", "nats per token", {"entropy": ""})
CLIP = Vital("clip fraction", "share of tokens clipped", {"clip_frac": ""},
             (Guide(f"healthy < {_share(T.clip_high)}", 0.0, T.clip_high),))
RATIO = Vital("ratio π_θ/π_old", "ratio (min, mean, max)",
              {"ratio_max": "max", "ratio_mean": "mean", "ratio_min": "min"}, (Guide("1: π_θ = π_old", 1.0),))
LENGTH = Vital("completion length", "tokens (mean)", {"completions/mean_length": ""})
CUT_OFF = Vital("cut off at the token budget", "share of completions", {"completions/clipped_ratio": ""},
                (Guide(f"truncation ≥ {_share(T.truncated_share)}", T.truncated_share),))
ZERO_SPREAD = Vital("groups with zero spread", "share of groups (no signal)", {"frac_reward_zero_std": ""},
                    (Guide(f"no signal ≥ {_share(T.zero_std_share)}", T.zero_std_share),))
GRAD_NORM = Vital("gradient norm", "‖g‖ before clipping", {"grad_norm": ""},
                  marks=("skipped_steps", "nonfinite_steps"))
TOOL_CALLS = Vital("tool calls", "per trajectory (mean)", {"agent/tool_calls": ""})
SAMPLER_CUT = Vital("sampler correction", "share of weights cut back", {"sampler/corrected_frac": ""},
                    (Guide(f"mismatch ≥ {_share(T.corrected_share)}", T.corrected_share),))
SAMPLER_GAP = Vital("sampler gap to π_old", "|log π_old − log π_sampler| (nats/token)",
                    {"sampler/logp_diff_mean": ""}, (Guide(f"mismatch ≥ {_share(T.sampler_gap)}", T.sampler_gap),))
EXPLAINED = Vital("explained variance of V", "1 − Var(R − V) / Var(R)", {"explained_variance": ""},
                  (Guide(f"healthy > {_share(T.explained_variance)}", T.explained_variance, 1.0),))
VALUE_LOSS = Vital("value loss", "value loss", {"value_loss": ""})

# RLHF PPO (ppo-sentiment): a learned reward r_φ, the KL to π_ref per completion in the reward, a trained critic
PER_COMPLETION = "nats per completion\n(summed over its tokens)"
PPO_REWARD = Vital("reward", "mean per completion", {"score_mean": "r_φ (learned)", "reward": "r_φ − β·KL (penalised)"})
TRUE_REWARD = Vital("true reward r*", "mean per completion", {"true_reward_mean": ""})
KL_PER_COMPLETION = Vital("KL(π_θ‖π_ref) per completion", PER_COMPLETION, {"kl_ref_seq": ""})
BETA = Vital("β, the KL coefficient", "β (reward per nat of KL)", {"kl_coef": ""}, at_least=(0.0, None))
RLHF_EXPLAINED = replace(EXPLAINED, guides=(Guide("0: no better than the returns' mean", 0.0),))

# preference pairs: the reward model's Bradley–Terry fit, and DPO's
CHANCE = Guide("chance: ln 2 (margin 0)", math.log(2))
RM_LOSS = Vital("loss", "−log σ(r(y_w) − r(y_l)), batch mean", {"loss": ""}, (CHANCE,))
RANKED = Vital("pairs ranked right", "share of pairs", {"accuracy": "training batch", "eval_accuracy": "held-out",
                                                        "eval_score_accuracy": "held-out, in r*'s order"},
               (Guide("chance 0.5", 0.5),), at_least=(0.0, 1.0))
RM_MARGIN = Vital("margin r(y_w) − r(y_l)", "mean over pairs", {"margin": "training batch", "eval_margin": "held-out"},
                  (Guide("0: no preference", 0.0),))
LENGTH_PAID = Vital("what the score pays for length", "Pearson r(score, words), held-out",
                    {"eval_length_corr": ""}, (Guide("0: blind to length", 0.0),), at_least=(-1.0, 1.0))
CALIBRATION = Vital("calibration error", "ECE of σ(margin), held-out", {"eval_calibration_error": ""},
                    at_least=(0.0, None))
DPO_LOSS = replace(RM_LOSS, unit="−log σ(β·Δ log π_θ/π_ref), batch mean")
DPO_RANKED = replace(RANKED, lines={"rewards/accuracies": "training batch", **{k: v for k, v in RANKED.lines.items()
                                                                              if k != "accuracy"}})
DPO_MARGIN = Vital("implicit reward margin", "β·Δ log π_θ/π_ref, mean over pairs",
                   {"rewards/margins": "training batch", "eval_margin": "held-out"}, (Guide("0: no preference", 0.0),))
IMPLICIT = Vital("implicit rewards β·log π_θ/π_ref", "batch mean", {"rewards/chosen": "chosen y_w",
                                                                    "rewards/rejected": "rejected y_l"},
                 (Guide("0: as likely as under π_ref", 0.0),))
LOGPS = Vital("log π_θ of the pairs", f"log π_θ(y), {PER_COMPLETION}", {"logps/chosen": "chosen y_w",
                                                                      "logps/rejected": "rejected y_l"})
SAMPLE_KL = Vital("KL(π_θ‖π_ref) of sampled completions", PER_COMPLETION, {"sample_kl": ""})
SAMPLE_TRUE = replace(TRUE_REWARD, unit="mean per sampled completion")
SAMPLE_LENGTH = replace(LENGTH, unit="tokens (mean of sampled completions)")

TAUGHT_ACCURACY = replace(ACCURACY, title="held-out accuracy, student and teacher",
                          lines={"eval_accuracy": "student", "teacher_accuracy": "teacher"})
REVERSE_KL = Vital("reverse KL(π_θ‖π_teacher)", PER_COMPLETION, {"distill/reverse_kl": ""},
                   (Guide(f"nothing to teach < {_share(T.taught_kl)} (at the start)", T.taught_kl),))
TEACHER_LOGP = Vital("log π_teacher of the student's tokens", "nats per token (mean)", {"distill/teacher_logp": ""})

PER_ACTION = replace(ENTROPY, unit="nats per action")
ACTION_CLIP = replace(CLIP, unit="share of actions clipped")
# Every vital sign by the name a rung declares it with (``Rung.vitals``).
VITALS = {"return": RETURN, "reward": REWARD, "reward_functions": REWARD_FUNCTIONS, "accuracy": ACCURACY,
          "kl_ref": KL_REF, "kl_old": KL_OLD, "entropy": ENTROPY, "action_entropy": PER_ACTION, "clip": CLIP,
          "action_clip": ACTION_CLIP, "ratio": RATIO, "length": LENGTH, "cut_off": CUT_OFF,
          "zero_spread": ZERO_SPREAD, "grad_norm": GRAD_NORM, "tool_calls": TOOL_CALLS, "sampler_cut": SAMPLER_CUT,
          "sampler_gap": SAMPLER_GAP, "explained": EXPLAINED, "value_loss": VALUE_LOSS, "ppo_reward": PPO_REWARD,
          "true_reward": TRUE_REWARD, "kl_per_completion": KL_PER_COMPLETION, "beta": BETA,
          "rlhf_explained": RLHF_EXPLAINED, "rm_loss": RM_LOSS, "ranked": RANKED, "rm_margin": RM_MARGIN,
          "length_paid": LENGTH_PAID, "calibration": CALIBRATION, "dpo_loss": DPO_LOSS, "dpo_ranked": DPO_RANKED,
          "dpo_margin": DPO_MARGIN, "implicit": IMPLICIT, "logps": LOGPS, "sample_kl": SAMPLE_KL,
          "sample_true": SAMPLE_TRUE, "sample_length": SAMPLE_LENGTH, "taught_accuracy": TAUGHT_ACCURACY,
          "reverse_kl": REVERSE_KL, "teacher_logp": TEACHER_LOGP}


def of_rung(rung: str | None) -> tuple[Vital, ...]:
    """The vital signs the rung declares (``Rung.vitals``); grpo's for a run of no rung ladder knows (TRL's logs)."""
    known = registry.rungs()
    declared = known[rung] if rung in known else known["grpo"]
    return tuple(VITALS[name] for name in declared.RUNG.vitals)


def series_names(vital: Vital, names) -> dict[str, str]:
    """The run's series a vital draws (in the order of its ``lines``, a pattern's matches sorted) → legend label."""
    drawn = {}
    for line, label in vital.lines.items():
        for name in _matches(line, names):
            function = name.split("/")[1] if name.count("/") == 2 else name  # rewards/NAME/mean → NAME
            drawn[name] = label.format(name=function)
    return drawn


def _matches(line: str, names) -> list[str]:
    """The names ``line`` stands for: a pattern's matches, sorted, or the name itself if the run logged it."""
    if "*" in line:
        return sorted(fnmatch.filter(names, line))
    return [line] if line in names else []


def vitals_of(run: Run) -> list[Vital]:
    """The vitals of the run's rung (grpo's for a rung not listed) that the run logged."""
    logged = [name for name in run.series if run.get(name) is not None]
    return [v for v in of_rung(run.rung) if series_names(v, logged)]


def own_guides(vital: Vital, run: Run) -> list[Guide]:
    """The guides that depend on the run: entropy collapse at a tenth of its first third's median (and its floor);
    the token budget on the length panel; the adaptive controller's KL target; in RLHF PPO, the critic's loss at
    ``value_kept`` of its first third's (not below it by the end: not learning)."""
    if "entropy" in vital.lines:
        return _entropy_guides(run)
    budget = run.facts.max_new_tokens
    if "completions/mean_length" in vital.lines and budget is not None:
        return [Guide(f"token budget {budget}", float(budget))]
    target = run.config.get("kl_target")
    if "kl_ref_seq" in vital.lines and run.config.get("adaptive_kl") and isinstance(target, (int, float)):
        return [Guide(f"the controller's target {target:g}", float(target))]
    value_loss = run.get("value_loss")
    if "value_loss" in vital.lines and run.rung == "ppo-sentiment" and _enough(value_loss):
        start = statistics.median(thirds(value_loss)[0][1])
        return [Guide(f"learnt: ≤ {T.value_kept:g} × start", T.value_kept * start)]
    return []


def _enough(series) -> bool:
    return series is not None and len(series) >= T.min_points_trend


def _entropy_guides(run: Run) -> list[Guide]:
    entropy = run.get("entropy")
    if not _enough(entropy):
        return []
    start = statistics.median(thirds(entropy)[0][1])
    return [Guide(f"collapse ≤ {T.entropy_kept:g} × start", T.entropy_kept * start),
            Guide(f"floor {T.entropy_floor:g}", T.entropy_floor)]
