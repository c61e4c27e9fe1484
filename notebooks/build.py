# ruff: noqa: E501  (LaTeX lines in the notebook text are as long as their equations)
"""Write the course notebooks (stripped: no outputs) from the cells below.

    python notebooks/build.py

Edit the text here, not in the .ipynb files, so the notebooks stay reviewable as plain Python.
Cells starting with ``md:`` are Markdown; everything else is code.
"""

from __future__ import annotations

from pathlib import Path

import nbformat

HERE = Path(__file__).resolve().parent

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
| $\pi_{\text{old}}$ | `old_logp` | the policy that **sampled** the batch; equals $\pi_\theta$ until the first update |
| $\pi_{\text{ref}}$ | `ref_logp` | the frozen anchor of the KL penalty (for LLMs: the model before RL) |

$\mu$ (`mu`) is how many optimisation passes reuse one batch. After the first pass
$\pi_\theta \neq \pi_{\text{old}}$, and the ratio $r = \pi_\theta / \pi_{\text{old}}$ starts to matter.""",
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
    r"""md:Try `baseline="none"` and compare the curves: same expectation, much more noise.
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
advantages whitened per minibatch, value loss, gradient clipping — all inside `core.update`.""",
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

The batch is sampled by the current policy, so on the first pass $\pi_\theta = \pi_{\text{old}}$ and every
ratio is exactly 1 (with a gradient). Each further pass moves $\pi_\theta$; the samples stay those of
$\pi_{\text{old}}$. Two things go wrong if we ignore that:

* the ratios spread and the clip switches off more and more of the gradient;
* a KL term estimated as the plain average of $k_3$ over the batch assumes $a \sim \pi_\theta$ — it now
  estimates the wrong thing. Importance sampling fixes it:

$$\mathrm{KL}(\pi_\theta\,\|\,\pi_{\text{ref}}) = \mathbb{E}_{a\sim\pi_{\text{old}}}\Big[\frac{\pi_\theta(a)}{\pi_{\text{old}}(a)}\,k_3(a)\Big]$$

(`core.kl_estimate(logp, ref_logp, "k3", old_logp)`; GRPO's `--kl-correction on`).

## The widget: $\mu$ real passes on one fixed batch

$\pi_{\text{ref}}$ is a freshly initialised CartPole MLP, $\pi_{\text{old}}$ the same network after a few PPO
updates; it samples one fixed batch of 1024 transitions. A copy of it, $\pi_\theta$, gets $\mu$ passes of
`core.update`. CartPole has two actions, so every KL here is also computed **exactly** at the batch's
states: $\sum_a \pi_\theta(a\mid s)\log\frac{\pi_\theta(a\mid s)}{\pi_x(a\mid s)}$.""",
    """view = viz.mu_view(mu=4, lr=2e-3, clip_eps=0.2)
view""",
    """for mu in (1, 2, 4, 8):
    run = viz.mu_passes(mu)
    print(f"μ={mu}: ratio std {run['ratios'][-1].std():.3f}  clip {run['clip_frac_after'][-1]:.3f}  "
          f"KL(θ‖ref) exact {run['kl_ref_exact'][-1]:.4f}  biased {run['kl_ref_biased'][-1]:.4f}  "
          f"corrected {run['kl_ref_corrected'][-1]:.4f}")""",
    r"""md:With $\mu = 1$ all three agree up to sampling noise. As $\mu$ grows the plain average drifts away
from the exact value while the corrected one tracks it. Try a larger learning rate, or a smaller $\varepsilon$.
**Exercises:** `ex07_kl_estimators.py` and `ex08_kl_corrected.py`; with `--use-exercises` your corrected
`kl_estimate` runs in place of the core's.""",
]

