# ruff: noqa: E501  (LaTeX lines in the notebook text are as long as their equations)
"""The text and code of notebook 9: where the reward comes from — a reward model from preference pairs, PPO against it
until it is over-optimised, and DPO.

Cells starting with ``md:`` are Markdown; everything else is code. ``notebooks/build.py`` writes them.
"""

from text_toy import SELF_CHECK, SETUP

NOTEBOOKS: dict[str, list[str]] = {}

NOTEBOOKS["9_where_the_reward_comes_from"] = [
    r"""md:# 9 · Where the reward comes from

After this notebook (about 60 minutes, on a CPU; its runs take about two minutes) you will be able to:

* say how a reward model is fitted to preference pairs (Bradley–Terry), and read its held-out accuracy and calibration;
* watch a learned reward being **over-optimised** — the reward PPO climbs keeps rising while the true one falls — and
  read from the completions where the policy went;
* derive DPO from the optimum of the KL-regularised objective, say what its implicit reward is, and tie that optimum to
  best-of-n sampling;
* watch what DPO does to the log-probabilities of the pairs' own completions and to the length of what it writes, and
  explain both from its loss;
* compare what RM + PPO and DPO reach at the same KL to $\pi_{\text{ref}}$ over three seeds, claiming only what the
  spread allows.

Rungs 3–5 were handed their reward: a sentiment classifier, a rule that checks an answer. RLHF starts a step earlier.
People are shown two completions of a prompt and say which is better; nobody writes a number. Everything here runs on
the **tiny preference task** (`ladder.tasks.tiny_preferences`): continuations of the bundled review openings, sampled
from the tiny review GPT-2 of notebook 4, two per prompt, ranked by a simulated labeller whose taste we know.""",
    SETUP,
    """import math

from ladder.tasks import tiny_preferences
from ladder.viz import preference_lab as lab, preference_study as seeds, preference_views as views

t = tiny_preferences
print(f"pairs: {t.SPLITS}; four of the training pairs (n: words; r*: the true reward, defined below):")
for pair in lab.pairs_sample(4):
    print(f"{pair['prompt']!r}\\n   chosen   {pair['chosen']!r}  ({pair['words_chosen']} words, r* {pair['score_chosen']:+.2f})"
          f"\\n   rejected {pair['rejected']!r}  ({pair['words_rejected']} words, r* {pair['score_rejected']:+.2f})")""",
    """p_longer = viz.Predict(f"In the {t.SPLITS['train']:,} training pairs, of those whose two completions differ in "
                       "length, what share of the labeller's choices is the longer completion?",
                       choices=("about a third", "about a half", "about two thirds"))
p_longer.answer = None      # your prediction, before you run on""",
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

The tiny task's labeller ranks $y_1$ over $y_2$ with probability $\sigma\big((u(y_1) - u(y_2))/\tau\big)$,
$u(y) = s(x + y) + b\cdot n(y)$, with $s$ VADER's sentiment in $[-1, 1]$, $n$ the words, $b$ = `LENGTH_BIAS` and
$\tau$ = `TEMPERATURE`: it prefers the more positive review, and it is swayed by length. What we actually want is the
task's **true reward** $r^*(x, y) = s(x + y) - c\cdot(k(y) + h(y))$: a plainly positive review, charged $c$ = `PADDING`
for each word that repeats an earlier one ($k$) and for a hedging "but" ($h$). The labeller never sees $r^*$, and
neither will any model we train; every pair carries it (`score_chosen`, `score_rejected`) so that we can check. The
cell below prints the constants, checks your prediction, and reads the pairs' completions: how long they are and how
many hedge or repeat a word, the chosen beside the rejected.""",
    """print(f"the labeller: b = LENGTH_BIAS = {t.LENGTH_BIAS} per word, τ = TEMPERATURE = {t.TEMPERATURE}; the truth: "
      f"c = PADDING = {t.PADDING}")
counts = lab.pair_counts()
share = counts["chosen_longer"]
p_longer.check("about a third" if share < 0.42 else "about a half" if share < 0.58 else "about two thirds",
               why=f"{share:.0%}: the labeller's pull towards length (b = {tiny_preferences.LENGTH_BIAS} per word)")
print(f"the truth orders {counts['truth_agrees']:.0%} of the pairs as the labeller did (of those it does not tie)")
pairs = lab.pair_anatomy()
print(f"\\n{'training pairs':<16}{'tokens':>8}{'words':>7}{'longest (words)':>17}{'hedge (but)':>13}{'repeat a word':>15}")
for side, a in pairs.items():
    print(f"{side:<16}{a['response_length']:>8.1f}{a['words_mean']:>7.1f}{a['max_words']:>17}{a['hedged_share']:>13.0%}"
          f"{a['padded_share']:>15.0%}")
chosen, rejected = torch.tensor([2.0, 0.0, -1.0]), torch.tensor([0.0, 0.0, 1.0])
by_hand = -torch.nn.functional.logsigmoid(chosen - rejected).mean()
print(f"\\nL_BT of three pairs with gaps 2, 0, −2: by hand {by_hand:.4f}, core.bradley_terry_loss "
      f"{core.bradley_terry_loss(chosen, rejected):.4f}")""",
    r"""md:Length brings company. A longer sample of the tiny review GPT-2 has more room for a "but" and for a repeated word,
so the labeller, choosing the longer completion more often than not, also chose the hedged and the repeated ones more
often than it rejected them — the table's last two columns. The truth charges for exactly those.

## 2 · A reward model on the tiny pairs

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
truth's, and its score rises with length. Where the two orders agree — most pairs, as printed in section 1 — that
costs nothing; where they disagree, $r_\phi$ sides with the labeller — with its noise, and with its pull towards length
and what comes with it. The calibration diagram reads each pair both ways round: of the pairs to which
$r_\phi$ gives $\sigma(r_a - r_b) \approx 0.8$, a calibrated model sees about 80% go its way. A model can be calibrated
about the labeller and still be wrong about what we want.""",
    r"""md:## 3 · Over-optimisation: the proxy rises, the truth falls

PPO now maximises the learned reward, held near $\pi_{\text{ref}}$ by the KL penalty of notebook 4:

$$\max_\theta\; \mathbb{E}_{y \sim \pi_\theta}\big[r_\phi(x, y)\big] - \beta\,\mathrm{KL}\big(\pi_\theta \,\|\, \pi_{\text{ref}}\big).$$

`python -m ladder.run ppo-sentiment --preset tiny --reward-model runs/rm/reward_model --true-reward tiny-preferences
--no-adaptive-kl --kl-coef 0.005` scores each completion with $r_\phi$ and logs $r^*$ beside it, which PPO never sees.
Two runs, a fixed $\beta$ (`--kl-coef`) of 0.005 and of 0.05, each a short, aggressive schedule — a larger learning rate
and completions of up to 32 tokens, twice the pairs' (`lab.PPO_FLAGS`, printed below; about half a minute each). Every
KL in this notebook is $\mathrm{KL}(\pi_\theta\,\|\,\pi_{\text{ref}})$ in **nats per completion** — the per-token
log-ratios summed over the completion, what PPO's penalty charges (section 4's optimum over samples is measured
against the samples' $\hat\pi_{\text{ref}}$ instead, and says so). "Peak", "trough" (the lowest after the peak) and
"end" below are means over 5 updates, as the curves are.""",
    """p_fall = viz.Predict("The larger penalty, β = 0.05: by the end of its run, will the true reward r* have fallen "
                     "clearly (by more than 0.1) from its peak?", choices=("yes", "no"))
p_fall.answer = None      # your prediction, before you run on""",
    """print("ppo-sentiment --preset tiny", " ".join(lab.PPO_FLAGS))
ppo = lab.ppo_runs(RUNS)   # against the reward model above
display(Image(data=views.overoptimisation_figure(ppo)))
seen = {beta: lab.peak_and_end(records) for beta, records in ppo.items()}
print("KL(π_θ‖π_ref) in nats per completion")
for beta, s in seen.items():
    trough = (f"trough {s['trough']:+.2f} (KL {s['kl_at_trough']:.1f})" if s["kl_at_trough"] != s["kl_at_peak"]
              else "no trough (its best window is its last)")
    print(f"β = {beta:g}: r* peak {s['peak']:+.2f} (KL {s['kl_at_peak']:.1f}), {trough}, end {s['end']:+.2f} (KL "
          f"{s['kl_end']:.1f}); r_φ at those {s['proxy_at_peak']:+.2f}, {s['proxy_at_trough']:+.2f}, "
          f"{s['proxy_end']:+.2f}")
small, large = seen[min(seen)], seen[max(seen)]
p_fall.check("yes" if large["end"] < large["peak"] - 0.1 else "no",
             why=f"β = {max(seen):g}: r* {large['peak']:+.2f} → {large['end']:+.2f}; β = {min(seen):g}: "
                 f"{small['peak']:+.2f} → {small['trough']:+.2f} at its trough while r_φ went "
                 f"{small['proxy_at_peak']:+.2f} → {small['proxy_at_trough']:+.2f}")""",
    """why_kl = viz.Reason("Before reading the completions: why does the small-β run's true reward fall while r_φ keeps "
                    "rising?",
                    "PPO's KL estimate is biased, so β = 0.005 acts as β = 0",
                    "r_φ pays for what the labeller's chosen completions had a little more of, and PPO, held only "
                    "loosely, makes those traits the rule rather than the exception — traits the truth charges for",
                    "the true reward is noisier than r_φ",
                    "the value head stops learning, so the advantages are wrong")
why_kl.answer = None      # a letter, before you run on
why_kl.ask()""",
    r"""md:Now read where each run's completions went: their length and the shares that hedge or repeat a word in the first
update's batch (sampled from $\pi_{\text{ref}}$, before any step), at $r^*$'s peak, at its trough and at the end, beside
the pairs' chosen and rejected completions.""",
    """rows = {f"β = {beta:g}, {at}": a for beta, records in ppo.items() for at, a in lab.anatomy_at(records).items()}
rows |= {f"pairs, {side}": a for side, a in pairs.items()}
print(f"{'':<22}{'tokens':>8}{'words':>7}{'hedge (but)':>13}{'repeat a word':>15}")
for name, a in rows.items():
    print(f"{name:<22}{a['response_length']:>8.1f}{a['words_mean']:>7.1f}{a['hedged_share']:>13.0%}{a['padded_share']:>15.0%}")
trough = lab.anatomy_at(ppo[min(ppo)])["trough"]
why_kl.check("b", why=f"at the β = {min(ppo):g} run's trough {trough['hedged_share']:.0%} of completions hedge and "
                      f"{trough['padded_share']:.0%} repeat a word, against {pairs['chosen']['hedged_share']:.0%} and "
                      f"{pairs['chosen']['padded_share']:.0%} of the pairs' chosen; r_φ "
                      f"{small['proxy_at_peak']:+.2f} → {small['proxy_at_trough']:+.2f} while r* "
                      f"{small['peak']:+.2f} → {small['trough']:+.2f}")
study = seeds.seed_study()
print("\\nthe same two runs on seeds 0–2 under three CPU-kernel variants (benchmarks/overoptimisation.py; each range the "
      "lowest … the highest over the runs):")
print(seeds.anatomy_line(study, "RM + PPO, β = 0.005", "trough", fell_by=0.2))
print(seeds.anatomy_line(study, "RM + PPO, β = 0.05", "end"))
large_runs = [r for r in study if r["method"] == "RM + PPO, β = 0.05"]
print(f"RM + PPO, β = 0.05, r* from its peak to its lowest window after it, {len(large_runs)} runs: "
      f"{seeds.spread([r['true_trough'] - r['true_peak'] for r in large_runs])}; to its end: "
      f"{seeds.spread([r['true_end'] - r['true_peak'] for r in large_runs])}")""",
    r"""md:This is Gao, Schulman and Hilton's over-optimisation (2022), and the tables say how it happened here. The small-$\beta$
run took the traits the labeller's chosen completions had a little more of — length, a "but", a repeated word — and
made them the rule. (Its last completions, printed below, also break words apart, text no pair held; the truth charges
only for what it counts, the hedges and repeats.) Which trait wins differs from run to run (the ranges
above: on some runs the hedges, on others the repeats), but on every run whose $r^*$ fell the commoner of the two is in
most completions at the trough, where $\pi_{\text{ref}}$ had it in at most a quarter, and the completions are longer
than $\pi_{\text{ref}}$'s. (Not every run falls within its 60 updates in the same way: on the others, the remainder of
the count, $r^*$ dipped less, or fell early and then climbed into another mode — `benchmarks/RESULTS.md` describes each;
Gao et al.'s curves are averages.) The labeller's bias, learned by $r_\phi$ from chosen completions that had these traits up to twice as often as the
rejected ones (the first table), is amplified until it is the policy; the truth charges for each hedge and repeat, so as the proxy climbs the true reward peaks and
falls to its trough (a run long enough may wander into another mode and recover some of it; the proxy never knew the
difference).

The larger $\beta$ reached about the same $r_\phi$ (compare the two runs' $r_\phi$ at the end) another way: its
completions nearly stopped hedging (the ranges above, on every run) and repeated a word far less often than the
small-$\beta$ runs at their troughs. Its $r^*$ is not immune to a dip (the last line above: one run's falls for a few
updates) but ends near its peak. The weaker penalty bought little or no more proxy with its extra KL; the extra
distance went into the traits. The doctor reads the same from the runs' logs:""",
    """from ladder.doctor import diagnose, read_run

for beta in ppo:
    found = diagnose(read_run(RUNS / f"ppo-{beta}"))
    print(f"β = {beta:g}: " + ("; ".join(f"{f.name} — {f.saw}" for f in found) if found else "no problem named"))
print("the small-β run's last completions:")
last = json.loads((RUNS / f"ppo-{min(ppo)}" / "summary.json").read_text())["samples"]
for row in last[:4]:
    print(f"   {row['prompt']!r} → {row['after']!r}")""",
    r"""md:## 4 · DPO: the reward was in the policy all along

The objective above has a closed-form optimum. For each prompt, with

$$\pi^*(y \mid x) = \frac{1}{Z(x)}\,\pi_{\text{ref}}(y \mid x)\, \exp\!\big(r(x, y)/\beta\big), \qquad
Z(x) = \sum_y \pi_{\text{ref}}(y \mid x)\, \exp\!\big(r(x, y)/\beta\big),$$

one line of algebra gives $\mathbb{E}_\pi[r] - \beta\,\mathrm{KL}(\pi\,\|\,\pi_{\text{ref}}) = \beta\log Z(x) - \beta\,\mathrm{KL}(\pi\,\|\,\pi^*)$
for any distribution $\pi$: a KL is never negative and is 0 only at $\pi = \pi^*$, so the left side is largest there,
and the reward can be read off the optimal policy: $r(x, y) = \beta \log \frac{\pi^*(y \mid x)}{\pi_{\text{ref}}(y \mid x)} + \beta \log Z(x)$.
$Z(x)$ is a sum over every completion — nobody can compute it for a language model. Before you read on: what happens to
it when this $r$ is put into the Bradley–Terry likelihood of section 1?""",
    """why_z = viz.Reason("Why does Z(x) disappear from DPO's loss?",
                   "Z(x) of the true reward r is 1 for every x, because π* is a probability distribution",
                   "it depends only on x, so β·log Z(x) is the same for y_w and y_l and cancels in their difference",
                   "DPO sets β so that log Z(x) = 0",
                   "it is estimated from the sampled completions, as PPO's baseline is")
why_z.answer = None      # a letter, before you run on
why_z.ask()""",
    r"""md:With $\pi_\theta$ in the place of $\pi^*$ (Rafailov et al. 2023):

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
estimate). Move $\beta$: the dot walks along the curve of $\mathbb{E}_{\pi^*}[r^*]$ against
$\mathrm{KL}(\pi^* \,\|\, \hat\pi_{\text{ref}})$, the KL to the samples' uniform $\hat\pi_{\text{ref}}$, beside the PPO runs'
$r^*$ against their $\mathrm{KL}(\pi_\theta\,\|\,\pi_{\text{ref}})$. The two KLs are not the same quantity: for a moderate
$\beta$ the reweighting's KL estimates the real $\pi^*_\beta$'s KL to $\pi_{\text{ref}}$ (a little low), but it can never
pass $\log n$, while the real one grows without bound as $\beta \to 0$. Read the curve beside PPO's as a shape, not
point by point. On the right, $\pi^*_\beta$'s implicit reward
$\beta\log\pi^*/\pi_{\text{ref}}$ against $r_\phi$: it equals $r_\phi(x, y) - \beta\log Z(x)$ — one offset per prompt,
which is why the points fall on parallel lines.

Slide $\beta$ to its left end. As $\beta \to 0$ the weights $\exp(r_\phi/\beta)$ put everything on each prompt's
highest-scoring sample: $\pi^*_{\beta\to 0}$ is **best-of-$n$** — draw $n$ completions from $\pi_{\text{ref}}$, keep the one
$r_\phi$ likes best. Its KL to the samples is $\log n$, the most any reweighting of $n$ samples can spend; its KL to the
real $\pi_{\text{ref}}$ is at most $\log n - (n-1)/n$ (Beirami et al. 2024). Best-of-$n$ is the KL-regularised optimum's
end point over $n$ samples, and a larger $\beta$ is a softer best-of-$n$.""",
    """why_z.check("b", why="L_DPO reads only r̂(x, y_w) − r̂(x, y_l)")
samples = lab.scored_samples(RUNS / "rm" / "reward_model")
view = views.beta_view(samples, ppo)
display(view)
best, softest = lab.best_of_n(samples), lab.optimum(samples, min(views.BETAS))
print(f"best-of-n over each prompt's samples (n = {best['n']}): E[r_φ] {best['proxy']:+.3f}, E[r*] {best['truth']:+.3f}; "
      f"KL to π̂_ref = mean log n = {best['kl']:.3f} nats per completion, to the real π_ref at most "
      f"mean(log n − (n − 1)/n) = {best['kl_bound']:.3f}")
print(f"π*_β at β = {softest['beta']:g}: E[r_φ] {softest['proxy']:+.3f}, E[r*] {softest['truth']:+.3f}, KL to π̂_ref "
      f"{softest['kl']:.3f} nats per completion")""",
    r"""md:Over samples of $\pi_{\text{ref}}$ the optimum cannot leave them: $\mathrm{KL}(\pi^*\,\|\,\hat\pi_{\text{ref}}) = \log n - H(\pi^*) \le \log n$
per prompt (the widget prints the bound), so it can only reweight the completions $\pi_{\text{ref}}$ wrote. DPO has no
such bound: its gradient pushes only on the pairs' own completions, but the weights are shared, so what happens to every
other completion is generalisation, and how far $\pi_\theta$ drifts is set by $\beta$, the learning rate and the number
of steps. `python -m ladder.run dpo --preset tiny` trains $\pi_\theta$ on the
same training pairs, through the same `core.update`: a `[2B, T]` batch of the completions' tokens,
$\log\pi_{\text{ref}}$ computed once per batch, and the objective `core.DPO(beta)`. Every few updates it ranks the
held-out pairs by $\hat r_\theta$ and samples completions on held-out prompts, logging their KL to $\pi_{\text{ref}}$, their
true reward, their length and their hedges and repeats.""",
    """p_dpo = viz.Predict("DPO's loss at its first update, before any step (π_θ = π_ref), to 3 decimals?", decimals=3)
p_dpo.answer = None      # your prediction, before you run on
p_chosen = viz.Predict("Over DPO's training, the chosen completions' log-probability log π_θ(y_w): does it end above "
                       "or below where it started (log π_ref(y_w))?", choices=("above", "below"))
p_chosen.answer = None      # your prediction, before you run on""",
    """dpo_summary, dpo_records = lab.dpo_run(RUNS / "dpo")
p_dpo.check(dpo_records[0]["loss"], why="every implicit reward is 0, so each pair's loss is −log σ(0) = log 2")
end, dpo_beta = dpo_summary["eval_after"], dpo_summary["beta"]
print(f"{dpo_summary['updates']} updates of {dpo_records[0]['pairs']} pairs")
print(f"DPO, β = {dpo_beta:g}: held-out pairs ranked right by r̂ {end['eval_accuracy']:.0%} (the truth's order "
      f"{end['eval_score_accuracy']:.0%}); sampled completions: KL(π_θ‖π_ref) {end['sample_kl']:.1f} nats per completion, r* "
      f"{dpo_summary['eval_before']['true_reward_mean']:+.2f} → {end['true_reward_mean']:+.2f}")
display(Image(data=views.dpo_figure(dpo_records, dpo_summary, pairs)))
moved = lab.displacement(dpo_records)
p_chosen.check("above" if moved["rewards/chosen"][1] > 0 else "below",
               why=f"r̂(y_w) = β·log π_θ/π_ref(y_w), last 5 updates: {moved['rewards/chosen'][1]:+.2f}, so log π_θ(y_w) "
                   f"moved {moved['rewards/chosen'][1] / dpo_beta:+.1f} nats; r̂(y_l) {moved['rewards/rejected'][1]:+.2f}, "
                   f"the margin {moved['rewards/margins'][0]:+.2f} → {moved['rewards/margins'][1]:+.2f}")
before = dpo_summary["eval_before"]
print(f"sampled completions, before → after: {before['response_length']:.1f} → {end['response_length']:.1f} tokens, "
      f"{before['words_mean']:.1f} → {end['words_mean']:.1f} words; hedge {before['hedged_share']:.0%} → "
      f"{end['hedged_share']:.0%}, repeat a word {before['padded_share']:.0%} → {end['padded_share']:.0%}")
found = diagnose(read_run(RUNS / "dpo"))
print("the doctor: " + ("; ".join(f"{f.name} — {f.saw}" for f in found) if found else "no problem named"))""",
    r"""md:## 5 · DPO's own failure modes: the likelihood it loses, the length it gains

**Likelihood displacement.** The loss reads one number per pair, the margin $\hat r_\theta(y_w) - \hat r_\theta(y_l)$, and
it is as happy with the margin grown by pushing $y_l$ down as by pulling $y_w$ up. Nothing in it holds
$\log\pi_\theta(y_w)$ where it was — and the two completions of a pair share their prompt, and one set of weights writes
both, so the step that lowers $y_l$ can lower $y_w$ with it. Read the left panel against your prediction: when both
implicit rewards fall while their gap grows, the probability the pairs' completions lose goes to completions that are
in no pair (Razin et al. 2024 call it likelihood displacement; Pal et al. 2024's DPOP, and RPO's added SFT loss on the
chosen — TRL's `loss_type=["sigmoid", "sft"]` — hold $\log\pi_\theta(y_w)$ up). The doctor's `likelihood_displacement` reads it from the logged
`logps/chosen`, `rewards/chosen` and `rewards/margins`.

**Length.** Where that probability goes is not random: the chosen completions are the longer ones (section 1), and
$\hat r_\theta$ is a sum over tokens, so a policy that has learnt "more like $y_w$" writes longer completions — the middle
panel — with the traits the longer ones carried — the right panel. It is the labeller's bias again, reached without a
reward model. TRL's `ld_alpha` (LD-DPO) down-weights the log-probs of the tokens past the shorter completion's length
for exactly this.

$\beta$ is the implicit reward's scale. `benchmarks/overoptimisation.py` ran DPO at three $\beta$ on seeds 0–2 under
three CPU-kernel variants, 120 updates each. Before you read its table:""",
    """why_beta = viz.Reason("Which DPO run ends further from π_ref — in KL, and in how far log π_θ(y_w) moved — the one "
                      "with a smaller β or the one with a larger β, and why?",
                      "the larger β: r̂ = β·log π_θ/π_ref grows with β, so it moves the log-probs further",
                      "the smaller β: r̂ is β times the log-ratio, so the margin the loss asks for needs a log-ratio "
                      "1/β times as large",
                      "neither: β cancels from the loss as Z(x) does",
                      "the smaller β, because a smaller β means a larger learning rate")
why_beta.answer = None      # a letter, before you run on
why_beta.ask()""",
    """sweep = seeds.dpo_sweep(study)
print(f"{'':<14}{'KL at the end':>15}{'r* at the end':>16}{'r̂(y_w), last 5':>17}{'log π_θ/π_ref(y_w)':>20}"
      f"   {'tokens, π_ref → end'}")
for method, row in sweep.items():
    log_ratio = [r / seeds.beta_of(method) for r in row["chosen_reward"]]
    tokens = f"{seeds.spread(row['tokens_before'], '.1f')} → {seeds.spread(row['tokens'], '.1f')}"
    print(f"{method:<14}{seeds.spread(row['kl'], '.1f'):>15}{seeds.spread(row['true']):>16}"
          f"{seeds.spread(row['chosen_reward']):>17}{seeds.spread(log_ratio, '+.1f'):>20}   {tokens}")
print(f"(each cell: the lowest … the highest over the {len(next(iter(sweep.values()))['kl'])} runs; KL(π_θ‖π_ref) in nats per "
      f"completion, the sampled completions'; r̂ and the log-ratio: the training batches' chosen, last 5 updates)")
display(Markdown(seeds.sweep_sentence(sweep)))
smallest, largest = (sweep[m] for m in sorted(sweep, key=seeds.beta_of)[::len(sweep) - 1])
why_beta.check("b", why=f"KL(π_θ‖π_ref) at the end {seeds.spread(smallest['kl'], '.1f')} nats per completion at the smallest β, "
                        f"{seeds.spread(largest['kl'], '.1f')} at the largest")""",
    r"""md:So $\beta$ sets how far DPO drifts and how far the chosen completions' likelihood falls — and, on these runs, not how
long the completions grow nor, beyond the spread, which $r^*$ it ends at.

## 6 · RM + PPO or DPO: the true reward per unit of KL

The question that matters is not which loss is lower but how much of what we wanted each method buys with its distance
from $\pi_{\text{ref}}$. The true reward against KL is concave, so dividing one by the other favours whoever stopped
early; compare at the same KL instead: for each pair of runs, the KL both reached (the smaller of their last ones), and
each one's $r^*$ where its KL first got there, less its own start — $\pi_{\text{ref}}$'s $r^*$ on its own prompts (PPO
samples training prompts, DPO held-out ones, so their starts differ). The KL of PPO's batches and of DPO's sampled
completions are the same quantity, $\mathbb{E}_{y\sim\pi_\theta}\sum_t \log\pi_\theta(y_t)/\pi_{\text{ref}}(y_t)$, nats per
completion. First this notebook's runs, one seed:""",
    """mine = [seeds.as_study_run(f"DPO, β = {dpo_beta:g}", dpo_records, "sample_kl", dpo_summary["eval_before"])]
mine += [seeds.as_study_run(f"RM + PPO, β = {beta:g}", records, "kl_ref") for beta, records in ppo.items()]
print(f"{'PPO run':<20}{'against':<15}{'at KL':>7}{'r* gain, DPO':>14}{'r* gain, PPO':>14}")
for row in seeds.matched_kl(mine):
    print(f"{row['ppo']:<20}{row['dpo']:<15}{row['kl']:>7.1f}{row['dpo_gain']:>+14.2f}{row['ppo_gain']:>+14.2f}")
print("(KL(π_θ‖π_ref) in nats per completion; a gain: r* there less the run's own start)")""",
    r"""md:One seed and one budget is a reading, not a finding. The benchmark adds PPO at its preset — the adaptive $\beta$ that
steers the KL towards a target, the run the README starts, 100 gentler updates of completions up to 16 tokens — to the
two aggressive runs, DPO at three $\beta$, and seeds 0–2 under three CPU-kernel variants. The figure draws the native
kernels' runs, one line per seed; each cell of the table is the range over all the runs, and the sentence under it
says where the sign of the difference held on every one of them:""",
    """display(Image(data=views.study_figure(study)))
matched = seeds.matched_kl(study)
print(f"{'DPO':<14}{'against':<31}{'at KL':>11}{'r* gain, DPO':>15}{'r* gain, PPO':>15}{'PPO − DPO':>15}")
for (dpo, ppo_method), rows in seeds.by_pairing(matched).items():
    print(f"{dpo:<14}{ppo_method:<31}{seeds.spread([r['kl'] for r in rows], '.1f'):>11}"
          f"{seeds.spread([r['dpo_gain'] for r in rows]):>15}{seeds.spread([r['ppo_gain'] for r in rows]):>15}"
          f"{seeds.spread([r['ppo_gain'] - r['dpo_gain'] for r in rows]):>15}")
print("(KL(π_θ‖π_ref) in nats per completion)")
display(Markdown(seeds.comparison_sentence(matched)))""",
    r"""md:A difference whose sign held on every run may still be small: read its size in the last column before you read it as
a ranking.""",
    """display(Markdown(seeds.summary_sentence(study)))""",
    SELF_CHECK,
    """p_pair = viz.Predict("A pair whose chosen completion has log π_θ/π_ref = −2 and whose rejected one has −5, at "
                     "β = 0.1: its DPO loss, to 3 decimals? (Both completions are less likely than under π_ref.)",
                     decimals=3)
p_pair.answer = None
p_bon = viz.Predict("Best-of-n with n = 16 draws from π_ref: at most how many nats per completion is its KL to π_ref, "
                    "to 2 decimals?", decimals=2)
p_bon.answer = None
why_short = viz.Reason("Pairs from a labeller who prefers the SHORTER completion, a reward model fitted to them, PPO "
                       "against it with a small β. By the mechanism of section 3, PPO would…",
                       "still write longer, padded completions: PPO always buys length",
                       "write ever shorter completions — the chosen ones' trait made the rule — and the true reward "
                       "can fall again, through whatever the truth charges that comes with shortness",
                       "never over-optimise, since a short completion has no room to pad",
                       "stay at π_ref, since the reward model's scores have no zero of their own")
why_short.answer = None
for question in (p_pair, p_bon, why_short):
    question.ask()
    print()""",
    """p_pair.check(core.dpo_loss(torch.tensor([-2.0]), torch.tensor([-5.0]), torch.zeros(1), torch.zeros(1), 0.1).item(),
             why="−log σ(0.1·(−2 − (−5))) = −log σ(0.3): below log 2 = 0.693 — the loss rewards the gap, displaced "
                 "or not")
p_bon.check(math.log(16) - 15 / 16, why="log n − (n − 1)/n at n = 16 (Beirami et al. 2024); against the 16 samples "
                                        f"themselves it would be log 16 = {math.log(16):.2f}")
why_short.check("b", why="r_φ learns whatever the labeller's choices carry and PPO amplifies it; the direction is the "
                         "labeller's, the mechanism the same")
viz.tally(p_longer, p_fall, why_kl, why_z, p_dpo, p_chosen, why_beta, p_pair, p_bon, why_short)""",
]
