"""``update``: ratio 1 at sampling, statistics per pass, skipped non-finite steps, determinism, the
sequence-level ratio and the objectives, padding that never reaches the gradient."""

from __future__ import annotations

import copy
import math
import sys
from dataclasses import fields

import pytest
import torch
from core_update_helpers import LinearPolicy, make_batch, params_of, same_params, single_thread  # noqa: F401 (autouse fixture)

from ladder.core import CISPO, Batch, UpdateConfig, compute_loss, update

# ``ladder.core.update`` the attribute is the function; the module itself lives in sys.modules
update_module = sys.modules["ladder.core.update"]


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
    twin = copy.deepcopy(policy)                            # π_old: the policy before any step
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

    # old_logp was recorded once, from the policy before any step, into a copy of the batch
    assert batch.old_logp is None
    with torch.no_grad():
        assert all(torch.allclose(mb.old_logp, twin.evaluate(mb)[0], atol=1e-6, rtol=0) for mb, _ in calls)

    mb, logp = calls[0]
    real = mb.mask.bool()
    ratio = torch.exp(logp - mb.old_logp)
    # 1 up to float32 rounding: old_logp came from a forward over other rows, whose kernels may round otherwise
    assert torch.allclose(ratio[real], torch.ones_like(ratio[real]), atol=1e-5, rtol=0)
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


@pytest.mark.parametrize("mu,num_minibatches", [(2, 1), (1, 2), (2, 2), (1, 1)])
def test_update_leaves_the_callers_batch_as_it_was(monkeypatch, mu, num_minibatches):
    """π_old, recorded only when it is reused (μ > 1 or several minibatches), goes into a copy: the
    caller's old_logp None stays None and every tensor of its batch holds what it held."""
    recorded = []
    real = update_module._record_old_logp
    monkeypatch.setattr(update_module, "_record_old_logp", lambda *a: recorded.append(1) or real(*a))
    policy = LinearPolicy()
    batch = make_batch(policy, B=8, ref=True)
    before = copy.deepcopy(batch)
    cfg = UpdateConfig(mu=mu, num_minibatches=num_minibatches, kl_coef=0.1, normalize_advantages=True)
    update(policy, batch, torch.optim.SGD(policy.parameters(), lr=0.5), cfg)
    assert len(recorded) == (mu > 1 or num_minibatches > 1)
    assert batch.old_logp is None
    for f in fields(Batch):
        mine, theirs = getattr(batch, f.name), getattr(before, f.name)
        if f.name == "inputs":
            assert mine.keys() == theirs.keys() and all(torch.equal(mine[k], theirs[k]) for k in mine)
        elif isinstance(theirs, torch.Tensor) or theirs is None:
            assert (mine is None) == (theirs is None) and (mine is None or torch.equal(mine, theirs)), f.name
        else:
            assert mine == theirs, f.name


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
        assert p["clip_frac"] == pytest.approx(p["clip_frac_low"] + p["clip_frac_high"])  # two disjoint sides
        assert p["skipped_steps"] == 0.0
        assert p["entropy"] > 0 and p["kl_ref"] > 0
    # nothing clipped while the ratio stays within 1 ± ε (pass 0: 0.90 to 1.09); clipped below and above once
    # the steps have pushed it past (pass 1: 0.70 to 1.20)
    assert passes[0]["ratio_min"] > 0.8 and passes[0]["ratio_max"] < 1.2 and passes[0]["clip_frac"] == 0
    assert passes[1]["clip_frac_low"] > 0 and passes[1]["clip_frac_high"] > 0

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
    # the very first ratio tensor of a reused batch is one on the first minibatch (to float32 rounding).
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
    assert torch.allclose(seen[0], torch.ones_like(seen[0]), atol=1e-5, rtol=0)  # 1 up to float32 rounding
    assert not torch.allclose(seen[-1], torch.ones_like(seen[-1]), atol=1e-5, rtol=0)


