"""Notebook 1b's foundations on the chain: exact V/Q/A, Monte-Carlo vs TD vs GAE, truncation, the surrogate."""

import json
import re
from pathlib import Path

import numpy as np
import pytest
import torch

from ladder import core
from ladder.viz import foundations as f

CHAIN = f.Chain()
PI = f.policy(f.uniform(CHAIN))


@pytest.fixture(scope="module")
def exact():
    return f.exact_values(CHAIN, PI)


@pytest.fixture(scope="module")
def batch():
    return f.sample_episodes(CHAIN, PI, episodes=4000, max_steps=80, seed=1)


def test_exact_values_solve_the_bellman_equations(exact):
    V, Q, A = exact["V"], exact["Q"], exact["A"]
    P, r = CHAIN.transitions(), CHAIN.rewards()
    assert torch.allclose(Q, r + CHAIN.gamma * torch.einsum("sat,t->sa", P, V), atol=1e-12)
    assert torch.allclose((PI * Q).sum(-1), V, atol=1e-12)            # V = E_π[Q]
    assert torch.allclose((PI * A).sum(-1), torch.zeros(5, dtype=torch.float64), atol=1e-12)   # E_π[A] = 0
    assert Q[0, 0] == pytest.approx(1.0)                               # stepping off the end: one reward, no future
    assert torch.allclose(V, V.flip(0), atol=1e-12)                    # the uniform policy on a symmetric chain


def test_exact_v_agrees_with_monte_carlo_returns(exact, batch):
    returns = core.discounted_returns(batch["rewards"], batch["mask"], CHAIN.gamma)[:, 0]
    assert not batch["truncated"].any()                                # every episode ended inside the 80 steps
    stderr = returns.std() / len(returns) ** 0.5
    assert abs(returns.mean() - exact["V"][CHAIN.start]) < 4 * stderr


def test_gae_at_lambda_0_is_the_td_target_and_at_1_the_monte_carlo_return(exact, batch):
    V = exact["V"]
    _, td_target = f.gae_returns(batch, V, CHAIN.gamma, 0.0)
    v_next = torch.cat([V[batch["states"][:, 1:]], torch.zeros(len(td_target), 1, dtype=V.dtype)], 1)
    expected = (batch["rewards"] + CHAIN.gamma * v_next * (1 - batch["dones"])) * batch["mask"]
    assert torch.allclose(td_target, expected, atol=1e-12)
    _, mc = f.gae_returns(batch, V, CHAIN.gamma, 1.0)
    assert torch.allclose(mc, core.discounted_returns(batch["rewards"], batch["mask"], CHAIN.gamma), atol=1e-9)


@pytest.mark.parametrize("lam", [0.0, 0.5, 0.95, 1.0])
def test_gae_is_the_lambda_weighted_sum_of_td_errors(exact, lam):
    short = f.sample_episodes(CHAIN, PI, episodes=200, max_steps=6, seed=2)   # some rows cut by the limit
    critic = 0.7 * exact["V"]
    adv, ret = f.gae_returns(short, critic, CHAIN.gamma, lam)
    by_deltas = f.lambda_returns_at_start(short, critic, CHAIN.gamma, torch.tensor([lam], dtype=torch.float64))
    assert torch.allclose(by_deltas[0], ret[:, 0], atol=1e-12)
    assert torch.allclose(adv[:, 0], by_deltas[0] - critic[short["states"][:, 0]], atol=1e-12)


def test_a_truncated_step_bootstraps_with_v_of_its_last_state(exact):
    short = f.sample_episodes(CHAIN, PI, episodes=500, max_steps=3, seed=3)
    cut = short["truncated"].bool()
    assert 0 < cut.sum() < 500
    V = exact["V"]
    _, ret = f.gae_returns(short, V, CHAIN.gamma, 0.0)
    assert torch.allclose(ret[cut, -1], 1.0 + CHAIN.gamma * V[short["last_state"][cut]], atol=1e-12)
    _, ret = f.gae_returns(short, V, CHAIN.gamma, 0.0, truncation_as_termination=True)
    assert torch.allclose(ret[cut, -1], torch.ones(int(cut.sum()), dtype=V.dtype))


