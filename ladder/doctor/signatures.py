"""The signatures of a run's known failures (and of two harmless surprises), each a small function of the series.

Every threshold is in ``Thresholds``, here at the top, and every sentence in ``wording.WORDING``. A signature reads
robust statistics over windows — the median of the first, middle or last third of the run, or of its last
half — never one point; a trend needs ``min_points_trend`` logged steps, a level ``min_points``. Windows:

    first, middle, last = thirds(x)      k = max(1, n // 3): x[:k], x[k:n−k], x[n−k:]
    late = x[n // 2:]                    the last half: where the run has settled

A few signatures read a rung its own way: on ppo-sentiment (RLHF PPO) kl_blowup reads the KL per completion that the
reward's penalty holds and critic_not_learning the value loss too; on dpo, likelihood_displacement reads the chosen's
log-probabilities and length_drift the sampled completions against the true reward. ``wording.wording(name, rung)``
gives such a finding its rung's words. One is a distill run's own: nothing_to_teach reads the reverse KL to the
teacher that only that rung logs.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass

from ladder.doctor.runs import Run, Series
from ladder.doctor.wording import WORDING, wording  # noqa: F401 - WORDING also read from here


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
    kl_climbing: float = 1.3  # RLHF, KL per completion: last third ≥ 1.3× the middle third, not settling (healthy
    # tiny runs at β = 0.05, 0.005 or adaptive: 0.82–1.26×; at β = 0: 1.43×)
    penalised_fall: float = 0.25  # r_φ − β·KL back down a quarter of its gain (as true_fall): the KL costs more than
    # r_φ pays for it (healthy tiny runs: at most 0.01 of the gain; at 25× the preset's lr: 0.79)
    value_kept: float = 0.8  # RLHF critic: its loss not down a fifth from its first third's: not learning (healthy runs
    # of 60–100 updates: 0.06–0.19×, one of 36 updates: 0.58×; a critic never trained: 0.96×)
    displaced: float = math.log(2)  # DPO: the chosen's log-prob down ln 2 nats: the chosen half as likely as before
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
    true_fall: float = 0.25  # the true reward back down a quarter of its rise (start → peak third → last third): a
    # fall, not a plateau's noise (each third's median is over a third of the run's updates)
    clip_high: float = 0.25  # PPO's healthy clip fraction is 0.05–0.2 (tiny presets: under 0.1); from a quarter of
    # the actions clipped, the steps leave the trust region
    taught_kl: float = 0.1  # distillation: the reverse KL to the teacher per completion at the start below 0.1 nats,
    # π_θ/π_teacher within e^0.1 ≈ 1.1 on a whole completion: a teacher that is the student (a copy: exactly 0; healthy
    # tiny runs, seeds 0–2 under 3 CPU-kernel variants: 4.7–5.8 over the first 3 updates, 4.0–5.2 over the first third)


T = Thresholds()




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
    title: str = ""  # the signature's title on this run's rung (``wording.wording``)


def finding(name: str, metric: str, window: tuple[list[int], list[float]], saw: str, rung: str | None = None,
            **fill) -> Finding:
    """A finding of signature ``name`` in the words of ``rung`` (where the rung declares its own: ``Rung.words``)."""
    w = wording(name, rung)
    file, heading = w.section
    return Finding(name, w.severity, metric, list(window[0]), list(window[1]), saw, w.means.format(**fill),
                   f"ladder: {w.ladder}; TRL: {w.trl}", f"{file}, “{plain(heading)}”", w.title)


LATEX = {"$": "", r"\text{old}": "old", r"\pi": "π", r"\theta": "θ", r"\mu": "μ", r"\beta": "β", "_{old}": "_old"}


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
    if kl_blowup(run) is not None:
        return None  # so does a policy running away from π_ref: its completions collapse to the same few
    if enough(run.get("distill/reverse_kl"), T.min_points):
        return None  # a teacher scores every token: its per-token rewards are the signal, whatever the groups' spread
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
    """GRPO, agent, TRL: the KL per token to π_ref high (last third ≥ ``kl_high``) or growing ``kl_growth``× from
    the middle third. RLHF PPO (ppo-sentiment) has its own reading: ``kl_runaway``."""
    if run.rung == "ppo-sentiment":
        return kl_runaway(run)
    kl = run.get("kl_ref")
    if not enough(kl, T.min_points_trend):
        return None
    first, middle, last = thirds(kl)
    high = med(last) >= T.kl_high
    growing = med(last) >= T.kl_growing_min and med(last) >= T.kl_growth * med(middle)
    if not (high or growing):
        return None
    return finding("kl_blowup", "kl_ref", last, f"KL(π_θ‖π_ref) per token median {med(first):.3g} over "
                   f"{span(first)}, {med(middle):.3g} over {span(middle)}, {med(last):.3g} over {span(last)}")


def kl_runaway(run: Run) -> Finding | None:
    """RLHF PPO: the KL that matters is the one in the reward, per completion (``kl_ref_seq``: log π_θ/π_ref summed
    over the completion's tokens, the quantity the adaptive controller steers). With β > 0 the penalty holds it: the
    KL climbs only while r_φ pays β per nat, then settles. It has run away where its last third is not below its
    middle third and nothing holds it (``unheld``)."""
    kl = run.get("kl_ref_seq")
    if not enough(kl, T.min_points_trend):
        return None
    first, middle, last = thirds(kl)
    if med(last) <= 0 or med(last) < med(middle):
        return None
    why = unheld(run, climbing=med(last) >= T.kl_climbing * med(middle))
    if why is None:
        return None
    return finding("kl_blowup", "kl_ref_seq", last, f"KL(π_θ‖π_ref) per completion (summed over its tokens) median "
                   f"{med(first):.3g} over {span(first)}, {med(middle):.3g} over {span(middle)}, {med(last):.3g} "
                   f"over {span(last)}; {why}", rung=run.rung)


def unheld(run: Run, climbing: bool) -> str | None:
    """What says the KL penalty does not hold the KL, or None. The penalised reward r_φ − β·KL (``reward``: what PPO
    climbs) fell back from its peak (the better of the first two thirds' medians) by ``penalised_fall`` of its gain
    over its start (the median of the first ``min_points`` records, π_θ ≈ π_ref): the KL spent costs more than r_φ
    pays for it. Or, the KL still ``climbing``, no penalty at all (β = 0 in the last half, as logged, else as
    configured). A collapsed entropy is no clue here: entropy_collapse names it, and at β = 0.05 a healthy policy's
    entropy halves while its KL climbs up to 1.35× (thirds of 20 updates), as fast as an unpenalised one's (1.4×)."""
    coef = run.get("kl_coef")
    beta = med(late(coef)) if coef is not None else run.facts.kl_coef
    reward = run.get("reward")
    if enough(reward, T.min_points_trend):
        start = statistics.median(reward.values[:T.min_points])
        medians = [med(w) for w in thirds(reward)]
        peak = max(medians[:2])
        if peak > start and peak - medians[2] >= T.penalised_fall * (peak - start):
            return (f"the penalised reward r_φ − β·KL fell back {start:.3f} → {peak:.3f} → {medians[2]:.3f} (start, "
                    f"peak third, last third) at β = {'unknown' if beta is None else f'{beta:.3g}'}")
    if climbing and beta == 0:
        return "β = 0: no penalty holds it"
    return None


def length_drift(run: Run) -> Finding | None:
    """The completions' mean length longer in every third than in the one before, the last ``length_growth``× the
    first, while the reward gains less than ``rise_min`` (and no more tool calls explain it). GRPO under the
    per-sequence mean (loss type grpo) on the training reward; DPO on its sampled completions, judged by the true
    reward r* — only where the task knows it: without it longer cannot be told from better."""
    length = run.get("completions/mean_length")
    dpo = run.rung == "dpo"
    if not (dpo or run.facts.loss_type == "grpo") or not enough(length, T.min_points_trend):
        return None
    first, middle, last = (med(w) for w in thirds(length))
    if not (first < middle < last and last >= T.length_growth * first):
        return None
    reward = run.get("true_reward_mean" if dpo else "reward")
    if dpo and not enough(reward, T.min_points_trend):
        return None
    gain = rise(reward) if enough(reward, T.min_points_trend) else 0.0
    calls = run.get("agent/tool_calls")
    more_calls = rise(calls) if enough(calls, T.min_points_trend) else 0.0
    if gain >= T.rise_min or more_calls >= T.rise_min:
        return None  # longer and better, or longer by its tool calls (an agent learning its tool): no drift
    window = thirds(length)[2]
    judged = "r* (true_reward_mean) of the samples" if dpo else "reward"
    how = "DPO's summed log-ratios" if dpo else f"loss type {run.facts.shown('loss_type')}"
    return finding("length_drift", "completions/mean_length", (length.steps, length.values),
                   f"mean length {first:.1f} → {middle:.1f} → {last:.1f} tokens over the thirds of the run "
                   f"(to {span(window)}), {judged} {gain:+.2f}, {how}", rung=run.rung)


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


PROXIES = ("score_mean", "rewards/margins")  # a learned reward: r_φ's score (RM + PPO), DPO's implicit reward margin


def reward_overoptimised(run: Run) -> Finding | None:
    """The true reward (``true_reward_mean``, where the task knows it) rose from where it started (the median of the
    first ``min_points`` records) to a peak (the better of the first two thirds' medians) and fell back from it by at
    least ``true_fall`` of that rise in the last third, while the learned reward there is at least where it was at the
    peak."""
    true = run.get("true_reward_mean")
    proxy_name = next((name for name in PROXIES if enough(run.get(name), T.min_points_trend)), None)
    if proxy_name is None or not enough(true, T.min_points_trend):
        return None
    start = statistics.median(true.values[:T.min_points])
    medians = [med(w) for w in thirds(true)]
    proxies = [med(w) for w in thirds(run.get(proxy_name))]
    at = 0 if medians[0] >= medians[1] else 1
    peak, last = medians[at], medians[2]
    if peak <= start or peak - last < T.true_fall * (peak - start) or proxies[2] < proxies[at]:
        return None
    return finding("reward_overoptimised", "true_reward_mean", (true.steps, true.values),
                   f"true_reward_mean {start:+.3f} → {peak:+.3f} → {last:+.3f} (start, peak third, last third) while "
                   f"{proxy_name} {proxies[at]:+.3f} → {proxies[2]:+.3f}", proxy=proxy_name)


def likelihood_displacement(run: Run) -> Finding | None:
    """DPO: the margin ``rewards/margins`` up (last third's median above the first's) while the chosen completions
    are made less likely: their log-ratio to π_ref, ``rewards/chosen`` / β, below −``displaced`` (the chosen at most
    half as likely as under π_ref; without β, below 0) and falling over the thirds — and, where the run logs
    ``logps/chosen`` (log π_θ(y_w) summed over tokens, a batch's mean), that down by ``displaced`` nats too, the
    evidence then. The log-ratio is per pair, the log-prob carries which pairs a batch drew: both must show it."""
    margins, chosen = run.get("rewards/margins"), run.get("rewards/chosen")
    if run.rung != "dpo" or not (enough(margins, T.min_points_trend) and enough(chosen, T.min_points_trend)):
        return None
    beta = run.facts.kl_coef if run.facts.kl_coef and run.facts.kl_coef > 0 else None
    first, _, last = thirds(chosen)
    floor = -T.displaced * beta if beta else 0.0
    if rise(margins) <= 0 or not med(last) < min(med(first), floor):
        return None
    ratio = f" (log π_θ/π_ref = {med(last) / beta:+.2f} at β = {beta:g})" if beta else ""
    true = run.get("true_reward_mean")
    truth = f"; r* of the sampled completions {rise(true):+.3f}" if enough(true, T.min_points_trend) else ""
    said = (f"rewards/chosen {med(first):+.3f} → {med(last):+.3f}{ratio} while rewards/margins "
            f"{med(thirds(margins)[0]):+.3f} → {med(thirds(margins)[2]):+.3f} (first → last third){truth}")
    logps = run.get("logps/chosen")
    if not enough(logps, T.min_points_trend):
        return finding("likelihood_displacement", "rewards/chosen", last, said)
    start, _, end = thirds(logps)
    if med(start) - med(end) < T.displaced:
        return None
    return finding("likelihood_displacement", "logps/chosen", end,
                   f"logps/chosen median {med(start):.2f} over {span(start)}, {med(end):.2f} over {span(end)} "
                   f"(nats per completion, summed over its tokens: the chosen ×{math.exp(med(end) - med(start)):.2g} "
                   f"as likely); {said}")


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
    still = f", KL to π_ref {med(late(kl)):.2g} per token" if kl is not None else ""
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
    corrected, gap, stale = run.get("sampler/corrected_frac"), run.get("sampler/logp_diff_mean"), \
        run.get("sampling/staleness")
    lag = f"; π_rollout {med(late(stale)):g} updates stale" if enough(stale, 1) and med(late(stale)) > 0 else ""
    if enough(corrected, T.min_points) and med(late(corrected)) >= T.corrected_share:
        return finding("sampler_mismatch", "sampler/corrected_frac", late(corrected),
                       f"the correction ({run.facts.sampler_correction}) cut back a median {med(late(corrected)):.2f} "
                       f"of the weights over {span(late(corrected))}{lag}")
    if enough(gap, T.min_points) and med(late(gap)) >= T.sampler_gap:
        return finding("sampler_mismatch", "sampler/logp_diff_mean", late(gap),
                       f"|log π_old − log π_sampler| median {med(late(gap)):.3g} nats per token over "
                       f"{span(late(gap))} (correction: {run.facts.sampler_correction}{lag})")
    return None


def critic_not_learning(run: Run) -> Finding | None:
    """The value coefficient 0 (no critic is trained), or the explained variance ≤ ``explained_variance`` over the
    last half — and in RLHF PPO (ppo-sentiment) the value loss's last third not below ``value_kept`` × its first's.
    There the return is one score at the last token less the KL penalties, and as the policy settles a batch's scores
    grow alike: what is left of their spread the prompt cannot predict, and healthy value heads explain none of it
    (late EV −5.5 to +0.2 on β = 0.05, 0.005 and adaptive runs) while their loss falls to a tenth: they learn the
    level of the returns, the baseline GAE needs."""
    ev = run.get("explained_variance")
    untrained = run.facts.value_coef == 0
    if not enough(ev, T.min_points) or (med(late(ev)) > T.explained_variance and not untrained):
        return None
    value_loss = run.get("value_loss")
    rlhf = run.rung == "ppo-sentiment" and enough(value_loss, T.min_points_trend)
    first, _, last = thirds(value_loss) if rlhf else (None, None, None)
    if rlhf and not untrained and med(last) <= T.value_kept * med(first):
        return None
    cause = " (the value coefficient is 0: the critic is never trained)" if untrained else ""
    how = "explains none of the returns' variance"
    if rlhf and not untrained:
        how += f", and has not learnt even their level: its loss is not below {T.value_kept:g}× its start"
    loss = f", value loss median {med(first):.3g} over {span(first)}, {med(last):.3g} over {span(last)}" if rlhf else ""
    return finding("critic_not_learning", "explained_variance", late(ev),
                   f"explained variance median {med(late(ev)):.2f} over {span(late(ev))}{loss}, value coefficient "
                   f"{run.facts.shown('value_coef')}", rung=run.rung, cause=cause, how=how)


def clip_too_high(run: Run) -> Finding | None:
    clip = run.get("clip_frac")
    if not enough(clip, T.min_points) or med(late(clip)) < T.clip_high:
        return None
    return finding("clip_too_high", "clip_frac", late(clip),
                   f"clip fraction median {med(late(clip)):.2f} over {span(late(clip))} "
                   f"(μ = {run.facts.shown('mu')}, M = {run.facts.shown('minibatches')}, lr {run.facts.shown('lr')})")


def nothing_to_teach(run: Run) -> Finding | None:
    """Distillation: the reverse KL to the teacher per completion (``distill/reverse_kl``: Σ_t log π_θ − log π_teacher
    over the student's own samples, a batch's mean) below ``taught_kl`` at the start — the median of the first
    ``min_points`` updates and of the first third. The teacher then gives the student's tokens the student's own
    log-probs: every per-token reward r_t is ≈ 0, the Â they give too, and the student stays where it began. Read at
    the start, not the end: a student that has learnt its teacher well ends near 0 too."""
    kl = run.get("distill/reverse_kl")
    if not enough(kl, T.min_points):
        return None
    start = statistics.median(kl.values[:T.min_points])
    first, _, last = thirds(kl)
    if max(start, med(first)) >= T.taught_kl:
        return None
    grad = run.get("grad_norm")
    still = f", gradient norm median {statistics.median(grad.values):.2g}" if enough(grad, T.min_points) else ""
    return finding("nothing_to_teach", "distill/reverse_kl", first,
                   f"reverse KL(π_θ‖π_teacher) per completion median {start:.3g} over the first {T.min_points} "
                   f"updates, {med(first):.3g} over {span(first)}, {med(last):.3g} over {span(last)}{still}"
                   f"{accuracies(run)}")


def accuracies(run: Run) -> str:
    """The held-out accuracy of the teacher and of the student (its first and last evaluation), where logged."""
    teacher, student = run.get("teacher_accuracy"), run.get("eval_accuracy")
    if not (enough(teacher, 1) and enough(student, 1)):
        return ""
    return (f"; held-out accuracy: the teacher {teacher.values[-1]:.2f}, the student {student.values[0]:.2f} at step "
            f"{student.steps[0]} → {student.values[-1]:.2f} at step {student.steps[-1]}")


SIGNATURES = (nonfinite, nothing_to_teach, kl_blowup, entropy_collapse, clip_too_high, sampler_mismatch,
              nothing_moving, critic_not_learning, truncation, no_signal, length_drift, reward_overoptimised,
              likelihood_displacement, format_hacking, loss_zero, clip_zero)


def diagnose(run: Run) -> list[Finding]:
    """Every finding on the run, problems first, in SIGNATURES' order: likely causes before their symptoms."""
    found = [f for f in (signature(run) for signature in SIGNATURES) if f is not None]
    return sorted(found, key=lambda f: f.severity != "problem")
