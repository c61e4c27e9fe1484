"""Rung 7: on-policy distillation — the student samples, a stronger teacher scores every token it sampled.

Each update, on grpo's machinery and the same ``ladder.core``:

    P prompts × G completions sampled from the student π_θ               grpo's rollout (the rule rewards logged)
    log π_θ and log π_teacher of every sampled token, no grad             the teacher frozen beside the student
    r_t = −(log π_θ − log π_teacher)(y_t)                                 core.distillation_rewards: k1 of the reverse
                                                                          KL, π_teacher where π_ref was
    Â_t = Σ_{t' ≥ t} γ^(t'−t)·r_t'  (+ the rule rewards' group Â)          core.discounted_returns, --discount γ
    core.update with the clipped surrogate (grpo's objective and flags)

Every token gets a signal where GRPO's correctness gives a completion one number. In expectation, with γ = 1 the
policy gradient is −∇KL(π_θ ‖ π_teacher) over whole completions, and with γ = 0 a one-sample estimate of GKD's
reverse-KL gradient (β = 1) at the student's own prefixes (``ladder.core.distillation``) — each completion's term
scaled as ``--loss-type`` aggregates it (grpo's default: by 1/its length; dr_grpo: by one constant). The default is
γ = 0, each token its own reward: on the tiny task it reached 0.9 held-out accuracy with less compute than γ = 1 on two
seeds of three and never with more (benchmarks/distill_compare.py; γ = 1 credits each token with the noise of every
later one). By default no
π_ref is computed (``--kl-coef 0``: the teacher is the anchor) and the correctness reward is only logged
(``--reward-weights 0``). ``--preset tiny``: the tiny math model, which forgets to carry, taught
by its tutor's model, which always carries (``@tiny-math-teacher``), on a CPU in under a minute; the held-out greedy
accuracy of both is drawn in curves.png. The users' default: Qwen2.5-1.5B-Instruct teaching Qwen2.5-0.5B-Instruct on
GSM8K (``--qlora`` for the student).

metrics.jsonl, one line per update: grpo's fields (reward, rewards/correctness/mean, clip_frac, entropy, …) and
distill/reverse_kl (Σ_t log π_θ − log π_teacher per completion, mean), distill/teacher_logp (per token, mean); when
evaluated eval_accuracy and teacher_accuracy; summary.json adds the teacher's accuracy and the reverse KL of the first
and the last five updates. At --reward-weights 0 the rule reward is 0 for every completion: grpo's reward, advantage
and frac_reward_zero_std (1: no group has a spread) say so, and the teacher's rewards carry the signal.
completions.jsonl (every --print-samples updates): grpo's rows with each completion's reverse_kl and teacher_logp.
"""

# The package: the recipe the loop runs (``Distill``: grpo's with the teacher's accuracy), ``build``, ``train`` and
# the declaration ``RUNG`` (``recipe``); the options, grpo's and the teacher's (``options``); the teacher loaded,
# scoring the student's samples, and the per-token credit (``teacher``).

from ladder.rungs.distill.options import ALGOS, PRESETS, RESOLVED, Config, validate
from ladder.rungs.distill.recipe import CURVES, NAME, RUNG, Distill, build, train
from ladder.rungs.distill.teacher import load_teacher, scored_by, teacher_credit, with_teacher

__all__ = ["ALGOS", "CURVES", "NAME", "PRESETS", "RESOLVED", "RUNG", "Config", "Distill", "build", "load_teacher",
           "scored_by", "teacher_credit", "train", "validate", "with_teacher"]
