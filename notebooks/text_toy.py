# ruff: noqa: E501  (LaTeX lines in the notebook text are as long as their equations)
"""The text and code of notebooks 0–2: the ladder, REINFORCE, PPO on CartPole (``SETUP`` is every notebook's
first code cell).

Cells starting with ``md:`` are Markdown; everything else is code. ``notebooks/build.py`` writes them.
"""

SETUP = """\
import json, tempfile
from pathlib import Path

import torch
from IPython.display import Image, Markdown, display

from ladder import core, viz

RUNS = Path(tempfile.mkdtemp(prefix="ladder-nb-"))   # every run of this notebook writes here
metrics = lambda out: [json.loads(line) for line in open(Path(out) / "metrics.jsonl")]"""

SELF_CHECK = r"""md:## Self-check

Answer each question with a number you can read in this notebook's outputs; an answer within 5 % counts.
Fill in the `None`s below and run the cell again (`quiz.reveal()` shows the notebook's own numbers)."""

NOTEBOOKS: dict[str, list[str]] = {}

NOTEBOOKS["0_the_ladder"] = [
    r"""md:# 0 · The ladder

After this notebook (about 15 minutes) you will be able to:

* write the policy gradient and say what the advantage $\hat A_t$ does in it;
* tell apart the three policies $\pi_\theta$, $\pi_{\text{old}}$, $\pi_{\text{ref}}$ and the passes $\mu$ and minibatches $M$;
* build a padded `[B, T]` `Batch` with its mask and run any rung from the shell.

This course climbs from a pole balanced on a cart to a language model that learns arithmetic, and
**every rung runs the same code**: `ladder.core`. What changes from rung to rung is only which
tensors go in.

## What a policy gradient is

A policy $\pi_\theta(a \mid s)$ picks actions; a trajectory $\tau = (s_0, a_0, r_0, s_1, \dots)$
earns a return $R(\tau)$. We want to climb $J(\theta) = \mathbb{E}_{\tau \sim \pi_\theta}[R(\tau)]$.
The log-derivative trick turns the gradient of an expectation into an expectation we can sample:

$$\nabla_\theta J(\theta) = \mathbb{E}_{\tau \sim \pi_\theta}\Big[\sum_t \nabla_\theta \log \pi_\theta(a_t \mid s_t)\,\hat A_t\Big]$$

where $\hat A_t$ (the *advantage*) says how much better $a_t$ was than expected. REINFORCE, PPO and
GRPO all follow this gradient; they differ in

* the objective: REINFORCE's $-\hat A_t\log\pi_\theta$, or PPO's and GRPO's clipped surrogate (notebook 2);
* how many passes $\mu$ reuse one batch: REINFORCE one, PPO and GRPO several (below);
* how they estimate $\hat A_t$: returns with a baseline, GAE on a learnt critic (PPO), or the other completions
  of the same prompt (GRPO, no critic);
* the KL to a reference policy: none in REINFORCE or in PPO on CartPole, in the per-token reward in RLHF-PPO
  (notebook 4), in the loss in GRPO (notebook 5).

## Three policies

| name | in the code | what it is |
|---|---|---|
| $\pi_\theta$ | `logp` | the policy being optimised (with gradient) |
| $\pi_{\text{old}}$ | `old_logp` | the policy that **sampled** the batch; equals $\pi_\theta$ until the first optimiser step |
| $\pi_{\text{ref}}$ | `ref_logp` | the frozen anchor of the KL penalty (for LLMs: the model before RL) |

$\mu$ (`mu`) is how many optimisation passes reuse one batch; each pass is cut into $M$ minibatches
(`num_minibatches`), one optimiser step each. After the first optimiser step $\pi_\theta \neq \pi_{\text{old}}$ — from
the second minibatch of the first pass on, or from the second pass when $M = 1$ — and the ratio
$r = \pi_\theta / \pi_{\text{old}}$ starts to matter.""",
    SETUP,
    r"""md:## The map of the package

`ladder.core` is pure torch — no environments, no tokenizers. Experience arrives as a `Batch` of padded
`[B, T]` tensors (a CartPole rollout and an LM completion are the same shape of thing) and
`core.update` runs the $\mu$ passes.""",
    """print(core.__doc__)
print(sorted(core.__all__))""",
    """# A batch: two trajectories of length 3, the second one padded after 2 actions.
batch = core.Batch(actions=torch.tensor([[0, 1, 1], [1, 0, 0]]), mask=torch.tensor([[1., 1, 1], [1, 1, 0]]))
print(len(batch), "rows,", batch.num_tokens, "real actions")
print(core.last_step_mask(batch.mask))""",
    r"""md:## How to run each rung

| rung | notebook | command |
|---|---|---|
| REINFORCE on CartPole | 1 | `python -m ladder.run reinforce` |
| PPO on CartPole | 2, 3 | `python -m ladder.run cartpole` |
| RLHF-PPO, GPT-2 sentiment | 4 | `python -m ladder.run ppo-sentiment` (`--preset tiny` on a CPU) |
| GRPO with QLoRA on GSM8K | 5 | `python -m ladder.run grpo --qlora` (`--preset tiny` on a CPU) |
| GRPO's design space, TRL side by side | 6 | `python -m ladder.run grpo --preset tiny --algo NAME` (grpo, dr_grpo, dapo, gspo, cispo, rloo) |

Every run writes `metrics.jsonl`, `summary.json` and `curves.png`; `--help` lists every knob.""",
    """import subprocess, sys
from ladder.run import RUNGS
print(RUNGS)
help_text = subprocess.run([sys.executable, "-m", "ladder.run", "cartpole", "--help"], capture_output=True, text=True)
lines = help_text.stdout.split("\\n\\n", 1)[1].splitlines()   # past the usage block: the description, the options
print("\\n".join(lines[:next(i for i in range(30, len(lines)) if lines[i].startswith("  -"))]))   # whole options""",
    SELF_CHECK,
    """quiz = viz.SelfCheck(
    real_actions=("How many real (unpadded) actions does the example batch hold?", batch.num_tokens),
    last_step=("At which position t (counting from 0) does the second trajectory take its last real action?",
               core.last_step_mask(batch.mask)[1].argmax()),
)
quiz.ask()""",
    "quiz.check(real_actions=None, last_step=None)",
]

