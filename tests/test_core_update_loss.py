"""``update`` and ``compute_loss``: the KL to π_ref, the documented loss and its aggregations, the
sequence ratio (GSPO), δ and CISPO in the loss, Dr. GRPO's constant normaliser and DAPO's token count
across data-parallel processes."""

from __future__ import annotations

import copy
import math
import socket

import pytest
import torch
from core_update_helpers import (
    ACT,
    DAPO_CFG,
    DAPO_LENGTHS,
    FixedLogp,
    LinearPolicy,
    dapo_setup,
    dapo_worker,
    fixed_batch,
    make_batch,
    params_of,
    same_params,
    single_thread,  # noqa: F401 (autouse fixture)
    true_kl,
    widen,
)

from ladder.core import CISPO, Clipped, UpdateConfig, compute_loss, update

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
    """L = agg(L_clip) + c_v agg(L_V) - c_H mean_t(H) + beta agg(w * k3), written out by hand (the entropy
    bonus a token mean whatever the aggregation)."""
    logp, entropy, values = policy.evaluate(batch)
    m = batch.mask
    B = m.shape[0]
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
    entropy_mean = (entropy * m).sum() / m.sum()
    return agg(l_pg) + cfg.value_coef * agg(l_v) - cfg.entropy_coef * entropy_mean + cfg.kl_coef * agg(kl)


# sum_over_constant with a budget rows · L_max (Dr. GRPO, L_max = 8 > T) and with a token count (DAPO)
AGGREGATIONS = [("token_mean", None), ("seq_mean_token_mean", None), ("sum_over_constant", 6 * 8.0),
                ("sum_over_constant", 17.0)]


@pytest.mark.parametrize("aggregation,num_tokens", AGGREGATIONS)
@pytest.mark.parametrize("normalize", [False, True])
def test_update_step_is_gradient_of_the_documented_loss(aggregation, num_tokens, normalize):
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
    stats = update(policy, batch, torch.optim.SGD(policy.parameters(), lr=1.0), cfg, num_tokens=num_tokens)[0]
    assert 0 < stats["clip_frac"] < 1                        # the clip is active somewhere

    loss = reference_loss(twin, batch, batch.old_logp, cfg, num_tokens)
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
    cfg = UpdateConfig(clip_eps_low=0.2, clip_eps_high=0.3, aggregation="sum_over_constant", value_coef=0.7,
                       value_clip=0.2, entropy_coef=0.05, kl_coef=0.3)
    loss, stats, _ = compute_loss(policy, batch, cfg, 11.0)
    expected = reference_loss(policy, batch, batch.old_logp, cfg, 11.0)
    assert loss.item() == pytest.approx(expected.item(), rel=1e-5)
    assert {"loss_pg", "value_loss", "entropy", "kl_ref", "clip_frac", "ratio_max"} <= set(stats)


@pytest.mark.parametrize("aggregation,num_tokens", [*AGGREGATIONS, ("sum_over_constant", "real tokens")])
def test_update_aggregation_per_minibatch(aggregation, num_tokens):
    # lr = 0: the policy never moves, so each minibatch's loss can be recomputed afterwards.
    # sum_over_constant: each minibatch divides by its share of the whole batch's constant.
    policy = LinearPolicy(critic=False, seed=6)
    batch = make_batch(policy, B=8, T=5, seed=6)
    num_tokens = float(batch.num_tokens) if num_tokens == "real tokens" else num_tokens
    cfg = UpdateConfig(num_minibatches=2, objective="reinforce", aggregation=aggregation)
    stats = update(policy, batch, torch.optim.SGD(policy.parameters(), lr=0.0), cfg,
                   generator=torch.Generator().manual_seed(7), num_tokens=num_tokens)[0]
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
            else:
                losses.append(total / (num_tokens / 2))
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


# --------------------------------------------------------------------------- compute_loss: GSPO, δ, CISPO


# row 0: token log ratios 0, 0, 1.5 (r = 1, 1, 4.48): GSPO's s = e^0.5 = 1.65 > 1.2, whole row clipped
# row 1: token log ratios 0.1, -0.1 and padding: s = 1, unclipped; its tokens' r = e^±0.1 lie in [0.8, 1.2]
SEQ_LOGP = [[-1.0, -1.0, -1.0], [-1.0, -1.0, 0.0]]
SEQ_OLD = [[-1.0, -1.0, -2.5], [-1.1, -0.9, 7.0]]
SEQ_MASK = [[1, 1, 1], [1, 1, 0]]


