"""``Batch`` and ``update`` of ``ladder.core`` with a tiny linear categorical policy, CPU only."""

from __future__ import annotations

import copy
import math
import sys

import pytest
import torch
from torch import nn

from ladder.core import Batch, UpdateConfig, update

# ``ladder.core.update`` the attribute is the function; the module itself lives in sys.modules
update_module = sys.modules["ladder.core.update"]

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


# --------------------------------------------------------------------------- update: ratio = 1


def test_update_single_pass_ratio_is_exactly_one():
    policy = LinearPolicy()
    batch = make_batch(policy)
    opt = torch.optim.Adam(policy.parameters(), lr=0.1)
    passes = update(policy, batch, opt, UpdateConfig(mu=1, num_minibatches=1),
                    generator=torch.Generator().manual_seed(0))
    assert len(passes) == 1
    s = passes[0]
    assert s["ratio_min"] == 1.0 and s["ratio_max"] == 1.0 and s["ratio_mean"] == 1.0
    assert s["approx_kl_old_k1"] == 0.0 and s["approx_kl_old_k3"] == 0.0
    assert s["clip_frac"] == 0.0
    assert batch.old_logp is None                           # mu = 1: no extra forward recorded


def test_update_first_minibatch_of_first_pass_has_ratio_one():
    policy = LinearPolicy()
    batch = make_batch(policy, B=8)
    with torch.no_grad():
        before = policy.evaluate(batch)[0]
    calls = []
    original = policy.evaluate

    def spy(mb):
        out = original(mb)
        if torch.is_grad_enabled():                         # the training forwards, not the recording
            calls.append((mb, out[0].detach().clone()))
        return out

    policy.evaluate = spy
    opt = torch.optim.Adam(policy.parameters(), lr=0.1)
    cfg = UpdateConfig(mu=3, num_minibatches=2)
    passes = update(policy, batch, opt, cfg, generator=torch.Generator().manual_seed(0))
    assert len(passes) == 3 and len(calls) == 6

    # old_logp was recorded once, from the policy before any step
    assert batch.old_logp is not None and batch.old_logp.shape == batch.actions.shape
    assert torch.allclose(batch.old_logp, before, atol=1e-6, rtol=0)

    mb, logp = calls[0]
    real = mb.mask.bool()
    ratio = torch.exp(logp - mb.old_logp)
    assert torch.all(ratio[real] == 1.0)
    # after the first optimiser step the policy has moved: the next minibatch's ratio is not 1
    mb2, logp2 = calls[1]
    ratio2 = torch.exp(logp2 - mb2.old_logp)
    assert (ratio2[mb2.mask.bool()] != 1.0).any()
    assert passes[0]["ratio_min"] < 1.0 < passes[0]["ratio_max"]
    # each pass reports the extreme ratios over all of its minibatches (the real tokens only)
    for k in range(3):
        ratios = [torch.exp(lp - m.old_logp)[m.mask.bool()] for m, lp in calls[2 * k:2 * k + 2]]
        assert passes[k]["ratio_min"] == pytest.approx(min(r.min().item() for r in ratios), rel=1e-6)
        assert passes[k]["ratio_max"] == pytest.approx(max(r.max().item() for r in ratios), rel=1e-6)


def test_update_uses_given_old_logp():
    policy = LinearPolicy()
    batch = make_batch(policy, old_logp=True)
    batch.old_logp = batch.old_logp - 0.1                   # r = e^0.1 everywhere
    opt = torch.optim.SGD(policy.parameters(), lr=0.0)
    s = update(policy, batch, opt, UpdateConfig())[0]
    expected = math.exp(0.1)
    assert s["ratio_min"] == pytest.approx(expected, rel=1e-5)
    assert s["ratio_max"] == pytest.approx(expected, rel=1e-5)
    assert s["approx_kl_old_k1"] == pytest.approx(-0.1, rel=1e-4)


