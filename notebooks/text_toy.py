# ruff: noqa: E501  (LaTeX lines in the notebook text are as long as their equations)
"""The text and code of notebooks 0–3: the ladder, REINFORCE, PPO on CartPole, three policies and the KL.

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

NOTEBOOKS: dict[str, list[str]] = {}

NOTEBOOKS["0_the_ladder"] = [
    r"""md:# 0 · The ladder

This course climbs from a pole balanced on a cart to a language model that learns arithmetic, and
**every rung runs the same code**: `ladder.core`. What changes from rung to rung is only which
tensors go in.

## What a policy gradient is

A policy $\pi_\theta(a \mid s)$ picks actions; a trajectory $\tau = (s_0, a_0, r_0, s_1, \dots)$
earns a return $R(\tau)$. We want to climb $J(\theta) = \mathbb{E}_{\tau \sim \pi_\theta}[R(\tau)]$.
The log-derivative trick turns the gradient of an expectation into an expectation we can sample:

$$\nabla_\theta J(\theta) = \mathbb{E}_{\tau \sim \pi_\theta}\Big[\sum_t \nabla_\theta \log \pi_\theta(a_t \mid s_t)\,\hat A_t\Big]$$

where $\hat A_t$ (the *advantage*) says how much better $a_t$ was than expected. REINFORCE, PPO and
GRPO differ in (1) how they estimate $\hat A_t$ and (2) where the KL to a reference policy goes.

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
print("\\n".join(help_text.stdout.splitlines()[:30]))""",
]

NOTEBOOKS["1_reinforce_cartpole"] = [
    r"""md:# 1 · REINFORCE on CartPole

## The log-derivative trick

$\nabla_\theta \pi_\theta = \pi_\theta \nabla_\theta \log \pi_\theta$, so

$$\nabla_\theta J = \mathbb{E}_{\tau\sim\pi_\theta}\Big[\sum_t \nabla_\theta \log\pi_\theta(a_t\mid s_t)\, G_t\Big],
\qquad L(\theta) = -\frac{1}{N}\sum_{t} \hat A_t \log \pi_\theta(a_t \mid s_t)$$

`core.pg_loss` is exactly that $L$ per action; its gradient is the policy gradient.

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
The batch is 8 complete episodes, padded to `[8, T_max]` with a mask; `core.update` runs one pass with
`objective="reinforce"` — REINFORCE cannot reuse a batch, because its gradient is only right for
samples from the current $\pi_\theta$.""",
    """from ladder.rungs import reinforce

cfg = reinforce.Config(total_steps=8_000, eval_every=4_000, eval_episodes=5, out=str(RUNS / "reinforce"),
                       progress=False)
summary = reinforce.train(cfg)
{k: summary[k] for k in ("env_steps", "eval_return_mean", "wall_s")}""",
    """display(Image(filename=str(RUNS / "reinforce" / "curves.png")))
[(r["step"], r["episode_return"]) for r in metrics(RUNS / "reinforce")][-5:]""",
    r"""md:The two returns in the plot measure different episodes. `eval_return_mean` in the summary comes from separate
**greedy** evaluation episodes: the argmax action at every step. The training return is the mean over the 8
episodes of each batch, played with **sampled** actions: a stochastic policy now and then pushes the wrong way and
drops the pole sooner, so the training curve sits well below the greedy one.

Try `baseline="none"` and compare the curves: much more noise. Whitening subtracts the batch mean (a baseline:
the expected gradient stays the same) and divides by the batch's std (which rescales the gradient, as a learning
rate would); exercise 4 has the details.
**Exercises:** `exercises/ex01_discounted_returns.py` and `ex02_reinforce_loss.py` (grade them with
`pytest exercises/`). Once they pass, `python -m ladder.run reinforce --use-exercises` trains with your own
`discounted_returns` and `pg_loss`.""",
]

NOTEBOOKS["2_ppo_cartpole"] = [
    r"""md:# 2 · PPO on CartPole

REINFORCE throws each batch away after one step. PPO reuses it for $\mu$ passes — which means the
batch was sampled by $\pi_{\text{old}}$ while we optimise $\pi_\theta$. The importance ratio corrects for
that, and a clip keeps $\pi_\theta$ from running away from the data:

