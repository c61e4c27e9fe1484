# ruff: noqa: E501  (LaTeX lines in the notebook text are as long as their equations)
"""The text and code of notebook 6b: the newer objectives, GDPO, the entropy levers and the fifth policy.

Cells starting with ``md:`` are Markdown; everything else is code. ``notebooks/build.py`` writes them.
The numbers come from ``ladder.viz.objective_lab``, ``ladder.viz.objective_runs`` and ``ladder.viz.algo_league``.
"""

from text_common import SELF_CHECK, SETUP

NOTEBOOKS: dict[str, list[str]] = {}

NOTEBOOKS["6b_objectives_entropy_staleness"] = [
    r"""md:# 6b · Newer objectives, two rewards, the entropy levers, and the fifth policy

After this notebook (about 1 hour, on a CPU) you will be able to:

* say, for the clipped surrogate, CISPO, SAPO's soft gate and VESPO's gamma weight, where each one still pushes a token and where it lets go, from the derivative $\partial L/\partial \rho$;
* say which of two rewards of different scales decides the advantage when they are summed, and what GDPO's per-reward normalisation changes;
* read which tokens the top-entropy mask keeps on real completions, and what the share $q$ does;
* tell apart $\pi_{\text{rollout}}$, $\pi_{\text{sampler}}$ and $\pi_{\text{old}}$, and say what `--max-staleness k` and `--sampler-correction token_truncate` do to the weight between them.

Notebook 6 laid out GRPO's design space as a handful of flags. TRL 1.16 added more: two objectives that replace the
hard clip (`--loss-type sapo`, `--loss-type vespo`), a way to combine several rewards (`--multi-objective-aggregation
normalize_then_sum`, GDPO), two entropy levers (`--top-entropy-quantile`, `--adaptive-entropy`), and the lag of an
asynchronous trainer (`--max-staleness k`). Each is a short function of `ladder.core`; every curve and number below is
computed by those functions.""",
    SETUP,
    r"""md:## 1 · Objectives as functions of the ratio

One token, one advantage $\hat A$, and its ratio $\rho = \pi_\theta(a)/\pi_{\text{old}}(a)$. The objectives differ only in
how the token's loss depends on $\rho$. Four formulas give the five curves drawn below (the clip twice: GRPO's
$\varepsilon = 0.2$ and DAPO's clip-higher $0.2 / 0.28$):

$$\begin{aligned}
\text{clipped (PPO, GRPO, DAPO)}\quad & L = -\min\big(\rho\hat A,\ \operatorname{clip}(\rho, 1-\varepsilon_{\text{low}}, 1+\varepsilon_{\text{high}})\,\hat A\big) \\
\text{CISPO}\quad & L = -\operatorname{sg}\big(\min(\rho, \varepsilon_{\max})\big)\,\hat A\,\log\pi_\theta(a) \\
\text{SAPO}\quad & L = -\tfrac{4}{\tau}\,\sigma\big(\tau(\rho-1)\big)\,\hat A, \qquad \tau = \tau_{\text{pos}} \text{ if } \hat A > 0 \text{ else } \tau_{\text{neg}} \\
\text{VESPO}\quad & L = -\operatorname{sg}\big(\varphi(\rho_{\text{seq}})\big)\,\hat A\,\log\pi_\theta(a), \qquad \varphi(x) = e^{\lambda}\,x^{k}\,e^{-\lambda x},\ \rho_{\text{seq}} = \textstyle\prod_t \rho_t
\end{aligned}$$

(sg: stop-gradient; VESPO's $\rho_{\text{seq}}$ is the completion's sequence ratio, the product of its tokens'). What training feels is the derivative. With $\log\pi_{\text{old}}$ fixed, $\partial \rho/\partial\log\pi_\theta = \rho$, so

$$\frac{\partial L}{\partial \rho}\Big|_{\text{clip}} = -\hat A\ \text{inside the band, } 0 \text{ outside on the side } \hat A \text{ pushes to}, \qquad
\frac{\partial L}{\partial \rho}\Big|_{\text{SAPO}} = -4\,\sigma(1-\sigma)\,\hat A, \qquad
\frac{\partial L}{\partial \rho}\Big|_{\text{CISPO, VESPO}} = -\frac{\operatorname{sg}\big(g(\rho)\big)\,\hat A}{\rho},$$

with $g(\rho) = \min(\rho, \varepsilon_{\max})$ for CISPO and $g = \varphi$ for VESPO (a one-token completion: $\rho_{\text{seq}} = \rho$).

The widget computes each curve by calling `core.clipped_surrogate` (ε 0.2, and DAPO's 0.2 / 0.28),
`core.cispo_loss` (ε_max 5), `core.soft_gated_surrogate` and `core.gamma_weight` on a grid of ratios and asking
autograd for $\partial L/\partial \rho$ (`viz.objective_lab.objective_curves`). The sliders move SAPO's two
temperatures and VESPO's $(k, \lambda)$ on either side of $\hat A$.""",
    r"""md:**Predict first.** At $\rho = 1.5$ with $\hat A > 0$ — $\pi_\theta$ already made the token half again as likely as
$\pi_{\text{old}}$ did — which of the five objectives still push it up ($\partial L/\partial \rho \neq 0$)? And at $\rho = 0.5$
with $\hat A < 0$? Then slide `tau_pos` up: what happens to SAPO's push at $\rho = 1.5$?""",
    """view = viz.objective_view()
view""",
    """for ratio, adv in ((1.5, 1.0), (0.5, -1.0)):
    pushes = viz.objective_lab.pushing_at(ratio, adv)
    print(f"ρ = {ratio}, Â = {adv:+g}:  " + "   ".join(f"{name} {g:+.3f}" for name, g in pushes.items()))
for tau in (1.0, 2.0, 4.0):
    print(f"SAPO, τ_pos = {tau}: ∂L/∂ρ at ρ = 1.5 is {viz.objective_lab.pushing_at(1.5, 1.0, tau_pos=tau)['SAPO gate']:+.3f}")
vc = view.data["vespo_vs_clip"]
k, lam = view.controls["k_pos"].value, view.controls["lambda_pos"].value
print(f"VESPO, Â = +1, k = {k:g}, λ = {lam:g}: strongest push {vc['peak_push']:+.3f} at ρ = {vc['peak_r']:.2f} "
      f"((k − 1)/λ = {(k - 1) / lam:.2f}; φ itself peaks at k/λ = {k / lam:.2f})")
print(f"  at ρ = {vc['r_first']:g}: VESPO {vc['vespo_first']:+.3f}, clip {vc['clip_first']:+.3f} "
      f"({vc['times_first']:.1f}× the clip's push); |VESPO| > |clip| at every drawn ρ < 1: {vc['harder_below_1']}")""",
    r"""md:<details><summary>Answer</summary>

The clip is a switch: the token's gradient is either $-\hat A$ or 0. SAPO's gate is the same slope at $\rho = 1$ and
fades smoothly as $\rho$ leaves 1, faster for a larger $\tau$ ($\tau_{\text{neg}} > \tau_{\text{pos}}$ by default: the
side with unbounded ratios fades sooner). CISPO never drops a token: its weight is capped, not its gradient. VESPO
weighs the whole completion by $\varphi$ of its sequence ratio, largest at $\rho_{\text{seq}} = k/\lambda$ and vanishing far
off-policy on either side; here a completion is one token, so $\rho_{\text{seq}} = \rho$.

Both clipped objectives have let go at both points ($\partial L/\partial \rho = 0$ on the first two lines): $\rho = 1.5$ is
above $1 + \varepsilon_{\text{high}}$ for either $\varepsilon_{\text{high}}$, and $\rho = 0.5$ below $1 - \varepsilon_{\text{low}}$. The other three still push,
each its own way: CISPO with its full $-\hat A$ (its weight $\min(\rho, \varepsilon_{\max})$ divided by $\rho$ is 1 until
$\rho > \varepsilon_{\max}$), SAPO with a gate that has faded only a little at $\tau = 1$, and VESPO with $\varphi(\rho)/\rho$, which
depends on $(k, \lambda)$ and on the sign of $\hat A$. The three SAPO lines show its push at $\rho = 1.5$ shrinking as
$\tau_{\text{pos}}$ grows: a large $\tau$ is a gate close to a hard clip, a small one close to no clip at all.

VESPO's push is not strongest where its weight is. With $\varphi$ detached the loss is $-\varphi\,\hat A\log\pi_\theta$, so
per unit of ratio the push is $\varphi(\rho)/\rho = e^{\lambda} \rho^{k-1} e^{-\lambda \rho}$, which peaks at $\rho = (k-1)/\lambda$, not at
$\varphi$'s own peak $k/\lambda$ (the first VESPO line). For $\hat A > 0$ the clip keeps its full push $-\hat A$ below the
band — it lets go only above $1 + \varepsilon_{\text{high}}$ — and at the default $(k, \lambda)$ VESPO pushes *harder*
than that everywhere the plot shows below $\rho = 1$, hardest near its peak (the last line: how many times the clip's
push it is at $\rho = 0.3$, the plot's left edge, close to that peak): a token that $\pi_\theta$ has made somewhat rarer
than $\pi_{\text{old}}$ did is pulled back up more strongly, not less. Only much further left, beyond the plot, does
$\rho^{k-1}$ win and the push fade to 0 — VESPO's "vanishing far off-policy" on that side.
</details>""",
    r"""md:## 2 · Two rewards of different scales: GDPO

With several reward functions $r_{i,f}$ (weights $w_f$), TRL's default sums first and normalises the sum within each
group (`--multi-objective-aggregation sum_then_normalize`, `core.group_relative` of $\sum_f w_f r_{i,f}$). GDPO
(arXiv 2601.05242, `normalize_then_sum`, `core.decoupled_group_relative`) normalises each reward within its group
first, then sums and whitens over the batch:

$$\check r_{i,f} = \frac{r_{i,f} - \operatorname{mean}_{\text{group}}(r_f)}{\operatorname{std}_{\text{group}}(r_f) + \epsilon}, \qquad
s_i = \sum_f w_f\,\check r_{i,f}, \qquad \hat A_i = \frac{s_i - \operatorname{mean}_{\text{batch}}(s)}{\operatorname{std}_{\text{batch}}(s) + \epsilon}.$$

Below, two reward functions on four groups of four completions, drawn with a seeded generator
(`viz.objective_lab.example_rewards`): correctness in $\{0, 1\}$ and a length score from 0 to 10, weights 1 and 1; the
last group is all correct. To say which reward decides an advantage, the cell after the question correlates $\hat A$ with each reward
centred in its group, over the batch.""",
    """rewards = viz.objective_lab.example_rewards(groups=4, group_size=4, seed=1)
print("group 0, one line per completion:")
for i, (correct, length) in enumerate(rewards[:4].tolist()):
    print(f"   completion {i}: correctness {correct:g}, length score {length:.2f}")""",
    r"""md:**Predict first.** Group 0's rewards are printed above: two correct completions, two wrong. Compare the wrong one
with the highest length score and the correct one with the lowest. Which gets the larger advantage when the rewards
are summed first, and why? And under GDPO? The table after this question gives every completion's $\hat A$ both ways.""",
    """gdpo = viz.objective_lab.gdpo_advantages(rewards, weights=(1.0, 1.0), group_size=4)
display(Markdown(viz.objective_lab.gdpo_markdown(gdpo)))
spread = rewards.view(4, 4, 2).std(dim=1).mean(dim=0)
print(f"mean within-group std: correctness {spread[0]:.2f}, length score {spread[1]:.2f}")
for how, (c_correct, c_length) in gdpo["corr"].items():
    print(f"{how:20s} corr(Â, correctness) {c_correct:+.2f}   corr(Â, length score) {c_length:+.2f}")
rank = viz.objective_lab.rank_in_group(gdpo, group=0)
for how in ("sum_then_normalize", "normalize_then_sum"):
    print(f"group 0, {how}: wrong with score {rank['wrong_score']:g} Â {rank[how]['wrong']:+.2f}, "
          f"correct with score {rank['right_score']:g} Â {rank[how]['right']:+.2f}; "
          f"both correct above both wrong: {rank[how]['right_above_wrong']}")""",
    r"""md:<details><summary>Answer</summary>

Summed first, the length score decides: its spread within a group is several times the correctness's (the line
under the table), so the group's std is mostly its own, and in group 0 the wrong completion with the high score
outranks the correct one with the low score (the last two lines) — the correlation of the summed $\hat A$ with the
length score is the larger of the two. GDPO divides each reward by its own group's std, so each has the same say
within a group: the two correlations move towards each other, and being correct weighs as much as the length score
does. In group 0 the order flips: the correct completion with the low score now ranks above the wrong one with the
high score, and both correct completions above both wrong ones (the last line). In the last group,
where every completion is correct, correctness carries no signal under either, and only the length score moves
$\hat A$.

In the rung: `python -m ladder.run grpo --preset tiny --algo gdpo` (`--reward-funcs` and `--reward-weights` pick the functions
and their $w_f$).
</details>""",
    r"""md:## 3 · The top-entropy mask on real tokens

Most tokens of a completion are near-certain continuations: $\pi_\theta$ puts almost all its mass on one token. A
few are "forks", where the text could have gone another way. "Beyond the 80/20 rule" (arXiv 2506.01939) trains the
policy term only on the share $q$ of the batch's tokens with the highest entropy (`--top-entropy-quantile q`,
TRL's `top_entropy_quantile`; `core.high_entropy_mask`):

$$H_t = -\sum_v \pi_\theta(v\mid s_t)\log\pi_\theta(v\mid s_t), \qquad h^* = \operatorname{quantile}_{1-q}\big(H_t \text{ over the real tokens}\big), \qquad \text{keep}_t = m_t\,[H_t \ge h^*].$$

Below, the tiny preset's model (`@tiny-math`, loaded offline by the rung's `load_task` and `load_policy`, its LoRA
adapter fresh) samples one completion for each of six of the task's sums; `CausalLMPolicy.evaluate` — the trainer's
own forward — gives each token's $H_t$. The tokens the mask keeps at the slider's $q$ are boxed in red; the
histogram shows where the threshold $h^*$ falls.

The other lever is an entropy *bonus*, $-c_H \cdot \operatorname{mean}(H_t)$ over the tokens the policy term keeps —
all of them, or the top $q$ with `--top-entropy-quantile` (`--entropy-coef` sets $c_H$). With `--adaptive-entropy`
(`core.AdaptiveEntropyCoef`, Skywork-OR1) a controller measures, after every optimiser step, the mean entropy of
those same kept tokens and moves $c_H$ by a fixed step (`--entropy-coef-delta`, within `--entropy-coef-min` and
`--entropy-coef-max`, from `--entropy-coef` as its starting value): up while that entropy is at or below
`--entropy-target`, down otherwise. The bonus is applied only while the last measured entropy is at or below the target, so the first
optimiser step has none (nothing has been measured yet): the bonus switches on once the entropy has fallen to the
target and stops once it recovers.""",
    r"""md:**Predict first.** At $q = 0.2$, will the mask keep exactly 20 % of the real tokens? Which tokens of an
addition do you expect it to keep: the digits of the answer, the spaces and `+` signs, or the end-of-text token?""",
    """view = viz.entropy_mask_view(q=0.2)
view""",
    """import math

tokens = viz.objective_lab.sampled_tokens()
real = tokens["mask"].bool()
print(f"{int(real.sum())} real tokens; median entropy {tokens['entropy'][real].median():.4f} nats, "
      f"largest {tokens['entropy'][real].max():.4f}")
for q in (0.1, 0.2, 0.5, 1.0):
    kept = core.high_entropy_mask(tokens["entropy"], tokens["mask"], q)
    print(f"q = {q}: kept {int(kept.sum())} of {int(real.sum())} = {float(kept.sum() / real.sum()):.1%}")
kept = core.high_entropy_mask(tokens["entropy"], tokens["mask"], 0.2).bool()
pieces = [p for row, ks in zip(tokens["pieces"], kept) for p, k in zip(row, ks) if k]
print("kept at q = 0.2:", " ".join(repr(p) for p in pieces))
print(f"digits among them: {sum(p.strip().isdigit() for p in pieces) / len(pieces):.0%}")
top = viz.objective_lab.most_uncertain(tokens, 2)
for u in top:
    print(f"H = {u['entropy']:.3f} (ln 2 = {math.log(2):.3f}) at {u['piece']!r}, the end of {u['text']!r}: addend "
          f"{u['addend']} of line {u['line']}" + (f"; the units sum calls for a carry of {u['carry']}" if u["carry"] is not None else ""))
at_carry = [u["line"] == 2 and u["addend"] == 3 for u in top]
print(f"both are the third addend of the tens line, the carry: {all(at_carry)}")""",
    r"""md:<details><summary>Answer</summary>

Close to $q$, not exactly: the threshold is a quantile with linear interpolation, and every token at or above it
is kept, ties included (the first lines above print the share at each $q$). The kept tokens at $q = 0.2$ are listed
next, with the share of digits among them: this model's doubts are in the digits of the partial sums and the answer, while the
spaces, signs and the end of the text follow the sum's layout and are near-certain, so the mask leaves them out.
The entropy lines at the end say where the two most uncertain tokens sit, and the last line whether both are the
third addend of the tens line — the carry, which this model, imitating a tutor who forgets to carry, writes as 1 or 0
(each line prints the carry the units sum calls for), with an entropy to compare with a coin flip's $\ln 2$.
Such tokens are exactly where GRPO's reward can teach something.
</details>""",
    r"""md:## 4 · The fifth policy: a rollout k updates stale

Notebook 5 met four policies, and a fifth takes its place beside them once the trainer is asynchronous:

| policy | what it is | where it enters |
|---|---|---|
| $\pi_\theta$ | the weights being optimised | the loss's gradient |
| $\pi_{\text{old}}$ | the trainer's own forward of the weights at the start of the update | the ratio $\rho = \pi_\theta/\pi_{\text{old}}$ and its trust region (the clip, the gate) |
| $\pi_{\text{ref}}$ | the starting model | the KL term |
| $\pi_{\text{sampler}}$ | the distribution the tokens were drawn from: another engine, a lower precision, the top-p nucleus | the weight $w = \pi_{\text{old}}/\pi_{\text{sampler}}$ |
| $\pi_{\text{rollout}}$ | the *weights* that drew the batch: in an asynchronous trainer, those of $k$ updates ago | the same weight, now $\pi_{\text{old}}/\pi_{\text{rollout}}$ |

An asynchronous trainer samples the next batches while it trains on the last ones, so the batch of update $u$ was
drawn by $\pi_{\text{rollout}} = \pi_{\theta_{\max(0,\,u-k)}}$. `--max-staleness k` makes that lag exact and
deterministic, with no threads (`grpo_staleness.LaggingRollout`); $\pi_{\text{old}}$ stays the trainer's forward at the
start of update $u$, so the clip's trust region is what it always was, and the log-probs recorded while sampling are
$\pi_{\text{rollout}}$'s. The gradient splits as before:

$$\frac{\pi_\theta(a_t)}{\pi_{\text{rollout}}(a_t)} = \underbrace{\frac{\pi_\theta(a_t)}{\pi_{\text{old}}(a_t)}}_{\rho_t:\ \text{clipped}}\cdot\underbrace{\frac{\pi_{\text{old}}(a_t)}{\pi_{\text{rollout}}(a_t)}}_{w_t:\ \text{a constant}}, \qquad
\texttt{token\_truncate}:\ w_t \leftarrow \min(w_t, C_{\max}).$$

### π_sampler under top-p

Sampling with top-p draws from the renormalised nucleus $N_t$, the most likely tokens at step $t$ whose mass reaches $p$:
$\pi_{\text{sampler}}(a) = \pi_{\text{old}}(a)/\sum_{b\in N_t}\pi_{\text{old}}(b)$ for $a \in N_t$ (0 outside it). ladder records
$\log\pi_{\text{sampler}}$ as it samples (`policies.decode`; `RecordLogp` under `--sampler-loop generate`), so the weight of a kept token is the mass the nucleus kept at its step,

$$w_t = \frac{\pi_{\text{old}}(a_t)}{\pi_{\text{sampler}}(a_t)} = \sum_{b\in N_t}\pi_{\text{old}}(b) \le 1 .$$

The cell draws with `CausalLMPolicy.generate(..., top_p=0.8, record_logp=True)`, takes $\log\pi_{\text{old}}$ from the
trainer's `evaluate`, and compares $w_t$ with the nucleus mass that the sampler's top-p warper (transformers'
`TopPLogitsWarper`, which ladder's loop applies as `generate` does) keeps at each position.""",
    """top_p = viz.objective_lab.top_p_weights(top_p=0.8)
w, mass = top_p["w"], top_p["kept_mass"]
print(f"top-p {top_p['top_p']}: {top_p['tokens']} tokens; w = π_old/π_sampler from {w.min():.4f} to {w.max():.4f}, "
      f"{top_p['share_w_below_1']:.0%} of them below 1")
print(f"largest |w_t − kept mass_t| = {top_p['max_diff']:.1e}")""",
    r"""md:### The lag, live

Below, the tiny preset trained for a handful of updates (4 prompts × 8 completions each) at each lag
$k \in \{0, 1, 2, 4\}$, with `--sampler-correction token_truncate --sampler-clip-max 1.2` (the flag's default
$C_{\max}$ is larger, printed below; a tighter one makes the truncation visible in so few updates). Each run is the rung's own
`grpo.train` (`viz.objective_runs.staleness_run`), in a temporary directory; the curves are its logged `sampler/*`
metrics. The first updates have a smaller lag (there is no older policy yet), and the learning rate warms up.

The table under the widget reduces each metric over the updates that ran at the full lag $k$: the max of the
per-update maxima, the min of the minima, the mean of the means and of the share `corrected_frac`. The weights
are logged *after* truncation, so `is_ratio_max` never exceeds $C_{\max}$: it equals $C_{\max}$ in every update where
`token_truncate` changed a token, and the raw weight it capped was larger.

Whether the correction pays off in held-out accuracy is a longer measurement: `benchmarks/RESULTS.md`, section
*Staleness*, trains the tiny preset at several $k$, with and without `--sampler-correction`, over three seeds.""",
    r"""md:**Predict first.** As $k$ grows from 0 to 4, what happens to the mean $|\log\pi_{\text{old}} - \log\pi_{\text{rollout}}|$,
and to the share of tokens `token_truncate` changes? At $k = 0$, what do you expect both to be?""",
    """view = viz.staleness_view(ks=(0, 1, 2, 4), steps=10, clip_max=1.2)
view""",
    """display(Markdown(view.data["table"]))
at_k = {k: [r for r in records if r.get("sampling/staleness", 0.0) == k] for k, records in view.data["runs"].items()}
gaps = {k: sum(r["sampler/logp_diff_mean"] for r in rs) / len(rs) for k, rs in at_k.items()}
print("mean |log π_old − log π_rollout| at full lag: " + ", ".join(f"k = {k}: {g:.4f}" for k, g in gaps.items()))
print("grows with k:", all(a < b for a, b in zip(list(gaps.values()), list(gaps.values())[1:])))
print(f"k = 0: mean gap {gaps[0]:.1e} nats — the sampling decode (cached keys and values) against the full forward")
from ladder.rungs import grpo
print(f"--sampler-clip-max's default C_max: {grpo.Config().sampler.clip_max:g}")""",
    r"""md:<details><summary>Answer</summary>

At $k = 0$ the rollout is $\pi_{\text{old}}$ itself: the gap can only be float rounding between the cached decode that
sampled and the trainer's full forward, so every weight is within rounding of 1, below $C_{\max}$, and `token_truncate`
should change nothing. As $k$ grows, $\pi_{\text{old}}$ has moved further from the weights that sampled, so the gap
should grow, the weights spread further from 1 and more of them exceed $C_{\max}$, where `token_truncate` caps them:
the update still uses every token, but no stale token counts more than $C_{\max}$ times. The truncation is a bias
traded for a bounded variance, as in notebook 5. The lines above say whether the gap grew at every step of $k$ in
these few updates; the cell below says the same of the truncated share.
</details>""",
    """truncated = {k: sum(r["sampler/corrected_frac"] for r in rs) / len(rs) for k, rs in at_k.items()}
print("mean share of tokens token_truncate changed, at full lag: "
      + ", ".join(f"k = {k}: {share:.2%}" for k, share in truncated.items()))
shares = list(truncated.values())
print("the share never falls as k grows:", all(a <= b for a, b in zip(shares, shares[1:])),
      f"| at k = 0: {'none truncated' if truncated[0] == 0 else f'{truncated[0]:.2%} truncated'}")""",
    r"""md:## 5 · The league, extended

Notebook 6's league, with the new bundles: `--algo sapo` (the soft gate) and `--algo vespo` (the gamma weight, no KL
term) beside `--algo grpo`, each trained by the real rung on the tiny task at the same budget of sampled completions,
scored by greedy accuracy on held-out sums. The flags each bundle sets, the policy term of section 1 its loss type
picks, the ratio that term reads, and its KL coefficient. `vespo`'s row keeps `ratio_level=token` though its weight
is one per completion: $\varphi$ builds that completion's ratio $\rho_{\text{seq}} = \prod_t \rho_t$ from the token ratios itself
(`core.gamma_weight`), the rung refuses `--ratio-level sequence` with it, and for `vespo` the flag decides only which
ratios the logged statistics (`clip_frac`) read.""",
    """display(Markdown(viz.objective_runs.bundles_markdown(("grpo", "sapo", "vespo", "gdpo"))))""",
    r"""md:The tiny preset takes one pass ($\mu = 1$) over one minibatch ($M = 1$) per update, as TRL's defaults do. One seed and
32 held-out sums (accuracy in steps of 1/32), so do not read a ranking into small differences: `benchmarks/variants.py`
runs every `--algo` over several seeds and a larger budget, with results in `benchmarks/RESULTS.md`.

**Predict first.** Look back at section 1's curves at $\rho = 1$. With $\mu = 1$ and $M = 1$, will `grpo`'s and `sapo`'s
runs differ at all? And after the widget, the same two with $\mu = 2$ passes: will they differ then? (Switch the
metric to the KL to $\pi_{\text{ref}}$ and compare the curves.)""",
    """view = viz.league_view(methods=("grpo", "sapo", "vespo"), max_completions=192, eval_size=32)
view""",
    """on_policy = view.data["runs"]
display(Markdown(view.data["table"]))
print({m: f"last KL {r['kl_ref'][-1]:.2e}" for m, r in on_policy.items()})
print(f"league: {sum(r['wall_s'] for r in on_policy.values()):.0f} s of training in all")
gap = viz.objective_runs.largest_gap
print(f"μ = 1: grpo vs sapo, largest |Δ reward| {gap(on_policy, 'grpo', 'sapo', 'reward'):.1e}, "
      f"largest |Δ KL| {gap(on_policy, 'grpo', 'sapo', 'kl_ref'):.1e}")
two_passes = {m: viz.objective_runs.off_policy_run(m, mu=2, max_completions=192, eval_size=32) for m in ("grpo", "sapo")}
print(f"μ = 2: grpo vs sapo, largest |Δ reward| {gap(two_passes, 'grpo', 'sapo', 'reward'):.1e}, "
      f"largest |Δ KL| {gap(two_passes, 'grpo', 'sapo', 'kl_ref'):.1e} (last KL {two_passes['grpo']['kl_ref'][-1]:.2e})")
for m, r in two_passes.items():
    print(f"μ = 2, {m}: accuracy {r['accuracy_before']:.3f} → {r['accuracy_after']:.3f}, "
          f"largest share of ratios past 1 ± ε (clip_frac) {max(r['clip_frac']):.2%}, {r['wall_s']:.0f} s")""",
    r"""md:<details><summary>Answer</summary>

With $\mu = 1$ and $M = 1$ the only gradient is taken at $\pi_\theta = \pi_{\text{old}}$, where $\rho = 1$ at every
token, and there every objective of section 1 has the same slope $\partial L/\partial \rho = -\hat A$ — the clip has not
acted, SAPO's gate is at its full slope, VESPO's $\varphi(1) = 1$. `sapo` also keeps `grpo`'s aggregation and $\beta$
(the table above), so nothing else differs: on-policy the two are one algorithm, and their runs should take the same
steps up to float rounding. On-policy `vespo`'s objective is `grpo`'s too; it differs from `grpo` in two other flags:
its loss is summed over a constant (`sum_over_constant`, section 1 of notebook 6) and $\beta = 0$. Its KL curve stays at
0 for that reason alone, not because its policy stands still: with $\beta = 0$ the rung computes no $\pi_{\text{ref}}$ and
no KL, so there is no KL to record, however far $\pi_\theta$ moves (the cell below prints its accuracy before and after).
With $\mu = 2$ the second pass sees $\rho \neq 1$, where the objectives part; in so few updates few ratios may leave
the band, and then the sampled rewards and the accuracies may still agree. The share printed is the logged `clip_frac`:
it counts the tokens whose ratio is past $1 \pm \varepsilon$ (`--clip-eps`, the same in both bundles) on the side $\hat A$
pushes to, whatever the objective — the ratio is defined the same way in both runs, and until the runs part it is
computed from the same weights, which is why the two largest shares can print alike. For `grpo` those are the tokens
the clip switched off; `sapo` clips nothing, so for it the number only says how far the ratios spread, where its gate
fades instead. The cell below says what these runs did. The objectives matter where training is off-policy: many
passes, many minibatches, or a stale rollout (section 4).
</details>""",
    """parted = {mu: gap(runs, "grpo", "sapo", "kl_ref") > 1e-5 for mu, runs in ((1, on_policy), (2, two_passes))}
for mu, apart in parted.items():
    print(f"μ = {mu}: grpo and sapo " + ("parted (largest |Δ KL| above 1e-5)" if apart
                                          else "took the same steps, to float rounding (largest |Δ KL| at most 1e-5)"))
vespo = on_policy["vespo"]
print(f"vespo: every logged KL 0: {all(kl == 0 for kl in vespo['kl_ref'])} (β = 0: never computed); "
      f"its accuracy {vespo['accuracy_before']:.3f} → {vespo['accuracy_after']:.3f}")""",
    SELF_CHECK,
    """p_tau = viz.Predict("Section 1's SAPO gate at a point no line printed: ρ = 1.2, Â = +1, τ_pos = 3. What is its "
                    "push |∂L/∂ρ| = 4σ(1 − σ)·|Â|, σ = σ(τ(ρ − 1))?", decimals=2)
p_tau.answer = None
p_peak = viz.Predict("Section 1, new values: VESPO with k_pos = 4, λ_pos = 3 (Â > 0; one token, so ρ_seq = ρ). At which "
                     "ratio ρ is its push |∂L/∂ρ| largest?", decimals=2)
p_peak.answer = None
p_q = viz.Predict("Section 3's mask on a model equally unsure everywhere: every real token at the same entropy. At "
                  "q = 0.2, what share of the real tokens does the mask keep (a number in 0…1)?", decimals=2)
p_q.answer = None
for question in (p_tau, p_peak, p_q):
    question.ask()
    print()""",
    """why_gdpo = viz.Reason("Section 2, new case: the length score divided by 10 (0 to 1 instead of 0 to 10). Why does that "
                      "change the summed-first advantages but leave GDPO's as they were?",
                      "GDPO whitens the summed scores over the whole batch at the end, and that last division by the "
                      "batch's std undoes any common scale; summed first, the group's std is never rescaled",
                      "GDPO replaces each reward by its rank within the group before summing, and a rank does not "
                      "change when a reward is divided by 10; summed first, the raw values add",
                      "GDPO divides each reward by its own group's std, so a reward's scale cancels; summed first, the "
                      "scale sets the reward's share of the sum's spread",
                      "GDPO subtracts each reward's group mean before anything else, and centring removes a reward's "
                      "scale; summed first, the centring comes after the sum, too late to remove it")
why_gdpo.answer = None
why_trunc = viz.Reason("Section 4: which tokens' weight does token_truncate change?",
                       "those whose ratio ρ = π_θ/π_old leaves [1 − ε, 1 + ε] on the side Â pushes to: the truncation "
                       "caps the weight where the clip would otherwise act",
                       "every token of a rollout k > 0 updates stale: its weight π_old/π_rollout is replaced by C_max, "
                       "since a stale token's weight is unknown",
                       "those with Â < 0 whose weight is large: a stale bad token is cut back, while a good one keeps "
                       "its full weight to learn from",
                       "those whose weight w = π_old/π_rollout exceeds C_max: w ← min(w, C_max), whatever ρ, Â or "
                       "the lag, the others untouched")
why_trunc.answer = None
for question in (why_gdpo, why_trunc):
    question.ask()
    print()""",
    """push = abs(viz.objective_lab.pushing_at(1.2, 1.0, tau_pos=3.0)["SAPO gate"])
sigma = torch.sigmoid(torch.tensor(3.0 * 0.2)).item()
p_tau.check(push, why=f"σ(0.6) = {sigma:.3f}: 4 · {sigma:.3f} · {1 - sigma:.3f}, already faded from the full slope 1 at ρ = 1")
grid = torch.linspace(0.05, 3.0, 2951, dtype=torch.float64)[:, None]
phi = core.gamma_weight(grid.log(), torch.ones_like(grid), torch.ones_like(grid), 4.0, 3.0, 3.0, 2.0)[:, 0]
p_peak.check(grid[(phi / grid[:, 0]).argmax(), 0].item(), why="the push is φ(ρ)/ρ = e^λ ρ^(k−1) e^(−λρ): its peak is "
             f"(k − 1)/λ = 1, not φ's own k/λ = {4 / 3:.2f}")
scaled = viz.objective_lab.gdpo_advantages(rewards * torch.tensor([1.0, 0.1]), weights=(1.0, 1.0), group_size=4)
moved = {how: (scaled[how] - gdpo[how]).abs().max().item() for how in ("sum_then_normalize", "normalize_then_sum")}
why_gdpo.check("c", why=f"largest change of Â: summed first {moved['sum_then_normalize']:.2f}, GDPO "
                        f"{moved['normalize_then_sum']:.1e} (the ε in std + ε)")
tokens = viz.objective_lab.sampled_tokens()
flat = torch.full_like(tokens["entropy"], 0.5)
share = core.high_entropy_mask(flat, tokens["mask"], 0.2).sum() / tokens["mask"].sum()
p_q.check(share.item(), why="every token is at the threshold h*, and every token at or above it is kept: ties included")
last = at_k[max(at_k)][-1]
why_trunc.check("d", why=f"w ← min(w, C_max); at k = {max(at_k)} the last update's largest w after truncation is {last['sampler/is_ratio_max']:.3f} and "
                f"{last['sampler/corrected_frac']:.1%} of its tokens were truncated")
viz.tally(p_tau, p_peak, why_gdpo, p_q, why_trunc)""",
]