def test_update_records_old_logp_only_when_reused():
    policy = LinearPolicy()
    b1 = make_batch(policy)
    update(policy, b1, torch.optim.SGD(policy.parameters(), lr=0.0), UpdateConfig(mu=2))
    assert b1.old_logp is not None
    b2 = make_batch(policy)
    update(policy, b2, torch.optim.SGD(policy.parameters(), lr=0.0), UpdateConfig(num_minibatches=2))
    assert b2.old_logp is not None
    b3 = make_batch(policy)
    update(policy, b3, torch.optim.SGD(policy.parameters(), lr=0.0), UpdateConfig())
    assert b3.old_logp is None


# --------------------------------------------------------------------------- update: statistics

PASS_KEYS = {"clip_frac_low", "clip_frac_high", "clip_frac", "approx_kl_old_k1", "approx_kl_old_k3",
             "ratio_min", "ratio_mean", "ratio_max", "entropy", "loss", "loss_pg", "grad_norm",
             "skipped_steps", "pass"}


def test_update_statistics_keys_per_pass():
    policy = LinearPolicy()
    batch = make_batch(policy, ref=True)
    opt = torch.optim.Adam(policy.parameters(), lr=0.05)
    cfg = UpdateConfig(mu=3, num_minibatches=2, kl_coef=0.1, entropy_coef=0.01)
    passes = update(policy, batch, opt, cfg, generator=torch.Generator().manual_seed(0))
    assert [p["pass"] for p in passes] == [0, 1, 2]
    for p in passes:
        missing = (PASS_KEYS | {"kl_ref", "value_loss", "explained_variance"}) - set(p)
        assert not missing, missing
        assert all(math.isfinite(v) for v in p.values())
        assert p["ratio_min"] <= p["ratio_mean"] <= p["ratio_max"]
        assert 0.0 <= p["clip_frac_low"] <= 1 and 0.0 <= p["clip_frac_high"] <= 1
        assert p["skipped_steps"] == 0.0
        assert p["entropy"] > 0 and p["kl_ref"] > 0

    # no reference policy: no kl_ref; no critic: no value_loss / explained_variance
    actor = LinearPolicy(critic=False)
    batch = make_batch(actor)
    p = update(actor, batch, torch.optim.Adam(actor.parameters(), lr=0.05), UpdateConfig(mu=2))[-1]
    assert PASS_KEYS <= set(p)
    assert "kl_ref" not in p and "value_loss" not in p and "explained_variance" not in p


def test_update_larger_mu_gives_larger_ratio_spread():
    def run(mu):
        policy = LinearPolicy(seed=1)
        batch = make_batch(policy, B=8, seed=1)
        opt = torch.optim.Adam(policy.parameters(), lr=0.05)
        cfg = UpdateConfig(mu=mu, num_minibatches=2, clip_eps_low=0.2)
        return update(policy, batch, opt, cfg, generator=torch.Generator().manual_seed(0))

    one, many = run(1), run(8)
    spread_one = one[-1]["ratio_max"] - one[-1]["ratio_min"]
    spread_many = many[-1]["ratio_max"] - many[-1]["ratio_min"]
    assert spread_one > 0
    assert spread_many > 2 * spread_one
    assert many[-1]["approx_kl_old_k3"] > one[-1]["approx_kl_old_k3"]
    assert many[-1]["clip_frac"] > 0


def test_update_target_kl_stops_early():
    def run(target):
        policy = LinearPolicy(seed=2)
        batch = make_batch(policy, seed=2)
        opt = torch.optim.Adam(policy.parameters(), lr=0.05)
        cfg = UpdateConfig(mu=10, num_minibatches=2, target_kl=target)
        return update(policy, batch, opt, cfg, generator=torch.Generator().manual_seed(0))

    assert len(run(None)) == 10
    target = 1e-3
    passes = run(target)
    assert 1 <= len(passes) < 10
    assert passes[-1]["approx_kl_old_k3"] > target
    assert all(p["approx_kl_old_k3"] <= target for p in passes[:-1])
    assert len(run(1e9)) == 10


