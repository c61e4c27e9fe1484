"""Preference pairs through the one ``core.update``: minibatching keeps each pair whole, and DPO's and the
Bradley–Terry objectives give through ``compute_loss`` exactly the loss, gradient and statistics of
``core.dpo_loss`` / ``core.bradley_terry_loss`` on the same pairs (which tests/test_trl_parity_preferences.py
holds equal to TRL's)."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from ladder import core


class TokenTable(nn.Module):
    """A policy whose log-probs of the batch's tokens are a parameter table ``[B, T]`` (log-softmaxed over a
    second, fixed alternative), so its gradient is easy to compare."""

    def __init__(self, logits: torch.Tensor):
        super().__init__()
        self.logits = nn.Parameter(logits.clone())

    def evaluate(self, batch: core.Batch):
        rows = batch.inputs["row"]
        logp = nn.functional.logsigmoid(self.logits[rows])
        return logp, None, None


def pair_batch(pairs: int, width: int, seed: int = 0) -> tuple[core.Batch, torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    rows = 2 * pairs
    lengths = torch.randint(1, width + 1, (rows,), generator=generator)
    mask = (torch.arange(width)[None, :] < lengths[:, None]).float()
    ref_logp = -torch.rand(rows, width, generator=generator) * mask
    batch = core.Batch(actions=torch.zeros(rows, width, dtype=torch.long), mask=mask,
                       advantages=torch.zeros(rows, width), ref_logp=ref_logp,
                       inputs={"row": torch.arange(rows)}, rows_per_group=2)
    return batch, torch.randn(rows, width, generator=generator)


def test_minibatches_keep_every_pair_whole_and_in_order():
    batch, _ = pair_batch(pairs=6, width=3)
    seen = []
    for mb in batch.minibatches(3, torch.Generator().manual_seed(1)):
        rows = mb.inputs["row"].tolist()
        assert len(rows) == 4 and mb.rows_per_group == 2
        assert all(rows[i] % 2 == 0 and rows[i + 1] == rows[i] + 1 for i in range(0, 4, 2))
        seen += rows
    assert sorted(seen) == list(range(12)) and seen != list(range(12))  # shuffled, by pairs
    with pytest.raises(ValueError, match="5 groups of 2 rows cannot be split into 2"):
        next(pair_batch(pairs=5, width=3)[0].minibatches(2))


def test_dpo_through_compute_loss_is_dpo_loss():
    batch, logits = pair_batch(pairs=4, width=5)
    beta = 0.2
    policy = TokenTable(logits)
    cfg = core.UpdateConfig(objective=core.DPO(beta=beta))
    loss, stats, _ = core.compute_loss(policy, batch, cfg)
    loss.backward()
    through_update = policy.logits.grad.clone()

    direct = TokenTable(logits)
    logp = core.sequence_logp(direct.evaluate(batch)[0], batch.mask)
    ref = core.sequence_logp(batch.ref_logp, batch.mask)
    expected = core.dpo_loss(logp[0::2], logp[1::2], ref[0::2], ref[1::2], beta)
    expected.backward()
    reward = core.implicit_reward(logp.detach(), ref, beta)
    expected_stats = {"rewards/chosen": reward[0::2].mean().item(), "rewards/rejected": reward[1::2].mean().item(),
                      "rewards/accuracies": (reward[0::2] > reward[1::2]).float().mean().item(),
                      "rewards/margins": (reward[0::2] - reward[1::2]).mean().item(),
                      "logps/chosen": logp[0::2].mean().item(), "logps/rejected": logp[1::2].mean().item()}
    assert loss.item() == pytest.approx(expected.item(), rel=1e-6)
    assert torch.allclose(through_update, direct.logits.grad, atol=1e-6)
    for name, value in expected_stats.items():
        assert stats[name] == pytest.approx(value, abs=1e-6), name


def test_dpo_gradient_is_a_policy_gradient_weighted_by_sigma_of_the_wrong_margin():
    batch, logits = pair_batch(pairs=1, width=4)
    beta = 0.5
    policy = TokenTable(logits)
    loss, _, _ = core.compute_loss(policy, batch, core.UpdateConfig(objective=core.DPO(beta=beta)))
    loss.backward()
    with torch.no_grad():
        logp = core.sequence_logp(policy.evaluate(batch)[0], batch.mask)
        ref = core.sequence_logp(batch.ref_logp, batch.mask)
        margin = beta * ((logp[0] - ref[0]) - (logp[1] - ref[1]))
        weight = beta * torch.sigmoid(-margin)          # the advantage: +weight on y_w, −weight on y_l
        d_logp = 1 - torch.sigmoid(logits)              # ∂ log σ(z) / ∂z
        expected = -weight * torch.tensor([[1.0], [-1.0]]) * d_logp * batch.mask
    assert torch.allclose(policy.logits.grad, expected, atol=1e-6)


@pytest.mark.trained
def test_bradley_terry_through_compute_loss_on_a_scores_batch():
    scores = torch.tensor([[1.0], [0.0], [-0.5], [0.5], [2.0], [2.0]])
    batch = core.Batch(actions=torch.zeros(6, 1, dtype=torch.long), mask=torch.ones(6, 1),
                       advantages=torch.zeros(6, 1), inputs={"row": torch.arange(6)}, rows_per_group=2)

    class Scores(nn.Module):
        def __init__(self):
            super().__init__()
            self.r = nn.Parameter(scores.clone())

        def evaluate(self, b):
            return self.r[b.inputs["row"]], None, None

    model = Scores()
    loss, stats, _ = core.compute_loss(model, batch, core.UpdateConfig(objective="bradley_terry"))
    expected = core.bradley_terry_loss(scores[0::2, 0], scores[1::2, 0])
    assert loss.item() == pytest.approx(expected.item())
    assert stats["accuracy"] == pytest.approx(1 / 3) and stats["margin"] == pytest.approx(0.0)
    passes = core.update(model, batch, torch.optim.SGD(model.parameters(), lr=1.0), core.UpdateConfig(
        objective="bradley_terry", mu=2, num_minibatches=3, max_grad_norm=None), torch.Generator().manual_seed(0))
    # each pair its own step: the pair ranked wrong and the tie are pulled apart by σ(−Δ), and rank right after it
    assert passes[0]["accuracy"] == pytest.approx(1 / 3) and passes[1]["accuracy"] == 1.0


def test_a_preference_batch_that_cannot_mean_a_pair_loss_is_refused():
    batch, logits = pair_batch(pairs=2, width=3)
    policy = TokenTable(logits)
    with pytest.raises(ValueError, match="aggregation must be one of"):
        core.compute_loss(policy, batch, core.UpdateConfig(objective=core.DPO(), aggregation="seq_mean_token_sum"))
    with pytest.raises(ValueError, match="odd number"):
        core.compute_loss(policy, batch.select(torch.arange(3)), core.UpdateConfig(objective="dpo"))
    batch.ref_logp = None
    with pytest.raises(ValueError, match="needs ref_logp"):
        core.compute_loss(policy, batch, core.UpdateConfig(objective="dpo"))