def test_compute_loss_sequence_ratio_is_shared_and_clips_whole_rows():
    batch = fixed_batch(SEQ_MASK, [1.0, -1.0], SEQ_OLD)
    N = 5.0
    policy = FixedLogp(torch.tensor(SEQ_LOGP))
    loss, stats, tensors = compute_loss(policy, batch, UpdateConfig(ratio_level="sequence"))
    ratio = tensors["ratio"]
    assert torch.allclose(ratio[0], torch.full((3,), math.exp(0.5)))
    assert torch.allclose(ratio[1, :2], torch.ones(2))     # every real token of a row shares s_i
    # L = [3 · (−1.2 · 1) + 2 · (−1 · −1)] / 5 : row 0 sits on the clip, row 1 is the unclipped s · Â
    assert loss.item() == pytest.approx((3 * -1.2 + 2 * 1.0) / N, rel=1e-6)
    loss.backward()
    # a clipped row: no gradient at all; an unclipped row: −Â · s / N on every real token
    assert torch.equal(policy.logp.grad[0], torch.zeros(3))
    assert torch.allclose(policy.logp.grad[1], torch.tensor([1 / N, 1 / N, 0.0]), atol=1e-7)

    token = FixedLogp(torch.tensor(SEQ_LOGP))
    loss, _, tensors = compute_loss(token, batch, UpdateConfig(ratio_level="token"))
    loss.backward()
    r = tensors["ratio"]
    # token level clips only the one token with r = e^1.5; the other two of row 0 keep −Â · r_t / N
    expected = torch.tensor([[-1 / N, -1 / N, 0.0], [r[1, 0].item() / N, r[1, 1].item() / N, 0.0]])
    assert torch.allclose(token.logp.grad, expected, atol=1e-7)


def test_compute_loss_passes_delta():
    # two tokens, Â = −1: r = e^2 = 7.39 (capped at delta = 4) and r = 1; token_mean over 2
    batch = fixed_batch([[1, 1]], [-1.0], [[-3.0, -1.0]])
    capped = FixedLogp(torch.tensor([[-1.0, -1.0]]))
    loss, _, _ = compute_loss(capped, batch, UpdateConfig(objective=Clipped(delta=4.0)))
    assert loss.item() == pytest.approx((4.0 + 1.0) / 2, rel=1e-6)
    loss.backward()
    assert torch.allclose(capped.logp.grad, torch.tensor([[0.0, 0.5]]))
    plain = FixedLogp(torch.tensor([[-1.0, -1.0]]))
    loss, _, _ = compute_loss(plain, batch, UpdateConfig())
    assert loss.item() == pytest.approx((math.exp(2) + 1.0) / 2, rel=1e-6)
    loss.backward()
    assert torch.allclose(plain.logp.grad, torch.tensor([[math.exp(2) / 2, 0.5]]))


def test_compute_loss_cispo_objective():
    batch = fixed_batch([[1, 1, 0]], [2.0], [[-1.0 - math.log(8.0), -1.0, 0.0]])
    policy = FixedLogp(torch.tensor([[-1.0, -1.0, math.nan]]))
    loss, _, _ = compute_loss(policy, batch, UpdateConfig(objective=CISPO(max_weight=3.0)))
    # weights min(8, 3) = 3 and 1: L = −(3 · 2 · −1 + 1 · 2 · −1) / 2 = 4
    assert loss.item() == pytest.approx(4.0, rel=1e-6)
    loss.backward()
    assert torch.allclose(policy.logp.grad, torch.tensor([[-3.0, -1.0, 0.0]]))


# --------------------------------------------------------------------------- sum_over_constant: N given


def test_a_constant_normaliser_makes_the_loss_independent_of_the_width():
    policy = LinearPolicy(seed=40)
    narrow = make_batch(policy, B=6, T=5, seed=40, ref=True, old_logp=True)
    narrow.old_logp += 0.3 * torch.randn(narrow.old_logp.shape, generator=torch.Generator().manual_seed(41))
    wide = widen(narrow, 3, seed=42)

    def loss_and_grad(batch, num_tokens):
        p = copy.deepcopy(policy)
        loss, _, _ = compute_loss(p, batch, cfg, num_tokens)
        loss.backward()
        return loss.item(), [q.grad.clone() for q in p.parameters()]

    cfg = UpdateConfig(aggregation="sum_over_constant", kl_coef=0.1)  # the entropy bonus is a mean: not ÷ N
    (l5, g5), (l8, g8) = loss_and_grad(narrow, 6 * 8), loss_and_grad(wide, 6 * 8)  # Dr. GRPO: B · L_max, L_max 8
    assert l5 == pytest.approx(l8, rel=1e-6)
    for a, b in zip(g5, g8):
        assert torch.allclose(a, b, atol=1e-7, rtol=1e-6)
    # dividing by the padded B · T instead: the same sums over 6 · 5 and 6 · 8
    (m5, h5), (m8, h8) = loss_and_grad(narrow, 6 * 5), loss_and_grad(wide, 6 * 8)
    assert m5 == pytest.approx(l5 * 8 / 5, rel=1e-6)
    assert m8 == pytest.approx(l8, rel=1e-6)
    assert m5 != pytest.approx(m8, rel=1e-3)
    for a, b in zip(h5, h8):
        assert torch.allclose(a * 5, b * 8, atol=1e-6, rtol=1e-5)