# --------------------------------------------------------------------------- update: skipping


def test_update_nan_advantage_skips_step():
    policy = LinearPolicy()
    batch = make_batch(policy)
    batch.advantages[0, 0] = float("nan")                    # a real position (row 0 has T-2 tokens)
    before = params_of(policy)
    opt = torch.optim.Adam(policy.parameters(), lr=0.1)
    passes = update(policy, batch, opt, UpdateConfig(mu=2, num_minibatches=1))
    assert [p["skipped_steps"] for p in passes] == [1.0, 1.0]
    assert same_params(before, params_of(policy))
    assert all(p.grad is None for p in policy.parameters())


class CountingAdam(torch.optim.Adam):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.steps = 0

    def step(self, closure=None):
        self.steps += 1
        return super().step(closure)


def test_update_nan_skips_only_its_minibatch():
    policy = LinearPolicy()
    batch = make_batch(policy, B=8)
    batch.advantages[0, 0] = float("nan")
    before = params_of(policy)
    opt = CountingAdam(policy.parameters(), lr=0.1)
    passes = update(policy, batch, opt, UpdateConfig(mu=1, num_minibatches=2),
                    generator=torch.Generator().manual_seed(0))
    assert passes[0]["skipped_steps"] == 1.0
    assert opt.steps == 1                                    # only the clean minibatch stepped
    assert not same_params(before, params_of(policy))
    assert all(torch.isfinite(p).all() for p in policy.parameters())


class InfiniteGradPolicy(LinearPolicy):
    """Finite log-probs whose gradient is NaN: sqrt'(0) = inf times a zero."""

    def evaluate(self, batch: Batch):
        logp, entropy, values = super().evaluate(batch)
        w = self.pi.weight[0, 0]
        return logp + 0.0 * torch.sqrt(w - w), entropy, values


def test_update_non_finite_gradient_with_finite_loss_skips_step():
    policy = InfiniteGradPolicy()
    batch = make_batch(policy)
    before = params_of(policy)
    opt = CountingAdam(policy.parameters(), lr=0.1)
    passes = update(policy, batch, opt, UpdateConfig(mu=2))
    assert all(math.isfinite(p["loss"]) for p in passes)
    assert [p["skipped_steps"] for p in passes] == [1.0, 1.0]
    assert opt.steps == 0
    assert same_params(before, params_of(policy))


@pytest.mark.parametrize("max_grad_norm", [None, 1e-3])
def test_update_clips_the_gradient_norm(max_grad_norm):
    policy = LinearPolicy(seed=10)
    batch = make_batch(policy, seed=10)
    before = params_of(policy)
    cfg = UpdateConfig(max_grad_norm=max_grad_norm)
    s = update(policy, batch, torch.optim.SGD(policy.parameters(), lr=1.0), cfg)[0]
    step_norm = torch.sqrt(sum(((a - b) ** 2).sum() for a, b in zip(before, params_of(policy)))).item()
    assert s["grad_norm"] > 1e-2                             # the norm before clipping
    expected = s["grad_norm"] if max_grad_norm is None else max_grad_norm
    assert step_norm == pytest.approx(expected, rel=1e-4)


# --------------------------------------------------------------------------- update: KL to pi_ref


