"""The signatures of a run's known failures (and of two harmless surprises), each a small function of the series.

Every threshold is in ``Thresholds`` and every sentence in ``WORDING``, here at the top. A signature reads
robust statistics over windows — the median of the first, middle or last third of the run, or of its last
half — never one point; a trend needs ``min_points_trend`` logged steps, a level ``min_points``. Windows:

    first, middle, last = thirds(x)      k = max(1, n // 3): x[:k], x[k:n−k], x[n−k:]
    late = x[n // 2:]                    the last half: where the run has settled
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass

from ladder.doctor.runs import Run, Series


@dataclass(frozen=True)
class Thresholds:
    min_points: int = 3  # fewer logged steps cannot give a median apart from a single point
    min_points_trend: int = 6  # thirds of ≥ 2 points each: a trend is then more than two points
    loss_zero: float = 1e-2  # at ratio ≡ 1 the surrogate is the mean advantage (0) plus β·KL ≈ 0.04 × 0.05: below this
    grad_alive: float = 1e-8  # a gradient norm above float32 round-off: the loss ≈ 0 still moves the weights
    clip_zero: float = 1e-9  # ratio ≡ 1 clips nothing, exactly; anything above is a real clip
    truncated_share: float = 0.3  # a third of completions cut off: their rewards (usually 0) fill whole groups
    zero_std_share: float = 0.5  # half the groups with Â = 0: half the batch gives no gradient
    too_easy: float = 0.9  # correctness ≥ 0.9: nearly every completion right, groups all-correct
    too_hard: float = 0.1  # correctness ≤ 0.1: nearly every completion wrong, groups all-wrong
    entropy_kept: float = 0.1  # entropy down to a tenth of its start: sampling is near-greedy, groups identical
    entropy_min_start: float = 1e-3  # below this at the start the ratio is noise (an already-confident model)
    entropy_floor: float = 1e-3  # nats per action: greedy but ~1 draw in 1000, collapsed even from the start
    kl_high: float = 0.3  # nats per token to π_ref: far past the 0.001–0.05 of a healthy run
    kl_growing_min: float = 0.05  # a growth from tiny values means nothing; from here on it does
    kl_growth: float = 5.0  # last third ≥ 5× the middle third: the KL is running away, not settling
    length_growth: float = 1.3  # 30% longer, every third longer than the one before: a trend, not noise
    rise_min: float = 0.1  # a reward function up by 0.1 (rewards in [0, 1]) is a real rise
    correctness_share: float = 0.25  # correctness rising < a quarter as much: the rise is not correctness
    flat_reward: float = 0.5  # |Δ reward| < ½ the within-group spread; a short run's thirds differ by ~⅓ of it by noise
    kl_still: float = 1e-3  # per-token KL to π_ref below this: the weights have hardly moved
    low_lr: float = 1e-5  # full-fine-tuning rates (1e-6–1e-5); LoRA needs ~10× more (its update is low-rank)
    skipped_updates: int = 1  # in float32 a non-finite gradient is never rounding noise: any one is a fault
    corrected_share: float = 0.1  # the correction truncating or masking > 10%: it reshapes the gradient
    sampler_gap: float = 0.1  # |log π_old − log π_sampler| of 0.1 nats per token: w = e^{±0.1} per token
    explained_variance: float = 0.0  # EV ≤ 0: the value head predicts no better than the returns' mean
    clip_high: float = 0.3  # PPO's healthy clip fraction is 0.05–0.2; ≥ 0.3 the steps leave the trust region


T = Thresholds()


@dataclass(frozen=True)
class Wording:
    title: str
    severity: str  # "harmless" | "problem"
    means: str
    ladder: str  # what to change: the ladder flag …
    trl: str  # … and TRL's name for it
    section: tuple[str, str]  # (file, heading as written there)


NB3 = "notebooks/3_three_policies_and_kl.ipynb"
NB5 = "notebooks/5_grpo_qlora.ipynb"
NB6 = "notebooks/6_design_space_and_trl.ipynb"
WORDING = {
    "loss_zero": Wording(
        "loss ≈ 0 at μ·M = 1", "harmless",
        "with one optimiser step per batch π_old = π_θ, the ratio is 1 and the loss is the mean advantage plus β·KL "
        "(the mean of group-centred Â is 0 per completion; averaged over tokens, as dapo, bnpo and dr_grpo do, it "
        "is a length-weighted mean, small when lengths are alike); its gradient is not zero — look at grad_norm and "
        "the reward, not the loss",
        "nothing (--mu > 1 or --num-minibatches > 1 makes the ratio move)", "nothing (num_iterations, "
        "steps_per_generation)", (NB3, r"## Why $\pi_{\text{old}} = \pi_\theta$ at sampling, and what $\mu$ does")),
    "clip_zero": Wording(
        "clip fraction always 0 at μ·M = 1", "harmless",
        "the ratio π_θ/π_old is exactly 1 at the only step on each batch, so nothing can be clipped",
        "nothing (the clip acts only with --mu > 1 or --num-minibatches > 1)", "nothing (num_iterations > 1)",
        (NB3, r"## Why $\pi_{\text{old}} = \pi_\theta$ at sampling, and what $\mu$ does")),
    "truncation": Wording(
        "truncation starves the signal", "problem",
        "completions cut off at the token budget get the same (usually zero) reward, whole groups alike: Â = 0, "
        "no gradient from them",
        "raise --max-new-tokens, or --mask-truncated / --overlong-buffer", "raise max_completion_length, or "
        "mask_truncated_completions=True", ("notebooks/8_run_doctor.ipynb",
                                            "## 3 · The token budget: where the signal starves")),
    "no_signal": Wording(
        "groups that teach nothing", "problem",
        "a group whose rewards are all equal has Â = 0 and adds no gradient; {why}",
        "--dynamic-sampling, a larger --group-size, or data of the right difficulty", "num_generations larger, or "
        "filter the dataset (GRPOTrainer has no dynamic sampling)", (NB5, "## Run it: a few steps of the tiny preset")),
    "entropy_collapse": Wording(
        "entropy collapse", "problem",
        "the policy is near-deterministic: the same actions every time (for an LM, groups alike), no exploration left",
        "lower --lr; grpo: --kl-coef up, --clip-eps-high 0.28 or --adaptive-entropy; cartpole: --entropy-coef 0.01",
        "lower learning_rate, raise beta, epsilon_high=0.28 or use_adaptive_entropy",
        (NB6, "## 3 · Tokens: who loses the gradient")),
    "kl_blowup": Wording(
        "KL to π_ref blowing up", "problem",
        "the policy is running away from π_ref: steps too large for the data, reward hacking follows",
        "lower --lr, raise --kl-coef, lower --max-grad-norm", "lower learning_rate, raise beta, lower max_grad_norm",
        (NB5, "## KL in the loss, and how the loss is averaged")),
    "length_drift": Wording(
        "length drift under the per-sequence mean", "problem",
        "the per-sequence mean gives each token of a long completion less weight, so long wrong answers are "
        "punished less than short ones: length grows while the reward does not",
        "--loss-type dr_grpo (or dapo)", "loss_type='dr_grpo' (or 'dapo')", (NB6, "### What the constant counts")),
    "format_hacking": Wording(
        "reward rising while correctness does not", "problem",
        "the policy is learning an easier reward (format, say) and not the task; the total reward hides it",
        "--reward-weights with more weight on correctness, or a stricter format reward",
        "reward_weights", (NB5, "## Rule rewards")),
    "nothing_moving": Wording(
        "nothing moving", "problem",
        "the reward is flat and the policy has not left π_ref: the learning rate is too low{lora}",
        "raise --lr (LoRA: ~1e-4–1e-3)", "raise learning_rate (with a peft_config: ~1e-4–1e-3)",
        (NB5, "## Memory: 4-bit + LoRA + the disabled adapter")),
    "nonfinite": Wording(
        "non-finite steps", "problem",
        "a loss or gradient overflowed (NaN/inf); ladder skipped those steps, TRL applies them",
        "check the rewards' scale and NaNs first (huge rewards with --scale-rewards none overflow the gradient before "
        "any clipping), then lower --lr", "scale_rewards, the reward functions, learning_rate",
        ("README.md", "## Every run")),
    "sampler_mismatch": Wording(
        "a sampler mismatch the correction no longer covers", "problem",
        "π_sampler and π_old disagree so much that the importance weights are cut back on many tokens: the "
        "gradient is no longer the on-policy one",
        "--sampler-dtype same, or --sampler-correction sequence_mask with --sampler-clip-max",
        "vllm_importance_sampling_mode / vllm_importance_sampling_cap, or match vLLM's dtype",
        (NB5, "## The fourth policy: when the sampler is not π_old")),
    "critic_not_learning": Wording(
        "critic not learning", "problem",
        "the value head explains none of the returns' variance: GAE's baseline is noise, the advantages too{cause}",
        "raise --value-coef (0 trains no critic); if the policy diverged too (entropy, KL), lower --lr first",
        "vf_coef (classic PPOConfig), learning_rate",
        ("notebooks/1b_foundations.ipynb", "### Explained variance")),
    "clip_too_high": Wording(
        "clip fraction too high", "problem",
        "a large share of the actions (an LM's tokens) has its ratio π_θ/π_old pushed out of [1 − ε, 1 + ε]: the "
        "update is leaving the trust region; the run may still learn, but it is fragile",
        "lower --mu or --lr (or fewer --num-minibatches)", "lower num_iterations or learning_rate",
        ("notebooks/2_ppo_cartpole.ipynb", "## The clipped objective, on real ratios")),
}


@dataclass
class Finding:
    name: str
    severity: str
    metric: str
    steps: list[int]  # the evidence: the window the statistic was taken over
    values: list[float]
    saw: str
    means: str
    change: str
    section: str


def finding(name: str, metric: str, window: tuple[list[int], list[float]], saw: str, **fill) -> Finding:
    w = WORDING[name]
    file, heading = w.section
    return Finding(name, w.severity, metric, list(window[0]), list(window[1]), saw, w.means.format(**fill),
                   f"ladder: {w.ladder}; TRL: {w.trl}", f"{file}, “{plain(heading)}”")


LATEX = {"$": "", r"\text{old}": "old", r"\pi": "π", r"\theta": "θ", r"\mu": "μ", "_{old}": "_old"}


def plain(heading: str) -> str:
    """A heading as the reader sees it rendered: without the #s and the LaTeX markup."""
    text = heading.lstrip("# ")
    for markup, shown in LATEX.items():
        text = text.replace(markup, shown)
    return text


