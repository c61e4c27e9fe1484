"""The foundations on a chain small enough to solve exactly: V, Q and A, Monte-Carlo vs TD vs GAE(λ),
termination vs time-limit truncation, and the surrogate's first-order equality with the policy gradient.

The chain: states 0 … n−1 in a row, two actions (0 = left, 1 = right), reward 1 for every step taken, and
the episode *terminates* when a step leaves the row at either end (like CartPole: +1 per step until the
pole falls). A policy is a table of logits θ[s, a]; π_θ(a|s) = softmax(θ[s])_a.

    V = (I − γ P_π)⁻¹ r_π          the Bellman equation V = r_π + γ P_π V, solved as a linear system
    Q(s, a) = r(s, a) + γ Σ_s' P(s'|s, a) V(s')        A = Q − V,  Σ_a π(a|s) A(s, a) = 0
    J(θ) = V_θ(s_start)                                the objective, exact and differentiable (torch)

Sampling (``sample_episodes``) returns padded ``[B, T]`` tensors as a rollout does, with ``dones`` = 1 on
a terminating step; ``ladder.core.gae`` turns them into advantages and value targets.
"""

from __future__ import annotations

from dataclasses import dataclass

import ipywidgets as widgets
import numpy as np
import torch
from matplotlib.figure import Figure
from torch import Tensor

from ladder import core
from ladder.viz._widget import View

_SLIDER = {"continuous_update": False, "style": {"description_width": "initial"}}


@dataclass(frozen=True)
class Chain:
    n_states: int = 5
    gamma: float = 0.9
    start: int = 1

    def transitions(self) -> Tensor:
        """P[s, a, s']: the probability of landing on state s' (a step off either end lands nowhere)."""
        n = self.n_states
        P = torch.zeros(n, 2, n, dtype=torch.float64)
        for s in range(n):
            if s > 0:
                P[s, 0, s - 1] = 1.0
            if s < n - 1:
                P[s, 1, s + 1] = 1.0
        return P

    def rewards(self) -> Tensor:
        """r[s, a] = 1: one unit of reward for every step, the last one included."""
        return torch.ones(self.n_states, 2, dtype=torch.float64)


def policy(theta: Tensor, n_states: int = 5) -> Tensor:
    """π_θ(a|s) = softmax(θ[s])_a, shape [n_states, 2]. A scalar θ is one *shared* logit: π_θ(right|s) = σ(θ)
    in every state (a policy that cannot tell the states apart, so one step moves π everywhere)."""
    if theta.dim() == 0:
        theta = torch.stack([torch.zeros(n_states, dtype=theta.dtype), theta.expand(n_states)], dim=-1)
    return torch.softmax(theta, dim=-1)


def uniform(chain: Chain) -> Tensor:
    """θ = 0: left and right with probability 1/2 in every state."""
    return torch.zeros(chain.n_states, 2, dtype=torch.float64)


def exact_values(chain: Chain, pi: Tensor) -> dict[str, Tensor]:
    """V, Q and A of policy ``pi`` [n, 2] from the Bellman equation, solved as a linear system."""
    P, r = chain.transitions(), chain.rewards()
    P_pi = torch.einsum("sa,sat->st", pi, P)
    r_pi = (pi * r).sum(-1)
    V = torch.linalg.solve(torch.eye(chain.n_states, dtype=P.dtype) - chain.gamma * P_pi, r_pi)
    Q = r + chain.gamma * torch.einsum("sat,t->sa", P, V)
    return {"V": V, "Q": Q, "A": Q - V[:, None]}


def objective(chain: Chain, theta: Tensor) -> Tensor:
    """J(θ) = V_θ(s_start), differentiable in θ."""
    return exact_values(chain, policy(theta, chain.n_states))["V"][chain.start]


def visitation(chain: Chain, pi: Tensor) -> Tensor:
    """d(s) = Σ_t γ^t P(s_t = s) from s_start: the discounted state visitation of ``pi``."""
    P_pi = torch.einsum("sa,sat->st", pi, chain.transitions())
    start = torch.zeros(chain.n_states, dtype=pi.dtype)
    start[chain.start] = 1.0
    return torch.linalg.solve((torch.eye(chain.n_states, dtype=pi.dtype) - chain.gamma * P_pi).T, start)


