# ruff: noqa: E501  (LaTeX lines in the notebook text are as long as their equations)
"""The text and code of notebook 9: where the reward comes from — a reward model from preference pairs, PPO against it
until it is over-optimised, and DPO.

Cells starting with ``md:`` are Markdown; everything else is code. ``notebooks/build.py`` writes them.
"""

from text_toy import SELF_CHECK, SETUP

NOTEBOOKS: dict[str, list[str]] = {}

NOTEBOOKS["9_where_the_reward_comes_from"] = [
    r"""md:# 9 · Where the reward comes from

After this notebook (about 45 minutes, on a CPU; its runs take about a minute and a half) you will be able to:

* say how a reward model is fitted to preference pairs (Bradley–Terry), and read its held-out accuracy and calibration;
* watch a learned reward being **over-optimised**: the reward PPO climbs keeps rising while the true one falls;
* derive DPO from the optimum of the KL-regularised objective, and say what its implicit reward is;
* compare what RM + PPO and DPO reach at the same KL to $\pi_{\text{ref}}$, on the same pairs.

Rungs 3–5 were handed their reward: a sentiment classifier, a rule that checks an answer. RLHF starts a step earlier.
People are shown two completions of a prompt and say which is better; nobody writes a number. Everything here runs on
the **tiny preference task** (`ladder.tasks.tiny_preferences`): continuations of the bundled review openings, sampled
from the tiny review GPT-2 of notebook 4, two per prompt, ranked by a simulated labeller whose taste we know.""",
    SETUP,
    """from ladder.tasks import tiny_preferences
from ladder.viz import preference_lab as lab, preference_views as views

t = tiny_preferences
print(f"the labeller: b = LENGTH_BIAS = {t.LENGTH_BIAS} per word, τ = TEMPERATURE = {t.TEMPERATURE}; the truth: "
      f"c = PADDING = {t.PADDING}; pairs: {t.SPLITS}")
for pair in lab.pairs_sample(4):
    print(f"{pair['prompt']!r}\\n   chosen   {pair['chosen']!r}  ({pair['words_chosen']} words, r* {pair['score_chosen']:+.2f})"
          f"\\n   rejected {pair['rejected']!r}  ({pair['words_rejected']} words, r* {pair['score_rejected']:+.2f})")""",
    r"""md:## 1 · From preferences to a reward: Bradley–Terry

Each pair is a prompt $x$, the chosen completion $y_w$ and the rejected one $y_l$ (TRL's format: `prompt`, `chosen`,
`rejected`). Bradley and Terry (1952) model a choice as a coin weighted by a hidden score: the wider the gap, the surer
the choice,

$$P(y_w \succ y_l \mid x) = \sigma\big(r(x, y_w) - r(x, y_l)\big), \qquad \sigma(z) = \frac{1}{1 + e^{-z}},$$

and a **reward model** $r_\phi$ — a language model whose last real token feeds a scalar head — is fitted by maximum
likelihood over the pairs:

$$L_{\text{BT}}(\phi) = -\frac{1}{B}\sum_i \log\sigma\big(r_\phi(x_i, y_{w,i}) - r_\phi(x_i, y_{l,i})\big).$$

Only differences enter, so $r_\phi + a$ ranks every pair as $r_\phi$ does: a reward model's scores have no zero of their
own. This is exercise 26 (`ex26_bradley_terry`).

The tiny task's labeller prefers the more positive review, but it is swayed by length: it ranks $y_1$ over $y_2$ with
probability $\sigma\big((u(y_1) - u(y_2))/\tau\big)$, $u(y) = s(x + y) + b\cdot n(y)$, with $s$ VADER's sentiment in
$[-1, 1]$, $n$ the words, $b$ = `LENGTH_BIAS` and $\tau$ = `TEMPERATURE`. What we actually want is the task's **true
reward** $r^*(x, y) = s(x + y) - c\cdot(k(y) + h(y))$: a plainly positive review, charged $c$ = `PADDING` for each word
that repeats an earlier one ($k$) and for a hedging "but" ($h$). The labeller never sees $r^*$, and neither will any
model we train; every pair carries it (`score_chosen`, `score_rejected`) so that we can check.""",
    """p_longer = viz.Predict(f"In the {t.SPLITS['train']:,} training pairs, of those whose two completions differ in "
                       "length, what share of the labeller's choices is the longer completion?",
                       choices=("about a third", "about a half", "about two thirds"))
p_longer.answer = None      # your prediction, before you run on""",
    """counts = lab.pair_counts()
share = counts["chosen_longer"]
p_longer.check("about a third" if share < 0.42 else "about a half" if share < 0.58 else "about two thirds",
               why=f"{share:.0%}: the labeller's pull towards length (b = {tiny_preferences.LENGTH_BIAS} per word)")
print(f"the truth orders {counts['truth_agrees']:.0%} of the pairs as the labeller did (of those it does not tie)")
chosen, rejected = torch.tensor([2.0, 0.0, -1.0]), torch.tensor([0.0, 0.0, 1.0])
by_hand = -torch.nn.functional.logsigmoid(chosen - rejected).mean()
print(f"L_BT of three pairs with gaps 2, 0, −2: by hand {by_hand:.4f}, core.bradley_terry_loss "
      f"{core.bradley_terry_loss(chosen, rejected):.4f}")""",
    r"""md:## 2 · A reward model on the tiny pairs

`python -m ladder.run reward-model --preset tiny --out runs/rm` fits $r_\phi$ — the tiny review GPT-2 with a fresh scalar
head — to the training pairs (the sizes are printed below), through the same `core.update` as every rung: a batch of $B$ pairs is
$2B$ rows, row $2i$ the chosen sequence and row $2i + 1$ the rejected one, a `[2B, 1]` batch whose one "log-prob" per
row is the score, and the objective `"bradley_terry"` (`Batch.rows_per_group = 2` keeps each pair whole when the
batch is split into minibatches). Every few updates it scores the held-out pairs.""",
    """rm_summary, rm_records = lab.reward_model_run(RUNS / "rm")
display(Image(data=views.reward_model_figure(rm_records, rm_summary)))
before, after = rm_summary["eval_before"], rm_summary["eval_after"]
print(f"{rm_summary['train_pairs']} training pairs, {rm_records[0]['pairs']} per update, {rm_summary['updates']} "
      f"updates; {rm_summary['held_out_pairs']} held-out pairs")
print(f"held-out pairs ranked as the labeller did: {before['eval_accuracy']:.0%} → {after['eval_accuracy']:.0%}; "
      f"as the truth does: {before['eval_score_accuracy']:.0%} → {after['eval_score_accuracy']:.0%}")
print(f"correlation of r_φ with length: {before['eval_length_corr']:+.2f} (the fresh head) → "
      f"{after['eval_length_corr']:+.2f}; calibration error {after['eval_calibration_error']:.3f}")""",
    r"""md:The reward model learns the labeller, not the truth: it ranks more held-out pairs in the labeller's order than in the
truth's, and it pays for length. Among the completions the pairs hold — samples of the tiny review GPT-2 — that
costs little: the truth does not charge for length itself, only for padding and hedges, and few samples have them.
The calibration diagram reads each pair both ways round: of the pairs to which $r_\phi$ gives
$\sigma(r_a - r_b) \approx 0.8$, a calibrated model sees about 80% go its way. A model can be calibrated about the
labeller and still be wrong about what we want.""",
    r"""md:## 3 · Over-optimisation: the proxy rises, the truth falls

PPO now maximises the learned reward, held near $\pi_{\text{ref}}$ by the KL penalty of notebook 4:

$$\max_\theta\; \mathbb{E}_{y \sim \pi_\theta}\big[r_\phi(x, y)\big] - \beta\,\mathrm{KL}\big(\pi_\theta \,\|\, \pi_{\text{ref}}\big).$$

`python -m ladder.run ppo-sentiment --preset tiny --reward-model runs/rm/reward_model --true-reward tiny-preferences
--no-adaptive-kl --kl-coef 0.005` scores each completion with $r_\phi$ and logs $r^*$ beside it, which PPO never sees.
Two runs, a fixed $\beta$ (`--kl-coef`) of 0.005 and of 0.05, each a short schedule with a larger learning rate
(`lab.PPO_FLAGS`, printed below; about half a minute each). "Peak", "trough" (the lowest after the peak) and "end"
below are means over 5 updates, as the curves are.""",
    """p_fall = viz.Predict("The larger penalty, β = 0.05: by the end of its run, will the true reward r* have fallen "
                     "clearly (by more than 0.1) from its peak?", choices=("yes", "no"))
p_fall.answer = None      # your prediction, before you run on""",
    """print("ppo-sentiment --preset tiny", " ".join(lab.PPO_FLAGS))
ppo = lab.ppo_runs(RUNS / "rm" / "reward_model", RUNS)
display(Image(data=views.overoptimisation_figure(ppo)))
seen = {beta: lab.peak_and_end(records) for beta, records in ppo.items()}
for beta, s in seen.items():
    print(f"β = {beta:g}: r* peak {s['peak']:+.2f} (KL {s['kl_at_peak']:.1f}), trough {s['trough']:+.2f} (KL "
          f"{s['kl_at_trough']:.1f}), end {s['end']:+.2f} (KL {s['kl_end']:.1f}); r_φ at those "
          f"{s['proxy_at_peak']:+.2f}, {s['proxy_at_trough']:+.2f}, {s['proxy_end']:+.2f}")
small, large = seen[min(seen)], seen[max(seen)]
p_fall.check("yes" if large["end"] < large["peak"] - 0.1 else "no",
             why=f"β = {max(seen):g}: r* {large['peak']:+.2f} → {large['end']:+.2f}; β = {min(seen):g}: "
                 f"{small['peak']:+.2f} → {small['trough']:+.2f} at its trough while r_φ went "
                 f"{small['proxy_at_peak']:+.2f} → {small['proxy_at_trough']:+.2f}")""",
    r"""md:Read the small-$\beta$ run against the printed numbers: this is Gao, Schulman and Hilton's over-optimisation (2022).
As its KL to $\pi_{\text{ref}}$ grows, the proxy keeps climbing while the true reward peaks and falls to its trough
(a run long enough may wander into another mode and recover some of it; the proxy never knew the difference). The learned reward
is right where the pairs were — near $\pi_{\text{ref}}$ — and wrong far from it: it learned that long reviews win, and
PPO with a small $\beta$ finds the cheapest ways to look long, ways no pair ever showed it (read the completions below).
A larger $\beta$ holds the policy nearer $\pi_{\text{ref}}$, where $r_\phi$ was fitted. Compare the two runs' $r_\phi$ at the
end: the weaker penalty bought little or no more proxy with its extra KL — $r_\phi$'s score levels off beyond what its
pairs showed — and the extra distance went into the exploits. The doctor reads the same thing from the runs' logs:""",
    """from ladder.doctor import diagnose, read_run

for beta in ppo:
    found = [f for f in diagnose(read_run(RUNS / f"ppo-{beta}")) if f.name == "reward_overoptimised"]
    print(f"β = {beta:g}: " + (f"reward_overoptimised — {found[0].saw}" if found else "no reward_overoptimised"))
print("the small-β run's last completions:")
last = json.loads((RUNS / f"ppo-{min(ppo)}" / "summary.json").read_text())["samples"]
for row in last[:4]:
    print(f"   {row['prompt']!r} → {row['after']!r}")""",
    r"""md:## 4 · DPO: the reward was in the policy all along

The objective above has a closed-form optimum. For each prompt, with

$$\pi^*(y \mid x) = \frac{1}{Z(x)}\,\pi_{\text{ref}}(y \mid x)\, \exp\!\big(r(x, y)/\beta\big), \qquad
Z(x) = \sum_y \pi_{\text{ref}}(y \mid x)\, \exp\!\big(r(x, y)/\beta\big),$$

one line of algebra gives $\mathbb{E}_\pi[r] - \beta\,\mathrm{KL}(\pi\,\|\,\pi_{\text{ref}}) = \beta\log Z(x) - \beta\,\mathrm{KL}(\pi\,\|\,\pi^*)$
for any distribution $\pi$: the left side is largest at $\pi = \pi^*$,

so the reward can be read off the optimal policy: $r(x, y) = \beta \log \frac{\pi^*(y \mid x)}{\pi_{\text{ref}}(y \mid x)} + \beta \log Z(x)$.
Put that into the Bradley–Terry likelihood of section 1: $\beta\log Z(x)$ is the same for $y_w$ and $y_l$ and cancels.
With $\pi_\theta$ in the place of $\pi^*$ (Rafailov et al. 2023):

$$\hat r_\theta(x, y) = \beta \log \frac{\pi_\theta(y \mid x)}{\pi_{\text{ref}}(y \mid x)}, \qquad
L_{\text{DPO}}(\theta) = -\frac{1}{B}\sum_i \log\sigma\big(\hat r_\theta(x_i, y_{w,i}) - \hat r_\theta(x_i, y_{l,i})\big).$$

No reward model, no sampling: only the log-probs of the pairs' completions under $\pi_\theta$ and $\pi_{\text{ref}}$,
each summed over the completion's tokens. Its gradient has the form $-\hat A\,\nabla\log\pi_\theta$ on fixed, off-policy
completions,
$\nabla L_{\text{DPO}} = -\frac{\beta}{B}\sum_i \sigma(\hat r_{l,i} - \hat r_{w,i})\,\big[\nabla\log\pi_\theta(y_{w,i}) - \nabla\log\pi_\theta(y_{l,i})\big]$:
an advantage of $+\beta\sigma(\hat r_{l,i} - \hat r_{w,i})$ on the chosen and its negative on the rejected, large while the
pair is still ranked wrong. This is exercise 27 (`ex27_dpo_loss`).

The widget computes $\pi^*_\beta$ for $r = r_\phi$ — not over all reviews, but over the held-out completions, samples of
$\pi_{\text{ref}}$: with $\pi_{\text{ref}}$ replaced by the uniform distribution over each prompt's $n$ samples, the optimum
is exact and simple, each sample weighted by $\exp(r_\phi/\beta)$ (relative to the real $\pi^*$ it is a reweighting
estimate). Move $\beta$: the dot
walks along the curve of $\mathbb{E}_{\pi^*}[r^*]$ against $\mathrm{KL}(\pi^* \,\|\, \pi_{\text{ref}})$, beside the PPO runs. On the
right, $\pi^*_\beta$'s implicit reward $\beta\log\pi^*/\pi_{\text{ref}}$ against $r_\phi$: the reward, shifted by
$\beta\log Z(x)$ — one shift per prompt, which is why the points fall on parallel lines.""",
    """samples = lab.scored_samples(RUNS / "rm" / "reward_model")
view = views.beta_view(samples, ppo)
display(view)""",
    r"""md:Over samples of $\pi_{\text{ref}}$ the optimum cannot leave them: $\mathrm{KL}(\pi^*\,\|\,\hat\pi_{\text{ref}}) = \log n - H(\pi^*) \le \log n$
per prompt (the widget prints the bound), and the padded reviews PPO wrote are not among the samples, so it does not
over-optimise the way PPO did. DPO has no such bound: its gradient pushes only on the pairs' own completions, but the
weights are shared, so where the rest of the probability goes is generalisation, and nothing bounds its KL but the
number of steps. `python -m ladder.run dpo --preset tiny` trains $\pi_\theta$ on the same training pairs, through the
same `core.update`: a `[2B, T]` batch of the completions' tokens, $\log\pi_{\text{ref}}$ computed once per batch, and the
objective `core.DPO(beta)`. Every few updates it ranks the held-out pairs by $\hat r_\theta$ and samples completions on
held-out prompts, logging their KL to $\pi_{\text{ref}}$ and their true reward.""",
    """p_dpo = viz.Predict("DPO's loss at its first update, before any step (π_θ = π_ref), to 3 decimals?", decimals=3)
p_dpo.answer = None      # your prediction, before you run on""",
    """dpo_summary, dpo_records = lab.dpo_run(RUNS / "dpo")
p_dpo.check(dpo_records[0]["loss"], why="every implicit reward is 0, so each pair's loss is −log σ(0) = log 2")
end, dpo_beta = dpo_summary["eval_after"], dpo_summary["beta"]
print(f"{dpo_summary['updates']} updates of {dpo_records[0]['pairs']} pairs")
print(f"DPO, β = {dpo_beta:g}: held-out pairs ranked right by r̂ {end['eval_accuracy']:.0%} (the truth's order "
      f"{end['eval_score_accuracy']:.0%}); sampled completions: KL {end['sample_kl']:.1f} nats, r* "
      f"{dpo_summary['eval_before']['true_reward_mean']:+.2f} → {end['true_reward_mean']:+.2f}")""",
    r"""md:## 5 · RM + PPO or DPO: the true reward per unit of KL

The question that matters is not which loss is lower but how much of what we wanted each method buys with its distance
from $\pi_{\text{ref}}$. The true reward against KL is concave, so dividing one by the other favours whoever stopped
early; compare at the same KL instead: each PPO run's $r^*$ where its KL first reached DPO's, beside DPO's (the KL of
PPO's batches and of DPO's sampled completions are the same quantity,
$\mathbb{E}_{y\sim\pi_\theta}\sum_t \log\pi_\theta(y_t)/\pi_{\text{ref}}(y_t)$, in nats per completion; PPO's prompts are drawn
from the same review openings as DPO's held-out ones):""",
    """kl = end["sample_kl"]
print(f"π_ref's completions (DPO's evaluation before training): r* {dpo_summary['eval_before']['true_reward_mean']:+.2f}")
print(f"{'method':<22}{'r* at KL ' + format(kl, '.1f'):>14}{'r* at the end':>15}{'KL at the end':>15}")
print(f"{'DPO, β = ' + format(dpo_beta, 'g'):<22}{end['true_reward_mean']:>+14.2f}{end['true_reward_mean']:>+15.2f}"
      f"{kl:>15.1f}")
for beta, s in seen.items():
    print(f"{'RM + PPO, β = ' + format(beta, 'g'):<22}{lab.true_at_kl(ppo[beta], kl):>+14.2f}{s['end']:>+15.2f}"
          f"{s['kl_end']:>15.1f}")
print("\\nbenchmarks/RESULTS.md has the same comparison over three seeds (benchmarks/overoptimisation.py).")""",
    r"""md:One seed and one budget, so read the ordering, not the digits. Which method buys more at the same KL depends on the
data and the budget; what this notebook shows is that a learned reward is a map that holds only near where it was
drawn, and that the distance from $\pi_{\text{ref}}$ — held by PPO's $\beta$, or by how far DPO is trained — is what keeps
the policy on the map.""",
    SELF_CHECK,
    """why_z = viz.Reason("Why does Z(x) disappear from DPO's loss?",
                   "Z(x) of the true reward r is 1 for every x, because π* is a probability distribution",
                   "it depends only on x, so β·log Z(x) is the same for y_w and y_l and cancels in their difference",
                   "DPO sets β so that log Z(x) = 0",
                   "it is estimated from the sampled completions, as PPO's baseline is")
why_z.answer = None
why_kl = viz.Reason("Why does the small-β PPO run's true reward fall while r_φ keeps rising?",
                    "PPO's KL estimate is biased, so β = 0.005 acts as β = 0",
                    "r_φ was fitted near π_ref; far from it, it pays for what the labeller's pairs made look good "
                    "(length) in forms no pair showed, which the truth charges for",
                    "the true reward is noisier than r_φ",
                    "the value head stops learning, so the advantages are wrong")
why_kl.answer = None
for question in (why_z, why_kl):
    question.ask()
    print()""",
    """why_z.check("b", why="L_DPO reads only r̂(x, y_w) − r̂(x, y_l)")
why_kl.check("b", why=f"r* {small['peak']:+.2f} → {small['trough']:+.2f} while r_φ {small['proxy_at_peak']:+.2f} → "
                      f"{small['proxy_at_trough']:+.2f}")
viz.tally(p_longer, p_fall, p_dpo, why_z, why_kl)""",
]