$$r_t(\theta) = \frac{\pi_\theta(a_t\mid s_t)}{\pi_{\text{old}}(a_t\mid s_t)}, \qquad
L^{\text{CLIP}} = -\,\mathbb{E}_t\Big[\min\big(r_t \hat A_t,\ \operatorname{clip}(r_t, 1-\varepsilon_{\text{low}}, 1+\varepsilon_{\text{high}})\,\hat A_t\big)\Big]$$

The gradient vanishes exactly where the clipped branch is the smaller: $r > 1+\varepsilon_{\text{high}}$ with
$\hat A > 0$ (already made more likely enough) and $r < 1-\varepsilon_{\text{low}}$ with $\hat A < 0$.

## GAE

A critic $V(s)$ turns rewards into advantages with a bias–variance knob $\lambda$:

$$\delta_t = r_t + \gamma V(s_{t+1})(1-d_t) - V(s_t), \qquad \hat A_t = \delta_t + \gamma\lambda(1-d_t)\hat A_{t+1}$$

and the critic regresses on $R_t = \hat A_t + V(s_t)$.""",
    SETUP,
    """rewards = torch.ones(1, 5)
values = torch.tensor([[3.0, 2.5, 2.0, 1.5, 1.0]])
dones = torch.tensor([[0., 0., 0., 0., 1.]])
for lam in (0.0, 0.8, 1.0):   # λ = 0: one-step TD error; λ = 1: Monte-Carlo return minus V
    adv, ret = core.gae(rewards, values, dones, gamma=0.98, lam=lam)
    print(f"λ={lam}: Â = {adv.numpy().round(3)}")""",
    r"""md:## Train PPO (tiny preset)

`python -m ladder.run cartpole --preset tiny`: 8 envs × 32 steps per batch, $\mu = 15$ passes, GAE,
advantages whitened per minibatch, value loss, gradient clipping — all inside `core.update`.

`solved` in the summary means that a greedy evaluation (20 episodes, the argmax action at every step) averaged at
least 475 of CartPole's 500; the run stops there. The training return in the curves stays lower, for two reasons:
its actions are sampled, as in notebook 1, and each point is the mean of the episodes that *ended* during that
update's 8 × 32 steps. An episode spans several rollouts and is counted only when it ends, so a long one was played
mostly by earlier, weaker policies; an update in which no episode ended has no training return.""",
    """from ladder.rungs import cartpole

cfg = cartpole.Config(**cartpole.PRESETS["tiny"], out=str(RUNS / "cartpole"), progress=False)
summary = cartpole.train(cfg)
{k: summary[k] for k in ("solved", "env_steps", "eval_return_mean", "wall_s")}""",
    """display(Image(filename=str(RUNS / "cartpole" / "curves.png")))
last = metrics(RUNS / "cartpole")[-1]
{k: round(last[k], 4) for k in ("clip_frac", "ratio_min", "ratio_max", "approx_kl_old_k3")}""",
    r"""md:## The clipped objective, on real ratios

Below: the surrogate $\min(r\hat A, \operatorname{clip}(r)\hat A)$ per unit $|\hat A|$, for $\hat A>0$ (left) and
$\hat A<0$ (right), computed by `core.clipped_surrogate`. The dots are the **actual** ratios of a real
4-pass PPO update on a CartPole batch (`viz.mu_passes`), each on the side of its advantage's sign; red dots
are clipped — their gradient is zero. Move $\varepsilon_{\text{low}}$ and $\varepsilon_{\text{high}}$ and watch
the clip fraction (`core.clip_fractions`) change. DAPO's *clip-higher* sets $\varepsilon_{\text{high}} > \varepsilon_{\text{low}}$
so that unlikely-but-good actions can grow further.""",
    """view = viz.clipped_objective_view()
view""",
    """view.controls["eps_high"].value = 0.28     # DAPO's clip-higher
view.data["clip_frac_low"], view.data["clip_frac_high"]""",
    r"""md:**Exercises:** `ex03_gae.py`, `ex04_whiten.py`, `ex05_clipped_surrogate.py`, `ex06_value_loss.py`. Once they
pass, `python -m ladder.run cartpole --use-exercises` trains with your own `gae`, `whiten`,
`clipped_surrogate` and `value_loss`.""",
]

NOTEBOOKS["3_three_policies_and_kl"] = [
    r"""md:# 3 · Three policies and the KL

## Estimating a KL from samples