@pytest.mark.parametrize("estimator,correction", [
    ("k1", True), ("k2", True), ("k3", True),
    # plain k1 is left out: as a loss its gradient, -grad log pi, has zero mean on-policy
    ("k2", False), ("k3", False),
])
def test_update_kl_coef_moves_policy_towards_ref(estimator, correction):
    policy, ref = LinearPolicy(critic=False, seed=3), LinearPolicy(critic=False, seed=4)
    batch = make_batch(policy, B=16, T=6, seed=3)
    batch.advantages = torch.zeros_like(batch.advantages)    # no reward signal: only the KL acts
    with torch.no_grad():
        batch.ref_logp = ref.evaluate(batch)[0]
    obs, mask = batch.inputs["obs"], batch.mask
    kl_before = true_kl(policy, ref, obs, mask)
    assert kl_before > 0.1

    still = copy.deepcopy(policy)
    before = params_of(still)
    update(still, copy.deepcopy(batch), torch.optim.Adam(still.parameters(), lr=0.02),
           UpdateConfig(mu=5, kl_coef=0.0, kl_estimator=estimator, kl_correction=correction))
    assert same_params(before, params_of(still))              # kl_coef = 0: nothing pulls

    opt = torch.optim.Adam(policy.parameters(), lr=0.02)
    cfg = UpdateConfig(mu=5, kl_coef=1.0, kl_estimator=estimator, kl_correction=correction)
    passes = update(policy, batch, opt, cfg)
    kl_after = true_kl(policy, ref, obs, mask)
    assert kl_after < 0.8 * kl_before
    assert passes[-1]["kl_ref"] < passes[0]["kl_ref"]


# --------------------------------------------------------------------------- update: the loss


def reference_loss(policy, batch, old_logp, cfg: UpdateConfig, num_tokens: float):
    """L = agg(L_clip) + c_v agg(L_V) - c_H agg(H) + beta agg(w * k3), written out by hand."""
    logp, entropy, values = policy.evaluate(batch)
    m = batch.mask
    B, T = m.shape
    adv = batch.advantages
    if cfg.normalize_advantages:
        n = m.sum()
        mean = (adv * m).sum() / n
        var = (((adv - mean) * m) ** 2).sum() / (n - 1)
        adv = (adv - mean) / torch.sqrt(var + 1e-8) * m

    def agg(x):
        if cfg.aggregation == "token_mean":
            return (x * m).sum() / m.sum()
        if cfg.aggregation == "seq_mean_token_mean":
            return ((x * m).sum(1) / m.sum(1)).sum() / B
        if cfg.aggregation == "dr_grpo":
            return (x * m).sum() / (B * T)
        return (x * m).sum() / num_tokens

    r = torch.exp(logp - old_logp)
    lo, hi = 1 - cfg.clip_eps_low, 1 + cfg.clip_eps_high
    l_pg = -torch.minimum(r * adv, torch.where(r < lo, lo, torch.where(r > hi, hi, r)) * adv)
    dv = values - batch.values
    v_clip = batch.values + torch.where(dv > cfg.value_clip, cfg.value_clip,
                                        torch.where(dv < -cfg.value_clip, -cfg.value_clip, dv))
    l_v = 0.5 * torch.maximum((values - batch.returns) ** 2, (v_clip - batch.returns) ** 2)
    ell = batch.ref_logp - logp
    kl = torch.exp(logp - old_logp) * (torch.exp(ell) - 1 - ell)
    return agg(l_pg) + cfg.value_coef * agg(l_v) - cfg.entropy_coef * agg(entropy) + cfg.kl_coef * agg(kl)


@pytest.mark.parametrize("aggregation", ["token_mean", "seq_mean_token_mean", "dr_grpo", "dapo"])
@pytest.mark.parametrize("normalize", [False, True])
def test_update_step_is_gradient_of_the_documented_loss(aggregation, normalize):
    policy = LinearPolicy(seed=5)
    twin = copy.deepcopy(policy)
    batch = make_batch(policy, B=6, T=5, seed=5, ref=True, old_logp=True)
    g = torch.Generator().manual_seed(50)
    batch.old_logp = batch.old_logp + 0.4 * torch.randn(batch.old_logp.shape, generator=g)
    batch.values = batch.returns + torch.randn(batch.returns.shape, generator=g)
    cfg = UpdateConfig(clip_eps_low=0.2, clip_eps_high=0.3, aggregation=aggregation, value_coef=0.7,
                       value_clip=0.2, entropy_coef=0.05, kl_coef=0.3, kl_estimator="k3",
                       normalize_advantages=normalize, max_grad_norm=None)
    before = params_of(policy)
    stats = update(policy, batch, torch.optim.SGD(policy.parameters(), lr=1.0), cfg)[0]
    assert 0 < stats["clip_frac"] < 1                        # the clip is active somewhere

    loss = reference_loss(twin, batch, batch.old_logp, cfg, float(batch.num_tokens))
    loss.backward()
    assert stats["loss"] == pytest.approx(loss.item(), rel=1e-5, abs=1e-6)
    for p0, p1, p in zip(before, params_of(policy), twin.parameters()):
        assert torch.allclose(p0 - p1, p.grad, atol=1e-5, rtol=1e-5)