def test_only_the_bootstrapped_estimate_is_unbiased_under_a_time_limit():
    stats = f.truncation_estimates(CHAIN, [2, 5, 40], episodes=4000)
    assert np.all(np.abs(stats["bootstrapped"] - stats["v_true"]) < 4 * stats["stderr"])
    bias = stats["v_true"] - stats["as_terminated"]
    assert bias[0] > bias[1] > 0.5 and stats["truncated"][0] > stats["truncated"][1] > stats["truncated"][2]
    limit = f.time_limit_values(0.99, 500, steps=(0, 499))
    assert limit["as_terminated"][1] == pytest.approx(1.0) and limit["as_terminated"][0] < limit["v_true"]


TABLE = torch.randn(5, 2, dtype=torch.float64, generator=torch.Generator().manual_seed(0))


@pytest.mark.parametrize("theta_old", [TABLE, torch.tensor(0.3, dtype=torch.float64)], ids=["table", "shared"])
def test_the_surrogate_gradient_at_theta_old_is_the_policy_gradient(theta_old):
    grads = f.surrogate_gradients(CHAIN, theta_old)
    assert grads["max_abs_diff"] < 1e-6
    assert grads["grad_J"].abs().max() > 0.05                         # not two zeros
    assert f.surrogate(CHAIN, theta_old, theta_old).item() == pytest.approx(0.0, abs=1e-12)


def test_the_surrogate_drifts_from_the_true_objective_away_from_theta_old():
    theta_old = torch.tensor(0.0, dtype=torch.float64)
    near = f.surrogate_drift(CHAIN, theta_old, [0.005, 0.01], clip_eps=0.2)
    gap = np.abs(near["surrogate"] - near["true_change"])
    assert gap[1] < 0.02 * near["true_change"][1]                       # near θ_old they agree to first order:
    assert gap[1] / gap[0] == pytest.approx(4.0, rel=0.1)               # the gap is second order in the step
    steps = np.linspace(0, 3, 31)
    drift = f.surrogate_drift(CHAIN, theta_old, steps, clip_eps=0.2)
    assert drift["true_change"][-1] < 0 < drift["surrogate"][-1]        # far away the surrogate still promises
    peak = steps[np.argmax(drift["true_change"])]
    assert 0 < peak < 3 and steps[np.argmax(drift["surrogate"])] == 3.0
    assert abs(steps[np.argmax(drift["clipped"])] - peak) <= 0.2        # the clip stops near J's peak


def test_the_views_draw_and_answer_their_knobs():
    lam = f.lambda_view(lam=0.9, episodes=10, critic_error=0.0)
    assert lam.data["best_lam"] <= 0.2                                  # exact critic: TD's low variance wins
    mc_bias = lam.data["bias"][-1]
    lam.controls["critic_error"].value = 0.5
    lam.controls["episodes"].value = 200
    assert lam.data["best_lam"] >= 0.9                                  # many episodes, biased critic: MC wins
    assert lam.data["bias"][-1] == pytest.approx(mc_bias, abs=1e-9)     # λ = 1 never reads the critic
    assert lam.data["bias"][0] ** 2 > 100 * mc_bias ** 2
    trunc = f.truncation_view(limit=3)
    assert "T = 3:" in trunc.data["summary"]
    sur = f.surrogate_view(step=1.0)
    assert sur.data["true_change"][20] < sur.data["surrogate"][20]


def test_the_notebook_predicts_before_each_widget_and_answers_after():
    nb = json.loads((Path(__file__).resolve().parents[1] / "notebooks" / "1b_foundations.ipynb").read_text())
    cells = [{"type": c["cell_type"], "text": "".join(c["source"])} for c in nb["cells"]]
    opening = cells[0]["text"].split("\n## ")[0]
    assert re.search(r"\d+\s*minutes", opening) and 2 <= len(re.findall(r"^\* ", opening, flags=re.M)) <= 4
    views = [i for i, c in enumerate(cells) if c["type"] == "code" and re.search(r"\w+_view\(", c["text"])]
    assert len(views) == 3
    for i in views:
        assert cells[i - 1]["text"].startswith("**Predict first.**"), i
        assert any("<details><summary>Answer</summary>" in c["text"] for c in cells[i + 1:i + 4]), i
    asked = [re.search(r"(\w+) = viz\.(Predict|Reason)\(", c["text"]) for c in cells]
    names = [(i, m.group(1)) for i, m in enumerate(asked) if m]
    assert len(names) >= 4
    for i, name in names:                                                # each checked in a later cell
        assert any(f"{name}.check(" in c["text"] for c in cells[i + 1:]), name
