# ruff: noqa: E501  (LaTeX lines in the notebook text are as long as their equations)
"""The text and code of notebook 2: PPO on CartPole (``text_toy.py`` files it under its name).

Cells starting with ``md:`` are Markdown; everything else is code. ``notebooks/build.py`` writes them.
"""

from text_common import SELF_CHECK, SETUP

WHY_MIN = """why_min = viz.Reason("A sample with Â = −1 whose ratio has grown to ρ = 1.5 (ε = 0.2): does the clip remove its "
                     "gradient (set it to 0), and why?",
                     "yes: ρ = 1.5 lies outside [1 − ε, 1 + ε], so the objective uses the clipped branch "
                     "clip(ρ)·Â, a constant in θ, and the sample's gradient is 0",
                     "yes: with Â < 0 the clipped branch is the one the min keeps here, and a constant branch has "
                     "no gradient",
                     "no: with Â < 0 the unclipped branch ρ·Â is the one the min keeps here, and it still depends "
                     "on θ",
                     "no: for Â < 0 PPO uses ρ·Â unclipped at every ρ, since the clip guards only against "
                     "over-rewarding good actions")
why_min.answer = None     # "a", "b", "c" or "d"
why_min.ask()"""

VECTOR_ENV_CELLS = [
    r"""md:## Vector envs and autoreset

The rung does not play one CartPole at a time. `gym_common.make_vec_env` builds a gymnasium `SyncVectorEnv` of
$N$ = `num_envs` copies stepped together: `reset()` returns `obs` of shape `[N, 4]` (CartPole's state
$[x, \dot x, \varphi, \dot\varphi]$ per env, $\varphi$ the pole angle), and one `step(actions)` takes $N$ actions and returns $N$ observations,
rewards, `terminated` and `truncated` flags. `collect` calls it `num_steps` times per rollout: that is the
`[N, T]` batch.

An env whose episode ends does not wait for the others: the vector env resets it by itself (*autoreset*). Recall what
a reset is for a single env: once its episode has ended it must be `reset()` before it can `step` again, and `reset()`
takes no action and returns a first observation only (with `info`): no reward, no flags. gymnasium
(≥ 1.1) has modes for it; two matter here.

* `NEXT_STEP`, gymnasium's default: the step at which env $i$ ends returns that episode's last observation with its
  flag set, as a single env would. Env $i$ is not reset by that call but by its next `step` call.
* `SAME_STEP`, the mode the CartPole rungs ask for (`gym_common.make_vec_env`; Capstone I uses it too): the step at
  which env $i$ ends resets it at once. `obs[i]` is then the **new** episode's first observation, and the finished
  episode's last one is in `info["final_obs"][i]` — an object array, set only where `info["_final_obs"][i]` is True.

Below, a real run: three CartPoles with a short time limit (printed), each driven by a fixed rule of its own
observation — env 0 always pushes right, env 1 balances, env 2 always pushes left — so that episodes end both ways
inside a few steps. The same seed and rules run once under each mode.""",
    """import numpy as np
from ladder.viz import answers, vector_envs as ve
from ladder.viz import vector_envs_view

runs = {mode: ve.record(mode) for mode in ve.MODES}
print(f"{len(ve.RULES)} envs ({', '.join(ve.RULES)}), time limit {ve.TIME_LIMIT} steps, {ve.STEPS} steps recorded; "
      f"obs of one step: {runs['SAME_STEP']['obs'][0].shape}")
reset_q = viz.Reason("Under NEXT_STEP, env i ended at step t. What does step t + 1 return for env i, and what becomes "
                     "of the action you pass it?",
                     "the next state of the finished episode, reached by that action, with reward 1: NEXT_STEP "
                     "delays the reset, so the old episode runs one step past its end before env i restarts",
                     "the finished episode's last observation again, with its flag still set: the call clears the "
                     "flag and ignores the action, and the reset comes at step t + 2",
                     "the new episode's first observation, with reward 0 and both flags False; the action is "
                     "ignored: the call only resets env i, so this step is no transition of any episode")
reset_q.answer = None     # "a", "b" or "c": answer before you run on
reset_q.ask()""",
    r"""md:The widget: a timeline per mode (one row per env) and, below it, step $t$ of each env as `step()` returned it —
the action, the flags, the observation returned, `final_obs` where it is set, and $s_{t+1}$, the state the
transition reached. Move $t$ to the steps where an episode ends (× terminated, ■ truncated), and to the step after.""",
    """vector_envs_view.autoreset_view(t=7)""",
    """nxt = runs["NEXT_STEP"]
ended = nxt["terminated"] | nxt["truncated"]
after = ve.real_transitions(nxt, "NEXT_STEP") == 0          # the steps right after an env ended
print(f"NEXT_STEP, the {int(after.sum())} steps after an end: rewards {np.unique(nxt['rewards'][after]).tolist()}, "
      f"any flag set: {bool(ended[after].any())}")
pushed = {action: ve.reset_step_obs(action) for action in (0, 1)}
print("env 0 on the step after its first end, pushed left:", pushed[0].round(3), "pushed right:", pushed[1].round(3))
first_end = tuple(int(k) for k in np.argwhere(ended)[0])
key = answers.autoreset_key(nxt["rewards"][after], ended[after], pushed[0], pushed[1])
reset_q.check(key, why=f"the new first observation, the same whatever the action; reward 0 and no flag at every "
                       f"such step. SAME_STEP returns that observation one step earlier: at step {first_end[0]}, where env "
                       f"{first_end[1]} ended, it returned {runs['SAME_STEP']['obs'][first_end].round(3)}")""",
    r"""md:Under `NEXT_STEP` the step after an end is not a transition: its observation is not the result of its action,
and its reward 0 was earned by nothing. A rollout that keeps it must mask it out of the loss; one that trains on it
teaches the critic a jump from the last state to a fresh start, and the policy an action that did nothing.
`SAME_STEP` has no such step — every step of every env is a transition — at the price of a rule for reading the
next state.

### $V(s_{t+1})$ across an autoreset

GAE's $\delta_t = r_t + \gamma V(s_{t+1})(1-d_t) - V(s_t)$ needs $s_{t+1}$, the state **this** episode reached, and
whether that episode still has a future. Below, one recorded `SAME_STEP` step at which one env terminated, one was
truncated and one went on, and a stand-in critic `ve.critic` ($V(s) = 10\,(1 - |\varphi| / 0.2095)$, with $\varphi$ the
pole angle: 10 upright, 0 at the angle where CartPole terminates).""",
    """same = runs["SAME_STEP"]
t_mix = ve.mixed_step(same)
obs, terminated, truncated = same["obs"][t_mix], same["terminated"][t_mix], same["truncated"][t_mix]
final_obs, has_final = same["final_obs"][t_mix], same["has_final"][t_mix]   # final_obs is NaN where not set
print(f"step {t_mix}: terminated {terminated}, truncated {truncated}, _final_obs {has_final}")
print("obs returned:\\n", obs.round(3), "\\nfinal_obs:\\n", final_obs.round(3))""",
    r"""md:Your turn: the value that $\gamma$ multiplies in each env's $\delta_t$ at this step (its bootstrap), one number per
env, with `ve.critic(states)` (it takes `[N, 4]` or `[4]`), from what the step returned above: the flags, `obs` and
`final_obs`. For each env, decide which state is the $s_{t+1}$ its episode reached, and whether there is anything to
bootstrap at all. The check wants all three to $10^{-6}$.""",
    """V_next_yours = ...        # [3]: one value per env, from ve.critic and the step's flags, obs and final_obs""",
    """# the reference is computed in ladder/viz/answers.py; it and its rule are printed once you have answered
if answers.check_bootstrap(V_next_yours, obs, terminated, truncated, final_obs, ve.critic) is not None:
    print("had the returned obs been read everywhere:", ve.critic(obs).round(3))""",
    r"""md:The rule the check applied, per env. Under `SAME_STEP`, where env $i$ ended at step $t$, the returned `obs[i]` is
the next episode's first state: its value belongs to another episode, and bootstrapping from it would add a fresh
start's value to a finished one. So:

* **terminated**: the episode is over; there is no $V(s_{t+1})$ ($d_t = 1$: 0). Terminated wins when both flags are
  set (gymnasium can set both at the time limit's last step): the episode ended, whatever the clock;
* **truncated**: the time limit cut a state that has a future (notebook 1b), and that state is
  `info["final_obs"][i]`: bootstrap with $V(s_{\text{final}})$;
* **neither**: $V(\text{obs}[i])$, the returned observation is the episode's next state.

The rung does exactly this: `cartpole.collect` reads $V$ of `info["final_obs"]` where an env was truncated, adds
$\gamma V(s_{\text{final}})$ to that step's reward and marks the step done, so its target is
$r_t + \gamma V(s_{\text{final}})$.""",
]