# ------------------------------------------------------------------------------------------- sampling
def sample_episodes(chain: Chain, pi: Tensor, episodes: int, max_steps: int, seed: int = 0) -> dict[str, Tensor]:
    """``episodes`` rollouts of ``pi`` from s_start, cut at ``max_steps`` (a time limit): ``[B, T]`` tensors
    ``states``, ``actions``, ``rewards``, ``mask``, ``dones`` (1 where the step left the row: terminated),
    and per row ``truncated`` (still running at the limit) and ``last_state`` (s_T of a truncated row)."""
    rng = np.random.default_rng(seed)
    p_right = pi[:, 1].detach().numpy()
    B, T = episodes, max_steps
    states, actions = np.zeros((B, T), dtype=np.int64), np.zeros((B, T), dtype=np.int64)
    mask, dones = np.zeros((B, T)), np.zeros((B, T))
    s = np.full(B, chain.start)
    alive = np.ones(B, dtype=bool)
    for t in range(T):
        a = (rng.random(B) < p_right[np.clip(s, 0, chain.n_states - 1)]).astype(np.int64)
        states[:, t], actions[:, t], mask[:, t] = s, a, alive
        s_next = s + 2 * a - 1
        fell = alive & ((s_next < 0) | (s_next >= chain.n_states))
        dones[:, t] = fell
        alive = alive & ~fell
        s = np.where(alive, s_next, s)
    as_t = lambda x, dtype=torch.float64: torch.as_tensor(x, dtype=dtype)  # noqa: E731
    return {"states": as_t(states, torch.long), "actions": as_t(actions, torch.long), "rewards": as_t(mask),
            "mask": as_t(mask), "dones": as_t(dones), "truncated": as_t(alive), "last_state": as_t(s, torch.long)}


def td_errors(batch: dict[str, Tensor], values: Tensor, gamma: float) -> Tensor:
    """δ_t = r_t + γ V(s_{t+1}) (1 − d_t) − V(s_t), with V(s_T) bootstrapping a truncated row's last step."""
    v = values[batch["states"]] * batch["mask"]
    last = torch.where(batch["truncated"].bool(), values[batch["last_state"]], 0.0)
    v_next = torch.cat([v[:, 1:], last[:, None]], dim=1)
    return (batch["rewards"] + gamma * v_next * (1 - batch["dones"]) - v) * batch["mask"]


def gae_returns(batch: dict[str, Tensor], values: Tensor, gamma: float, lam: float,
                truncation_as_termination: bool = False) -> tuple[Tensor, Tensor]:
    """``core.gae`` on a sampled batch with critic ``values`` [n_states]: (Â, R = Â + V). A row cut by the
    time limit bootstraps with V(s_T) — unless ``truncation_as_termination``, which sets d = 1 there."""
    v = values[batch["states"]] * batch["mask"]
    dones = batch["dones"].clone()
    if truncation_as_termination:
        dones[:, -1] = torch.maximum(dones[:, -1], batch["truncated"])
    last = torch.where(batch["truncated"].bool(), values[batch["last_state"]], 0.0)
    adv, ret = core.gae(batch["rewards"], v, dones, gamma, lam, last_values=last)
    return adv * batch["mask"], ret * batch["mask"]


def lambda_returns_at_start(batch: dict[str, Tensor], values: Tensor, gamma: float, lams: Tensor) -> Tensor:
    """R^λ_0 = V(s_0) + Σ_t (γλ)^t δ_t for each λ in ``lams``: GAE's value target at t = 0, [len(lams), B]."""
    deltas = td_errors(batch, values, gamma)
    weights = (gamma * lams[:, None]) ** torch.arange(deltas.shape[1], dtype=deltas.dtype)   # (γλ)^t, 0^0 = 1
    return values[batch["states"][:, 0]] + weights @ deltas.T