@pytest.mark.parametrize("num_tokens", [8 * 7, 10.0])  # rows · L_max (Dr. GRPO: len(mb) · 7 each); a token count
def test_num_tokens_is_shared_over_minibatches(num_tokens):
    # lr = 0: the policy does not move; each minibatch's REINFORCE loss is Σ m·(−Â·logp) / (N / 2)
    policy = LinearPolicy(critic=False, seed=50)
    batch = make_batch(policy, B=8, T=5, seed=50)
    cfg = UpdateConfig(num_minibatches=2, objective="reinforce", aggregation="sum_over_constant")
    stats = update(policy, batch, torch.optim.SGD(policy.parameters(), lr=0.0), cfg,
                   generator=torch.Generator().manual_seed(5), num_tokens=num_tokens)[0]
    losses = []
    with torch.no_grad():
        for mb in batch.minibatches(2, torch.Generator().manual_seed(5)):
            x = -mb.advantages * policy.evaluate(mb)[0]
            losses.append((x * mb.mask).sum().item() / (num_tokens / 2))
    assert stats["loss_pg"] == pytest.approx(sum(losses) / 2, rel=1e-5)
    with pytest.raises(ValueError, match="num_tokens"):   # the constant is the caller's: never guessed
        update(policy, batch, torch.optim.SGD(policy.parameters(), lr=0.0), cfg)


def test_a_constant_normaliser_update_is_independent_of_the_width():
    def run(batch):
        policy = LinearPolicy(seed=44)
        cfg = UpdateConfig(mu=2, num_minibatches=2, aggregation="sum_over_constant", kl_coef=0.1)
        update(policy, batch, torch.optim.SGD(policy.parameters(), lr=0.5), cfg,
               generator=torch.Generator().manual_seed(3), num_tokens=8 * 9)
        return params_of(policy)

    narrow = make_batch(LinearPolicy(seed=44), B=8, T=6, seed=44, ref=True, old_logp=True)
    for a, b in zip(run(copy.deepcopy(narrow)), run(widen(narrow, 3, seed=45))):
        assert torch.allclose(a, b, atol=1e-6, rtol=0)


# --------------------------------------------------------------------------- DAPO's N: the whole batch's tokens


@pytest.mark.filterwarnings("ignore::UserWarning", "ignore::FutureWarning")
def test_dapo_two_processes_match_one_process_on_the_whole_batch(tmp_path):
    import multiprocessing

    import torch.multiprocessing as mp

    policy, batch = dapo_setup()
    before = params_of(policy)
    update(policy, batch, torch.optim.SGD(policy.parameters(), lr=1.0), UpdateConfig(**DAPO_CFG),
           num_tokens=float(sum(DAPO_LENGTHS)))
    whole = params_of(policy)
    assert not same_params(before, whole)

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    # Not fork: a child forked from a process whose OpenMP pool has run hangs in its first parallel op.
    # A fork server imports torch and DistributedDataParallel's torch._dynamo once, for both children.
    multiprocessing.set_forkserver_preload(["torch", "torch._dynamo", "ladder.core", "ladder.runtime.distributed"])
    mp.start_processes(dapo_worker, args=(port, str(tmp_path)), nprocs=2, start_method="forkserver")
    results = [torch.load(tmp_path / f"rank{r}.pt") for r in (0, 1)]

    assert [r["local_tokens"] for r in results] == [11, 3]
    for r in results:
        for a, b in zip(r["global"], whole):
            assert torch.allclose(a, b, atol=1e-6, rtol=0)
    # each process dividing by its own count weights process 1's 3 tokens like process 0's 11: wrong
    assert same_params(results[0]["local"], results[1]["local"])      # still in step with each other
    diff = max((a - b).abs().max().item() for a, b in zip(results[0]["local"], whole))
    assert diff > 1e-3
