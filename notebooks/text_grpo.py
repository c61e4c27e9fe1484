# ruff: noqa: E501  (LaTeX lines in the notebook text are as long as their equations)
"""The text and code of notebook 5: GRPO with QLoRA (``text_llm.py`` files it under its name; its section on the
fourth policy is ``text_sampler.py``).

Cells starting with ``md:`` are Markdown; everything else is code. ``notebooks/build.py`` writes them.
"""

from text_decoding import CELLS as DECODING_CELLS
from text_sampler import CELLS as SAMPLER_CELLS
from text_toy import SELF_CHECK, SETUP

CELLS: list[str] = [
    r"""md:# 5 · GRPO with QLoRA

After this notebook (about 70 minutes, on a CPU) you will be able to:

* compute GRPO's group-relative advantages under each reward scale, and say when a group carries no signal;
* say how each `--loss-type` averages the per-token loss, and when two of them are the same number;
* read what $\mu$ passes do to the ratios, the clip fraction and the KL estimates on a real (tiny) language model;
* decode with a key/value cache — prefill, one token per forward, left padding, each step's attention mask and position ids — and measure what the cache changes.

**Notation.** As in notebooks 2–4, the ratio is $\rho_t(\theta) = \pi_\theta(a_t\mid s_t)/\pi_{\text{old}}(a_t\mid s_t)$; $r_t$ is only
ever a reward. A completion's reward is one number, written $R_i$ (it is the completion's whole return).

## Dropping the critic

A value head as big as the policy is expensive. GRPO (DeepSeekMath) samples $G$ completions per
prompt and uses the group as the baseline:

$$\hat A_i = \frac{R_i - \operatorname{mean}(R_1,\dots,R_G)}{\operatorname{std}(R_1,\dots,R_G) + \epsilon}$$

with the sample std, $\operatorname{std} = \sqrt{\tfrac{1}{G-1}\sum_j (R_j - \operatorname{mean})^2}$ (`torch.std`'s default);

every token of completion $i$ shares $\hat A_i$ (`core.group_relative`). `--scale-rewards` picks the
denominator: the group's std (`group`), the batch's (`batch`), or none at all (`none`, Dr. GRPO, which
argues the std over-weights nearly-easy and nearly-impossible prompts, whose small std inflates $\hat A$). A group
whose rewards are all equal has no signal: $\hat A = 0$.

## Rule rewards

No reward model: a completion earns 1 for the right final answer and a bonus for the expected format
(`ladder.tasks.arithmetic`).

The widget below takes 12 rewards (say 1 for right, 0 for wrong), cuts them into groups of $G$ in order, and
computes $\hat A_i$ under each `--scale-rewards`.""",
    SETUP,
    r"""md:**Predict first.** With $G = 4$ the third group is $(1, 1, 1, 1)$. Slide $G$ to 6, so the groups become
$(1,0,0,0,1,1)$ and $(1,0,1,1,1,1)$: how many of the 12 completions will have $\hat A_i = 0$ then?""",
    """view = viz.group_advantages_view("1, 0, 0, 0,  1, 1, 1, 0,  1, 1, 1, 1", group_size=4)
view""",
    """R = torch.tensor([1., 0, 0, 0, 1, 1, 1, 0, 1, 1, 1, 1])
for G in (4, 6):
    A = core.group_relative(R, G, "group")
    print(f"G = {G}: Â = {' '.join(f'{a:+.2f}' for a in A.tolist())}   ({int((A == 0).sum())} of 12 are 0)")""",
    r"""md:<details><summary>Answer</summary>

None. With $G = 4$ the all-right group gives its four completions $\hat A = 0$: their right answers teach nothing. With
$G = 6$ no group is constant, so every completion gets a non-zero advantage, right ones positive and wrong ones negative;
the printout shows both. How the prompts are grouped decides which comparisons the advantage makes.
</details>""",
    r"""md:## KL in the loss, and how the loss is averaged

DeepSeekMath's GRPO puts the KL into the loss, not the reward. The paper's reason is the advantage: "instead of
adding KL penalty in the reward, GRPO regularizes by directly adding the KL divergence between the trained policy and
the reference policy to the loss, avoiding complicating the calculation of $\hat{A}_{i,t}$". Both are options of the rung: `--kl-in loss` (GRPO) or
`--kl-in reward` (RLOO: $\beta\sum_t \mathrm{KL}_t$ comes off each completion's reward $R_i$);
notebook 6 §2 computes which estimator's gradient is the gradient of which KL. In the loss DeepSeekMath estimates the
KL with plain $k_3$ (notebook 3). The grpo rung, like TRL 1.16's default form of the term (`use_bias_correction_kl`; TRL's default
$\beta$ is 0, no KL term at all, so the form applies once $\beta > 0$), goes one step
further and weights $k_3$ by the ratio $\rho_t(\theta)$ (DeepSeek-V3.2's correction); `--kl-correction off` gives
DeepSeekMath's plain $\beta\,k_3$. The weight's *value* is 1 until the first optimiser step (to float32 rounding:
$\pi_{\text{old}}$'s log-probs come from a forward pass of their own), but its *gradient* is not 0: from the very first
step it turns $k_3$'s gradient (that of the forward KL) into the reverse KL's, the one the penalty means (notebook 6
§2). Its value matters once $\pi_\theta$ has moved, whenever $\mu\cdot M > 1$ ($\mu$ passes of $M$ minibatches): from
the second minibatch of the first pass on, or from the second pass when $M = 1$. The rung's default loss is

$$L = \operatorname{agg}\Big(-\min\big(\rho_t(\theta)\hat A_t,\ \operatorname{clip}(\rho_t(\theta), 1-\varepsilon_{\text{low}}, 1+\varepsilon_{\text{high}})\,\hat A_t\big) + \beta\, \rho_t(\theta)\,k_3\Big)$$

(DeepSeekMath's: the same with $\beta\,k_3$ in place of $\beta\,\rho_t(\theta)\,k_3$).

`--loss-type` chooses $\operatorname{agg}$: `grpo` averages tokens within each sequence, then sequences; `bnpo`
averages all tokens; `dr_grpo` divides the sum by a constant, the generation budget $B\cdot L_{\max}$ ($L_{\max}$ new
tokens per completion), and `dapo` by the real tokens of the whole update. Long and short completions weigh
differently:

<details><summary>Aside — the core's names, and minibatches</summary>

The three ways are modes of `core.aggregate`: `seq_mean_token_mean` (`grpo`), `token_mean` (`bnpo`) and
`sum_over_constant` (`dr_grpo`, `dapo`), whose constant $N$ the rung computes (`max_new_tokens` is $L_{\max}$). With
$M$ minibatches per pass each minibatch divides its sum by its share $N/M$; notebook 6 §1 adds processes.
</details>""",
    """per_token = torch.tensor([[1.0, 1.0, 1.0, 1.0], [3.0, 0.0, 0.0, 0.0]])
mask = torch.tensor([[1., 1., 1., 1.], [1., 0., 0., 0.]])   # a long and a short completion
modes = {"grpo": ("seq_mean_token_mean", None), "bnpo": ("token_mean", None),   # --loss-type → mode, constant
         "dr_grpo": ("sum_over_constant", 2 * 8), "dapo": ("sum_over_constant", 5)}  # B · L_max (L_max = 8); tokens
losses = {loss_type: round(core.aggregate(per_token, mask, mode, num_tokens).item(), 3)
          for loss_type, (mode, num_tokens) in modes.items()}
losses""",
    r"""md:`dapo` and `bnpo` give the same number here because this is one minibatch ($M = 1$) on one process: DAPO's
constant, the real tokens of the whole update, is then the minibatch's own token count (5), so $\sum/N$ is the token mean.

<details><summary>Aside — when they differ</summary>

With $M > 1$ each minibatch divides by $N/M$ instead of its own count, and a minibatch of long completions weighs more
than under `bnpo`.
</details>""",
    r"""md:## Memory: 4-bit + LoRA + the disabled adapter

`--qlora` loads the base model in 4-bit NF4 (double quantisation), trains only small LoRA adapters, and
gets $\pi_{\text{ref}}$ for free: the reference log-probs are the same model with the adapter **disabled**
— no second copy of the weights. Gradient checkpointing trades compute for activation memory.

## Run it: a few steps of the tiny preset

The tiny preset (a tiny instruct model ladder built and ships with the package,
and synthetic two-digit addition) runs on a CPU, 4-bit included. Two steps here; the reward is the
correctness reward plus the format reward, so a right, well-formatted answer earns 2.
A group whose $G$ rewards are all equal has $\hat A = 0$ and, with $\pi_\theta = \pi_{\text{ref}}$ at the start of training, the
$k_3$ term has zero gradient too: nothing moves. `frac_reward_zero_std` is the fraction of such groups. On
problems that are too hard or too easy for the model it nears 1 and training stalls; the tiny preset's sums are
chosen to suit its model, and the two steps below print the fraction on them.
On a GPU, the real run is

```bash
python -m ladder.run grpo --qlora --device cuda        # Qwen2.5-0.5B-Instruct on GSM8K
```""",
    """from ladder.rungs import grpo

USE_GPU = False
short = {"steps": 2, "eval_size": 8, "eval_every": 0, "print_samples": 2}
base = {"device": "cuda"} if USE_GPU else {**grpo.PRESETS["tiny"], **short}
summary = grpo.train(grpo.Config(**base, qlora=True, out=str(RUNS / "notebook-5-grpo"), progress=False))
for r in metrics(RUNS / "notebook-5-grpo"):
    print(f"step {r['step']}: " + "  ".join(f"{k} {r[k]:.4f}"
                                            for k in ("reward", "frac_reward_zero_std", "clip_frac", "kl_ref")))""",
    r"""md:The clip fraction printed is 0 at both steps, and not by chance: the tiny preset keeps the rung's default
$\mu = 1$ (TRL's `num_iterations = 1`, as in DeepSeekMath) and one minibatch, so each batch gets a single optimiser
step, taken after the loss was computed with $\pi_\theta = \pi_{\text{old}}$: every $\rho_t(\theta)$ is 1 to float32
rounding, inside any clip range. The clip acts only once $\pi_\theta$ has moved within an update — $\mu > 1$, or more
than one minibatch —, which the section on $\mu$ below does.

One group of the last logged update — each completion with its rewards, its length and whether it was cut off;
its $G$ advantages are its rewards, centred on the group's mean and divided by the group's sample standard deviation
(plus a small ε):

<details><summary>Aside — where these rows come from</summary>

Every `--print-samples` updates (here: 2) the rung prints one question → completion → reward line and appends *all*
the update's completions to `OUT/completions.jsonl`, what TRL's `log_completions` shows: each completion with its
reward, each reward function's score, its advantage $\hat A_i$, its length and whether it was cut off at
`--max-new-tokens`. `ladder.runtime.runlog.read_completions(OUT)` reads it back (a script can read the JSON lines as they
are).
</details>""",
    """from ladder.runtime.runlog import read_completions

rows = read_completions(RUNS / "notebook-5-grpo")
group = [r for r in rows if r["step"] == rows[-1]["step"] and r["group"] == 0]
print(f"step {group[0]['step']}, group 0: {group[0]['question']!r}")
print(f"{'completion':<44} {'correct':>7} {'format':>6} {'reward':>6} {'Â_i':>7} {'tokens':>6} cut off")
for r in group:
    print(f"{r['completion'][:42]!r:<44} {r['rewards']['correctness']:>7.0f} {r['rewards']['format']:>6.0f} "
          f"{r['reward']:>6.1f} {r['advantage']:>+7.3f} {r['length']:>6} {'yes' if r['truncated'] else 'no'}")""",
    r"""md:The reward of two steps means nothing; the full tiny run is `python -m ladder.run grpo --qlora --preset tiny`
(and `python -m ladder.run eval --preset tiny --qlora --adapter runs/grpo-tiny-qlora-seed0/adapter` evaluates the adapter).

## What $\mu$ does on the LM

Notebook 3's experiment, on the language model. The three policies of the tiny QLoRA preset:

* $\pi_{\text{ref}}$ — the 4-bit base with the LoRA adapter **disabled**;
* $\pi_{\text{old}}$ — the same model after 8 ordinary GRPO updates (`grpo.grpo_step`); it samples one fixed batch
  of 8 prompts × 8 completions (its number of completion tokens is in the widget's first panel title);
* $\pi_\theta$ — a copy of $\pi_{\text{old}}$'s adapter, given $\mu$ passes of `core.update` with the GRPO loss
  (clipped surrogate $+\ \beta\, \rho_t(\theta)\, k_3$, $\beta = 0.04$).

The tiny model's vocabulary has a few hundred tokens, so every KL is also computed **exactly** at each visited
position $s_t$: $\sum_v \pi_\theta(v\mid s_t)\log\frac{\pi_\theta(v\mid s_t)}{\pi_x(v\mid s_t)}$. The GRPO loss instead sees one
sampled token $c_t \sim \pi_{\text{old}}$ per position: the plain estimate averages $k_3(c_t)$, the importance-weighted one
$\frac{\pi_\theta(c_t)}{\pi_{\text{old}}(c_t)}\,k_3(c_t)$, and the shaded bands show mean ± std of each estimate over fresh
samples $c_t \sim \pi_{\text{old}}$ at the same positions. Building $\pi_{\text{old}}$ and the batch
is done once; a new setting of the sliders runs its passes, and a run of μ passes also answers every smaller μ. The preset
has one minibatch ($M = 1$), so $\pi_\theta = \pi_{\text{old}}$ until the first optimiser step, at the end of pass 1: every pass-1
ratio is 1, to float32 rounding.""",
    r"""md:**Predict first.** Slide $\mu$ from 1 to 8. Which of the two estimates, the plain $k_3$ average or the
importance-weighted one, stays with the exact KL$(\pi_\theta\,\|\,\pi_{\text{ref}})$ *in expectation* (the centre of its
shaded band), and why? Does that one also stay with it on this one batch (its line), at every $\mu$ — and what would
pull it off?""",
    """view = viz.lm_mu_view(mu=4, lr=3e-4, clip_eps=0.2)
view""",
    """runs = {mu: viz.lm_mu_passes(mu, lr=3e-4) for mu in (1, 2, 4, 8)}
for mu, run in runs.items():
    print(f"μ={mu}: ratio std {run['ratios'][-1].std():.3f}  clip {run['clip_frac_after'][-1]:.3f}  "
          f"KL(θ‖old) {run['kl_old_exact'][-1]:.4f}  KL(θ‖ref) exact {run['kl_ref_exact'][-1]:.4f}  "
          f"biased {run['kl_ref_biased'][-1]:.4f}  corrected {run['kl_ref_corrected'][-1]:.4f}")
    print(f"      over fresh samples c ~ π_old: biased {run['kl_ref_biased_expected'][-1]:.4f} "
          f"± {run['kl_ref_biased_std'][-1]:.4f}, corrected {run['kl_ref_corrected_expected'][-1]:.4f} "
          f"± {run['kl_ref_corrected_std'][-1]:.4f}")
print(f"fraction of the groups whose G rewards are all equal: {runs[8]['frac_reward_zero_std']:.3f}")
for mu, run in runs.items():
    exact, r = run["kl_ref_exact"][-1], run["ratios"][-1]
    print(f"μ={mu}: plain k3's expectation − exact KL {run['kl_ref_biased_expected'][-1] - exact:+.4f}; the corrected "
          f"estimate's std = {run['kl_ref_corrected_std'][-1] / exact:.2f} × the exact KL; "
          f"{(abs(r - 1) > 0.01).sum()} of {r.size} ratios off 1 by more than 1 %")""",
    r"""md:<details><summary>Answer</summary>

The importance-weighted one — the *corrected* estimate, as the printout calls it — stays with the exact KL, in expectation: at each position

$$\mathbb{E}_{c\sim\pi_{\text{old}}}\Big[\frac{\pi_\theta(c)}{\pi_{\text{old}}(c)}k_3(c)\Big] = \sum_v \pi_\theta(v)\,k_3(v) = \mathrm{KL}(\pi_\theta\,\|\,\pi_{\text{ref}}),
\qquad \mathbb{E}_{c\sim\pi_{\text{old}}}[k_3(c)] = \sum_v \pi_{\text{old}}(v)\,k_3(v) \neq \mathrm{KL}(\pi_\theta\,\|\,\pi_{\text{ref}})$$

so its average over fresh samples *is*
KL$(\pi_\theta\,\|\,\pi_{\text{ref}})$ (the second line of each μ above shows the same number as the exact KL of the
first), whatever the run. The plain $k_3$ average's expectation is a sum under $\pi_{\text{old}}$, not $\pi_\theta$, so it
moves off the exact KL as the passes move $\pi_\theta$ away from $\pi_{\text{old}}$: the last lines print the gap for each
μ. One batch is not the expectation, though: the same lines print the corrected estimate's std over fresh samples as a
multiple of the exact KL. Where that multiple is not small, this batch's corrected value can sit well off the exact one
(compare them in the first line of each μ): a few positions, and tokens $\pi_{\text{old}}$ seldom samples, carry much of
the KL, and their weights $\pi_\theta/\pi_{\text{old}}$ are what the passes spread.

The rest is for the printout to say, on your machine: how the ratio std, the clip fraction and KL$(\pi_\theta\,\|\,\pi_{\text{old}})$
change with μ (on CartPole, notebook 3, the ratio std and the clip fraction grew with μ), and how many ratios move off 1 at all — most
tokens of a worked sum are nearly certain, which is why the histogram is on a log scale. In the fraction of groups
printed in the middle all $G$ answers scored the same, so their $\hat A = 0$ and only the KL term moves them.
</details>

Try the preset's learning rate `1e-3` in the widget: Adam's first steps are larger, so the passes move $\pi_\theta$
further. Whether the plain estimate then overshoots further, and whether the corrected band widens or narrows, pass by
pass, is the widget's to show.

**Exercises:** `ex10_group_relative.py` and `ex11_aggregate.py`; then
`python -m ladder.run grpo --preset tiny --use-exercises` trains with your `group_relative` and `aggregate`.""",
    *DECODING_CELLS,
    *SAMPLER_CELLS,
    SELF_CHECK,
    """p_group = viz.Predict("A group of G = 3 rewards (1, 0, 0) under --scale-rewards group: what will Â of the right "
                       "completion be?", decimals=2)
p_group.answer = None
p_scale = viz.Predict("Multiply every reward by 10. Under which --scale-rewards does Â stay the same?",
                      choices=("group", "none"))
p_scale.answer = None
p_weight = viz.Predict("In the two-completion aggregation example, the short completion's single token has a weight "
                       "∂L/∂L_t in the loss under each --loss-type. What is its weight under grpo divided by its weight "
                       "under bnpo?")
p_weight.answer = None
why_kl = viz.Reason("Move the KL into the reward (--kl-in reward, β = 0.1, --scale-rewards group). A group of two "
                    "WRONG answers (R = 0 each), one at Σ_t KL_t = 5 from π_ref, the other at 1: with the KL in the "
                    "loss their advantages were 0 (equal rewards). What are their advantages now, and why?",
                    "−0.4 and +0.4, the one nearer π_ref above: the penalties −0.5 and −0.1 are centred on their "
                    "mean −0.3, and --scale-rewards group divides by a std only when the rewards differ by more than ε",
                    "both stay 0: the group's std is computed from the task's rewards, both 0 here, so the KL "
                    "penalties that differ are centred away and the group still carries no signal",
                    "−0.71 and +0.71, the one nearer π_ref above: each R_i carries its own penalty, the rewards "
                    "−0.5 and −0.1 differ, and a group of two normalises to ±1/√2 whatever the gap",
                    "−1 and +1, the one nearer π_ref above: the penalties are centred on their mean −0.3 and divided "
                    "by their std, and two values at ±0.2 from their mean have std 0.2")
why_kl.answer = None
for question in (p_group, p_scale, p_weight, why_kl):
    question.ask()
    print()""",
    """A_right = core.group_relative(torch.tensor([1., 0, 0]), 3, "group")[0].item()
p_group.check(round(A_right, 2), why=f"to 2 decimals: mean 1/3, sample std √(1/3): (2/3) / √(1/3) = 2/√3 = {2 / 3 ** 0.5:.4f}, "
                                     f"{A_right:.4f} with the ε of the denominator")
kept = {s: torch.allclose(core.group_relative(10 * R, 4, s), core.group_relative(R, 4, s), atol=1e-3) for s in ("group", "none")}
p_scale.check("group" if kept["group"] and not kept["none"] else "none",
              why="dividing by the group's std undoes any common scale; without it Â scales with the rewards")
weight = {}
for loss_type, mode in (("grpo", "seq_mean_token_mean"), ("bnpo", "token_mean")):
    x = per_token.clone().requires_grad_(True)
    core.aggregate(x, mask, mode).backward()
    weight[loss_type] = x.grad[1, 0].item()
p_weight.check(weight["grpo"] / weight["bnpo"], why=f"∂L/∂L_t of the short token's loss L_t: grpo {weight['grpo']:.2f} = "
               f"1/(B·|y_i|), bnpo {weight['bnpo']:.2f} = 1/(the minibatch's real tokens): grpo weighs a short "
               "completion's tokens more")
in_reward = core.group_relative(torch.tensor([0 - 0.1 * 5, 0 - 0.1 * 1]), 2, "group")
key = "c" if abs(in_reward[1] - 2 ** -0.5) < 1e-3 and abs(in_reward[0] + 2 ** -0.5) < 1e-3 else "d"
why_kl.check(key, why=f"Â = {in_reward[0]:+.3f}, {in_reward[1]:+.3f} (R = −0.5, −0.1; the sample std of two values is "
                      "their gap over √2): what DeepSeekMath avoids by putting the KL in the loss, where Â keeps only "
                      "the rewards")
viz.tally(p_group, p_scale, p_weight, why_kl)""",
]