def estimator_stats(chain: Chain, critic_error: float, lams, episodes: int = 4000, max_steps: int = 60,
                    seed: int = 0) -> dict:
    """Bias and variance of R^λ_0 as an estimate of V(s_start), under the uniform policy and the critic
    V̂ = (1 − critic_error) · V; one episode's squared error averages bias² + var, n episodes' bias² + var / n.
    Also the explained variance of V̂ against the Monte-Carlo returns (``core.explained_variance``)."""
    pi = policy(uniform(chain))
    V = exact_values(chain, pi)["V"]
    critic = (1.0 - critic_error) * V
    batch = sample_episodes(chain, pi, episodes, max_steps, seed)
    lams = torch.as_tensor(lams, dtype=torch.float64)
    estimates = lambda_returns_at_start(batch, critic, chain.gamma, lams)
    mc_returns = gae_returns(batch, critic, chain.gamma, 1.0)[1]
    ev = core.explained_variance(critic[batch["states"]], mc_returns, batch["mask"])
    return {"lams": lams.numpy(), "bias": (estimates.mean(1) - V[chain.start]).numpy(),
            "var": estimates.var(1).numpy(), "stderr": (estimates.var(1) / episodes).sqrt().numpy(),
            "v_true": V[chain.start].item(),
            "critic": critic.numpy(), "explained_variance": ev}


def truncation_estimates(chain: Chain, limits, episodes: int = 4000, seed: int = 0) -> dict:
    """For each time limit T: the share of episodes cut by it, and the mean of the λ = 1 return from s_start
    with the exact V, bootstrapped at the cut (``bootstrapped``) or treated as a termination (``as_terminated``)."""
    pi = policy(uniform(chain))
    V = exact_values(chain, pi)["V"]
    out = {"limits": np.asarray(limits), "truncated": [], "bootstrapped": [], "as_terminated": [], "stderr": []}
    for limit in limits:
        batch = sample_episodes(chain, pi, episodes, int(limit), seed)
        boot = gae_returns(batch, V, chain.gamma, 1.0)[1][:, 0]
        cut = gae_returns(batch, V, chain.gamma, 1.0, truncation_as_termination=True)[1][:, 0]
        out["truncated"].append(batch["truncated"].mean().item())
        out["bootstrapped"].append(boot.mean().item())
        out["as_terminated"].append(cut.mean().item())
        out["stderr"].append((boot.std() / episodes ** 0.5).item())
    out = {k: np.asarray(v) for k, v in out.items()}
    out["v_true"] = V[chain.start].item()
    return out


def time_limit_values(gamma: float = 0.99, limit: int = 500, steps=(0, 250, 450, 490, 499)) -> dict:
    """CartPole with a policy that never drops the pole (+1 per step): V = 1 / (1 − γ) at every step, since the
    state does not hold the clock; a critic taught that the time limit terminates learns Σ_{k < limit − t} γ^k."""
    steps = np.asarray(steps)
    as_terminated = (1 - gamma ** (limit - steps)) / (1 - gamma)
    return {"steps": steps, "v_true": 1.0 / (1.0 - gamma), "as_terminated": as_terminated}


# -------------------------------------------------------------------------------------------- the surrogate
def surrogate(chain: Chain, theta: Tensor, theta_old: Tensor, clip_eps: float | None = None) -> Tensor:
    """J̃(θ) = Σ_s d_old(s) Σ_a π_old(a|s) · ρ(θ) · A_old(s, a), ρ = π_θ / π_old: E_old[ρ Â] with the exact A of
    π_old and its discounted visitation; with ``clip_eps``, PPO's min(ρ Â, clip(ρ, 1 − ε, 1 + ε) Â) instead."""
    pi_old = policy(theta_old, chain.n_states).detach()
    adv, d_old = exact_values(chain, pi_old)["A"], visitation(chain, pi_old)
    ratio = policy(theta, chain.n_states) / pi_old
    per_action = ratio * adv
    if clip_eps is not None:
        per_action = torch.minimum(per_action, ratio.clamp(1 - clip_eps, 1 + clip_eps) * adv)
    return (d_old[:, None] * pi_old * per_action).sum()