# --- windows ------------------------------------------------------------------------------------------------

def thirds(s: Series) -> list[tuple[list[int], list[float]]]:
    n, k = len(s), max(1, len(s) // 3)
    return [(s.steps[:k], s.values[:k]), (s.steps[k:n - k] or s.steps, s.values[k:n - k] or s.values),
            (s.steps[n - k:], s.values[n - k:])]


def late(s: Series) -> tuple[list[int], list[float]]:
    return s.steps[len(s) // 2:], s.values[len(s) // 2:]


def med(window: tuple[list[int], list[float]]) -> float:
    return statistics.median(window[1])


def span(window) -> str:
    steps = window[0]
    return f"steps {steps[0]}–{steps[-1]}" if len(steps) > 1 else f"step {steps[0]}"


def one_step(run: Run) -> str:
    assumed = {"mu", "minibatches"} & run.facts.assumed
    return "μ·M = 1" + (" (assumed: TRL's defaults)" if assumed else "")


def enough(s: Series | None, points: int) -> bool:
    return s is not None and len(s) >= points


# --- the signatures -----------------------------------------------------------------------------------------

def loss_zero(run: Run) -> Finding | None:
    loss = run.get("loss")
    if run.facts.updates_per_batch != 1 or not enough(loss, T.min_points):
        return None
    whole = (loss.steps, loss.values)
    typical = statistics.median(abs(v) for v in loss.values)
    grad = run.get("grad_norm")
    if typical >= T.loss_zero or (grad is not None and statistics.median(grad.values) <= T.grad_alive):
        return None  # a zero gradient is no harmless surprise: the groups without signal say why
    return finding("loss_zero", "loss", whole, f"median |loss| {typical:.2g} over {span(whole)} at {one_step(run)}")


def clip_zero(run: Run) -> Finding | None:
    clip = run.get("clip_frac")
    if run.facts.updates_per_batch != 1 or not enough(clip, T.min_points) or max(clip.values) > T.clip_zero:
        return None
    whole = (clip.steps, clip.values)
    return finding("clip_zero", "clip_frac", whole, f"clip fraction 0 at every one of {span(whole)} at {one_step(run)}")


def truncation(run: Run) -> Finding | None:
    cut, alike = run.get("completions/clipped_ratio"), run.get("frac_reward_zero_std")
    if not (enough(cut, T.min_points) and enough(alike, T.min_points)):
        return None
    if med(late(cut)) < T.truncated_share or med(late(alike)) < T.zero_std_share:
        return None
    return finding("truncation", "completions/clipped_ratio", late(cut),
                   f"median cut-off share {med(late(cut)):.2f} and zero-spread groups {med(late(alike)):.2f} over "
                   f"{span(late(cut))} (max-new-tokens {run.facts.shown('max_new_tokens')})")


def correctness_series(run: Run) -> tuple[str, Series] | None:
    """The per-function reward that scores correctness (named correct… or accura…), if the run logs one."""
    for name, s in run.series.items():
        if name.startswith("rewards/") and name.endswith("/mean") and ("correct" in name or "accura" in name):
            return name, s
    return None


def no_signal(run: Run) -> Finding | None:
    alike, cut = run.get("frac_reward_zero_std"), run.get("completions/clipped_ratio")
    if not enough(alike, T.min_points) or med(late(alike)) < T.zero_std_share:
        return None
    if enough(cut, T.min_points) and med(late(cut)) >= T.truncated_share:
        return None  # the truncation signature explains it
    why = "the rewards do not tell these completions apart"
    found = correctness_series(run)
    if found is not None and len(found[1]):
        level = med(late(found[1]))
        if level >= T.too_easy:
            why = f"the data is too easy ({found[0]} ≈ {level:.2f}: every completion right)"
        elif level <= T.too_hard:
            why = f"the data is too hard ({found[0]} ≈ {level:.2f}: every completion wrong)"
    return finding("no_signal", "frac_reward_zero_std", late(alike),
                   f"median share of zero-spread groups {med(late(alike)):.2f} over {span(late(alike))}", why=why)


def entropy_collapse(run: Run) -> Finding | None:
    entropy = run.get("entropy")
    if not enough(entropy, T.min_points_trend):
        return None
    first, _, last = thirds(entropy)
    fell = med(first) >= T.entropy_min_start and med(last) <= T.entropy_kept * med(first)
    if not (fell or med(last) <= T.entropy_floor):
        return None
    return finding("entropy_collapse", "entropy", last,
                   f"entropy median {med(first):.3g} over {span(first)}, {med(last):.3g} over {span(last)}")


def kl_blowup(run: Run) -> Finding | None:
    kl = run.get("kl_ref")
    if not enough(kl, T.min_points_trend):
        return None
    first, middle, last = thirds(kl)
    high = med(last) >= T.kl_high
    growing = med(last) >= T.kl_growing_min and med(last) >= T.kl_growth * med(middle)
    if not (high or growing):
        return None
    return finding("kl_blowup", "kl_ref", last, f"KL(π_θ‖π_ref) median {med(first):.3g} over {span(first)}, "
                   f"{med(middle):.3g} over {span(middle)}, {med(last):.3g} over {span(last)}")


def length_drift(run: Run) -> Finding | None:
    length = run.get("completions/mean_length")
    if run.facts.loss_type != "grpo" or not enough(length, T.min_points_trend):
        return None
    first, middle, last = (med(w) for w in thirds(length))
    if not (first < middle < last and last >= T.length_growth * first):
        return None
    reward = run.get("reward")
    gain = rise(reward) if enough(reward, T.min_points_trend) else 0.0
    calls = run.get("agent/tool_calls")
    more_calls = rise(calls) if enough(calls, T.min_points_trend) else 0.0
    if gain >= T.rise_min or more_calls >= T.rise_min:
        return None  # longer and better, or longer by its tool calls (an agent learning its tool): no drift
    window = thirds(length)[2]
    return finding("length_drift", "completions/mean_length", (length.steps, length.values),
                   f"mean length {first:.1f} → {middle:.1f} → {last:.1f} tokens over the thirds of the run "
                   f"(to {span(window)}), reward {gain:+.2f}, loss type {run.facts.shown('loss_type')}")


def rise(s: Series) -> float:
    first, _, last = thirds(s)
    return med(last) - med(first)


def format_hacking(run: Run) -> Finding | None:
    found = correctness_series(run)
    if found is None or not enough(found[1], T.min_points_trend):
        return None
    correct_name, correct = found
    if correct_name.split("/")[1] in run.facts.unweighted:
        return None  # logged at weight 0 (an environment scores the task): not what the run optimises
    others = [(name, s) for name, s in run.series.items() if name.startswith("rewards/") and name.endswith("/mean")
              and name != correct_name and enough(s, T.min_points_trend)]
    for name, s in others:
        if rise(s) >= T.rise_min and rise(correct) <= T.correctness_share * rise(s):
            return finding("format_hacking", name, (s.steps, s.values),
                           f"{name} up {rise(s):+.2f}, {correct_name} {rise(correct):+.2f} (first → last third)")
    return None


def nothing_moving(run: Run) -> Finding | None:
    reward, spread, kl = run.get("reward"), run.get("reward_std"), run.get("kl_ref")
    lr = run.facts.lr
    if lr is None or lr > T.low_lr or not enough(reward, T.min_points_trend) or spread is None:
        return None
    if abs(rise(reward)) >= T.flat_reward * statistics.median(spread.values):
        return None
    if kl is not None and med(late(kl)) >= T.kl_still:
        return None
    lora = " for LoRA, whose low-rank update needs ~10× the full-fine-tuning rate" if run.facts.lora else ""
    still = f", KL to π_ref {med(late(kl)):.2g}" if kl is not None else ""
    return finding("nothing_moving", "reward", (reward.steps, reward.values),
                   f"reward {rise(reward):+.3f} first → last third (the groups' reward std "
                   f"{statistics.median(spread.values):.2f})"
                   f"{still}, lr {lr:g}" + (" with LoRA" if run.facts.lora else ""), lora=lora)


def nonfinite(run: Run) -> Finding | None:
    for metric in ("skipped_steps", "nonfinite_steps"):
        s = run.get(metric)
        if s is None:
            continue
        bad = [(step, v) for step, v in zip(s.steps, s.values) if v > 0]
        if len(bad) >= T.skipped_updates:
            steps, values = [b[0] for b in bad], [b[1] for b in bad]
            return finding("nonfinite", metric, (steps, values),
                           f"{len(bad)} update(s) with non-finite steps, at step(s) {', '.join(map(str, steps[:8]))}")
    return None


def sampler_mismatch(run: Run) -> Finding | None:
    corrected, gap = run.get("sampler/corrected_frac"), run.get("sampler/logp_diff_mean")
    if enough(corrected, T.min_points) and med(late(corrected)) >= T.corrected_share:
        return finding("sampler_mismatch", "sampler/corrected_frac", late(corrected),
                       f"the correction ({run.facts.sampler_correction}) cut back a median {med(late(corrected)):.2f} "
                       f"of the weights over {span(late(corrected))}")
    if enough(gap, T.min_points) and med(late(gap)) >= T.sampler_gap:
        return finding("sampler_mismatch", "sampler/logp_diff_mean", late(gap),
                       f"|log π_old − log π_sampler| median {med(late(gap)):.3g} nats per token over "
                       f"{span(late(gap))} (correction: {run.facts.sampler_correction})")
    return None


def critic_not_learning(run: Run) -> Finding | None:
    ev = run.get("explained_variance")
    untrained = run.facts.value_coef == 0
    if not enough(ev, T.min_points) or (med(late(ev)) > T.explained_variance and not untrained):
        return None
    cause = " (the value coefficient is 0: the critic is never trained)" if untrained else ""
    return finding("critic_not_learning", "explained_variance", late(ev),
                   f"explained variance median {med(late(ev)):.2f} over {span(late(ev))}, value coefficient "
                   f"{run.facts.shown('value_coef')}", cause=cause)


def clip_too_high(run: Run) -> Finding | None:
    clip = run.get("clip_frac")
    if not enough(clip, T.min_points) or med(late(clip)) < T.clip_high:
        return None
    return finding("clip_too_high", "clip_frac", late(clip),
                   f"clip fraction median {med(late(clip)):.2f} over {span(late(clip))} "
                   f"(μ = {run.facts.shown('mu')}, M = {run.facts.shown('minibatches')}, lr {run.facts.shown('lr')})")


SIGNATURES = (nonfinite, kl_blowup, entropy_collapse, clip_too_high, sampler_mismatch, nothing_moving,
              critic_not_learning, truncation, no_signal, length_drift, format_hacking, loss_zero, clip_zero)


def diagnose(run: Run) -> list[Finding]:
    """Every finding on the run, problems first, in SIGNATURES' order: likely causes before their symptoms."""
    found = [f for f in (signature(run) for signature in SIGNATURES) if f is not None]
    return sorted(found, key=lambda f: f.severity != "problem")
