"""π_sampler ≠ π_old by hand: the weight π_old/π_sampler in each mode, the off-policy sequence mask, and
what they do to the loss (TRL's computation on the same tensors: tests/test_trl_parity_sampler.py)."""

import math

import pytest
import torch

from ladder import core

LOG = math.log
# one row, three real tokens and one padding token; token weights π_old/π_sampler = 4, 0.5, 1
OLD = torch.tensor([[LOG(0.4), LOG(0.1), LOG(0.3), 0.0]])
SAMPLING = torch.tensor([[LOG(0.1), LOG(0.2), LOG(0.3), 9.0]])
MASK = torch.tensor([[1.0, 1.0, 1.0, 0.0]])


@pytest.mark.parametrize("mode, clip_min, clip_max, expected", [
    ("token_truncate", None, 3.0, [3.0, 0.5, 1.0]),
    ("token_truncate", 0.6, 3.0, [3.0, 0.6, 1.0]),
    ("token_truncate", None, None, [4.0, 0.5, 1.0]),          # no bound: the plain weight
    ("token_mask", None, 3.0, [0.0, 0.5, 1.0]),
    ("token_mask", 0.6, 5.0, [4.0, 0.0, 1.0]),
    ("sequence_truncate", None, 3.0, [2.0]),                   # 4 · 0.5 · 1 = 2
    ("sequence_truncate", None, 1.5, [1.5]),
    ("sequence_mask", None, 1.5, [0.0]),
    ("sequence_mask", 2.5, None, [0.0]),
    ("sequence_mask", 0.5, 3.0, [2.0]),
])
def test_weights_by_hand(mode, clip_min, clip_max, expected):
    w = core.sampler_weights(OLD, SAMPLING, MASK, mode, clip_min, clip_max)
    got = w[0, :3] if mode.startswith("token") else w[0]
    assert w.shape == ((1, 4) if mode.startswith("token") else (1, 1))
    assert torch.allclose(got, torch.tensor(expected), atol=1e-6)


def test_padding_and_unscored_tokens_weigh_one():
    sampling = SAMPLING.clone()
    sampling[0, 0] = float("nan")  # the sampler could not score it: no evidence, weight 1
    w = core.sampler_weights(OLD, sampling, MASK, "token_truncate", None, 3.0)
    assert torch.allclose(w, torch.tensor([[1.0, 0.5, 1.0, 1.0]]))
    assert core.sampler_weights(OLD, sampling, MASK, "sequence_truncate", None, 3.0).item() == pytest.approx(0.5)


def test_the_sequence_weight_is_the_product_so_its_log_grows_with_length():
    """A per-token gap of 0.01 nats is harmless per token; over 300 tokens the sequence weight is e^3 ≈ 20."""
    T = 300
    old, sampling, mask = torch.zeros(1, T), torch.full((1, T), -0.01), torch.ones(1, T)
    assert core.sampler_weights(old, sampling, mask, "token_truncate", None, None).max() == pytest.approx(math.exp(.01))
    assert core.sampler_weights(old, sampling, mask, "sequence_truncate", None, None).item() == pytest.approx(
        math.exp(3.0), rel=1e-4)


def test_off_policy_keep_drops_only_bad_sequences_far_from_pi_theta():
    logp = torch.tensor([[-1.0, -1.0], [-1.0, -1.0], [-1.0, -1.0], [-1.0, -1.0]])
    sampling = torch.tensor([[-0.5, -0.5], [-0.5, -0.5], [-1.0, -1.0], [-0.5, 7.0]])   # mean KL 0.5, 0.5, 0, 0.5
    adv = torch.tensor([[1.0], [-1.0], [-1.0], [-1.0]]).expand(4, 2)
    mask = torch.tensor([[1.0, 1.0], [1.0, 1.0], [1.0, 1.0], [1.0, 0.0]])
    keep = core.off_policy_keep(adv, logp, sampling, mask, delta=0.1)
    assert keep[:, 0].tolist() == [1.0, 0.0, 1.0, 0.0]  # Â ≥ 0 kept; close kept; bad and far dropped
    assert core.off_policy_keep(adv, logp, sampling, mask, delta=0.5)[:, 0].tolist() == [1.0] * 4