NOTEBOOKS["1_reinforce_cartpole"] = [
    r"""md:# 1 · REINFORCE on CartPole

After this notebook (about 30 minutes) you will be able to:

* compute returns-to-go $G_t$ with `core.discounted_returns` on a padded batch;
* check that the gradient of REINFORCE's loss $-\hat A\log\pi_\theta$ is the policy gradient;
* train REINFORCE on CartPole and read its curves: greedy evaluation against sampled training returns.

## The log-derivative trick

$\nabla_\theta \pi_\theta = \pi_\theta \nabla_\theta \log \pi_\theta$, so

$$\nabla_\theta J = \mathbb{E}_{\tau\sim\pi_\theta}\Big[\sum_t \nabla_\theta \log\pi_\theta(a_t\mid s_t)\, G_t\Big],
\qquad L(\theta) = -\frac{1}{N}\sum_{t} \hat A_t \log \pi_\theta(a_t \mid s_t)$$

with $N$ the number of real actions in the batch (`core.aggregate`'s token mean). `core.pg_loss` is exactly that
$L$ per action, before the average; its gradient is the policy gradient.

## Returns-to-go

An action cannot influence rewards that came before it, so each $\log\pi$ is weighted only by the
reward that follows: $G_t = r_t + \gamma G_{t+1}$ (`core.discounted_returns`).

## A baseline

Subtracting any $b(s_t)$ leaves the gradient unbiased, because
$\mathbb{E}_{a\sim\pi}[\nabla\log\pi(a\mid s)] = \nabla \sum_a \pi(a\mid s) = 0$, and it can cut the
variance a lot: $\hat A_t = G_t - b(s_t)$. The rung offers `--baseline none | whiten | value`.""",
    SETUP,
    """rewards = torch.tensor([[1., 1., 1., 1., 0.], [1., 1., 0., 0., 0.]])
mask = torch.tensor([[1., 1., 1., 1., 0.], [1., 1., 0., 0., 0.]])   # the second episode ended after 2 steps
G = core.discounted_returns(rewards, mask, gamma=0.9)
G""",
    """# The loss's gradient is the policy gradient: −Â ∇log π. One logit vector, two actions.
logits = torch.zeros(2, requires_grad=True)
logp = torch.log_softmax(logits, -1)[1]            # we took action 1
core.pg_loss(logp, torch.tensor(2.0)).backward()   # Â = 2: push action 1 up
logits.grad                                        # = −Â (onehot(1) − π) = [1, −1]""",
    r"""md:## Train

A short run of the real rung (`python -m ladder.run reinforce --total-steps 8000` does the same from a shell).
The batch is `episodes_per_update` complete episodes (printed below), padded to `[episodes, T_max]` with a mask; `core.update` runs one pass with
`objective="reinforce"` — REINFORCE cannot reuse a batch, because its gradient is only right for
samples from the current $\pi_\theta$.""",
    """from ladder.rungs import reinforce

cfg = reinforce.Config(total_steps=8_000, eval_every=4_000, eval_episodes=20, out=str(RUNS / "notebook-1-reinforce"),
                       progress=False)
print({k: getattr(cfg, k) for k in ("total_steps", "episodes_per_update", "baseline", "eval_episodes")})
summary = reinforce.train(cfg)
{k: summary[k] for k in ("env_steps", "eval_return_mean", "wall_s")}""",
    """display(Image(filename=str(RUNS / "notebook-1-reinforce" / "curves.png")))
[(r["step"], r["episode_return"]) for r in metrics(RUNS / "notebook-1-reinforce")][-5:]""",
    r"""md:The two returns in the plot measure different episodes. `eval_return_mean` in the summary comes from separate
**greedy** evaluation episodes: the argmax action at every step. The training return is the mean over the
`episodes_per_update` episodes of each batch, played with **sampled** actions: a stochastic policy now and then pushes the wrong way and
drops the pole sooner, so the training curve tends to sit below the greedy one (compare the last training returns
printed above with `eval_return_mean`).

Try `baseline="none"` and compare the curves: without a baseline each update's gradient is noisier. Whitening subtracts the batch mean (a baseline:
the expected gradient stays the same) and divides by the batch's std. Under plain SGD that division would act like a
learning rate; under Adam, which every rung uses, a constant factor on the loss hardly changes the step. What it does
change: every batch gets the same scale, whether its episodes were short or long (so late batches of long episodes do
not outweigh early ones), the policy term's weight against any other term of the same loss (an entropy bonus, a
value loss), and whether the gradient-norm clip cuts the step.
Exercise 4 has the details.
**Exercises:** `exercises/ex01_discounted_returns.py` and `ex02_reinforce_loss.py` (grade them with
`pytest exercises/`). Once they pass, `python -m ladder.run reinforce --use-exercises` trains with your own
`discounted_returns` and `pg_loss`.""",
    SELF_CHECK,
    """quiz = viz.SelfCheck(
    return_to_go=("In the γ = 0.9 example, what is the return-to-go G_0 of the first episode?", G[0, 0]),
    grad_action_0=("In the one-logit-vector example, what is the gradient of the loss on logit 0?", logits.grad[0]),
    greedy_return=("What mean return did the greedy evaluation of the trained policy reach (eval_return_mean)?",
                   summary["eval_return_mean"]),
)
quiz.ask()""",
    "quiz.check(return_to_go=None, grad_action_0=None, greedy_return=None)",
]

