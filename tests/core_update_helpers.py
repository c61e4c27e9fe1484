"""A tiny linear categorical policy, batches and the two-process DAPO setup for the ``ladder.core`` update
tests (CPU only)."""

from __future__ import annotations

import copy
import os

import pytest
import torch
from torch import nn

from ladder.core import Batch, UpdateConfig, update

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


class FixedLogp:
    """A "policy" whose log-probs are one leaf tensor: the gradient of the loss per token is ``logp.grad``."""

    def __init__(self, logp: torch.Tensor):
        self.logp = logp.detach().clone().requires_grad_()

    def evaluate(self, batch: Batch):
        return self.logp, None, None


def fixed_batch(mask, advantages, old_logp) -> Batch:
    """A batch for ``FixedLogp``: ``advantages`` per token [B, T] or per row [B]."""
    mask = torch.tensor(mask, dtype=torch.float32)
    adv = torch.tensor(advantages, dtype=torch.float32)
    if adv.dim() == 1:
        adv = adv[:, None].expand(mask.shape).clone()
    return Batch(actions=torch.zeros(mask.shape, dtype=torch.long), mask=mask, advantages=adv,
                 old_logp=torch.tensor(old_logp, dtype=torch.float32))


def widen(batch: Batch, extra: int, seed: int) -> Batch:
    """Append ``extra`` all-padding columns holding random (finite) data, as a longer completion elsewhere would."""
    g = torch.Generator().manual_seed(seed)
    B, T = batch.mask.shape
    out = copy.deepcopy(batch)
    for name in ("advantages", "values", "returns", "old_logp", "ref_logp"):
        x = getattr(out, name)
        if x is not None:
            setattr(out, name, torch.cat([x, torch.randn(B, extra, generator=g)], dim=1))
    out.actions = torch.cat([out.actions, torch.zeros(B, extra, dtype=out.actions.dtype)], dim=1)
    out.mask = torch.cat([out.mask, torch.zeros(B, extra)], dim=1)
    obs = out.inputs["obs"]
    out.inputs["obs"] = torch.cat([obs, torch.randn(B, extra, obs.shape[-1], generator=g)], dim=1)
    return out


# DAPO's N over two data-parallel processes (a module-level worker, so a fork server can start it)

# Four rows: the first two (process 0) hold 6 + 5 = 11 active tokens, the last two (process 1) 1 + 2 = 3.
DAPO_LENGTHS = [6, 5, 1, 2]
# No entropy bonus: it is each process's own token mean (as TRL's), not a share of the whole batch's sum.
DAPO_CFG = dict(mu=2, aggregation="sum_over_constant", max_grad_norm=None, value_coef=0.5)


class DDPLinearPolicy(LinearPolicy):
    """DistributedDataParallel calls ``forward``: make it ``evaluate``."""

    def forward(self, batch: Batch):
        return self.evaluate(batch)


def dapo_setup() -> tuple[DDPLinearPolicy, Batch]:
    policy = DDPLinearPolicy(seed=60)
    batch = make_batch(policy, B=4, T=6, seed=60, old_logp=True)
    batch.mask = (torch.arange(6)[None, :] < torch.tensor(DAPO_LENGTHS)[:, None]).float()
    batch.old_logp += 0.3 * torch.randn(batch.old_logp.shape, generator=torch.Generator().manual_seed(61))
    return policy, batch


def dapo_worker(rank: int, port: int, out_dir: str) -> None:
    """Process ``rank`` of two: its half of ``dapo_setup``'s batch, updated with the whole batch's N, then its own."""
    from ladder.runtime.distributed import Processes

    torch.set_num_threads(1)
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), WORLD_SIZE="2", RANK=str(rank),
                      LOCAL_RANK=str(rank))
    procs = Processes(torch.device("cpu"))
    policy, batch = dapo_setup()
    local = batch.select(torch.arange(2 * rank, 2 * rank + 2))
    out = {"local_tokens": local.num_tokens}
    for name, num_tokens in (("global", sum(DAPO_LENGTHS) / 2), ("local", float(local.num_tokens))):
        p = copy.deepcopy(policy)
        update(procs.wrap(p), copy.deepcopy(local), torch.optim.SGD(p.parameters(), lr=1.0), UpdateConfig(**DAPO_CFG),
               num_tokens=num_tokens)
        out[name] = params_of(p)
    torch.save(out, os.path.join(out_dir, f"rank{rank}.pt"))
    torch.distributed.destroy_process_group()