With $a \sim \pi_\theta$ and $\ell = \log \pi_{\text{ref}}(a) - \log \pi_\theta(a)$ (Schulman, *Approximating KL*):

$$k_1 = -\ell, \qquad k_2 = \tfrac12 \ell^2, \qquad k_3 = (e^{\ell} - 1) - \ell$$

$k_1$ is unbiased but noisy and can be negative; $k_2$ is low-variance but biased; $k_3$ is unbiased,
non-negative and low-variance near $\pi_\theta \approx \pi_{\text{ref}}$ — GRPO's choice. All three are
`core.kl_estimate`. The widget computes their bias and spread against the exact
$\mathrm{KL}(p\,\|\,q) = \sum_a p(a)\log\frac{p(a)}{q(a)}$ on a 5-action categorical.""",
    SETUP,
    """view = viz.kl_estimators_view(distance=1.0, num_samples=16)
view""",
    """for d in (0.25, 1.0, 2.5):
    s = viz.kl_estimator_stats(d)
    print(f"distance {d}: exact {s['exact']:.3f} | " + " | ".join(
        f"{k} bias {s[k]['bias']:+.3f} std {s[k]['std']:.3f}" for k in ("k1", "k2", "k3")))""",
    r"""md:## Why $\pi_{\text{old}} = \pi_\theta$ at sampling, and what $\mu$ does

The batch is sampled by the current policy, so $\pi_\theta = \pi_{\text{old}}$ until the first optimiser step: on the
first minibatch of the first pass every ratio is exactly 1 (with a gradient). Each optimiser step moves $\pi_\theta$;
the samples stay those of $\pi_{\text{old}}$. With $M$ minibatches per pass the second minibatch of the first pass
already sees $r \neq 1$ (`--algo gspo` sets $M = 4$); here $M = 1$, so each pass is one optimiser step.
Two things go wrong if we ignore that:

* the ratios spread and the clip switches off more and more of the gradient;
* a KL term estimated as the plain average of $k_3$ over the batch assumes $a \sim \pi_\theta$ — it now
  estimates the wrong thing. Importance sampling fixes it:

$$\mathrm{KL}(\pi_\theta\,\|\,\pi_{\text{ref}}) = \mathbb{E}_{a\sim\pi_{\text{old}}}\Big[\frac{\pi_\theta(a)}{\pi_{\text{old}}(a)}\,k_3(a)\Big]$$

(`core.kl_estimate(logp, ref_logp, "k3", old_logp)`; GRPO's `--kl-correction on`).

## The widget: $\mu$ real passes on one fixed batch

$\pi_{\text{ref}}$ is a freshly initialised CartPole MLP, $\pi_{\text{old}}$ the same network after a few PPO
updates; it samples one fixed batch of 1024 transitions. A copy of it, $\pi_\theta$, gets $\mu$ passes of
`core.update` (one minibatch per pass: $\mu$ optimiser steps). CartPole has two actions, so every KL here is
also computed **exactly** at the batch's states: $\sum_a \pi_\theta(a\mid s)\log\frac{\pi_\theta(a\mid s)}{\pi_x(a\mid s)}$.""",
    """view = viz.mu_view(mu=4, lr=2e-3, clip_eps=0.2)
view""",
    """for mu in (1, 2, 4, 8):
    run = viz.mu_passes(mu)
    print(f"after μ={mu} pass(es): ratio std {run['ratios'][-1].std():.3f}  clip {run['clip_frac_after'][-1]:.3f}  "
          f"KL(θ‖ref) exact {run['kl_ref_exact'][-1]:.4f}  biased {run['kl_ref_biased'][-1]:.4f}  "
          f"corrected {run['kl_ref_corrected'][-1]:.4f}")""",
    r"""md:Each line is read **after** its run's passes, i.e. after its $\mu$ optimiser steps: during the single pass of
$\mu = 1$ every ratio was 1, but after its step they have spread (std above 0) — the ratios the next pass would see.
With $\mu = 1$ all three KLs agree up to sampling noise. As $\mu$ grows the plain average drifts away
from the exact value while the corrected one tracks it. Try a larger learning rate, or a smaller $\varepsilon$.
**Exercises:** `ex07_kl_estimators.py` and `ex08_kl_corrected.py`; with `--use-exercises` your corrected
`kl_estimate` runs in place of the core's.""",
]