NOTEBOOKS["2_ppo_cartpole"] = [
    r"""md:# 2 · PPO on CartPole

After this notebook (about 45 minutes) you will be able to:

* derive PPO's clipped surrogate from REINFORCE: the ratio, its gradient, and why both agree at $r = 1$;
* say which samples the clip takes the gradient from, and check it on a real CartPole batch;
* compute GAE advantages and train PPO on CartPole with `core.update`.

REINFORCE throws each batch away after one step. PPO reuses it for $\mu$ passes — which means the
batch was sampled by $\pi_{\text{old}}$ while we optimise $\pi_\theta$.

## From REINFORCE to PPO's surrogate

REINFORCE (notebook 1) minimises $L^{\text{PG}}(\theta) = -\mathbb{E}_t\big[\hat A_t \log\pi_\theta(a_t\mid s_t)\big]$.
Its gradient $-\mathbb{E}_t\big[\hat A_t\,\nabla_\theta\log\pi_\theta(a_t\mid s_t)\big]$ is the policy gradient only
while the samples come from $\pi_\theta$. After one optimiser step they no longer do: they came from $\pi_{\text{old}}$.

**Importance sampling.** For any $f$,
$\mathbb{E}_{a\sim\pi_\theta}[f(a)] = \sum_a \pi_\theta(a) f(a) = \mathbb{E}_{a\sim\pi_{\text{old}}}\big[\tfrac{\pi_\theta(a)}{\pi_{\text{old}}(a)}\,f(a)\big]$:
weighting each sample by the ratio
$r_t(\theta) = \pi_\theta(a_t\mid s_t) / \pi_{\text{old}}(a_t\mid s_t)$ (written $r_t$ for short in this section; in the GAE
section below, $r_t$ is the reward) turns expectations under $\pi_{\text{old}}$,
which we have samples of, into expectations under $\pi_\theta$. PPO's surrogate, maximised over the
$\pi_{\text{old}}$ samples of the batch, is

$$L(\theta) = \mathbb{E}_t\big[r_t(\theta)\,\hat A_t\big].$$

The states still come from $\pi_{\text{old}}$ and $\hat A_t$ is $\pi_{\text{old}}$'s advantage, so $L$ stands in for
$J$ only while $\pi_\theta$ stays close to $\pi_{\text{old}}$; keeping it close is the clip's job (below).

**Its gradient.** $\pi_{\text{old}}$ does not depend on $\theta$, and $\nabla_\theta\pi_\theta = \pi_\theta\nabla_\theta\log\pi_\theta$, so

$$\nabla_\theta r_t = \frac{\nabla_\theta\pi_\theta(a_t\mid s_t)}{\pi_{\text{old}}(a_t\mid s_t)} = r_t\,\nabla_\theta\log\pi_\theta(a_t\mid s_t),
\qquad \nabla_\theta L = \mathbb{E}_t\big[r_t\,\hat A_t\,\nabla_\theta\log\pi_\theta(a_t\mid s_t)\big].$$

At $\theta = \theta_{\text{old}}$ every $r_t = 1$ and $\nabla_\theta L = \mathbb{E}_t\big[\hat A_t\,\nabla_\theta\log\pi_\theta(a_t\mid s_t)\big]$:
**REINFORCE's gradient, exactly.** The two objectives have different values ($\mathbb{E}[\hat A]$ and
$\mathbb{E}[\hat A\log\pi_\theta]$) but the same gradient there. Once $\theta$ has moved, $r_t \neq 1$ reweights each
sample's REINFORCE term by how much more (or less) likely $\pi_\theta$ now makes its action.

**The clip.** Per sample, PPO maximises $\min\big(r_t\hat A_t,\ \operatorname{clip}(r_t, 1-\varepsilon_{\text{low}}, 1+\varepsilon_{\text{high}})\,\hat A_t\big)$:

| | $r_t < 1-\varepsilon_{\text{low}}$ | $1-\varepsilon_{\text{low}} \le r_t \le 1+\varepsilon_{\text{high}}$ | $r_t > 1+\varepsilon_{\text{high}}$ |
|---|---|---|---|
| $\hat A_t > 0$ | $r_t\hat A_t$: gradient | $r_t\hat A_t$: gradient | $(1+\varepsilon_{\text{high}})\hat A_t$: **no gradient** |
| $\hat A_t < 0$ | $(1-\varepsilon_{\text{low}})\hat A_t$: **no gradient** | $r_t\hat A_t$: gradient | $r_t\hat A_t$: gradient |

A sample loses its gradient exactly when $\hat A_t > 0$ and $r_t > 1+\varepsilon_{\text{high}}$ (its action has already gained
enough probability for this batch), or $\hat A_t < 0$ and $r_t < 1-\varepsilon_{\text{low}}$ (it has already lost enough). In the
other two corners the min keeps the unclipped, lower value: a step that made the objective worse is never
hidden. On the first minibatch of the first pass every $r_t = 1$, inside the interval, so nothing is clipped
and the policy part of PPO's first step is a REINFORCE step. `core.clipped_surrogate` returns the loss to minimise:

$$L^{\text{CLIP}}(\theta) = -\,\mathbb{E}_t\Big[\min\big(r_t \hat A_t,\ \operatorname{clip}(r_t, 1-\varepsilon_{\text{low}}, 1+\varepsilon_{\text{high}})\,\hat A_t\big)\Big]$$

## The bridge on real numbers

A real batch: the fixed CartPole batch of notebook 3's widgets ($\pi_{\text{old}}$ after a few PPO updates, the
transitions it sampled, GAE advantages whitened as `core.update` whitens them). `surrogate_vs_reinforce` (in
`ladder/viz/cartpole_lab.py`) builds three losses with the core and takes their gradients with respect to the
actor's weights $\theta$:

```python
loss_clip = core.aggregate(core.clipped_surrogate(ratio, adv, clip_eps), mask)  # PPO
loss_is = core.aggregate(core.clipped_surrogate(ratio, adv, math.inf), mask)    # ratio, no clip
loss_pg = core.aggregate(core.pg_loss(logp, adv), mask)                         # REINFORCE
```

first at $\theta = \theta_{\text{old}}$ (step 0), then after each of a few real PPO optimiser steps (`core.update`,
one pass each). *Clip removed* counts the samples whose $\partial L^{\text{CLIP}} / \partial \log\pi_\theta$ is exactly 0
while $\hat A_t \neq 0$.""",
    SETUP,
    """from ladder.viz.cartpole_lab import surrogate_vs_reinforce

bridge = surrogate_vs_reinforce(steps=4, lr=2e-3, clip_eps=0.2)
print(f"{bridge['advantages'].size} transitions, ε = {bridge['clip_eps']}. At θ = θ_old: max |∇L_clip − ∇L_PG| "
      f"= {bridge['max_abs_diff'][0]:.1e}, largest |∇L_PG| entry {bridge['pg_grad_max'][0]:.1e}")
header = ("| step | r from … to | clip removed | cos(∇L_clip, ∇L_PG) | ‖∇L_clip‖ / ‖∇L_PG‖ | cos(∇L_IS, ∇L_PG) "
          "| ‖∇L_IS‖ / ‖∇L_PG‖ |")
rows = [f"| {k} | {r.min():.3f} … {r.max():.3f} | {bridge['removed_share'][k]:.1%} | {bridge['cosine'][k]:.4f} "
        f"| {bridge['norm_ratio'][k]:.4f} | {bridge['cosine_is'][k]:.4f} | {bridge['norm_ratio_is'][k]:.4f} |"
        for k, r in enumerate(bridge["ratios"])]
display(Markdown("\\n".join([header, "|---:|:---:|---:|---:|---:|---:|---:|", *rows])))""",
    r"""md:Step 0 is $\theta = \theta_{\text{old}}$: every ratio is 1 and the two gradients agree, both to float32 rounding (the
printed difference), so the surrogate's first step is REINFORCE's. From step 1 on the ratios spread; from the
first step where *clip removed* is above 0 the rows part:

* the ratio alone barely turns the gradient: the surrogate without its clip against REINFORCE (the last two
  columns) keeps a cosine near 1 for these few steps, though its norm already moves;
* the clip turns it and shrinks it. It removes the samples that $\pi_\theta$ has already moved furthest in the
  direction of their advantage, and those carry more of the gradient than their share of the batch: compare
  *clip removed* with the cosine and the norm ratio.

Reusing REINFORCE's $-\hat A\log\pi_\theta$ on these stale samples would keep pushing every one of them, with nothing
to stop it; that is why REINFORCE takes one step per batch and PPO can take $\mu$.

## GAE

A critic $V(s)$ turns rewards into advantages with a bias–variance knob $\lambda$:

$$\delta_t = r_t + \gamma V(s_{t+1})(1-d_t) - V(s_t), \qquad \hat A_t = \delta_t + \gamma\lambda(1-d_t)\hat A_{t+1}$$

and the critic regresses on $R_t = \hat A_t + V(s_t)$.""",
    """rewards = torch.ones(1, 5)
values = torch.tensor([[3.0, 2.5, 2.0, 1.5, 1.0]])
dones = torch.tensor([[0., 0., 0., 0., 1.]])
for lam in (0.0, 0.8, 1.0):   # λ = 0: one-step TD error; λ = 1: Monte-Carlo return minus V
    adv, ret = core.gae(rewards, values, dones, gamma=0.98, lam=lam)
    print(f"λ={lam}: Â = {adv.numpy().round(3)}")""",
    r"""md:## Train PPO (tiny preset)

`python -m ladder.run cartpole --preset tiny`: `num_envs` × `num_steps` transitions per batch, $\mu$ passes of
`num_minibatches` minibatches each (all printed below), GAE, advantages whitened per minibatch, value loss,
gradient clipping — all inside `core.update`.

`solved` in the summary means that a greedy evaluation (`eval_episodes` episodes, the argmax action at every step)
averaged at least `solve_return` (CartPole-v1 ends an episode at `max_episode_steps`); the run stops there. The
training return in the curves can run above the greedy evaluations for a while, but it need not reach them at the
end (the last of each is printed under the curves), for two reasons: its actions are sampled, as in notebook 1, and
each point is the mean of the episodes that *ended* during that update's `num_envs` × `num_steps` steps. An episode spans
several rollouts and is counted only when it ends, so a long one was played mostly by earlier, weaker policies; an
update in which no episode ended has no training return.""",
    """import gymnasium
from ladder.rungs import cartpole

cfg = cartpole.Config(**cartpole.PRESETS["tiny"], out=str(RUNS / "notebook-2-cartpole"), progress=False)
print({k: getattr(cfg, k) for k in ("num_envs", "num_steps", "mu", "num_minibatches", "eval_episodes", "solve_return")},
      "max_episode_steps:", gymnasium.spec(cfg.env_id).max_episode_steps)
summary = cartpole.train(cfg)
{k: summary[k] for k in ("solved", "env_steps", "eval_return_mean", "wall_s")}""",
    """display(Image(filename=str(RUNS / "notebook-2-cartpole" / "curves.png")))
records = metrics(RUNS / "notebook-2-cartpole")
trained = [r["episode_return"] for r in records if r.get("episode_return") is not None]
greedy = [r["eval_return_mean"] for r in records if r.get("eval_return_mean") is not None]
print(f"last training return {trained[-1]:.1f}, last greedy evaluation {greedy[-1]:.1f}")
last = records[-1]
{k: round(last[k], 4) for k in ("clip_frac", "ratio_min", "ratio_max", "approx_kl_old_k3")}""",
    r"""md:## The clipped objective, on real ratios

Below: the surrogate $\min(r\hat A, \operatorname{clip}(r)\hat A)$ per unit $|\hat A|$, for $\hat A>0$ (left) and
$\hat A<0$ (right), computed by `core.clipped_surrogate`. The dots are the **actual** ratios after step 4 of the
table above (`viz.mu_passes(4)`: the same batch, the same four steps), each on the side of its advantage's sign;
red dots are clipped — their gradient is zero. Move $\varepsilon_{\text{low}}$ and $\varepsilon_{\text{high}}$ and watch
the clip fraction (`core.clip_fractions`) change. DAPO's *clip-higher* sets $\varepsilon_{\text{high}} > \varepsilon_{\text{low}}$
so that unlikely-but-good actions can grow further.""",
    r"""md:**Predict first.** At $\varepsilon_{\text{low}} = \varepsilon_{\text{high}} = 0.2$ the clip fraction is the *clip removed*
share of step 4 above. When $\varepsilon_{\text{high}}$ goes from 0.2 to 0.28 (DAPO's clip-higher), what happens to the
clip fraction on the $\hat A > 0$ side (`high`), and what happens on the $\hat A < 0$ side (`low`)?""",
    """view = viz.clipped_objective_view()
view""",
    """before = {k: view.data[k] for k in ("clip_frac", "clip_frac_low", "clip_frac_high")}
view.controls["eps_high"].value = 0.28     # DAPO's clip-higher: the widget above redraws
after = {k: view.data[k] for k in ("clip_frac", "clip_frac_low", "clip_frac_high")}
print(f"ε_high = 0.2: clip fraction {before['clip_frac']:.4f}; step 4's clip removed {bridge['removed_share'][4]:.4f}")
for k in ("clip_frac_low", "clip_frac_high"):
    print(f"{k}: {before[k]:.4f} at ε_high = 0.2 → {after[k]:.4f} at ε_high = 0.28")""",
    r"""md:<details><summary>Answer</summary>

The `high` fraction can only fall: a positive-advantage sample is clipped only above $1 + \varepsilon_{\text{high}}$, and
no more ratios lie above 1.28 than above 1.2 (it stays put if none lies in between; the printout says which). The `low` fraction does not move: the $\hat A < 0$ side is clipped below
$1 - \varepsilon_{\text{low}}$, which $\varepsilon_{\text{high}}$ does not touch. Drag $\varepsilon_{\text{high}}$ in the widget
to see the red dots of the left panel turn blue.
</details>

**Exercises:** `ex03_gae.py`, `ex04_whiten.py`, `ex05_clipped_surrogate.py`, `ex06_value_loss.py`. Once they
pass, `python -m ladder.run cartpole --use-exercises` trains with your own `gae`, `whiten`,
`clipped_surrogate` and `value_loss`.""",
    SELF_CHECK,
    """quiz = viz.SelfCheck(
    cosine_step_4=("After 4 PPO steps, what is cos(∇L_clip, ∇L_PG)?", bridge["cosine"][4]),
    removed_step_4=("After 4 PPO steps, what share of the samples had its gradient removed by the clip "
                    "(a fraction, e.g. 0.25)?", bridge["removed_share"][4]),
    td_error_0=("In the GAE example with λ = 0, what is Â_0?", core.gae(rewards, values, dones, 0.98, 0.0)[0][0, 0]),
    clip_low_028=("At ε_high = 0.28, what is clip_frac_low?", after["clip_frac_low"]),
)
quiz.ask()""",
    "quiz.check(cosine_step_4=None, removed_step_4=None, td_error_0=None, clip_low_028=None)",
]