CELLS: list[str] = [
    r"""md:# 2 · PPO on CartPole

After this notebook (about 45 minutes) you will be able to:

* derive PPO's clipped surrogate from REINFORCE: the ratio $\rho_t$, its gradient, and why both agree at $\rho_t = 1$;
* say from which samples the clip removes the gradient (zeroes it), and check it on a real CartPole batch;
* compute GAE advantages and train PPO on CartPole with `core.update`;
* step $N$ environments together with gymnasium's vector envs, and read $V(s_{t+1})$ right where an episode ends.

REINFORCE throws each batch away after one step. PPO reuses it for $\mu$ passes — which means the
batch was sampled by $\pi_{\text{old}}$ while we optimise $\pi_\theta$.

## From REINFORCE to PPO's surrogate

REINFORCE (notebook 1) minimises $L^{\text{PG}}(\theta) = -\mathbb{E}_t\big[\hat A_t \log\pi_\theta(a_t\mid s_t)\big]$.
Its gradient $-\mathbb{E}_t\big[\hat A_t\,\nabla_\theta\log\pi_\theta(a_t\mid s_t)\big]$ is minus the policy gradient
(the descent direction) only while the samples come from $\pi_\theta$. After one optimiser step they no longer do: they came from $\pi_{\text{old}}$.

**Importance sampling.** For any $f$,
$\mathbb{E}_{a\sim\pi_\theta}[f(a)] = \sum_a \pi_\theta(a) f(a) = \mathbb{E}_{a\sim\pi_{\text{old}}}\big[\tfrac{\pi_\theta(a)}{\pi_{\text{old}}(a)}\,f(a)\big]$:
weighting each sample by the ratio
$\rho_t(\theta) = \pi_\theta(a_t\mid s_t) / \pi_{\text{old}}(a_t\mid s_t)$ (the importance ratio; $r_t$ stays the reward) turns
expectations under $\pi_{\text{old}}$,
which we have samples of, into expectations under $\pi_\theta$. PPO's surrogate objective, maximised over the
$\pi_{\text{old}}$ samples of the batch, is

$$\tilde J(\theta) = \mathbb{E}_t\big[\rho_t(\theta)\,\hat A_t\big].$$

(The course keeps $L$ for losses, which are minimised; $\tilde J$ is the surrogate of $J$.) The states still come from
$\pi_{\text{old}}$ and $\hat A_t$ is $\pi_{\text{old}}$'s advantage, so $\tilde J$ stands in for $J$ only while $\pi_\theta$ stays close to $\pi_{\text{old}}$; keeping it close is the clip's job (below).

**Its gradient.** $\pi_{\text{old}}$ does not depend on $\theta$, and $\nabla_\theta\pi_\theta = \pi_\theta\nabla_\theta\log\pi_\theta$, so

$$\nabla_\theta \rho_t = \frac{\nabla_\theta\pi_\theta(a_t\mid s_t)}{\pi_{\text{old}}(a_t\mid s_t)} = \rho_t\,\nabla_\theta\log\pi_\theta(a_t\mid s_t),
\qquad \nabla_\theta \tilde J = \mathbb{E}_t\big[\rho_t\,\hat A_t\,\nabla_\theta\log\pi_\theta(a_t\mid s_t)\big].$$

At $\theta = \theta_{\text{old}}$ every $\rho_t = 1$ and $\nabla_\theta \tilde J = \mathbb{E}_t\big[\hat A_t\,\nabla_\theta\log\pi_\theta(a_t\mid s_t)\big]$:
**REINFORCE's gradient, exactly** (minus $\nabla_\theta L^{\text{PG}}$). $\tilde J$ and $-L^{\text{PG}}$ have different values ($\mathbb{E}[\hat A]$ and
$\mathbb{E}[\hat A\log\pi_\theta]$) but the same gradient there. Once $\theta$ has moved, $\rho_t \neq 1$ reweights each
sample's REINFORCE term by how much more (or less) likely $\pi_\theta$ now makes its action.

**The clip.** Per sample, PPO maximises $\min\big(\rho_t\hat A_t,\ \operatorname{clip}(\rho_t, 1-\varepsilon_{\text{low}}, 1+\varepsilon_{\text{high}})\,\hat A_t\big)$.

**Predict first** (`why_min`, in the next cell; the self-check at the end marks it): from this definition alone,
before the table below, decide whether the clip removes the gradient of a sample whose advantage is negative and
whose ratio has grown past $1+\varepsilon_{\text{high}}$.""",
    SETUP,
    WHY_MIN,
    r"""md:Where the clip removes a sample's gradient (sets it to 0), case by case:

| | $\rho_t < 1-\varepsilon_{\text{low}}$ | $1-\varepsilon_{\text{low}} \le \rho_t \le 1+\varepsilon_{\text{high}}$ | $\rho_t > 1+\varepsilon_{\text{high}}$ |
|---|---|---|---|
| $\hat A_t > 0$ | $\rho_t\hat A_t$: gradient | $\rho_t\hat A_t$: gradient | $(1+\varepsilon_{\text{high}})\hat A_t$: **no gradient** |
| $\hat A_t < 0$ | $(1-\varepsilon_{\text{low}})\hat A_t$: **no gradient** | $\rho_t\hat A_t$: gradient | $\rho_t\hat A_t$: gradient |

A sample loses its gradient exactly when $\hat A_t > 0$ and $\rho_t > 1+\varepsilon_{\text{high}}$ (its action has already gained
enough probability for this batch), or $\hat A_t < 0$ and $\rho_t < 1-\varepsilon_{\text{low}}$ (it has already lost enough). In the
other two corners the min keeps the unclipped, lower value: a step that made the objective worse is never
hidden. On the first minibatch of the first pass every $\rho_t = 1$, inside the interval, so nothing is clipped
and the policy part of PPO's first step is a REINFORCE step. `core.clipped_surrogate` returns the loss to minimise:

$$L^{\text{CLIP}}(\theta) = -\,\mathbb{E}_t\Big[\min\big(\rho_t \hat A_t,\ \operatorname{clip}(\rho_t, 1-\varepsilon_{\text{low}}, 1+\varepsilon_{\text{high}})\,\hat A_t\big)\Big]$$

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
    """from ladder.viz.cartpole_lab import surrogate_vs_reinforce

bridge = surrogate_vs_reinforce(steps=4, lr=2e-3, clip_eps=0.2)
print(f"{bridge['advantages'].size} transitions, ε = {bridge['clip_eps']}. At θ = θ_old: max |∇L_clip − ∇L_PG| "
      f"= {bridge['max_abs_diff'][0]:.1e}, largest |∇L_PG| entry {bridge['pg_grad_max'][0]:.1e}")
header = ("| step | ρ from … to | clip removed | cos(∇L_clip, ∇L_PG) | ‖∇L_clip‖ / ‖∇L_PG‖ | cos(∇L_IS, ∇L_PG) "
          "| ‖∇L_IS‖ / ‖∇L_PG‖ |")
rows = [f"| {k} | {rho.min():.3f} … {rho.max():.3f} | {bridge['removed_share'][k]:.1%} | {bridge['cosine'][k]:.4f} "
        f"| {bridge['norm_ratio'][k]:.4f} | {bridge['cosine_is'][k]:.4f} | {bridge['norm_ratio_is'][k]:.4f} |"
        for k, rho in enumerate(bridge["ratios"])]
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
for lam in (0.0, 0.8, 1.0):   # λ = 0: the one-step TD error δ_t
    adv, ret = core.gae(rewards, values, dones, gamma=0.98, lam=lam)
    print(f"λ={lam}: Â = {adv.numpy().round(3)}")""",
    *VECTOR_ENV_CELLS,
    r"""md:## Train PPO (tiny preset)

`python -m ladder.run cartpole --preset tiny`: `num_envs` × `num_steps` transitions per batch, $\mu$ passes of
`num_minibatches` minibatches each (all printed below), GAE, advantages whitened per minibatch, value loss,
gradient clipping — all inside `core.update`.

`solved` in the summary means that a greedy evaluation (`eval_episodes` episodes, the argmax action at every step)
averaged at least `solve_return` (CartPole-v1 ends an episode at `max_episode_steps`); the run stops there, and
otherwise it runs until its `total_steps` are spent. The learning rate anneals linearly from `lr` to 0 over the
updates those steps allow. The training return in the curves and the greedy evaluations measure different episodes,
for two reasons: the training actions are sampled, as in notebook 1, and each training point is the mean of the
episodes that *ended* during that update's `num_envs` × `num_steps` steps. An episode spans several rollouts and is
counted only when it ends, so a long one was played mostly by earlier, weaker policies; an update in which no episode
ended has no training return.""",
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
last = records[-1]
print(f"last training return {trained[-1]:.1f}, last greedy evaluation {greedy[-1]:.1f}")
{k: round(last[k], 4) for k in ("lr", "clip_frac", "ratio_min", "ratio_max", "approx_kl_old_k3")}""",
    """num_updates = -(-cfg.total_steps // (cfg.num_envs * cfg.num_steps))
if summary["solved"]:
    verdict = (f"**Solved**: the greedy evaluation at {summary['solved_at_env_steps']:,} env steps averaged "
               f"{summary['eval_return_mean']:.2f} ≥ {cfg.solve_return:g}, and the run stopped there.")
else:
    verdict = (f"**Not solved**: the run spent its {cfg.total_steps:,} steps, and its last greedy evaluation "
               f"averaged {summary['eval_return_mean']:.2f} < {cfg.solve_return:g}.")
side = "above" if trained[-1] > greedy[-1] else "below" if trained[-1] < greedy[-1] else "equal to"
display(Markdown(f"{verdict} The last training return, {trained[-1]:.1f}, is {side} the last greedy evaluation, "
                 f"{greedy[-1]:.1f}. The last update ran at lr = {last['lr']:.2e}, {last['lr'] / cfg.lr:.1%} of "
                 f"`lr` (update {len(records)} of at most {num_updates}); its clip fraction was "
                 f"{last['clip_frac']:.4f} and its KL(π_old‖π_θ) {last['approx_kl_old_k3']:.1e}."))""",
    r"""md:What the last update's clip fraction and KL measure: the statistics of an update are those of its last pass
(`passes[-1]` in `cartpole.train`), computed in that pass's forward, before its optimiser step, so they see the
$\mu - 1$ steps before it, whose size the annealed learning rate sets. They say how far those steps moved $\pi_\theta$,
not whether the policy has converged. Which case this run is:""",
    """share = last["lr"] / cfg.lr
if summary["solved"]:
    steps_were = (f"It solved and stopped at update {len(records)} of at most {num_updates}, with the learning rate still "
                  f"{share:.0%} of `lr`: the μ − 1 steps before its last pass were large, and its clip fraction "
                  f"{last['clip_frac']:.2f} and KL {last['approx_kl_old_k3']:.1e} say so. Stopping early left them large.")
else:
    steps_were = (f"It spent its whole budget, so its last update ran at lr = {share:.1%} of `lr` (1/{num_updates} of it): "
                  f"those steps barely move π_θ, every ratio stays near 1, and the clip fraction "
                  f"{last['clip_frac']:.4f} and KL {last['approx_kl_old_k3']:.1e} say the steps were small, not that "
                  "the policy has converged.")
display(Markdown(steps_were))""",
    r"""md:## The clipped objective, on real ratios

Below: the surrogate $\min(\rho\hat A, \operatorname{clip}(\rho)\hat A)$ per unit $|\hat A|$, for $\hat A>0$ (left) and
$\hat A<0$ (right). The dots are the **actual** ratios after step 4 of the table above (the same batch, the same
four steps), each on the side of its advantage's sign; red dots are clipped — their gradient is zero. Move
$\varepsilon_{\text{low}}$ and $\varepsilon_{\text{high}}$ and watch the clip fraction change (the widget computes the
surrogate with `core.clipped_surrogate` and the fractions with `core.clip_fractions`, on `viz.mu_passes(4)`). DAPO's *clip-higher* sets $\varepsilon_{\text{high}} > \varepsilon_{\text{low}}$.""",
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
$1 - \varepsilon_{\text{low}}$, which $\varepsilon_{\text{high}}$ does not touch. That is DAPO's aim: the samples set free are
actions with $\hat A > 0$ whose probability has already grown, such as unlikely-but-good ones, which may now grow
further. Drag $\varepsilon_{\text{high}}$ in the widget to see the red dots of the left panel turn blue.
</details>

**Exercises:** `ex03_gae.py`, `ex04_whiten.py`, `ex05_clipped_surrogate.py`, `ex06_value_loss.py`. Once they
pass, `python -m ladder.run cartpole --use-exercises` trains with your own `gae`, `whiten`,
`clipped_surrogate` and `value_loss`.""",
    SELF_CHECK,
    """p_value = viz.Predict("In the GAE example, raise V(s_0) from 3 to 4. At λ = 0.8, what will Â_0(new) − Â_0(old) be?")
p_value.answer = None
p_eps = viz.Predict(f"At ε = 0.2 the clip removed the gradient of {before['clip_frac_high']:.1%} of step 4's samples on the "
                    f"Â > 0 side and {before['clip_frac_low']:.1%} on the Â < 0 side (printed above). Clip at ε_low = "
                    "ε_high = 0.1 instead: on which side will most of the samples whose gradient the clip removes be, "
                    "Â > 0 (ratios above 1.1) or Â < 0 (ratios below 0.9)? The new ones are the ratios between 1.1 and "
                    "1.2 and between 0.8 and 0.9 that the smaller clip adds: recall where the widget's dots lay.",
                    choices=("Â > 0", "Â < 0", "as many on each"))
p_eps.answer = None
why_target = viz.Reason("In the GAE example (γ = 0.98, the episode ends at its 5th step), what is the critic's target "
                        "R_0 = Â_0 + V(s_0) at λ = 1, and why?",
                        "r_0 + γ·V(s_1): at λ = 1 each δ is taken at full weight, but the sum stops after the first, "
                        "so the target bootstraps one step, as TD(0) does",
                        "G_0 = Σ_k γ^k r_k: the δ's telescope, each γV(s_{t+1}) cancelling the next −V(s_{t+1}), so "
                        "Â_0 = G_0 − V(s_0), and adding V(s_0) back leaves G_0",
                        "G_0 − V(s_0): at λ = 1 nothing is bootstrapped, so R_t and Â_t coincide and the critic "
                        "regresses on the advantage itself",
                        "r_4 + γ·V(s_4)·(1 − d_4): the telescoping sum keeps only its last δ, at the step where the "
                        "episode ended and d_t = 1")
why_target.answer = None
for question in (p_value, p_eps, why_target):
    question.ask()
    print()""",
    """higher = values.clone()
higher[0, 0] = 4.0
A_0 = {name: core.gae(rewards, v, dones, gamma=0.98, lam=0.8)[0][0, 0] for name, v in (("V=3", values), ("V=4", higher))}
p_value.check(A_0["V=4"] - A_0["V=3"], why="V(s_0) enters only δ_0, with weight −1, whatever λ is")
adv, ratio_4 = bridge["advantages"], bridge["ratios"][4]
key, why = answers.clip_sides(adv, ratio_4, eps=0.1, eps_was=0.2)
p_eps.check(key, why=f"{why} Both ε at 0.1 in the widget above turn exactly these samples red")
print("why_min, asked at the start:")
log_rho = torch.tensor(1.5).log().requires_grad_()                # the sample's log-ratio, ρ = 1.5
core.clipped_surrogate(log_rho.exp(), torch.tensor(-1.0), 0.2).backward()
why_min.check("c", why=f"ρ·Â = −1.5 is below clip(ρ)·Â = −1.2, so the min keeps ρ·Â; autograd gives ∂L^CLIP/∂log ρ "
                       f"= {log_rho.grad.item():.2f} = −ρ·Â, the unclipped branch's gradient: a step that made a bad "
                       "action likelier is never hidden")
R_0 = core.gae(rewards, values, dones, gamma=0.98, lam=1.0)[1][0, 0]
G_0 = core.discounted_returns(rewards, torch.ones_like(rewards), gamma=0.98)[0, 0]
why_target.check("b" if abs(R_0 - G_0) < 1e-5 else "c", why=f"R_0 = {R_0:.4f}, G_0 = {G_0:.4f}: at λ = 1 GAE's Â is the "
                                                         "Monte-Carlo return minus V, and the critic regresses on the "
                                                         "return itself")
viz.tally(why_min, reset_q, p_value, p_eps, why_target)""",
]