# --------------------------------------------------------------------------- update: ratio level, objective


def test_update_sequence_ratio_drops_clipped_rows_that_token_level_keeps():
    # Every row: first token r = 1, the others r = e (log ratio 1): s_i = e^((n−1)/n) ≥ e^0.5 > 1.2,
    # Â > 0, so GSPO clips every row and the step is zero; token level still learns from column 0.
    def run(level):
        policy = LinearPolicy(critic=False, seed=21)
        batch = make_batch(policy, B=6, T=4, seed=21, old_logp=True)
        batch.mask = (torch.arange(4)[None, :] < torch.tensor([2, 4, 3, 2, 4, 3])[:, None]).float()
        batch.old_logp[:, 1:] -= 1.0
        batch.advantages = batch.advantages.abs() + 0.1
        before = params_of(policy)
        stats = update(policy, batch, torch.optim.SGD(policy.parameters(), lr=1.0),
                       UpdateConfig(ratio_level=level, max_grad_norm=None))[0]
        return before, params_of(policy), stats

    before, after, stats = run("sequence")
    assert same_params(before, after)
    assert stats["clip_frac"] == 1.0
    before, after, stats = run("token")
    assert not same_params(before, after)
    assert 0 < stats["clip_frac"] < 1


@pytest.mark.parametrize("objective,level", [("clipped", "sequence"), ("cispo", "token"), ("cispo", "sequence")])
def test_update_variants_ignore_finite_garbage_in_padding(objective, level):
    def run(batch):
        policy = LinearPolicy(seed=22)
        spec = CISPO(max_weight=1.1) if objective == "cispo" else objective
        cfg = UpdateConfig(mu=2, num_minibatches=2, objective=spec, ratio_level=level, kl_coef=0.1, value_clip=0.3)
        update(policy, batch, torch.optim.SGD(policy.parameters(), lr=0.3), cfg,
               generator=torch.Generator().manual_seed(2))
        return params_of(policy)

    base = make_batch(LinearPolicy(seed=22), B=8, T=5, seed=22, ref=True, old_logp=True)
    g = torch.Generator().manual_seed(220)
    base.old_logp += 0.3 * torch.randn(base.old_logp.shape, generator=g)
    pad = base.mask == 0
    noisy = copy.deepcopy(base)
    for name in ("advantages", "values", "returns", "old_logp", "ref_logp"):
        x = getattr(noisy, name)
        setattr(noisy, name, torch.where(pad, x + 5 * torch.randn(x.shape, generator=g), x))
    for a, b in zip(run(copy.deepcopy(base)), run(noisy)):
        assert torch.allclose(a, b, atol=1e-7, rtol=0)


@pytest.mark.parametrize("objective,level", [("clipped", "token"), ("clipped", "sequence"), ("cispo", "token"),
                                             ("reinforce", "token")])
def test_non_finite_advantages_in_padding_never_reach_the_gradient(objective, level):
    policy = LinearPolicy(seed=23)
    batch = make_batch(policy, B=6, T=5, seed=23, ref=True, old_logp=True)
    batch.advantages = torch.where(batch.mask == 0, torch.full_like(batch.advantages, math.nan), batch.advantages)
    cfg = UpdateConfig(objective=objective, ratio_level=level, kl_coef=0.1, max_grad_norm=None)
    stats = update(policy, batch, torch.optim.SGD(policy.parameters(), lr=0.1), cfg)[0]
    assert stats["skipped_steps"] == 0 and math.isfinite(stats["grad_norm"])


def test_update_rejects_unknown_ratio_level_and_objective():
    policy = LinearPolicy(seed=23)
    batch = make_batch(policy, B=2, T=3, seed=23)
    with pytest.raises(ValueError, match="ratio_level"):
        compute_loss(policy, batch, UpdateConfig(ratio_level="row"))
    with pytest.raises(ValueError, match="objective"):
        compute_loss(policy, batch, UpdateConfig(objective="gspo"))
