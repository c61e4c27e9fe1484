"""``Batch``: selecting rows, seeded minibatches, flattening to transitions."""

from __future__ import annotations

import pytest
import torch
from core_update_helpers import OBS, LinearPolicy, make_batch, single_thread  # noqa: F401 (autouse fixture)

from ladder.core import Batch

# --------------------------------------------------------------------------- Batch


def test_batch_select_picks_rows_of_every_field():
    policy = LinearPolicy()
    batch = make_batch(policy, B=6, T=4, ref=True)
    rows = torch.tensor([4, 1])
    sub = batch.select(rows)
    assert len(sub) == 2
    for name in ("actions", "mask", "advantages", "values", "returns", "ref_logp"):
        assert torch.equal(getattr(sub, name), getattr(batch, name)[rows]), name
    assert torch.equal(sub.inputs["obs"], batch.inputs["obs"][rows])
    assert sub.old_logp is None and sub.rewards is None
    assert batch.actions.shape[0] == 6                       # the original is untouched
    assert sub.num_tokens == int(batch.mask[rows].sum())


def test_batch_minibatches_partition_rows_and_are_seeded():
    B, T = 12, 3
    batch = Batch(actions=torch.zeros(B, T, dtype=torch.long), mask=torch.ones(B, T),
                  advantages=torch.arange(B, dtype=torch.float32)[:, None].expand(B, T).clone(),
                  inputs={"row": torch.arange(B)})

    def order(seed, n):
        mbs = list(batch.minibatches(n, torch.Generator().manual_seed(seed)))
        assert len(mbs) == n and all(len(mb) == B // n for mb in mbs)
        for mb in mbs:                                       # fields stay aligned with inputs
            assert torch.equal(mb.advantages[:, 0].long(), mb.inputs["row"])
        return [mb.inputs["row"].tolist() for mb in mbs]

    first = order(0, 3)
    assert sorted(r for mb in first for r in mb) == list(range(B))
    assert order(0, 3) == first                              # same seed, same order
    assert order(1, 3) != first                              # another seed shuffles differently
    assert [r for mb in order(0, 1) for r in mb] != list(range(B))   # rows are shuffled
    for bad in (0, 5, 13):
        with pytest.raises(ValueError):
            list(batch.minibatches(bad))


def test_batch_as_transitions_flattens_row_major():
    policy = LinearPolicy()
    batch = make_batch(policy, B=3, T=4, ref=True)
    flat = batch.as_transitions()
    assert flat.actions.shape == (12, 1)
    assert flat.inputs["obs"].shape == (12, 1, OBS)
    for b in range(3):
        for i in range(4):
            row = b * 4 + i
            assert flat.actions[row, 0] == batch.actions[b, i]
            assert flat.mask[row, 0] == batch.mask[b, i]
            assert flat.advantages[row, 0] == batch.advantages[b, i]
            assert flat.ref_logp[row, 0] == batch.ref_logp[b, i]
            assert torch.equal(flat.inputs["obs"][row, 0], batch.inputs["obs"][b, i])
    assert flat.old_logp is None and flat.rewards is None
    assert flat.num_tokens == batch.num_tokens
    # a policy evaluated on the transitions gives the same log-probs, reshaped
    with torch.no_grad():
        assert torch.allclose(policy.evaluate(flat)[0].reshape(3, 4), policy.evaluate(batch)[0])
