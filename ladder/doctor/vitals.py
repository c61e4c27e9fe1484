"""A run's vital signs: per rung, the few series a practitioner reads to judge a run, each a ``Vital`` (a panel of
doctor.png) with the thresholds its signatures use (``Thresholds``) as ``Guide``s.

    grpo, agent, TRL   reward, the reward functions, held-out accuracy, KL to π_ref, entropy, clip fraction,
                       the ratio's range, completion length, the cut-off share, zero-spread groups, grad norm,
                       tool calls (agent), the sampler's gap to π_old (when logged)
    cartpole           return, explained variance, value loss, KL to π_old, clip fraction, entropy, grad norm
    ppo-sentiment      reward, KL to π_ref, explained variance, value loss, KL to π_old, clip fraction, entropy,
                       completion length
    reinforce          return, entropy, grad norm

``vitals_of(run)`` keeps the vitals the run logged (a series it did not log: no panel). A guide is a dashed line
(``low`` alone) or a shaded healthy band (``low`` to ``high``); a run's own guides (a tenth of its starting entropy,
its token budget) come from ``own_guides``.
"""

from __future__ import annotations

import fnmatch
import statistics
from dataclasses import dataclass, replace

from ladder.doctor.run_data import Run
from ladder.doctor.signatures import T, thirds


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


def _share(value: float) -> str:
    return f"{value:g}"


RETURN = Vital("episode return", "return (steps balanced)",
               {"return": "training episodes", "eval_return_mean": "greedy evaluation"})
REWARD = Vital("reward", "mean per completion", {"reward": ""})
REWARD_FUNCTIONS = Vital("reward functions", "mean per completion", {"rewards/*/mean": "{name}"})
ACCURACY = Vital("held-out accuracy", "share correct (greedy)", {"eval_accuracy": ""})
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

PER_ACTION = replace(ENTROPY, unit="nats per action")
ACTION_CLIP = replace(CLIP, unit="share of actions clipped")
GRPO_VITALS = (REWARD, REWARD_FUNCTIONS, ACCURACY, KL_REF, ENTROPY, CLIP, RATIO, LENGTH, CUT_OFF, ZERO_SPREAD,
               GRAD_NORM, TOOL_CALLS, SAMPLER_CUT, SAMPLER_GAP)
VITALS = {
    "grpo": GRPO_VITALS,
    "agent": GRPO_VITALS,
    "cartpole": (RETURN, EXPLAINED, VALUE_LOSS, KL_OLD, ACTION_CLIP, PER_ACTION, GRAD_NORM),
    "ppo-sentiment": (REWARD, KL_REF, EXPLAINED, VALUE_LOSS, KL_OLD, CLIP, ENTROPY, LENGTH, GRAD_NORM),
    "reinforce": (RETURN, PER_ACTION, GRAD_NORM),
}


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
    return [v for v in VITALS.get(run.rung, GRPO_VITALS) if series_names(v, logged)]


def own_guides(vital: Vital, run: Run) -> list[Guide]:
    """The guides that depend on the run: entropy collapse at a tenth of its first third's median (and its floor);
    the token budget on the length panel."""
    entropy = run.get("entropy")
    if "entropy" in vital.lines and entropy is not None and len(entropy) >= T.min_points_trend:
        start = statistics.median(thirds(entropy)[0][1])
        return [Guide(f"collapse ≤ {T.entropy_kept:g} × start", T.entropy_kept * start),
                Guide(f"floor {T.entropy_floor:g}", T.entropy_floor)]
    budget = run.facts.max_new_tokens
    if "completions/mean_length" in vital.lines and budget is not None:
        return [Guide(f"token budget {budget}", float(budget))]
    return []
