# ruff: noqa: E501  (LaTeX lines in the notebook text are as long as their equations)
"""The text and code of notebook 2: PPO on CartPole (``text_toy.py`` files it under its name).

Cells starting with ``md:`` are Markdown; everything else is code. ``notebooks/build.py`` writes them.
"""

from text_common import SELF_CHECK, SETUP

CELLS: list[str] = [
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
transitions it sampled, GAE advantages whitened as PPO's update whitens them). Three losses, and their gradients
with respect to the actor's weights $\theta$: PPO's clipped surrogate $L^{\text{CLIP}}$, the surrogate with its clip
removed $L^{\text{IS}}$ (the ratio alone), and REINFORCE's $L^{\text{PG}}$ — first at $\theta = \theta_{\text{old}}$
(step 0), then after each of a few real PPO optimiser steps (one pass each). *Clip removed* counts the samples whose
$\partial L^{\text{CLIP}} / \partial \log\pi_\theta$ is exactly 0 while $\hat A_t \neq 0$.

<details><summary>Aside — the code behind the table</summary>

`surrogate_vs_reinforce` (in `ladder/viz/cartpole_lab.py`) builds the three losses with the core, and takes its
optimiser steps with `core.update`:

```python
loss_clip = core.aggregate(core.clipped_surrogate(ratio, adv, clip_eps), mask)  # PPO
loss_is = core.aggregate(core.clipped_surrogate(ratio, adv, math.inf), mask)    # ratio, no clip
loss_pg = core.aggregate(core.pg_loss(logp, adv), mask)                         # REINFORCE
```
</details>""",
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
$\hat A<0$ (right). The dots are the **actual** ratios after step 4 of the table above (the same batch, the same
four steps), each on the side of its advantage's sign; red dots are clipped — their gradient is zero. Move
$\varepsilon_{\text{low}}$ and $\varepsilon_{\text{high}}$ and watch the clip fraction change (the widget computes the
surrogate with `core.clipped_surrogate` and the fractions with `core.clip_fractions`, on `viz.mu_passes(4)`). DAPO's *clip-higher* sets $\varepsilon_{\text{high}} > \varepsilon_{\text{low}}$
so that unlikely-but-good actions can grow further.""",
    r"""md:**Predict first.** At $\varepsilon_{\text{low}} = \varepsilon_{\text{high}} = 0.2$ the clip fraction is the *clip removed*
share of step 4 above. When $\varepsilon_{\text{high}}$ goes from 0.2 to 0.28 (DAPO's clip-higher), what happens to the
clip fraction on the $\hat A > 0$ side (`high`), and what happens on the $\hat A < 0$ side (`low`)?""",
    """view = viz.clipped_objective_view()
view""",
    """before = {k: view.data[k] for k in ("clip_frac", "clip_frac_low", "clip_frac_high")}
view.controls["eps_high"].value = 0.28     # DAPO's clip-higher: the widget above redraws with a live kernel
# (a static copy of this notebook keeps its first drawing)
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
    """p_value = viz.Predict("In the GAE example, raise V(s_0) from 3 to 4. By how much will Â_0 change at λ = 0.8?")
p_value.answer = None
p_eps = viz.Predict("Take step 4's ratios and clip at ε = 0.1 instead of 0.2: will the share of samples whose gradient "
                    "the clip removes be larger, smaller or the same?", choices=("larger", "smaller", "the same"))
p_eps.answer = None
why_min = viz.Reason("A sample with Â = −1 whose ratio has grown to r = 1.5 (ε = 0.2): does the clip take its "
                     "gradient, and why?",
                     "no: the min compares r·Â = −1.5 with clip(r)·Â = −1.2 and keeps −1.5, the unclipped branch, "
                     "which still depends on θ",
                     "yes: r > 1 + ε, so r is clipped to 1.2 and its gradient is 0",
                     "no: the clip acts only on samples with Â > 0",
                     "yes: every sample outside [1 − ε, 1 + ε] loses its gradient")
why_min.answer = None
for question in (p_value, p_eps, why_min):
    question.ask()
    print()""",
    """higher = values.clone()
higher[0, 0] = 4.0
A_0 = {name: core.gae(rewards, v, dones, gamma=0.98, lam=0.8)[0][0, 0] for name, v in (("V=3", values), ("V=4", higher))}
p_value.check(A_0["V=4"] - A_0["V=3"], why="V(s_0) enters only δ_0, with weight −1, whatever λ is")
adv, ratio_4 = bridge["advantages"], bridge["ratios"][4]
removed = {eps: float((((adv > 0) & (ratio_4 > 1 + eps)) | ((adv < 0) & (ratio_4 < 1 - eps))).mean()) for eps in (0.2, 0.1)}
p_eps.check("larger" if removed[0.1] > removed[0.2] else "the same" if removed[0.1] == removed[0.2] else "smaller",
            why=f"{removed[0.2]:.1%} at ε = 0.2, {removed[0.1]:.1%} at ε = 0.1: a narrower band leaves more ratios outside")
log_r = torch.tensor(1.5).log().requires_grad_()                  # the sample's log-ratio, r = 1.5
core.clipped_surrogate(log_r.exp(), torch.tensor(-1.0), 0.2).backward()
why_min.check("a", why=f"autograd gives ∂L/∂log r = {log_r.grad.item():.2f} = −r·Â, the unclipped branch's "
                       "gradient: a step that made a bad action likelier is never hidden")
viz.tally(p_value, p_eps, why_min)""",
]