NOTEBOOKS["4_ppo_rlhf_sentiment"] = [
    r"""md:# 4 · PPO for RLHF: GPT-2 learns to write positive reviews

Now an action is a token and a trajectory a completion. A reward model scores the whole completion once;
the KL to $\pi_{\text{ref}}$ (the model before RL) goes **into the per-token reward**:

$$r_t = -\beta\,\mathrm{KL}_t + [t = T]\cdot \text{score}, \qquad \mathrm{KL}_t = \log\pi_{\text{old}}(a_t) - \log\pi_{\text{ref}}(a_t)$$

(`core.kl_penalized_rewards`). A **value head** on the same transformer predicts $V(s_t)$ at every token,
**GAE over tokens** turns the rewards into advantages, and $\mu$ passes of the clipped surrogate follow —
`core.update`, exactly as on CartPole.

## Adaptive $\beta$ (Ziegler et al. 2019)

$$e = \operatorname{clip}\Big(\frac{\mathrm{KL}}{\mathrm{KL}_{\text{target}}} - 1, -0.2, 0.2\Big), \qquad \beta \leftarrow \beta\,(1 + e\, n/H)$$

too much KL raises $\beta$, too little lowers it (`core.AdaptiveKLController`).""",
    SETUP,
    """scores = torch.tensor([1.0, -0.5])
logp = torch.tensor([[-1.0, -2.0, -0.5], [-1.5, -0.3, 0.0]])
ref_logp = torch.tensor([[-1.2, -2.5, -0.4], [-1.5, -0.9, 0.0]])
mask = torch.tensor([[1., 1., 1.], [1., 1., 0.]])
rewards, kl = core.kl_penalized_rewards(scores, logp, ref_logp, mask, kl_coef=0.2)
rewards""",
    r"""md:**Exercise:** `exercises/ex09_kl_rewards.py` builds these rewards; once it passes,
`python -m ladder.run ppo-sentiment --preset tiny --use-exercises` trains with your version.""",
    r"""md:## Run it

`USE_GPU = False` runs the **tiny preset** for a few updates: a tiny GPT-2 that ladder builds and caches,
bundled review openings, VADER as the reward model — offline, on a CPU. On a GPU set `USE_GPU = True`
for the real thing (`lvwerra/gpt2-imdb`, `lvwerra/distilbert-imdb`, IMDB), the same as

```bash
python -m ladder.run ppo-sentiment --device cuda
```""",
    """from ladder.rungs import ppo_sentiment

USE_GPU = False
if USE_GPU:
    cfg = ppo_sentiment.Config(device="cuda", out=str(RUNS / "sentiment"))
else:
    cfg = ppo_sentiment.Config(**{**ppo_sentiment.PRESETS["tiny"], "num_updates": 4, "batch_size": 16,
                                  "num_eval_prompts": 4, "sample_every": 0}, out=str(RUNS / "sentiment"),
                               progress=False)
summary = ppo_sentiment.train(cfg)
{k: summary[k] for k in ("updates", "score_first", "score_last", "kl_final", "kl_coef_final")}""",
    """display(Markdown((RUNS / "sentiment" / "samples.md").read_text()))""",
    """[{k: round(r[k], 4) for k in ("score_mean", "kl_ref", "kl_coef", "clip_frac")} for r in metrics(RUNS / "sentiment")]""",
    """display(Image(filename=str(RUNS / "sentiment" / "curves.png")))""",
    r"""md:## Reward vs KL: what $\beta$ buys

Every RLHF run walks a path in the (KL, score) plane: the reward model's score goes up as the policy moves
away from $\pi_{\text{ref}}$. $\beta$ is the price of that distance. PPO maximises, per completion,

$$\text{score} - \beta \sum_t \mathrm{KL}_t ,$$

so a large $\beta$ stops the walk early (close to $\pi_{\text{ref}}$, a modest score) and $\beta = 0$ lets it run as
far as the reward model pays — which is where **reward hacking** lives: the reward model is only a proxy,
and nothing keeps the text fluent once it has found what the proxy likes.

The widget below trains the tiny preset once for each $\beta$, **fixed** (`adaptive_kl=False`, so each run pays the
same price all along), 30 updates of 32 completions each — about ten seconds per run, once; the runs are
cached. Pick a $\beta$ to highlight it and to see its completions before and after training (same prompts, same
sampling seed); slide *updates* to read the curves part of the way. Curves are means over the last 5 updates.""",
    """view = viz.kl_tradeoff_view(betas=(0.0, 0.2, 1.0), steps=30)
view""",
    """for beta, run in view.data["runs"].items():
    print(f"β = {beta:<4}: score {run['score_end']:+.2f}   KL {run['kl_end']:6.2f}   score − β·KL {run['reward_end']:+.2f}")""",
    """view.controls["beta"].value = 0.0     # the β = 0 run: its completions now sit under the plot
[(s["after"], s["after_score"]) for s in view.data["samples"]]""",
    r"""md:With $\beta = 0$ the score is near its maximum, and the text is no longer a review: the policy found what
VADER likes and repeats it. With $\beta = 1$ the policy hardly moves. In between, the score rises while the KL stays modest — the
trade-off PPO-RLHF is tuned for. The adaptive controller (the default, `--kl-target`) picks $\beta$ for you by
steering the KL towards a target instead.""",
]