def surrogate_gradients(chain: Chain, theta_old: Tensor) -> dict:
    """∇J(θ_old) and ∇J̃(θ_old) (J̃: ``surrogate``) by autograd, and their largest difference."""
    theta = theta_old.detach().clone().requires_grad_(True)
    grad_J, = torch.autograd.grad(objective(chain, theta), theta)
    theta = theta_old.detach().clone().requires_grad_(True)
    grad_L, = torch.autograd.grad(surrogate(chain, theta, theta_old), theta)
    return {"grad_J": grad_J, "grad_L": grad_L, "max_abs_diff": (grad_J - grad_L).abs().max().item()}


def surrogate_drift(chain: Chain, theta_old: Tensor, steps, clip_eps: float = 0.2) -> dict:
    """Along θ = θ_old + α · u (u: the unit direction of ∇J at θ_old), for each α in ``steps``: the true change
    J(θ) − J(θ_old), the surrogate J̃(θ), the clipped surrogate, and the largest ratio π_θ / π_old."""
    grad = surrogate_gradients(chain, theta_old)["grad_J"]
    direction = grad / grad.norm()
    J_old = objective(chain, theta_old).item()
    pi_old = policy(theta_old, chain.n_states)
    out = {"steps": np.asarray(steps, dtype=float), "true_change": [], "surrogate": [], "clipped": [], "max_ratio": []}
    with torch.no_grad():
        for alpha in steps:
            theta = theta_old + float(alpha) * direction
            out["true_change"].append(objective(chain, theta).item() - J_old)
            out["surrogate"].append(surrogate(chain, theta, theta_old).item())
            out["clipped"].append(surrogate(chain, theta, theta_old, clip_eps).item())
            out["max_ratio"].append((policy(theta, chain.n_states) / pi_old).max().item())
    return {k: np.asarray(v) for k, v in out.items()}


# ------------------------------------------------------------------------------------------------ the views
def lambda_view(lam: float = 0.9, episodes: int = 10, critic_error: float = 0.5) -> View:
    """Squared error of GAE's value target R^λ_0 for V(s_start), averaged over ``episodes`` episodes:
    bias² + var / n against λ, for the critic V̂ = (1 − critic_error) · V."""
    lams = np.linspace(0.0, 1.0, 21)
    cache: dict[float, dict] = {}
    controls = {
        "lam": widgets.FloatSlider(value=lam, min=0.0, max=1.0, step=0.05, description="λ", **_SLIDER),
        "episodes": widgets.IntSlider(value=episodes, min=1, max=200, description="episodes n", **_SLIDER),
        "critic_error": widgets.FloatSlider(value=critic_error, min=0.0, max=1.0, step=0.1,
                                            description="critic error c (V̂ = (1 − c)V)", **_SLIDER),
    }

    def draw(v: dict):
        c = round(v["critic_error"], 2)
        stats = cache.setdefault(c, estimator_stats(Chain(), c, lams))
        bias2, var_n = stats["bias"] ** 2, stats["var"] / v["episodes"]
        mse = bias2 + var_n
        i = int(np.argmin(np.abs(lams - v["lam"])))
        fig = Figure(figsize=(7, 3.4))
        ax = fig.add_subplot(1, 1, 1)
        ax.plot(lams, bias2, label="bias²")
        ax.plot(lams, var_n, label="variance / n")
        ax.plot(lams, mse, "--", lw=2, color="k", label="squared error = bias² + variance / n")
        ax.axvline(lams[i], color="grey", ls=":")
        ax.set_xlabel("λ   (0: TD(0) target r + γV̂(s'),  1: Monte-Carlo return)")
        ax.set_ylabel(f"error of the estimate of V(s_start = s_{Chain().start})")
        ax.legend(fontsize=8)
        fig.tight_layout()
        best = float(lams[int(np.argmin(mse))])
        data = {**stats, "bias2": bias2, "var_n": var_n, "mse": mse, "best_lam": best,
                "summary": f"λ = {lams[i]:.2f}: bias² {bias2[i]:.3f}, variance/n {var_n[i]:.3f}, "
                           f"squared error {mse[i]:.3f}; lowest at λ = {best:.2f}; "
                           f"explained variance of V̂ {stats['explained_variance']:.2f}"}
        return fig, data

    return View(controls, draw, "Monte-Carlo, TD(0) and GAE(λ): bias and variance")