def test_compute_loss_matches_the_documented_loss():
    from ladder.core import compute_loss

    policy = LinearPolicy(seed=11)
    batch = make_batch(policy, B=6, T=5, seed=11, ref=True, old_logp=True)
    g = torch.Generator().manual_seed(110)
    batch.old_logp = batch.old_logp + 0.4 * torch.randn(batch.old_logp.shape, generator=g)
    cfg = UpdateConfig(clip_eps_low=0.2, clip_eps_high=0.3, aggregation="dapo", value_coef=0.7,
                       value_clip=0.2, entropy_coef=0.05, kl_coef=0.3)
    loss, stats, _ = compute_loss(policy, batch, cfg, 11.0)
    expected = reference_loss(policy, batch, batch.old_logp, cfg, 11.0)
    assert loss.item() == pytest.approx(expected.item(), rel=1e-5)
    assert {"loss_pg", "value_loss", "entropy", "kl_ref", "clip_frac", "ratio_max"} <= set(stats)


@pytest.mark.parametrize("aggregation", ["token_mean", "seq_mean_token_mean", "dr_grpo", "dapo"])
def test_update_aggregation_per_minibatch(aggregation):
    # lr = 0: the policy never moves, so each minibatch's loss can be recomputed afterwards.
    # dapo divides by the whole batch's token count shared out over the minibatches.
    policy = LinearPolicy(critic=False, seed=6)
    batch = make_batch(policy, B=8, T=5, seed=6)
    cfg = UpdateConfig(num_minibatches=2, objective="reinforce", aggregation=aggregation)
    stats = update(policy, batch, torch.optim.SGD(policy.parameters(), lr=0.0), cfg,
                   generator=torch.Generator().manual_seed(7))[0]
    losses = []
    with torch.no_grad():
        for mb in batch.minibatches(2, torch.Generator().manual_seed(7)):
            logp = policy.evaluate(mb)[0].tolist()
            x = [[-mb.advantages[b, i].item() * logp[b][i] for i in range(5)] for b in range(4)]
            m = mb.mask.tolist()
            total = sum(x[b][i] for b in range(4) for i in range(5) if m[b][i])
            if aggregation == "token_mean":
                losses.append(total / sum(map(sum, m)))
            elif aggregation == "seq_mean_token_mean":
                per_seq = [sum(x[b][i] for i in range(5) if m[b][i]) / sum(m[b]) for b in range(4)]
                losses.append(sum(per_seq) / 4)
            elif aggregation == "dr_grpo":
                losses.append(total / 20)
            else:
                losses.append(total / (batch.num_tokens / 2))
    assert stats["loss_pg"] == pytest.approx(sum(losses) / 2, rel=1e-5)


