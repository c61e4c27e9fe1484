# ruff: noqa: E501  (LaTeX lines in the notebook text are as long as their equations)
"""The text and code of notebook 6: GRPO's design space, and TRL side by side.

Cells starting with ``md:`` are Markdown; everything else is code. ``notebooks/build.py`` writes them.
The concepts come first (sections 1–4), the bookkeeping against TRL last (sections 5–7).
"""

from text_toy import SELF_CHECK, SETUP

NOTEBOOKS: dict[str, list[str]] = {}

NOTEBOOKS["6_design_space_and_trl"] = [
    r"""md:# 6 · GRPO's design space, and TRL side by side

After this notebook (about 1½ hours, on a CPU) you will be able to:

* say what each `--loss-type` divides the loss by at M minibatches and $n_{\text{proc}}$ processes, and which choice has a length bias;
* say which KL term's *gradient* follows which KL — $k_1$, $k_2$, $k_3$, $\frac{\pi_\theta}{\pi_{\text{old}}}k_3$, or $k_1$ in the reward — on-policy and off;
* predict which tokens lose their gradient under token-level (GRPO) and sequence-level (GSPO) clipping, and why GSPO's $\varepsilon$ is tiny;
* translate a TRL `GRPOConfig` and its generation schedule into ladder's flags, and check that both compute the same loss.

GRPO, Dr. GRPO, DAPO, GSPO, CISPO and RLOO are not six programs: each is a handful of choices, and
each choice is a flag of the `grpo` rung and a short function of `ladder.core` (README: *GRPO's design space*). The
first part is the concepts: the one loss and what it divides by (1), what the KL term's gradient follows (2), which
tokens lose their gradient (3), and the methods against each other on the tiny task (4). The second part is
bookkeeping against TRL, which implements the same space under other names: the names (5), the schedule (6), and the
loss itself on the same tensors (7).""",
    SETUP,
    r"""md:## 1 · One loss, six methods

$$L(\theta) = \operatorname{agg}\Big(-\min\big(\rho_t\hat A_t,\ \operatorname{clip}(\rho_t, 1-\varepsilon_{\text{low}}, 1+\varepsilon_{\text{high}})\,\hat A_t\big) + \beta\, c_t\, k(a_t)\Big),$$

$$\rho_t = \begin{cases} \pi_\theta(a_t)/\pi_{\text{old}}(a_t) & \text{token level (GRPO)} \\ s_i = \big(\pi_\theta(y_i)/\pi_{\text{old}}(y_i)\big)^{1/|y_i|} & \text{sequence level (GSPO)}\end{cases}$$

with $\hat A$ group-relative or leave-one-out, the KL term $k$ in the loss (weight $c_t = 1$ or $\pi_\theta/\pi_{\text{old}}$) or in the
reward, and $\operatorname{agg}$ chosen by `--loss-type` (TRL's names): `grpo` averages each completion's tokens, then the
completions (`core.aggregate`'s `seq_mean_token_mean`); `bnpo` averages all the tokens of the minibatch (`token_mean`);
`dr_grpo`, `dapo` and `cispo` sum the minibatch's token losses and divide by a constant (`sum_over_constant`).
`dr_grpo` and `dapo` differ only in the constant; `cispo` is `dapo`'s constant around CISPO's loss. Each method's paper
sets a handful of flags, and `--algo NAME` sets them together — the KL term excepted: `--algo grpo` keeps the
rung's default $\beta\,\frac{\pi_\theta}{\pi_{\text{old}}}k_3$ (TRL 1.16's form of the term; TRL's default $\beta$ is 0, no KL term at all), where DeepSeekMath wrote plain $\beta\,k_3$
(`--kl-correction off`; section 2 computes what each one's gradient follows). The newer bundles `--algo sapo`,
`luspo`, `vespo` and `gdpo` change the policy term or the rewards' aggregation instead: notebook 6b.""",
    """display(Markdown(viz.algo_league.algo_table(("grpo", "dr_grpo", "dapo", "gspo", "cispo", "rloo"))))""",
    r"""md:### What the constant counts

The rung computes the constant once per update, before the passes. An update holds $B$ completions spread over $n_{\text{proc}}$ processes, $B/n_{\text{proc}}$ on each:

$$N_{\text{dr\_grpo}} = \frac{B}{n_{\text{proc}}}\,L_{\max}, \qquad N_{\text{dapo}} = N_{\text{cispo}} = \frac{1}{n_{\text{proc}}}\sum_{\text{processes}}\ \sum_{i,t} m_{i,t},$$

with $L_{\max}$ = `--max-new-tokens` and $m_{i,t} = 1$ for a real token (0 for padding, and for a truncated completion
with `--mask-truncated`). So $N_{\text{dapo}}$ is the real tokens of the whole update — every minibatch, every process —
divided by $n_{\text{proc}}$. `core.update` then takes $\mu \times M$ optimiser steps, and each divides its minibatch's summed loss by
its share $N/M$ (the same share in every pass); the $n_{\text{proc}}$ processes average their gradients. One token's weight in the
gradient of the step that holds it is therefore

$$\omega_{\text{dapo}} = \frac{1}{n_{\text{proc}}}\cdot\frac{M}{N_{\text{dapo}}} = \frac{M}{\text{real tokens of the update}}, \qquad
\omega_{\text{dr\_grpo}} = \frac{1}{n_{\text{proc}}}\cdot\frac{M}{N_{\text{dr\_grpo}}} = \frac{1}{n_{\text{proc}}\,b\,L_{\max}},$$

with $b = B/(n_{\text{proc}}M)$ rows per minibatch on each process: each one number for every token of the update, whatever its completion's length or its minibatch, against
$\omega_{\text{grpo}} = 1/(n_{\text{proc}}\,b\,|y_i|)$ (a short completion's tokens weigh more: the length bias Dr. GRPO removes) and
$\omega_{\text{bnpo}} = 1/(n_{\text{proc}} \cdot \text{real tokens of its minibatch on its process})$. The newer loss types
in the table (notebook 6b) reuse these: `sapo` averages as `grpo`, `vespo` divides by `dapo`'s constant, and `luspo`
sums each completion's tokens before the mean over completions (`seq_mean_token_sum`), so every token weighs
$\omega_{\text{luspo}} = 1/(n_{\text{proc}}\,b)$, as much as a whole completion does under `grpo`.
The table below asks autograd for these weights, with the constants the rung computes, on 2 processes × 4 completions
cut into $M = 2$ minibatches; each entry is $1/x$, $x$ being what that token's loss is divided by.

<details><summary>Aside — the code, and TRL's constants</summary>

The rung computes the constant in `grpo.loss_normaliser`, called in `grpo.grpo_step`;
`viz.algo_league.loss_weights` asks autograd for the weights through `core.aggregate`.

TRL 1.16 divides by the same constants. For `dapo` and `cispo` each micro-batch divides by `num_items_in_batch` (the
real tokens of the whole generation batch, gathered over all processes) ÷ processes × gas ÷ spg, so the gas
micro-batches of one optimiser step together divide by $N/M$ with $M = \text{spg}/\text{gas}$; for `dr_grpo` each
micro-batch divides by its rows × `max_completion_length` and then by gas, so one step divides by its rows × $L_{\max}$.
The two agree wherever ladder has an $M$ (gas divides spg, section 6).
</details>""",
    """weights = viz.algo_league.loss_weights([[8, 2, 5, 1], [3, 3, 7, 4]], num_minibatches=2, max_new_tokens=8)
display(Markdown(viz.algo_league.loss_weights_table(weights)))
M, tokens = weights["num_minibatches"], weights["tokens"]
print(f"real tokens of the update {tokens}: dapo's weight M / tokens = {M}/{tokens} = 1/{tokens / M:g} for every token")""",
    r"""md:Read the columns: `grpo`'s weights change with the completion's length, `bnpo`'s with the minibatch's token count,
while `dr_grpo` and `dapo` give every token of the update one weight (`cispo` has `dapo`'s). On one process with
$M = 1$, $N_{\text{dapo}}$ is the batch's own real tokens, so `dapo` computes the same loss as `bnpo` (section 7 prints
both).""",
    r"""md:## 2 · KL in the loss: values vs gradients

Notebook 3 asked which estimator has the right *value*. Training uses its *gradient*, and that is another question.
With $a \sim \pi_{\text{old}}$ and $\ell = \log\pi_{\text{ref}}(a) - \log\pi_\theta(a)$, differentiate each term (the sample is fixed):

$$\nabla k_1 = \nabla\log\pi_\theta, \qquad \nabla k_2 = -\ell\,\nabla\log\pi_\theta, \qquad \nabla k_3 = (1 - e^{\ell})\,\nabla\log\pi_\theta .$$

On-policy — $\pi_{\text{old}} = \pi_\theta$, as holds until the first optimiser step of an update — take expectations and
compare with the two exact gradients
$\nabla\mathrm{KL}(\pi_\theta\|\pi_{\text{ref}}) = \mathbb{E}_{\pi_\theta}\big[\log\tfrac{\pi_\theta}{\pi_{\text{ref}}}\nabla\log\pi_\theta\big]$ (reverse) and
$\nabla\mathrm{KL}(\pi_{\text{ref}}\|\pi_\theta) = -\mathbb{E}_{\pi_{\text{ref}}}[\nabla\log\pi_\theta] = \mathbb{E}_{\pi_\theta}\big[(1 - \tfrac{\pi_{\text{ref}}}{\pi_\theta})\nabla\log\pi_\theta\big]$ (forward). The five ways are $k_1$, $k_2$, $k_3$ or $\frac{\pi_\theta}{\pi_{\text{old}}}k_3$ in the loss (the last is ladder's
`--kl-correction on`, TRL's `use_bias_correction_kl`) and $k_1$ in the reward (RLOO, `--kl-in reward`); the answer after
the widget works out each.

The cell after the widget checks all of it with no sampling: a small categorical (it prints its size), every action
enumerated with its weight $\pi_{\text{old}}(a)$, each term differentiated by autograd, against autograd on the exact
KLs (`viz.kl_gradients`, each term built by `core.kl_estimate` / `core.kl_in_reward`). Moving $\pi_{\text{old}}$ away from $\pi_\theta$ is what every
optimiser step after the first does to the minibatches still to come ($M > 1$ or $\mu > 1$).

**Exercise:** `ex14_kl_in_reward.py`; once it passes, `python -m ladder.run grpo --preset tiny --qlora --algo rloo --use-exercises`
trains with your `kl_in_reward`.""",
    r"""md:**Predict first.** The widget starts on-policy ($\pi_{\text{old}} = \pi_\theta$). Work out from the gradients above which
ways are exact against the reverse KL there. Then slide *how far π_old is from π_θ* up from 0: which of those stay
exact, and what in their expectation breaks for the others?""",
    """view = viz.kl_gradient_view(ref_distance=1.0, old_distance=0.0)
view""",
    """grads = {old: viz.kl_gradients(ref_distance=1.0, old_distance=old) for old in (0.0, 0.8)}
for old, g in grads.items():
    print(f"π_old {'= π_θ (on-policy)' if old == 0 else '≠ π_θ (off-policy)'}, {len(g['p_theta'])} actions:  "
          f"‖∇KL rev‖ {g['norm_reverse']:.3f}, ‖∇KL fwd‖ {g['norm_forward']:.3f}")
    for way in viz.exact_kl_gradients.KL_WAYS:
        print(f"   {way:26s} error vs reverse {g['error_reverse'][way]:.1e}   vs forward {g['error_forward'][way]:.1e}")""",
    r"""md:<details><summary>Answer</summary>

Taking expectations:

* $k_1$ in the loss: $\mathbb{E}[\nabla\log\pi_\theta] = 0$ — zero *expected* gradient, whatever $\pi_{\text{ref}}$ is (one batch's gradient is noise, not 0);
* $k_2$ in the loss: exactly the reverse KL's gradient;
* $k_3$ in the loss — GRPO as written in DeepSeekMath — exactly the **forward** KL's gradient, though its value estimates the reverse KL;
* $\frac{\pi_\theta}{\pi_{\text{old}}}k_3$ (ladder's `--kl-correction on`, TRL's `use_bias_correction_kl`): $\mathbb{E}_{\pi_{\text{old}}}[\frac{\pi_\theta}{\pi_{\text{old}}}k_3] = \sum_a \pi_\theta k_3 = \mathrm{KL}(\pi_\theta\|\pi_{\text{ref}})$ as a function of $\theta$,
  so its gradient is the reverse KL's, on-policy *and* off. The weight's value is 1 until the first optimiser step
  (on the first minibatch of the first pass); its gradient is not 0;
* $k_1$ in the reward (RLOO, `--kl-in reward`): $\hat A \ni -\beta k_1$ on $\pi_{\text{old}}$, a constant, so the gradient is REINFORCE's
  $\mathbb{E}[k_1\nabla\log\pi_\theta]$ — the reverse KL's, on-policy.

On-policy, plain $k_3$ in the loss is the one marked *exact* against the forward KL; $k_2$, $\frac{\pi_\theta}{\pi_{\text{old}}}k_3$
and $k_1$ in the reward are exact against the reverse KL, and $k_1$ in the loss against neither. Once $\pi_{\text{old}} \neq \pi_\theta$
only $\frac{\pi_\theta}{\pi_{\text{old}}}k_3$ stays exact: $k_2$'s and the reward's exactness needed the samples to come from
$\pi_\theta$. The cell above prints the errors at both settings.
</details>""",
    r"""md:## 3 · Tokens: who loses the gradient

The clip zeroes a token's gradient where the clipped branch is the smaller one: $\rho > 1+\varepsilon_{\text{high}}$ with
$\hat A > 0$, $\rho < 1-\varepsilon_{\text{low}}$ with $\hat A < 0$. At the token level (GRPO) $\rho_t(\theta) = \pi_\theta(a_t)/\pi_{\text{old}}(a_t)$ decides per token;
at the sequence level (GSPO)

$$s_i = \exp\Big(\frac{1}{|y_i|}\sum_t \log\frac{\pi_\theta(a_t)}{\pi_{\text{old}}(a_t)}\Big)$$

(`core.sequence_log_ratio`) decides for the whole completion: one token far off is averaged away, or the whole
completion goes. Below, a real batch of the tiny QLoRA preset (sampled by $\pi_{\text{old}}$ = the preset after a few GRPO
updates; computed once, then cached) after $\mu$ passes of `core.update`. Colour the tokens by whether they keep their
gradient, by $\pi_\theta/\pi_{\text{old}}$, by the sign of $\hat A$, by the exact KL to $\pi_{\text{ref}}$ at that position, or by the
entropy; in the coloured text, struck-through tokens lose their gradient at the chosen level (`viz.gradient_mask` asks autograd, through
`core.clipped_surrogate`). The figure below the text plots each token's ratio as a dot, one row per completion (grey where $\hat A = 0$, green
where the gradient flows, red where the clip takes it), each completion's $s_i$ as a hollow diamond and the band
$[1-\varepsilon_{\text{low}}, 1+\varepsilon_{\text{high}}]$ shaded; beside it, the shares clipped at each level. The toggle does not retrain: it clips the same $\pi_\theta$ both ways.

GSPO's own $\varepsilon$ is tiny: `--algo gspo` sets $\varepsilon_{\text{low}} / \varepsilon_{\text{high}}$ = 3e-4 / 4e-4, some 667 and 500 times
below GRPO's 0.2 (section 1's table prints the second). A sequence ratio is one number per completion, the geometric
mean of its tokens' ratios, so one outlying token moves it little — hence the small $\varepsilon$ — and clipping it removes the
whole completion's gradient. The *ε_high* menu sets $\varepsilon_{\text{high}} = \varepsilon$, DAPO's $1.4\,\varepsilon$ or GSPO's
$\frac{4}{3}\varepsilon$; the cell after the widget sets GSPO's pair and prints what it clips.

**Exercise:** `ex12_sequence_ratio.py` is the sequence ratio (TRL's `importance_sampling_level="sequence"`); once it
passes, `python -m ladder.run grpo --preset tiny --qlora --algo gspo --use-exercises` trains with it.""",
    r"""md:**Predict first.** Switch the clip level to `sequence` and slide $\varepsilon$ from 0.2 down to 0.05. Does the
share of the tokens with $\hat A \neq 0$ that the sequence level clips grow, shrink, or can it go either way?""",
    """view = viz.token_view(mu=3, eps=0.2, level="token")
view""",
    """shares = {}
for eps, high in ((0.2, 1.0), (0.05, 1.0), (3e-4, 4 / 3)):
    view.controls["high"].value = high
    view.controls["eps"].value = eps
    shares[eps] = view.data
    print(view.data["summary"])
t = view.data["table"]
print(f"{len(t.pieces)} completions, {t.group_size} per prompt")
view.controls["eps"].value, view.controls["high"].value = 0.2, 1.0
view.controls["level"].value = "sequence"     # with a live kernel the widget above redraws at the sequence level
# (a static copy of the notebook keeps its first drawing)
token_05, sequence_05 = shares[0.05]["frac_tokens"]["token"], shares[0.05]["frac_tokens"]["sequence"]
print(f"sequence level: {shares[0.2]['frac_tokens']['sequence']:.0%} of the tokens with Â ≠ 0 clipped at ε = 0.2, "
      f"{sequence_05:.0%} at ε = 0.05")
print(f"at ε = 0.05 the sequence level clips {'more' if sequence_05 > token_05 else 'not more'} of the tokens "
      f"with Â ≠ 0 than the token level: {sequence_05:.0%} against {token_05:.0%}")""",
    r"""md:<details><summary>Answer</summary>

It grows, or at worst stays: a smaller $\varepsilon$ narrows the band, so every $s_i$ outside the wide band is outside the
narrow one too (the second-to-last line above). Whether it overtakes the token level is this batch's (the last line). Why the sequence level catches up as $\varepsilon$ falls: each $s_i$
averages its tokens' log-ratios, so it is less extreme than its most outlying tokens, which the token level clips
one by one (compare the two levels at 0.2, the first line); but all of a completion's tokens share it: once $\varepsilon$ falls below the spread of the $s_i$, whole completions go at once, every token with them.
</details>""",
    """gspo_sequence, grpo_token = shares[3e-4]["frac_tokens"]["sequence"], shares[0.2]["frac_tokens"]["token"]
print(f"tokens clipped: sequence level at GSPO's pair {gspo_sequence:.0%}, token level at GRPO's 0.2 {grpo_token:.0%}")""",
    r"""md:The GSPO paper reports, of its own runs, that its sequence level at its tiny pair clips a far larger share of the
tokens than GRPO's token level does at 0.2; the line above is the same comparison on one toy batch after $\mu = 3$
passes, so read the shares as this batch's, not as GSPO's usual rate. Whatever the share, each completion clipped at
the sequence level is a whole, consistent decision rather than a scatter of single tokens.""",
    r"""md:## 4 · The league

Finally, the methods against each other on the tiny task, trained by the real rung: `grpo.train` with
`grpo.PRESETS["tiny"]` and each method's `grpo.ALGOS` bundle (the flags `--algo NAME` sets, section 1's table), stopped
by the same **budget of sampled completions** (`max_completions`) rather than of updates — DAPO's dynamic sampling may
sample more per update. The score is greedy accuracy on held-out sums,

$$\text{acc} = \frac{1}{N}\sum_{j=1}^{N} \big[\text{answer}(\text{greedy}(q_j)) = a_j\big],$$

plotted against completions sampled; the table after the widget prints each run's updates, completions and seconds.
One seed, so small differences are noise. The full table (every `--algo`, π_ref refresh, KL in the reward, several
seeds, a larger budget) is `python benchmarks/variants.py`, with results in `benchmarks/RESULTS.md`.

**Exercises:** `ex13_leave_one_out.py` and `ex14_kl_in_reward.py` are `rloo`'s two functions
(`python -m ladder.run grpo --preset tiny --qlora --algo rloo --use-exercises`); `ex15_soft_update.py` is the π_ref refresh
(`python -m ladder.run ppo-sentiment --preset tiny --ref-sync-every 2 --use-exercises`).""",
    r"""md:**Predict first.** Switch the widget's metric to the KL to $\pi_{\text{ref}}$. `dapo` trains with $\beta = 0$, and its
$\pi_\theta$ moves as the others' do. Will its KL curve show how far $\pi_\theta$ has moved from $\pi_{\text{ref}}$, and why?""",
    """view = viz.league_view(methods=("grpo", "dapo", "rloo"), max_completions=192, eval_size=32)
view""",
    """display(Markdown(view.data["table"]))
print({m: f"last KL {r['kl_ref'][-1]:.2e}" for m, r in view.data["runs"].items()})""",
    r"""md:<details><summary>Answer</summary>

No: with $\beta = 0$ (`kl_coef=0.0`, section 1's table) the rung computes no $\pi_{\text{ref}}$ at all, so there is no
KL to record and `dapo`'s curve stays at 0 however far its $\pi_\theta$ moves: a logged 0 there means *not computed*. `grpo` keeps $\beta$ with the KL in the loss and `rloo` keeps one
with the KL in the reward: their KL leaves 0 as soon as $\pi_\theta$ leaves $\pi_{\text{ref}}$ (the last KLs printed above).
The table above also has the accuracies. Do not read a ranking into them: 32 held-out sums give accuracy in steps of
1/32, and a few updates on one seed may well leave several methods on the same value; the benchmark's seeds and larger
budget are what separate them.
</details>""",
    r"""md:---

**From the concepts to the bookkeeping.** Everything above is arithmetic on tensors: what the loss divides by, what a
KL term's gradient follows, which tokens keep their gradient, and what the bundles do to a small run. What follows
is what you need to read a TRL script in those terms: which TRL field is which ladder flag (section 5), how TRL's
generation schedule maps onto $\mu$ passes × $M$ minibatches (section 6), and a check that TRL 1.16's
`GRPOTrainer._compute_loss` and `core.compute_loss` give the same loss and gradient on the same tensors (section 7).""",
    r"""md:## 5 · The map: TRL's names → ladder's options → core functions

`ladder.trl.map` keeps the correspondence as data, one row per (TRL name, ladder option): TRL 1.16's
`GRPOConfig` and `RLOOConfig`, and the classic `PPOConfig` of the RLHF articles (TRL ≤ 0.11). A row without a TRL
name is a ladder option TRL has no equivalent for; a row without a ladder option is a TRL setting ladder does
not expose (the note says what ladder does instead). Two rows matter most in section 6: TRL counts **optimiser steps**,
ladder counts **updates** (one rollout of $P\cdot G$ completions, then $\mu \times M$ optimiser steps), so

$$\text{max\_steps} = \text{steps} \cdot \mu \cdot M, \qquad \text{num\_iterations} = \mu, \qquad \text{steps\_per\_generation} = M \quad (\text{gradient\_accumulation\_steps} = 1).$$

**Exercises:** `ex13_leave_one_out.py` is `RLOOConfig`'s advantage and `ex15_soft_update.py` is
`sync_ref_model` / `ref_model_mixup_alpha`. Once they pass, `python -m ladder.run grpo --preset tiny --qlora --algo rloo --use-exercises`
and `python -m ladder.run ppo-sentiment --preset tiny --ref-sync-every 2 --use-exercises` train with them.""",
    """display(Markdown(viz.trl_map_markdown()))""",
    r"""md:## 6 · TRL's schedule vs ours

TRL's `GRPOTrainer` counts **micro-steps** $m$ (one micro-batch each; `gradient_accumulation_steps` of them make one
optimiser step). It generates one batch of `generation_batch_size` completions, cuts it into `steps_per_generation`
slices, and keeps reusing it:

$$\text{generate when } m \bmod (\text{spg}\cdot\text{num\_iterations}) = 0, \qquad \text{micro-batch}_m = \text{buffer}[\,m \bmod \text{spg}\,], \qquad \pi_{\text{old}} = \pi_\theta \text{ at generation time.}$$

When no optimiser step falls between a batch's generation and its last use, $\pi_\theta = \pi_{\text{old}}$ at every use,
and the log-probs of $\pi_{\text{old}}$ need no forward pass of their own: they are those of $\pi_\theta$, detached.
Ladder has no gradient accumulation (a minibatch is one forward and one optimiser step), so TRL's work is

$$\mu = \text{num\_iterations}, \qquad M = \text{spg}/\text{gas}, \qquad P\cdot G = \text{generation\_batch\_size}$$

when `gas` divides `spg`; other cases are in `viz.trl_schedule`'s docstring, and some have no ladder equivalent at all
(an optimiser step that straddles two generation batches, or one that mixes the end of a pass with the start of
the next — ladder's minibatches partition each pass). In the timeline, each box is a micro-step labelled
generation·slice·iteration, the middle row is which policy sampled it → which policy is being trained
(optimiser steps taken so far), and hatching marks $\pi_\theta \neq \pi_{\text{old}}$; the bottom row is the ladder update·pass·minibatch
doing the same optimiser step. (The ladder row is computed from the ladder configuration alone.)""",
    r"""md:**Predict first.** The widget starts at `num_iterations` = 2, `steps_per_generation` = 4,
`gradient_accumulation_steps` = 2. Slide `gradient_accumulation_steps` to 8: does TRL still need the old-log-prob
forward, and which ladder configuration does the same work?""",
    """view = viz.schedule_view(num_iterations=2, steps_per_generation=4, gradient_accumulation_steps=2)
view""",
    """# TRL's own diagram (grpo_trainer.py): 2 GPUs × 3 rows, G = 2, gas = 2, spg = 4 — and four more cases
cases = [dict(num_iterations=2, steps_per_generation=4, gradient_accumulation_steps=8),     # the prediction's case
         dict(gradient_accumulation_steps=2, steps_per_generation=4, per_device_train_batch_size=3, num_processes=2, num_generations=2),
         dict(), dict(num_iterations=2, steps_per_generation=1, gradient_accumulation_steps=2),
         dict(num_iterations=4, steps_per_generation=2), dict(steps_per_generation=3, gradient_accumulation_steps=2)]
schedules = [viz.trl_schedule(**case) for case in cases]
for case, s in zip(cases, schedules):
    lad = s["ladder"]
    print(f"{case}\\n   TRL: generate every {s['generate_every']} micro-steps, old-logp forward (no vLLM) "
          f"{'computed' if s['computes_old_logp'] else 'skipped'}, any π_θ ≠ π_old: {s['off_policy']}\\n   ladder: "
          + (f"{lad['flags']} (μ·M = {lad['optimizer_steps_per_update']} optimiser steps per update)" if lad["exact"]
             else lad["reason"]))""",
    r"""md:<details><summary>Answer</summary>

No: one optimiser step now accumulates both iterations over the whole generation batch ($\text{spg}\cdot\text{num\_iterations}$
micro-batches), so no step falls between the generation and its last use, $\pi_\theta = \pi_{\text{old}}$ at every use and the
forward is *skipped*. The ladder row reads `--mu 1 --num-minibatches 1`: the second iteration only adds the same
gradient again inside that one step. The cell above prints that case first, then five more.

TRL 1.16's rule (`GRPOTrainer._generate_and_score_completions`): it computes the old-log-prob forward when
$\text{gas} \bmod (\text{spg}\cdot\text{num\_iterations}) \neq 0$, **or** when it samples with vLLM (`use_vllm=True`) and
corrects for vLLM's sampling distribution (`vllm_importance_sampling_correction`, default `True`): that weight
$\pi_{\text{old}}/\pi_{\text{sampler}}$ (notebook 5) needs $\pi_{\text{old}}$'s own log-probs whatever the schedule. So it
skips the forward exactly when $\text{gas} \bmod (\text{spg}\cdot\text{num\_iterations}) = 0$ and that correction is off —
always so without vLLM. The timeline and the cases above assume no vLLM.
</details>""",
    r"""md:The defaults (`gas = spg = num_iterations = 1`) generate every step and never need $\pi_{\text{old}}$; `num_iterations = 2`
inside one accumulated step also never does (both iterations see the same weights, so they only recompute the same
gradient). `steps_per_generation = 3` with `gas = 2` is the odd one: step 1 mixes the last slice of one generation with
the first of the next, which ladder cannot express. No exercise here: this is bookkeeping, and `core.update` does it.""",
    r"""md:## 7 · Same tensors, same loss

The map of section 5 claims the same loss under other names, and that is testable: give TRL 1.16's
`GRPOTrainer._compute_loss` and `core.compute_loss` the same tiny model and the same tensors — prompts, completions,
$\hat A$, $\log\pi_{\text{old}}$ (shifted so ratios are clipped at both ends), $\log\pi_{\text{ref}}$ — and compare the loss and the
gradient of every weight:

$$\Delta_L = |L_{\text{TRL}} - L_{\text{ladder}}|, \qquad \Delta_\nabla = \max_j \big|\partial_{\theta_j} L_{\text{TRL}} - \partial_{\theta_j} L_{\text{ladder}}\big|.$$

The only difference should be float32 rounding of two differently chunked log-softmaxes; the cell after the widget
prints $\Delta_\nabla$ for every loss type next to the largest gradient entry. The bench is one process with
`gradient_accumulation_steps = steps_per_generation = 1`, so the constant of `dapo` and `cispo` (TRL's share for one
micro-batch, passed through `loss_normaliser` as the rung does) is the micro-batch's own real tokens: `dapo`'s loss
prints equal to `bnpo`'s, as section 1 said. `tests/test_trl_parity_grpo.py` runs every loss type × ratio level ×
KL correction × clip variant; here one at a time (the trainer is built offline on first use).

**Exercise:** `ex12_sequence_ratio.py` (section 3) is `importance_sampling_level="sequence"`.""",
    r"""md:**Predict first.** (Needs `trl ≥ 1.16`.) Select `importance_sampling_level` = `sequence` with
`use_bias_correction_kl` ticked: the widget reports that TRL and ladder differ. Which term of the loss do you expect the
difference to come from, and will unticking the box remove it?""",
    """if viz.trl_loss_parity.trl_available():
    view = viz.parity_view("grpo")
    display(view)
else:
    print("pip install 'trl>=1.16' (Python ≥ 3.11) to compare with TRL's GRPOTrainer")""",
    """if viz.trl_loss_parity.trl_available():
    from trl import GRPOConfig
    for loss_type in viz.trl_loss_parity.PARITY_LOSS_TYPES:
        r = viz.trl_parity(loss_type)
        print(f"{loss_type:8s} loss TRL {r['trl_loss']:.7f}  ladder {r['ladder_loss']:.7f}  "
              f"largest gradient difference {r['max_grad_diff']:.1e} (largest entry {r['max_grad']:.2f})")
    print("TRL 1.16's default use_bias_correction_kl:", GRPOConfig.__dataclass_fields__["use_bias_correction_kl"].default)
    view.controls["level"].value, view.controls["correction"].value = "sequence", True
    print("sequence level, bias-corrected KL:", view.data["summary"])
    view.controls["correction"].value = False
    print("sequence level, KL uncorrected:   ", view.data["summary"])""",
    r"""md:<details><summary>Answer</summary>

Unticked: yes (the last line). Ticked, the second-to-last line above says *differs by design*. One difference is deliberate: at the sequence level with
`use_bias_correction_kl`, TRL weights each token's KL by the completion's sequence ratio $s_i$, ladder by the token's
own $\pi_\theta/\pi_{\text{old}}$ (the weight that makes *that token's* estimate unbiased). Unticked, the KL term has no
weight in either: both add the same plain $k_3$, so they agree again to rounding.
</details>""",
    SELF_CHECK,
    """p_divisor = viz.Predict("Section 1's bench with new lengths: process 0's completions 2, 2, 2, 2 tokens long, process "
                         "1's 6, 6, 6, 6 (M = 2, L_max = 8). For bnpo, what is x for a token of process 0 (its loss "
                         "divided by x)?")
p_divisor.answer = None
why_off = viz.Reason("Section 2, new case: π_old far from π_θ (old_distance 0.8) but π_ref = π_θ (ref_distance 0). "
                     "Is plain k3's expected gradient then exactly the reverse KL's, and why?",
                     "no: the tokens come from π_old, so plain k3 averages its gradient under the wrong policy and "
                     "stays biased, as in section 2",
                     "no: the KL is 0, but k3's gradient (1 − e^ℓ)∇log π_θ is not, since e^ℓ ≠ 1 on the tokens "
                     "π_old drew",
                     "yes: π_ref = π_θ makes ℓ = 0 at every token, so ∇k3 = (1 − e^ℓ)∇log π_θ = 0 whoever drew it, "
                     "and the reverse KL's gradient at its minimum is 0 too",
                     "yes: plain k3 carries the weight π_θ/π_old inside it, so the policy that drew the tokens "
                     "never matters")
why_off.answer = None    # "a", "b", "c" or "d"
p_steps = viz.Predict("Section 6: num_iterations = 3, steps_per_generation = 2, gradient_accumulation_steps = 1. How "
                      "many optimiser steps does one ladder update take?")
p_steps.answer = None
p_eps = viz.Predict("GSPO's pair (ε_high = 4e-4), a completion of 100 tokens with Â > 0: one token's ratio at 1.5, the "
                    "other 99 at 1. Is the whole completion clipped?", choices=("clipped", "not clipped"))
p_eps.answer = None
for question in (p_divisor, why_off, p_steps, p_eps):
    question.ask()
    print()""",
    """new = viz.algo_league.loss_weights([[2, 2, 2, 2], [6, 6, 6, 6]], num_minibatches=2, max_new_tokens=8)
p_divisor.check(1 / new["bnpo"][0][0], why="x = n_proc × the real tokens of its minibatch on its process: 2 × (2 + 2); "
                                          f"dapo's x is the update's {new['tokens']} tokens / M, the same for every token")
same = viz.kl_gradients(ref_distance=0.0, old_distance=0.8)
error = same["error_reverse"]["k3 in the loss"]
why_off.check("c" if error < 1e-9 else "a",
              why=f"error {error:.1e}: ℓ = log π_ref − log π_θ = 0 at every token when π_ref = π_θ, whoever drew it; "
                  "plain k3 has no weight in it (that is the corrected estimator of section 2)")
ladder_row = viz.trl_schedule(num_iterations=3, steps_per_generation=2)["ladder"]
p_steps.check(ladder_row["optimizer_steps_per_update"], why=f"{ladder_row['flags']}: μ × M optimiser steps")
logp = torch.zeros(1, 100)
logp[0, 0] = torch.tensor(1.5).log()                 # log π_old = 0: log ρ_t = log π_θ
s_i = core.sequence_log_ratio(logp, torch.zeros(1, 100), torch.ones(1, 100)).exp().item()
p_eps.check("clipped" if s_i > 1 + 4e-4 else "not clipped",
            why=f"s_i = 1.5^(1/100) = {s_i:.5f} against 1 + ε_high = 1.0004: one token moves s_i little, and GSPO's "
                "band is smaller still")
viz.tally(p_divisor, why_off, p_steps, p_eps)""",
]
