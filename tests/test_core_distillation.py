"""``ladder.core.distillation``: the teacher's per-token reward and GKD's generalized JSD.

(a) ``generalized_jsd`` averaged over the completion tokens equals TRL 1.16's ``GKDTrainer.generalized_jsd_loss`` —
value and gradient — for β ∈ {0, 0.1, 0.5, 0.9, 1} at τ = 1 and 0.9, with masked positions and a row with none, and
``GKDTrainer.compute_loss`` on the same two models, inputs and labels; (b) its ends: JSD_β ≈ β·KL(p ‖ q) near β = 0,
≈ (1 − β)·KL(q ‖ p) near β = 1, the two KLs at the ends themselves; (c) the two views are one: on a two-token
language small enough to enumerate, the policy gradient with the k1 reward r_t = −(log π_θ − log π_teacher)(y_t) is
−∇KL(π_θ ‖ π_teacher) over whole sequences when summed without discount (γ = 1), and GKD's β = 1 gradient at the
student's own prefixes when each token keeps its own reward (γ = 0).
"""

from __future__ import annotations

import itertools
import os
from types import SimpleNamespace

import pytest
import torch

from ladder import core

V = 3  # the toy language: two tokens, each one of V


def _trl_gkd():
    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    pytest.importorskip("trl", minversion="1.16")
    from trl.experimental.gkd import GKDTrainer

    return GKDTrainer


