"""A tiny linear categorical policy and batches for the ``ladder.core`` update tests (CPU only)."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from ladder.core import Batch

OBS, ACT = 4, 3


@pytest.fixture(autouse=True, scope="module")
def single_thread():
    """Tiny tensors gain nothing from intra-op threads; on a busy CPU they only add contention."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


class LinearPolicy(nn.Module):
    """logits = W·obs + b, a separate linear critic; evaluate() for the actions of a batch."""

    def __init__(self, critic: bool = True, seed: int = 0):
        super().__init__()
        self.pi = nn.Linear(OBS, ACT)
        self.v = nn.Linear(OBS, 1) if critic else None
        g = torch.Generator().manual_seed(seed)
        with torch.no_grad():
            for p in self.parameters():
                p.copy_(torch.randn(p.shape, generator=g) * 0.5)

    def log_probs(self, obs: torch.Tensor) -> torch.Tensor:
        return torch.log_softmax(self.pi(obs), dim=-1)

    def evaluate(self, batch: Batch):
        logp_all = self.log_probs(batch.inputs["obs"])
        logp = logp_all.gather(-1, batch.actions.long().unsqueeze(-1)).squeeze(-1)
        entropy = -(logp_all.exp() * logp_all).sum(-1)
        values = self.v(batch.inputs["obs"]).squeeze(-1) if self.v is not None else None
        return logp, entropy, values


def make_batch(policy: LinearPolicy, B: int = 8, T: int = 5, seed: int = 0, ref: bool = False,
               old_logp: bool = False) -> Batch:
    """Actions sampled from ``policy``; right-padded rows (at least one padded cell)."""
    g = torch.Generator().manual_seed(seed)
    obs = torch.randn(B, T, OBS, generator=g)
    with torch.no_grad():
        probs = policy.log_probs(obs).exp().reshape(-1, ACT)
    actions = torch.multinomial(probs, 1, generator=g).reshape(B, T)
    lengths = torch.randint(1, T + 1, (B,), generator=g)
    lengths[0] = T - 2
    mask = (torch.arange(T)[None, :] < lengths[:, None]).float()
    batch = Batch(
        actions=actions,
        mask=mask,
        advantages=torch.randn(B, T, generator=g),
        values=torch.randn(B, T, generator=g),
        returns=torch.randn(B, T, generator=g),
        inputs={"obs": obs},
    )
    if ref:
        with torch.no_grad():
            batch.ref_logp = LinearPolicy(seed=seed + 100).evaluate(batch)[0]
    if old_logp:
        with torch.no_grad():
            batch.old_logp = policy.evaluate(batch)[0]
    return batch


def params_of(module: nn.Module) -> list[torch.Tensor]:
    return [p.detach().clone() for p in module.parameters()]


def same_params(a: list[torch.Tensor], b: list[torch.Tensor]) -> bool:
    return all(torch.equal(x, y) for x, y in zip(a, b))


def true_kl(policy: LinearPolicy, ref: LinearPolicy, obs: torch.Tensor, mask: torch.Tensor) -> float:
    """Exact KL(pi || ref) over the action distribution, averaged over the real states."""
    with torch.no_grad():
        lp, lq = policy.log_probs(obs), ref.log_probs(obs)
        kl = (lp.exp() * (lp - lq)).sum(-1)
        return ((kl * mask).sum() / mask.sum()).item()