NOTEBOOKS["5_grpo_qlora"] = [
    r"""md:# 5 · GRPO with QLoRA

## Dropping the critic

A value head as big as the policy is expensive. GRPO (DeepSeekMath) samples $G$ completions per
prompt and uses the group as the baseline:

$$\hat A_i = \frac{r_i - \operatorname{mean}(r_1,\dots,r_G)}{\operatorname{std}(r_1,\dots,r_G) + \epsilon}$$

every token of completion $i$ shares $\hat A_i$ (`core.group_relative`). `--scale-rewards` picks the
denominator: the group's std (`group`), the batch's (`batch`), or none at all (`none`, Dr. GRPO, which
argues the std over-weights easy and impossible prompts). A group whose rewards are all equal has no
signal: $\hat A = 0$.

## Rule rewards

No reward model: a completion earns 1 for the right final answer and a bonus for the expected format
(`ladder.tasks.arithmetic`).""",
    SETUP,
    """view = viz.group_advantages_view("1, 0, 0, 0,  1, 1, 1, 0,  1, 1, 1, 1", group_size=4)
view""",
    r"""md:## KL in the loss, and how the loss is averaged

Without a critic there is no per-token reward to put the KL into, so it goes into the loss,
estimated with $k_3$ and importance-corrected when $\mu > 1$ (notebook 3):

$$L = \operatorname{agg}\Big(-\min(r_t\hat A_t, \operatorname{clip}(r_t)\hat A_t) + \beta\,\tfrac{\pi_\theta}{\pi_{\text{old}}}k_3\Big)$$

`--loss-type` chooses $\operatorname{agg}$ (`core.aggregate`): `grpo` averages tokens within each sequence,
then sequences; `bnpo` averages all tokens; `dr_grpo` divides by the constant $B\cdot T_{\max}$;
`dapo` by the batch's token count. Long and short completions weigh differently:""",
    """per_token = torch.tensor([[1.0, 1.0, 1.0, 1.0], [3.0, 0.0, 0.0, 0.0]])
mask = torch.tensor([[1., 1., 1., 1.], [1., 0., 0., 0.]])   # a long and a short completion
{mode: round(core.aggregate(per_token, mask, mode, num_tokens=5).item(), 3)
 for mode in ("seq_mean_token_mean", "token_mean", "dr_grpo", "dapo")}""",
    r"""md:## Memory: 4-bit + LoRA + the disabled adapter

`--qlora` loads the base model in 4-bit NF4 (double quantisation), trains only small LoRA adapters, and
gets $\pi_{\text{ref}}$ for free: the reference log-probs are the same model with the adapter **disabled**
— no second copy of the weights. Gradient checkpointing trades compute for activation memory.

## Run it: a few steps of the tiny preset

The tiny preset (a tiny instruct model ladder builds and caches on first use — about a minute —
and synthetic two-digit addition) runs on a CPU, 4-bit included. Two steps here; the reward is the
correctness reward plus the format reward, so a right, well-formatted answer earns 2.
A group whose $G$ rewards are all equal has $\hat A = 0$ and, with $\pi_\theta = \pi_{\text{ref}}$ at the start, the
$k_3$ term has zero gradient too: nothing moves. `frac_reward_zero_std` counts those groups; early in
training (or on problems that are too hard) it is often 1.
On a GPU, the real run is

```bash
python -m ladder.run grpo --qlora --device cuda        # Qwen2.5-0.5B-Instruct on GSM8K
```""",
    """from ladder.rungs import grpo

USE_GPU = False
short = {"steps": 2, "eval_size": 8, "eval_every": 0, "print_samples": 0}
base = {"device": "cuda"} if USE_GPU else {**grpo.PRESETS["tiny"], **short}
summary = grpo.train(grpo.Config(**base, qlora=True, out=str(RUNS / "grpo"), progress=False))
for r in metrics(RUNS / "grpo"):
    print(f"step {r['step']}: " + "  ".join(f"{k} {r[k]:.4f}" for k in ("reward", "frac_reward_zero_std", "clip_frac", "kl_ref")))""",
    r"""md:The accuracy of two steps means nothing; the full tiny run is `python -m ladder.run grpo --qlora --preset tiny`
(and `python -m ladder.run eval --preset tiny --adapter runs/grpo-seed0/adapter` evaluates the adapter).

## What $\mu$ does on the LM

Notebook 3's experiment, on the language model. The three policies of the tiny QLoRA preset:

* $\pi_{\text{ref}}$ — the 4-bit base with the LoRA adapter **disabled**;
* $\pi_{\text{old}}$ — the same model after 8 ordinary GRPO updates (`grpo.grpo_step`); it samples one fixed batch
  of 8 prompts × 8 completions (about 1,700 completion tokens);
* $\pi_\theta$ — a copy of $\pi_{\text{old}}$'s adapter, given $\mu$ passes of `core.update` with the GRPO loss
  (clipped surrogate $+\ \beta\,\frac{\pi_\theta}{\pi_{\text{old}}} k_3$, $\beta = 0.04$).

The tiny model's vocabulary has a few hundred tokens, so every KL is also computed **exactly** at each visited
position $s_t$: $\sum_v \pi_\theta(v\mid s_t)\log\frac{\pi_\theta(v\mid s_t)}{\pi_x(v\mid s_t)}$. The GRPO loss instead sees one
sampled token $c_t \sim \pi_{\text{old}}$ per position. Over fresh samples at the same positions, the corrected estimate
averages to the exact KL:

$$\mathbb{E}_{c\sim\pi_{\text{old}}}\Big[\frac{\pi_\theta(c)}{\pi_{\text{old}}(c)}k_3(c)\Big] = \sum_v \pi_\theta(v)\,k_3(v) = \mathrm{KL}(\pi_\theta\,\|\,\pi_{\text{ref}}),
\qquad \mathbb{E}_{c\sim\pi_{\text{old}}}[k_3(c)] = \sum_v \pi_{\text{old}}(v)\,k_3(v) \neq \mathrm{KL}(\pi_\theta\,\|\,\pi_{\text{ref}})$$

and the shaded bands show mean ± std of each estimate over such fresh samples. Building $\pi_{\text{old}}$ and the batch
takes about 15 seconds, once; each setting of the sliders then costs well under a second per pass (CPU).""",
    """view = viz.lm_mu_view(mu=4, lr=3e-4, clip_eps=0.2)
view""",
    """for mu in (1, 2, 4, 8):
    run = viz.lm_mu_passes(mu, lr=3e-4)
    print(f"μ={mu}: ratio std {run['ratios'][-1].std():.3f}  clip {run['clip_frac_after'][-1]:.3f}  "
          f"KL(θ‖old) {run['kl_old_exact'][-1]:.4f}  KL(θ‖ref) exact {run['kl_ref_exact'][-1]:.4f}  "
          f"biased {run['kl_ref_biased'][-1]:.4f}  corrected {run['kl_ref_corrected'][-1]:.4f}")""",
    r"""md:As on CartPole, each pass spreads the ratios, the clip switches off more tokens, and KL$(\pi_\theta\,\|\,\pi_{\text{old}})$
grows. Most tokens of a worked sum are nearly certain, so most ratios stay at 1 and the action is in a few
hundred tokens (the histogram is on a log scale) — and in half the groups all $G$ answers scored the same,
so their $\hat A = 0$ and only the KL term moves them. The plain $k_3$ average drifts away from the exact KL as
$\mu$ grows; the corrected one's band is centred on it, but one batch's value is noisy — a few positions, and
tokens $\pi_{\text{old}}$ seldom samples, carry much of the KL. Try the preset's learning rate `1e-3`: Adam's first steps are large, the plain
estimate overshoots several-fold, and the corrected band widens.

**Exercises:** `ex10_group_relative.py` and `ex11_aggregate.py`; then
`python -m ladder.run grpo --preset tiny --use-exercises` trains with your `group_relative` and `aggregate`.""",
]


def build() -> list[Path]:
    written = []
    for name, cells in NOTEBOOKS.items():
        nb = nbformat.v4.new_notebook()
        nb.metadata = {"kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"},
                       "language_info": {"name": "python"}}
        nb.cells = [nbformat.v4.new_markdown_cell(c[3:].lstrip("\n")) if c.startswith("md:")
                    else nbformat.v4.new_code_cell(c) for c in cells]
        for cell in nb.cells:
            cell.pop("id", None)
        nb.nbformat, nb.nbformat_minor = 4, 4
        path = HERE / f"{name}.ipynb"
        nbformat.write(nb, path)
        written.append(path)
    return written


if __name__ == "__main__":
    for path in build():
        print(path)