def test_the_masked_share_counts_rows_by_their_real_tokens():
    """off_policy/masked_frac: the share of rows the mask drops, read on each row's real tokens (a row whose first
    token is masked carries Â·m = 0 there, which alone would read as kept)."""
    logp = torch.full((3, 3), -1.0)
    sampling = torch.full((3, 3), -0.5)                                      # mean KL 0.5 > δ: Â < 0 dropped
    mask = torch.tensor([[0.0, 1.0, 1.0], [1.0, 1.0, 0.0], [0.0, 1.0, 1.0]])
    adv = torch.tensor([[-1.0], [1.0], [-2.0]]) * mask
    options = core.SamplerOptions(off_policy_mask=0.1)
    loss, stats = core.sampler_correction(torch.ones(3, 3), logp, logp, sampling, adv, mask, options, None)
    assert torch.equal(loss * mask, torch.tensor([[0.0, 0.0, 0.0], [1.0, 1.0, 0.0], [0.0, 0.0, 0.0]]))
    assert stats["off_policy/masked_frac"].item() == pytest.approx(2 / 3)


def _policy_and_batch(sampling_shift: float):
    torch.manual_seed(0)
    logits = torch.nn.Parameter(torch.randn(4, 3, 5))
    actions = torch.randint(0, 5, (4, 3))

    class Table:
        def evaluate(self, batch):
            logp = torch.log_softmax(logits, -1).gather(-1, batch.actions[..., None]).squeeze(-1)
            return logp, None, None

    with torch.no_grad():
        old = Table().evaluate(core.Batch(actions=actions, mask=torch.ones(4, 3)))[0]
    batch = core.Batch(actions=actions, mask=torch.ones(4, 3), advantages=torch.tensor([[1.0], [-1.0], [0.5], [-0.5]])
                       .expand(4, 3).clone(), old_logp=old, sampling_logp=old + sampling_shift)
    return Table(), logits, batch


def test_a_sampler_equal_to_pi_old_changes_nothing_and_reports_no_gap():
    table, logits, batch = _policy_and_batch(0.0)
    plain, _, _ = core.compute_loss(table, core.Batch(**{**batch.__dict__, "sampling_logp": None}), core.UpdateConfig())
    loss, stats, _ = core.compute_loss(table, batch, core.UpdateConfig(sampler=core.SamplerOptions("token_truncate")))
    assert loss.item() == pytest.approx(plain.item())
    assert stats["sampler/logp_diff_max"] == 0.0 and stats["sampler/corrected_frac"] == 0.0
    assert stats["sampler/is_ratio_min"] == stats["sampler/is_ratio_max"] == 1.0


def test_the_weight_multiplies_the_policy_term_only():
    """Every token's weight is e^0.2 here (π_sampler a constant 0.2 nats below π_old): the policy term and its
    gradient scale by e^0.2, the KL to π_ref does not."""
    table, logits, batch = _policy_and_batch(-0.2)
    ref = batch.old_logp - 0.3
    plain_cfg = core.UpdateConfig(kl_coef=0.0)
    batch_ref = core.Batch(**{**batch.__dict__, "ref_logp": ref})
    _, plain, _ = core.compute_loss(table, core.Batch(**{**batch_ref.__dict__, "sampling_logp": None}), plain_cfg)
    truncated = core.UpdateConfig(sampler=core.SamplerOptions("token_truncate"))
    _, weighted, _ = core.compute_loss(table, batch_ref, truncated)
    assert weighted["loss_pg"] == pytest.approx(math.exp(0.2) * plain["loss_pg"], rel=1e-5)
    assert weighted["kl_ref"] == pytest.approx(plain["kl_ref"], rel=1e-6)
    assert weighted["sampler/logp_diff_mean"] == pytest.approx(0.2, rel=1e-5)
    assert weighted["sampler/seq_log_ratio_std"] == pytest.approx(0.0, abs=1e-5)


def test_update_reduces_the_extremes_by_min_and_max():
    assert core.reduce_stats([{"sampler/logp_diff_max": 1.0, "sampler/is_ratio_min": 0.5, "sampler/is_ratio_max": 2},
                              {"sampler/logp_diff_max": 3.0, "sampler/is_ratio_min": 0.2, "sampler/is_ratio_max": 1}]
                             ) == {"sampler/logp_diff_max": 3.0, "sampler/is_ratio_min": 0.2, "sampler/is_ratio_max": 2}