def truncation_view(limit: int = 5) -> View:
    """The estimate of V(s_start) from episodes cut by a time limit T: bootstrapped with V(s_T) at the cut,
    or treating the cut as a termination."""
    limits = np.arange(1, 31)
    stats = truncation_estimates(Chain(), limits)
    controls = {"limit": widgets.IntSlider(value=limit, min=1, max=30, description="time limit T", **_SLIDER)}

    def draw(v: dict):
        i = int(v["limit"]) - 1
        fig = Figure(figsize=(7, 3.4))
        ax = fig.add_subplot(1, 1, 1)
        ax.axhline(stats["v_true"], color="k", lw=1, label="exact V(s_start)")
        ax.plot(limits, stats["bootstrapped"], "o-", ms=3, label="truncation bootstraps with V(s_T)")
        ax.plot(limits, stats["as_terminated"], "o-", ms=3, label="truncation treated as termination")
        ax.axvline(limits[i], color="grey", ls=":")
        ax.set_xlabel("time limit T (steps)")
        ax.set_ylabel("mean estimate of V(s_start)")
        ax.legend(fontsize=8)
        fig.tight_layout()
        data = {**stats, "summary": f"T = {limits[i]}: {stats['truncated'][i]:.0%} of episodes cut; "
                                    f"bootstrapped {stats['bootstrapped'][i]:.3f}, as terminated "
                                    f"{stats['as_terminated'][i]:.3f}, exact {stats['v_true']:.3f}"}
        return fig, data

    return View(controls, draw, "Termination vs time-limit truncation")


def surrogate_view(step: float = 0.5, clip_eps: float = 0.2) -> View:
    """J(θ) − J(θ_old), J̃(θ) and the clipped J̃ along the policy gradient from θ_old = 0, for the shared-logit
    policy π_θ(right|s) = σ(θ)."""
    steps = np.linspace(0.0, 3.0, 61)
    theta_old = torch.tensor(0.0, dtype=torch.float64)
    controls = {"step": widgets.FloatSlider(value=step, min=0.0, max=3.0, step=0.05, description="step α", **_SLIDER),
                "clip_eps": widgets.FloatSlider(value=clip_eps, min=0.05, max=0.5, step=0.05, description="ε",
                                                **_SLIDER)}

    def draw(v: dict):
        drift = surrogate_drift(Chain(), theta_old, steps, v["clip_eps"])
        i = int(np.argmin(np.abs(steps - v["step"])))
        fig = Figure(figsize=(7, 3.4))
        ax = fig.add_subplot(1, 1, 1)
        ax.plot(steps, drift["true_change"], lw=2, color="k", label="true change J(θ) − J(θ_old)")
        ax.plot(steps, drift["surrogate"], label=r"surrogate $\tilde J(\theta) = \mathrm{E}[\rho\,\hat A]$")
        ax.plot(steps, drift["clipped"], label=f"clipped surrogate (ε = {v['clip_eps']:.2f})")
        ax.axvline(steps[i], color="grey", ls=":")
        ax.set_xlabel("step α along the policy gradient from θ_old")
        ax.legend(fontsize=8)
        fig.tight_layout()
        peak = {k: float(steps[int(np.argmax(drift[k]))]) for k in ("true_change", "surrogate", "clipped")}
        data = {**drift, "peak_step": peak,
                "summary": f"α = {steps[i]:.2f}: true change {drift['true_change'][i]:+.3f}, surrogate "
                           f"{drift['surrogate'][i]:+.3f}, clipped {drift['clipped'][i]:+.3f}, largest ratio "
                           f"{drift['max_ratio'][i]:.2f}"}
        return fig, data

    return View(controls, draw, "The surrogate near θ_old and away from it")