def test_update_padding_does_not_change_the_update():
    def run(batch):
        policy = LinearPolicy(seed=8)
        opt = torch.optim.SGD(policy.parameters(), lr=0.1)
        cfg = UpdateConfig(mu=2, num_minibatches=2, kl_coef=0.1, entropy_coef=0.01, value_clip=0.3,
                           normalize_advantages=True)
        stats = update(policy, batch, opt, cfg, generator=torch.Generator().manual_seed(1))
        return params_of(policy), stats

    base = make_batch(LinearPolicy(seed=8), B=8, T=6, seed=8, ref=True, old_logp=True)
    pad = base.mask == 0
    assert pad.any()
    g = torch.Generator().manual_seed(80)

    def perturb(x, where):
        return torch.where(where, x + torch.randn(x.shape, generator=g), x)

    def perturbed(where):
        b = copy.deepcopy(base)
        for name in ("advantages", "values", "returns", "old_logp", "ref_logp"):
            setattr(b, name, perturb(getattr(b, name), where))
        b.inputs["obs"] = perturb(b.inputs["obs"], where[..., None])
        b.actions = torch.where(where, (b.actions + 1) % ACT, b.actions)
        return b

    p0, s0 = run(copy.deepcopy(base))
    p1, s1 = run(perturbed(pad))
    for a, b in zip(p0, p1):
        assert torch.allclose(a, b, atol=1e-7, rtol=0)
    assert len(s0) == len(s1) == 2
    for r0, r1 in zip(s0, s1):
        assert r0.keys() == r1.keys()
        for k in r0:
            assert r0[k] == pytest.approx(r1[k], rel=1e-6, abs=1e-7), k
    # control: the same perturbation of one real cell does change the result
    real = torch.zeros_like(pad)
    real[1, 0] = True
    p2, _ = run(perturbed(real))
    assert not all(torch.allclose(a, b, atol=1e-4, rtol=0) for a, b in zip(p0, p2))


# --------------------------------------------------------------------------- update: determinism


def test_update_is_deterministic_with_seeded_generator():
    def run(seed, global_seed):
        torch.manual_seed(global_seed)                       # the global RNG must not matter
        policy = LinearPolicy(seed=9)
        batch = make_batch(policy, B=8, seed=9, ref=True)
        opt = torch.optim.Adam(policy.parameters(), lr=0.05)
        cfg = UpdateConfig(mu=3, num_minibatches=4, kl_coef=0.05)
        stats = update(policy, batch, opt, cfg, generator=torch.Generator().manual_seed(seed))
        return params_of(policy), stats

    p_a, s_a = run(0, 1)
    p_b, s_b = run(0, 2)
    assert same_params(p_a, p_b)
    assert s_a == s_b
    p_c, _ = run(1, 1)                                       # another shuffle: another result
    assert not same_params(p_a, p_c)


def test_update_rejects_bad_config():
    policy = LinearPolicy()
    opt = torch.optim.SGD(policy.parameters(), lr=0.0)
    with pytest.raises(ValueError):
        update(policy, make_batch(policy), opt, UpdateConfig(mu=0))
    with pytest.raises(ValueError):
        update(policy, make_batch(policy, B=8), opt, UpdateConfig(num_minibatches=3))
    with pytest.raises(ValueError):
        update(policy, make_batch(policy), opt, UpdateConfig(objective="ppo2"))


def test_update_first_ratio_is_one_seen_through_torch_exp():
    # the ratio is exp(logp - old_logp) computed with torch.exp inside update(); spying on it shows
    # the very first ratio tensor of a reused batch is exactly one on the first minibatch.
    policy = LinearPolicy()
    batch = make_batch(policy, B=8)
    seen = []
    real_exp = torch.exp

    class SpyTorch:
        def __getattr__(self, name):
            return getattr(torch, name)

        @staticmethod
        def exp(x):
            out = real_exp(x)
            seen.append(out.detach().clone())
            return out

    mp = pytest.MonkeyPatch()
    mp.setattr(update_module, "torch", SpyTorch())
    try:
        update(policy, batch, torch.optim.Adam(policy.parameters(), lr=0.1),
               UpdateConfig(mu=3, num_minibatches=2), generator=torch.Generator().manual_seed(0))
    finally:
        mp.undo()
    assert len(seen) >= 6
    assert torch.all(seen[0] == 1.0)
    assert not torch.all(seen[-1] == 1.0)
