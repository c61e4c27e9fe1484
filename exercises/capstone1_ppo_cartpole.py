"""Capstone I — your own PPO, in one file: CartPole-v1 with gymnasium's vector envs and torch.

Goes after exercises 1–6 and notebooks 1–2. You write the whole trainer: the agent, the stepping, the rollout
buffer, GAE with time limits done right, the clipped loss, μ epochs of shuffled minibatches, gradient clipping,
an evaluation. You may import torch, numpy, gymnasium and your own earlier exercises (``from ex05_clipped_surrogate
import clipped_surrogate`` works: they are found beside this file) — nothing else of ladder's.

What follows is a contract — what goes in and out, the equations, the pitfalls — not a recipe: the order of the
calls inside each function is yours to design. Grade it with ``pytest exercises/test_capstone1.py``: one test per
property (see "How it is graded" below), skipped ("not implemented yet") while a function it needs raises
NotImplementedError.

Shapes. N envs run side by side for T steps: a rollout is [N, T] (one row per env, as the course's [B, T]),
obs [N, T, 4]. A flat batch is those tensors flattened to [N·T] (obs [N·T, 4]); a minibatch is a set of its rows.

The contract
------------
Agent(nn.Module), built as ``Agent()`` (4 observations, 2 actions; the architecture is yours)
    actor(obs [b, 4]) -> logits [b, 2]                     π_θ(·|s) = softmax(logits)
    get_value(obs [b, 4]) -> V(s) [b]
    get_action_and_value(obs [b, 4], action [b] | None)
        -> (action [b] int64, log π_θ(a|s) [b], H(π_θ(·|s)) [b], V(s) [b])
        action None: sample a ~ π_θ(·|s) (not the argmax: PPO learns from its own exploration).
        logp and V carry gradients; the caller decides about torch.no_grad.

make_envs(num_envs) -> gymnasium.vector.SyncVectorEnv of CartPole-v1 with autoreset_mode SAME_STEP (see below).

collect_rollout(agent, envs, obs, num_steps) -> (buffer, next_obs)
    ``obs`` is what the last reset or step returned; step the envs T = num_steps times with π_old = the agent now.
    Record the obs an action is taken FROM, before calling step() (step() returns the next one).
    buffer, a dict of tensors holding no graph, [N, T] unless said:
        obs [N, T, 4]   the obs action t was taken FROM        actions   the actions (int64)
        logp            log π_old(a_t|s_t)                      values    V(s_t)
        rewards         r_t                                     terminated, truncated   0./1. floats, as the env said
        final_values    V(s_final) where truncated[n, t] (the episode's last obs, which autoreset replaced), 0 elsewhere
        last_values [N] V(next_obs): every row is cut off at T, and its next step is not in this rollout
    next_obs: the obs after the last step, for the next rollout.

gae(rewards, values, terminated, truncated, final_values, last_values, gamma, lam) -> (advantages, returns), [N, T]
        δ_t = r_t + γ·V_next(t) − V(s_t)
        V_next(t) = 0                       if terminated[t]     (the pole fell: there is no future)
                    final_values[t]         elif truncated[t]    (the clock ran out: the future was cut, not zero)
                    V(s_{t+1})              otherwise             (values[:, t + 1], or last_values at t = T − 1)
        Â_t = δ_t + γλ·(1 − d_t)·Â_{t+1},   d_t = terminated[t] or truncated[t]    (a new episode starts at t + 1)
        R_t = Â_t + V(s_t)
    final_values is read only where truncated (the grader puts noise elsewhere); where terminated and truncated
    are both set, any value is accepted there (gae ignores it: terminated wins). Inputs are float tensors; leave
    them unchanged (no in-place edit of any of them).
    Notebook 2's form — add γ·V(s_final) to a truncated step's reward and mark that step done — is the same GAE
    as V_next above; exercise 3's gae (one ``dones`` input) can be reused only in that form: rewards
    + γ·truncated·(1 − terminated)·final_values, dones = terminated or truncated.

ppo_loss(agent, mb, clip_eps, value_coef, entropy_coef) -> (loss, stats)
    mb: a dict of a minibatch's rows: obs [b, 4]; actions, logp (π_old's), values (V_old), advantages, returns [b].
        Â ← (Â − mean Â) / (std Â + 1e-8)   over the minibatch (torch's std, unbiased)
        (exercise 4's whiten, (x − mean)/sqrt(var + ε), differs from it by far less than the grader's
        tolerances: importing it is fine)
        ρ = exp(log π_θ(a|s) − log π_old(a|s))      (the importance ratio π_θ/π_old)
        L = mean(−min(ρ·Â, clip(ρ, 1 − ε, 1 + ε)·Â)) + c_v · mean(½(V(s) − R)²) − c_H · mean(H(π_θ(·|s)))
    Score the minibatch with one call of agent.get_action_and_value(mb["obs"], mb["actions"]).
    loss: a scalar tensor with its graph; stats: a dict of floats of your choice (clip fraction, approx KL …).

update(agent, optimizer, batch, num_epochs, num_minibatches, clip_eps, value_coef, entropy_coef, max_grad_norm,
       generator=None) -> stats
    batch: a flat dict with the keys of mb, [n] each (obs [n, 4]); n divisible by M = num_minibatches.
    Returns a dict of floats of your choice (e.g. the last epoch's mean loss, clip fraction): Python floats, or
    0-d tensors without a graph (loss.item(), not loss).
    μ = num_epochs passes; each pass splits the batch into M minibatches of n/M rows, shuffled afresh each pass
    with ``generator`` and no other RNG (torch.randperm(n, generator=generator); None: torch's global RNG), so that
    one generator seed gives one sequence of minibatches; and takes one optimiser step per minibatch:
    μ·M steps in all, each on the gradient of that minibatch's ppo_loss alone, its total norm clipped to
    max_grad_norm. Use the agent only through its methods and parameters(): the grader hands you a wrapped one.

evaluate(agent, episodes=20, seed=10_000) -> list of returns, one per episode
    greedy episodes (a = argmax of actor's logits), episode i reset with seed + i, each to its end.

train(total_steps=100_000, seed=0, **your hyperparameters) -> (agent, history)
    The parts joined: envs, agent and optimiser made, then rollout after rollout: collect_rollout, gae, update.
    train calls make_envs, collect_rollout, gae and update (and evaluate, if it evaluates) by their module-level
    names, as plain calls — not through copies of its own (a default argument, a dict of functions, a partial) —
    so that the grader, which puts recording wrappers in their place in the module for a run, sees every call.
    Helpers of yours may make the calls, by the same names. What each function does inside stays your design.
    - The first rollout starts from the obs of envs.reset(seed=seed); each next one from the next_obs the one
      before returned (episodes run on across rollouts: no reset between them).
    - update gets the rollout flattened: each row's advantages and returns are gae's at that row's (env, step)
      (the advantages may be whitened over the batch first: the loss's whitening per minibatch then gives the
      same Â, up to its 1e-8).
    - Seed everything from ``seed``: torch.manual_seed(seed) before Agent(), envs.reset(seed=seed), the shuffle's
      generator. Two runs with one seed give the same weights, whatever the global RNGs (torch's, numpy's,
      Python's) held before.
    - A rollout is N·T env steps (every env counts). Never more than total_steps: total_steps // (N·T) rollouts,
      so the last leaves less than one rollout of the budget unused. You may stop earlier once your own
      evaluation says solved.
    history: a list of dicts, one per update, each with at least "env_steps": the env steps taken so far.
    The wiring checks run train(total_steps=1_500, seed=1) with your defaults: keep a rollout (N·T) at most 750
    env steps, so that they see two or more.

The pitfalls, and why
---------------------
- Termination is not truncation. CartPole-v1 ends an episode when the pole falls or the cart leaves the track
  (terminated: the return after it is 0) or after 500 steps (truncated: the pole was still up; the return would
  have gone on). Bootstrapping a truncation with 0 teaches V that step 500 is a cliff it cannot see in the obs
  (the obs has no clock); bootstrap it with V(s_final).
- Gymnasium ≥ 1.0's vector envs reset a finished env by themselves. The default mode, NEXT_STEP, returns the final
  obs and resets on the following step(), whose action is ignored and whose transition is not real. make_envs asks
  for SAME_STEP: step() returns the NEW episode's first obs at once and puts the finished one's last obs in
  ``info["final_obs"]`` (an object array, set where ``info["_final_obs"]`` is True). So the obs step() returns is
  not the s_{t+1} of a transition that ended: V(s_{t+1}) must not be read from it, and final_values comes from info.
- Record the obs an action was taken FROM. Off by one (storing the obs step() returned) pairs each action with the
  next state: nothing crashes, and on CartPole, whose consecutive states are close, it may even learn — which is
  why the grader checks the rollout against the env itself, and why a run that learns proves little.
- π_old is the policy that collected the rollout: log π_old is recorded while stepping, before the first optimiser
  step, and never recomputed. Recomputed each epoch (or each minibatch), ρ = 1 at the start of every pass and the
  clip never holds π_θ near the policy that sampled the data.
- μ·M steps, the minibatches a fresh partition each pass: every row once per epoch, none twice.
- optimizer.zero_grad() before each backward (gradients add up otherwise); clip the gradient's norm after backward,
  before step (torch.nn.utils.clip_grad_norm_).
- Nothing of the rollout needs a graph: collect under torch.no_grad, or the buffer keeps every step's graph alive.
- Advantages are whitened per minibatch here (as CleanRL does); per batch is as good a choice, but the grader's
  loss check is written for per minibatch. CleanRL can also clip the value loss; this contract does not.

A suggested structure
---------------------
An Agent with two small MLPs (actor and critic, tanh, orthogonal init with a small gain on the actor's last layer
keeps the first policy near uniform). A rollout function that only steps and records. GAE on the rollout. The
rollout flattened into a batch with its advantages and returns. An update over that batch. A train loop around
these that also anneals the learning rate, logs finished episodes' returns and evaluates now and then. For
CartPole, a few tens of thousands of env steps are enough: e.g. N = 8 envs, T = 32, γ = 0.98, λ = 0.8, Adam 2e-3
annealed to 0, μ = 15 passes of M = 1 (or μ = 4 of M = 4), ε = 0.2, c_v = 0.5, c_H = 0, max_grad_norm = 0.5.

How it is graded
----------------
One test per property, each failing with a line or two that names what broke, on which input:
    agent, make_envs                the shapes, log-probs, entropy and sampling; SyncVectorEnv, SAME_STEP autoreset
    rollout, truncation_bootstrap   the buffer against the grader's own copy of the envs; V(s_final) where truncated
    gae, gae_inputs                 GAE against the core's on every kind of ending; its inputs left unchanged
    loss                            one minibatch's loss and gradient against core.compute_loss
    optimiser_steps, minibatches    μ·M steps, each epoch a fresh partition of the rows
    update_generator                one generator seed, one sequence of minibatches, whatever the global RNGs hold
    pi_old, grad_clip               each step's gradient the core's with π_old the rollout's, clipped to max_grad_norm
    update_stats                    update returns a dict of floats
    evaluate                        greedy episodes, episode i seeded seed + i
The wiring of train, seen through the recording wrappers in runs of train(total_steps=1_500, seed=1):
    rollout_chain                   each rollout starts where the one before ended; the first from reset(seed=seed)
    advantages_wiring               update gets gae's advantages and returns, row for row (rows matched by their obs)
    env_steps                       N·T a rollout; at most total_steps, less than a rollout short; history's count
    reproducible                    two runs with one seed give the same weights
And one training check, solves_cartpole: train(total_steps=60_000, seed=0) on one thread, then 20 greedy episodes
of the grader's own; a mean return of at least 475 counts as solved. When it fails, its message names the fast
properties that fail: CartPole is easy enough that a trainer wired wrong may still learn, or fail with no clue why.
It takes up to a minute or two when train runs its whole budget (the others a second or so each);
``pytest exercises/test_capstone1.py -k truncation`` grades one property alone.
"""

from __future__ import annotations

from torch import nn  # and torch, numpy, gymnasium, your earlier exercises: whatever you need


class Agent(nn.Module):
    def __init__(self):
        super().__init__()
        raise NotImplementedError

    # self.actor(obs [b, 4]) -> logits [b, 2]: a submodule (e.g. an nn.Sequential) or a method of yours

    def get_value(self, obs):
        raise NotImplementedError

    def get_action_and_value(self, obs, action=None):
        raise NotImplementedError


def make_envs(num_envs):
    raise NotImplementedError


def collect_rollout(agent, envs, obs, num_steps):
    raise NotImplementedError


def gae(rewards, values, terminated, truncated, final_values, last_values, gamma, lam):
    raise NotImplementedError


def ppo_loss(agent, mb, clip_eps, value_coef, entropy_coef):
    raise NotImplementedError


def update(agent, optimizer, batch, num_epochs, num_minibatches, clip_eps, value_coef, entropy_coef, max_grad_norm,
           generator=None):
    raise NotImplementedError


def evaluate(agent, episodes=20, seed=10_000):
    raise NotImplementedError


def train(total_steps=100_000, seed=0):   # add your hyperparameters as keyword arguments with defaults
    raise NotImplementedError