def _logits_and_labels(seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    student = torch.randn(3, 6, 11, generator=g, dtype=torch.float64) * 2
    teacher = torch.randn(3, 6, 11, generator=g, dtype=torch.float64) * 2
    labels = torch.randint(0, 11, (3, 6), generator=g)
    labels[0, :2] = -100   # a prompt
    labels[1, 4:] = -100   # padding
    labels[2, :] = -100    # a row with no completion token
    return student, teacher, labels


@pytest.mark.parametrize("temperature", [1.0, 0.9])
@pytest.mark.parametrize("beta", [0.0, 0.1, 0.5, 0.9, 1.0])
def test_the_token_mean_of_generalized_jsd_is_trls_loss_value_and_gradient(beta, temperature):
    gkd = _trl_gkd()
    student, teacher, labels = _logits_and_labels()
    mask = labels != -100
    ours_in = student.clone().requires_grad_(True)
    theirs_in = student.clone().requires_grad_(True)
    ours = core.aggregate(core.generalized_jsd(ours_in, teacher, beta, temperature), mask, "token_mean")
    theirs = gkd.generalized_jsd_loss(theirs_in, teacher, labels, beta=beta, temperature=temperature)
    ours.backward()
    theirs.backward()
    torch.testing.assert_close(ours, theirs, rtol=1e-10, atol=1e-12)
    torch.testing.assert_close(ours_in.grad, theirs_in.grad, rtol=1e-9, atol=1e-12)
    assert ours.item() > 0


class _TinyLM(torch.nn.Module):
    """A causal LM's interface, ``model(input_ids=…, attention_mask=…).logits``, with a bigram's insides."""

    def __init__(self, seed: int, vocab: int = 13):
        super().__init__()
        torch.manual_seed(seed)
        self.table = torch.nn.Embedding(vocab, vocab)

    def forward(self, input_ids, attention_mask=None):
        return SimpleNamespace(logits=self.table(input_ids))


@pytest.mark.parametrize("beta", [0.0, 0.5, 1.0])
def test_gkd_compute_loss_on_two_models_is_the_token_mean_over_the_completion(beta):
    gkd = _trl_gkd()
    student, teacher = _TinyLM(0), _TinyLM(1)
    input_ids = torch.tensor([[1, 2, 3, 4, 5, 6, 0], [7, 8, 9, 10, 0, 0, 0]])
    attention_mask = (torch.arange(7) < torch.tensor([[7], [4]])).long()
    labels = input_ids.masked_fill(attention_mask == 0, -100)
    labels[:, :3] = -100  # the prompts: three tokens each
    inputs = {"input_ids": input_ids, "attention_mask": attention_mask, "labels": labels}
    trainer = SimpleNamespace(teacher_model=teacher, beta=beta, generalized_jsd_loss=gkd.generalized_jsd_loss)
    theirs = gkd.compute_loss(trainer, student, inputs)
    student_logits = student(input_ids).logits[:, :-1]  # position t predicts token t + 1
    with torch.no_grad():
        teacher_logits = teacher(input_ids).logits[:, :-1]
    ours = core.aggregate(core.generalized_jsd(student_logits, teacher_logits, beta), labels[:, 1:] != -100,
                          "token_mean")
    torch.testing.assert_close(ours, theirs)  # GKDTrainer's loss runs at τ = 1 whatever GKDConfig.temperature


def test_the_ends_are_the_two_kls_and_the_jsd_vanishes_towards_them():
    student, teacher, _ = _logits_and_labels(1)
    log_q, log_p = torch.log_softmax(student, -1), torch.log_softmax(teacher, -1)
    forward = (log_p.exp() * (log_p - log_q)).sum(-1)
    reverse = (log_q.exp() * (log_q - log_p)).sum(-1)
    torch.testing.assert_close(core.generalized_jsd(student, teacher, 0.0), forward)
    torch.testing.assert_close(core.generalized_jsd(student, teacher, 1.0), reverse)
    small = 1e-7
    torch.testing.assert_close(core.generalized_jsd(student, teacher, small) / small, forward, rtol=1e-3, atol=1e-6)
    torch.testing.assert_close(core.generalized_jsd(student, teacher, 1 - small) / small, reverse, rtol=1e-3,
                               atol=1e-6)
    with pytest.raises(ValueError, match="beta must be in"):
        core.generalized_jsd(student, teacher, 1.5)


def test_the_reward_is_minus_the_log_ratio_on_real_tokens_and_zero_on_padding():
    logp = torch.tensor([[-1.0, -2.0, -0.5]])
    teacher_logp = torch.tensor([[-0.5, -3.0, -9.0]])
    mask = torch.tensor([[1, 1, 0]])
    rewards = core.distillation_rewards(logp, teacher_logp, mask)
    assert rewards.tolist() == [[0.5, -1.0, 0.0]]


# --- (c) the two views, by enumerating every completion of a two-token language ------------------------------------

def _tables(seed: int):
    """A two-token model: the first token's logits [V], the second's given the first [V, V]."""
    g = torch.Generator().manual_seed(seed)
    return torch.randn(V, generator=g, dtype=torch.float64), torch.randn(V, V, generator=g, dtype=torch.float64)


def _token_logps(first: torch.Tensor, second: torch.Tensor) -> torch.Tensor:
    """[V², 2]: log π(y_1), log π(y_2 | y_1) of every completion y = (y_1, y_2), in itertools.product order."""
    rows = [torch.stack([torch.log_softmax(first, 0)[a], torch.log_softmax(second[a], 0)[b]])
            for a, b in itertools.product(range(V), repeat=2)]
    return torch.stack(rows)


def _policy_gradient(first, second, teacher, gamma: float):
    """∇ of E_y[Σ_t log π_θ(y_t)·G_t], exactly (every completion weighted by its probability, the rewards fixed)."""
    logp = _token_logps(first, second)
    teacher_logp = _token_logps(*teacher)
    mask = torch.ones_like(logp)
    returns = core.discounted_returns(core.distillation_rewards(logp.detach(), teacher_logp, mask), mask, gamma)
    weights = logp.detach().sum(1).exp()  # π_θ(y)
    objective = (weights[:, None] * logp * returns).sum()
    return torch.autograd.grad(objective, (first, second))


def test_summed_without_discount_the_k1_reward_is_the_sequence_reverse_kl_gradient():
    first, second = (t.requires_grad_(True) for t in _tables(0))
    teacher = _tables(1)
    logp = _token_logps(first, second).sum(1)
    kl = (logp.exp() * (logp - _token_logps(*teacher).sum(1))).sum()  # KL(π_θ ‖ π_teacher) over completions
    kl_gradient = torch.autograd.grad(kl, (first, second))
    for pg, exact in zip(_policy_gradient(first, second, teacher, gamma=1.0), kl_gradient, strict=True):
        torch.testing.assert_close(pg, -exact)


def test_each_token_its_own_reward_is_gkds_reverse_kl_gradient_at_the_students_prefixes():
    first, second = (t.requires_grad_(True) for t in _tables(2))
    teacher = _tables(3)
    prefix = torch.softmax(first, 0).detach()  # π_θ(y_1): where the student's second token is scored
    per_position = (core.generalized_jsd(first, teacher[0], beta=1.0)
                    + (prefix * core.generalized_jsd(second, teacher[1], beta=1.0)).sum())
    gkd_gradient = torch.autograd.grad(per_position, (first, second))
    for pg, exact in zip(_policy_gradient(first, second, teacher, gamma=0.0), gkd_gradient, strict=True):
        torch.testing.assert_close(pg, -exact)
    sequence = _policy_gradient(first, second, teacher, gamma=1.0)
    assert not torch.allclose(sequence[0], -gkd_gradient[0])  # the first token also answers for the second's KL
