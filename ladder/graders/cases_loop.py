"""The cases of the loop exercises (16–20): token log-probs from logits, GAE over a completion's tokens,
the loss of one minibatch (with a sampler's log-probs too), the update, and one whole GRPO step.

Exercises 17, 18 and 20 are graded by running: the learner's function and the package's each get a
fresh, identical copy of a small policy (and optimiser, and random generator), and what they do to
it is compared — the loss, its gradient and statistics; the parameters and statistics after the μ
passes; the record and the parameters after one GRPO step on the tiny LM.
"""

from __future__ import annotations

import copy
import math
from dataclasses import fields

import torch
from torch import Tensor

from ladder.core import CISPO, DPO, Batch, Clipped, SamplerOptions, SoftGate, UpdateConfig

from .cases import JUNK, Case, Mismatch, fmt, lengths_mask, padded, pick, randn, shapes, t

PARAM_RTOL, PARAM_ATOL = 1e-5, 1e-6   # parameters after training: the same to 1e-6


def token_logp() -> list[Case]:
    logits = t([[[0.0, 1.0, 2.0], [2.0, 0.0, 0.0], [JUNK, -JUNK, 1.0]]])    # 3 positions, V = 3
    ids = torch.tensor([[0, 2, 0]])
    cases = [
        Case("two tokens scored: position i's logits give token i + 1's log-prob (the last position's: none)",
             dict(logits=logits, input_ids=ids, mask=t([[1, 1]])), grad=("logits",)),
        Case("temperature 2: the logits are divided by τ before the softmax",
             dict(logits=logits, input_ids=ids, mask=t([[1, 1]]), temperature=2.0), grad=("logits",)),
        Case("the second token is padding: 0 there", dict(logits=logits, input_ids=ids, mask=t([[1, 0]])),
             grad=("logits",)),
        Case("large logits: −1000 for the unlikely token, not −inf (logsumexp / log_softmax, never log(softmax))",
             dict(logits=t([[[1000.0, 0.0], [0.0, 0.0]]]), input_ids=torch.tensor([[0, 1]]), mask=t([[1]]))),
        Case("bf16 logits (a bf16 or 4-bit model): computed in float32, the result float32",
             dict(logits=t([[[0.1, 1.3, 2.7], [2.2, 0.4, -0.9]]]).bfloat16(), input_ids=torch.tensor([[1, 2]]),
                  mask=t([[1]]), temperature=0.7)),
        Case("temperature 0 is not a distribution: a ValueError",
             dict(logits=logits, input_ids=ids, mask=t([[1, 1]]), temperature=0.0), raises=ValueError),
    ]
    g = torch.Generator().manual_seed(16)
    for B, n, mask in shapes(g, 5):
        V = pick(g, (2, 3, 5))
        cases.append(Case(f"random: B = {B}, {n} scored tokens, V = {V}",
                          dict(logits=randn(g, B, n + 1, V, scale=2.0),
                               input_ids=torch.randint(V, (B, n + 1), generator=g), mask=mask,
                               temperature=pick(g, (1.0, 0.7, 1.3))), grad=("logits",)))
    cases.append(_tiny_lm_case())
    return cases


def _tiny_lm_case() -> Case:
    """A real model's logits: a 2-layer GPT-2 of random weights, one prompt of 4 tokens and a completion of 3."""
    from transformers import GPT2Config, GPT2LMHeadModel

    with torch.random.fork_rng():
        torch.manual_seed(16)
        model = GPT2LMHeadModel(GPT2Config(vocab_size=11, n_positions=16, n_embd=8, n_layer=2, n_head=2,
                                                  bos_token_id=10, eos_token_id=10)).eval()
        ids = torch.randint(11, (2, 7))
    with torch.no_grad():
        logits = model(ids).logits[:, 3:]       # positions 3 … 6: the last prompt position and the completion's
    return Case("a tiny GPT-2's logits: prompt of 4 tokens, completion of 3 (the second row's last is padding)",
                dict(logits=logits, input_ids=ids[:, 3:], mask=t([[1, 1, 1], [1, 1, 0]]), temperature=0.9),
                grad=("logits",))


def masked_gae() -> list[Case]:
    mask = lengths_mask([3, 1], 4)
    rewards = padded(t([[0.0, 0.0, 1.0, 0], [2.0, 0, 0, 0]]), mask)
    values = padded(t([[0.5, 0.2, 0.4, 0], [1.0, 0, 0, 0]]), mask)
    cases = [
        Case("γ = λ = 1: Â_0 = Σ_t r_t − V_0; nothing is bootstrapped past a row's last real token",
             dict(rewards=rewards, values=values, mask=mask, gamma=1.0, lam=1.0)),
        Case("γ = 0.9, λ = 0.95 (padding holds junk: it must not reach a real token, and comes out 0)",
             dict(rewards=rewards, values=values, mask=mask, gamma=0.9, lam=0.95)),
        Case("λ = 0: Â_t = δ_t = r_t + γ V_{t+1} − V_t (V after the last token = 0)",
             dict(rewards=rewards, values=values, mask=mask, gamma=0.9, lam=0.0)),
        Case("an empty row: all 0", dict(rewards=t([[1.0, 2.0]]), values=t([[3.0, 4.0]]), mask=t([[0, 0]]),
                                        gamma=0.9, lam=0.95)),
        Case("NaN on padding: it must not reach a real token (select with torch.where; NaN · 0 is NaN)",
             dict(rewards=padded(rewards, mask, math.nan), values=padded(values, mask, math.nan), mask=mask,
                  gamma=0.9, lam=0.95)),
    ]
    g = torch.Generator().manual_seed(19)
    for B, T, mask in shapes(g, 6):
        cases.append(Case(f"random: B = {B}, T = {T}",
                          dict(rewards=padded(randn(g, B, T), mask), values=padded(randn(g, B, T), mask), mask=mask,
                               gamma=pick(g, (1.0, 0.99, 0.9)), lam=pick(g, (1.0, 0.95, 0.5)))))
    return cases


# ---- a small policy and its batch: what exercises 17 and 18 are graded on ----

def small_policy_and_batch(seed: int, B: int = 4, T: int = 5, critic: bool = True, old: bool = True,
                           ref: bool = False, sampling: bool = False) -> tuple[torch.nn.Module, Batch]:
    """An MLP actor-critic over 3-dim observations and 4 actions, and a right-padded batch for it: random
    observations, actions, advantages and returns; π_old a little away from π_θ (``old``), π_ref further, and
    a sampler's log-probs π_sampler a little away from π_old (``sampling``; NaN on padding)."""
    from ladder.policies.mlp import MLPActorCritic

    with torch.random.fork_rng():
        torch.manual_seed(seed)
        policy = MLPActorCritic(3, 4, hidden=8, critic=critic)
    g = torch.Generator().manual_seed(seed)
    lengths = torch.randint(1, T + 1, (B,), generator=g)
    lengths[0] = T
    mask = lengths_mask(lengths.tolist(), T)
    obs, actions = randn(g, B, T, 3), torch.randint(4, (B, T), generator=g)
    batch = Batch(actions=actions, mask=mask, advantages=padded(randn(g, B, T), mask),
                  returns=padded(randn(g, B, T), mask) if critic else None, inputs={"obs": obs})
    with torch.no_grad():
        logp, _, values = policy.evaluate(batch)
    batch.values = None if values is None else padded(values + randn(g, B, T, scale=0.3), mask)
    batch.old_logp = padded(logp + randn(g, B, T, scale=0.3), mask, -JUNK) if old else None
    batch.ref_logp = padded(logp + randn(g, B, T, scale=0.5), mask, -JUNK) if ref else None
    if sampling:   # π_old is π_θ when it is not recorded
        anchor = logp if batch.old_logp is None else batch.old_logp
        batch.sampling_logp = padded(anchor + randn(g, B, T, scale=0.4), mask, math.nan)
    return policy, batch


def _copy_batch(batch: Batch) -> Batch:
    return Batch(**{f.name: _clone(getattr(batch, f.name)) for f in fields(batch)})


def _clone(value):
    if isinstance(value, Tensor):
        return value.clone()
    return {k: _clone(v) for k, v in value.items()} if isinstance(value, dict) else value


def _equal(a: Tensor, b: Tensor) -> bool:
    """The same tensor, NaN where it held NaN (a sampler's log-probs hold it on padding)."""
    return torch.equal(a, b) or (a.is_floating_point() and a.shape == b.shape and a.dtype == b.dtype
                                 and torch.allclose(a, b, rtol=0, atol=0, equal_nan=True))


def _batch_unchanged(after: Batch, before: Batch, what: str) -> None:
    for f in fields(before):
        a, b = getattr(after, f.name), getattr(before, f.name)
        same = (a is None and b is None) or (isinstance(a, Tensor) and isinstance(b, Tensor) and _equal(a, b)) \
            or (isinstance(a, dict) and all(_equal(a[k], b[k]) for k in b)) \
            or (isinstance(b, int) and a == b)
        if not same:
            raise Mismatch(f"changed the {what}'s {f.name}; leave the batch as it was (π_old, when you record "
                           "it, goes into a copy: dataclasses.replace)")


def _close(a: float, b: float, rtol: float = 1e-5, atol: float = 1e-5) -> bool:
    return (math.isnan(a) and math.isnan(b)) or math.isclose(a, b, rel_tol=rtol, abs_tol=atol)


def _compare_stats(got, expected: dict, where: str) -> None:
    if not isinstance(got, dict):
        raise Mismatch(f"{where}: should be a dict of statistics, got {type(got).__name__}")
    missing, extra = sorted(set(expected) - set(got)), sorted(set(got) - set(expected))
    if missing or extra:
        raise Mismatch(f"{where}: the statistics' names differ: missing {missing}, unexpected {extra}")
    for key, value in expected.items():
        if not isinstance(got[key], (int, float)) or not _close(float(got[key]), value):
            raise Mismatch(f"{where}: {key} is {got[key]!r}, expected {value:.6g}")


def _compare_tensor(got, expected: Tensor, what: str) -> None:
    if not isinstance(got, Tensor) or got.shape != expected.shape:
        shape = tuple(got.shape) if isinstance(got, Tensor) else type(got).__name__
        raise Mismatch(f"{what}: should be a tensor of shape {tuple(expected.shape)}, got {shape}")
    if not torch.allclose(got.detach().float().cpu(), expected.float().cpu(), rtol=1e-5, atol=1e-6):
        raise Mismatch(f"{what}: {fmt(got.detach())}, expected {fmt(expected)}")


def _compare_parameters(got: torch.nn.Module, expected: torch.nn.Module, rtol: float, atol: float,
                        what: str) -> None:
    for (name, g), (_, e) in zip(got.named_parameters(), expected.named_parameters()):
        values = g.grad if what == "gradient" else g
        want = e.grad if what == "gradient" else e
        if want is None and values is None:
            continue
        if values is None or want is None:
            raise Mismatch(f"the {what} of {name} is {fmt(values) if values is not None else None}, "
                           f"expected {fmt(want) if want is not None else None}")
        if not torch.allclose(values.detach(), want.detach(), rtol=rtol, atol=atol):
            diff = (values.detach() - want.detach()).abs().max().item()
            raise Mismatch(f"the {what} of {name} differs from the core's by up to {diff:.3g}")


def _loss_case(label: str, seed: int, cfg: UpdateConfig, num_tokens: float | None = None, **batch_kw) -> Case:
    def check(fn, core):
        policy, batch = small_policy_and_batch(seed, **batch_kw)
        mine = copy.deepcopy(policy)
        loss, stats, tensors = core(policy, batch, cfg, num_tokens)
        loss.backward()
        given = _copy_batch(batch)
        out = fn(mine, given, cfg, num_tokens)
        if not (isinstance(out, tuple) and len(out) == 3):
            raise Mismatch(f"should return (loss, stats, tensors), returned {type(out).__name__} {fmt(out)}")
        got_loss, got_stats, got_tensors = out
        if not isinstance(got_loss, Tensor) or got_loss.shape != ():
            raise Mismatch(f"the loss should be a scalar tensor, got {fmt(got_loss)}")
        if not _close(got_loss.item(), loss.item()):
            raise Mismatch(f"wrong loss\n  expected  {loss.item():.6g}\n  got       {got_loss.item():.6g}")
        if not got_loss.requires_grad:
            raise Mismatch("right loss, but it has no graph: the gradient cannot reach the policy")
        got_loss.backward()
        _compare_parameters(mine, policy, 1e-5, 1e-6, "gradient")
        _compare_stats(got_stats, stats, "the statistics")
        for name in ("ratio", "advantages"):
            if not isinstance(got_tensors, dict) or not isinstance(got_tensors.get(name), Tensor) or \
                    not torch.allclose(got_tensors[name], tensors[name], rtol=1e-5, atol=1e-6):
                raise Mismatch(f"tensors[{name!r}] should be {fmt(tensors[name])}, got "
                               f"{fmt(got_tensors.get(name)) if isinstance(got_tensors, dict) else got_tensors}")
        _batch_unchanged(given, batch, "minibatch")
    return Case(label, dict(config=_describe(cfg), num_tokens=num_tokens, **batch_kw), check=check)


def _describe(cfg: UpdateConfig) -> str:
    """The fields of ``cfg`` that differ from UpdateConfig's defaults."""
    default = UpdateConfig()
    changed = [f"{f.name}={getattr(cfg, f.name)!r}" for f in fields(cfg)
               if getattr(cfg, f.name) != getattr(default, f.name)]
    return "UpdateConfig(" + ", ".join(changed) + ")"


def compute_loss() -> list[Case]:
    C, S = UpdateConfig, SamplerOptions
    return [
        _loss_case("π_old = π_θ (old_logp None): the ratio is 1, the clipped surrogate and ½(V − R)²", 1, C(),
                   old=False),
        _loss_case("π_old recorded: ρ = exp(logp − old_logp) ≠ 1, clipped at 1 ± 0.2", 2, C()),
        _loss_case("ε_high = 0.28 and two-sided c = 1.5 (ratios between 1.2 and 1.28: clipped only at ε_low)", 6,
                   C(clip_eps_high=0.28, objective=Clipped(delta=1.5))),
        _loss_case("no critic (values None): no value loss", 4, C(), critic=False),
        _loss_case("KL to π_ref: β = 0.1, k3, importance-corrected", 5, C(kl_coef=0.1), ref=True),
        _loss_case("KL to π_ref: k1, not corrected; β = 0 still reports kl_ref", 6,
                   C(kl_coef=0.0, kl_estimator="k1", kl_correction=False), ref=True),
        _loss_case("GRPO's aggregation: seq_mean_token_mean", 7, C(aggregation="seq_mean_token_mean", kl_coef=0.04),
                   ref=True),
        _loss_case("sum_over_constant with N = 20 (Dr. GRPO / DAPO)", 8, C(aggregation="sum_over_constant"), 20.0),
        _loss_case("GSPO: one ratio per row (ratio_level sequence)", 9, C(ratio_level="sequence", clip_eps_low=0.05)),
        _loss_case("CISPO: −sg(min(ρ, ε_max))·Â·log π", 10, C(objective=CISPO(max_weight=1.2))),
        _loss_case("REINFORCE: −Â·log π", 11, C(objective="reinforce"), critic=False),
        _loss_case("whitened advantages, a value clip and an entropy bonus", 12,
                   C(normalize_advantages=True, value_clip=0.2, entropy_coef=0.01)),
        # π_sampler ≠ π_old: the policy term's ℓ_t × π_old/π_sampler (exercise 21) before the aggregation
        _loss_case("a sampler's log-probs (NaN on padding), token_truncate at C_max = 1.5: ℓ_t · min(w_t, 1.5) "
                   "before agg, the sampler/ statistics in stats", 15,
                   C(sampler=S("token_truncate", clip_max=1.5)), sampling=True),
        _loss_case("sequence_mask in [C_min, C_max] = [0.5, 2]: a completion outside leaves the policy term, "
                   "not the KL to π_ref (β = 0.1)", 16,
                   C(sampler=S("sequence_mask", clip_min=0.5, clip_max=2.0), kl_coef=0.1),
                   ref=True, sampling=True),
        _loss_case("the off-policy mask (off_policy_mask = 0.05) beside token_mask in [0.5, 2], GRPO's aggregation",
                   17,
                   C(sampler=S("token_mask", clip_min=0.5, clip_max=2.0, off_policy_mask=0.05),
                     aggregation="seq_mean_token_mean"), sampling=True),
        # the table's newer rows, and the entropy mask: L_t on the top-q entropy tokens only
        _loss_case("SAPO's soft gate (τ_pos = 1, τ_neg = 2) and the bonus over the top-half entropy tokens "
                   "(entropy_quantile = 0.5, c_H = 0.01)", 18,
                   C(objective=SoftGate(temp_pos=1.0, temp_neg=2.0), entropy_quantile=0.5,
                     entropy_coef=0.01, aggregation="seq_mean_token_mean")),
        _loss_case("VESPO's gamma weight with a sampler's log-probs, token_truncate at C_max = 1.5: w folded into "
                   "φ(w_i), not multiplied again", 19,
                   C(objective="gamma_weighted", aggregation="sum_over_constant",
                     sampler=S("token_truncate", clip_max=1.5)), 20.0, sampling=True),
        # preference pairs: rows 2i and 2i + 1 a pair (chosen, rejected), the objective's own statistics
        _loss_case("DPO (β = 0.5): rows 2i, 2i + 1 a pair; log π_ref from the batch; the implicit rewards' statistics",
                   20, C(objective=DPO(beta=0.5)), ref=True),
        Case("an unknown objective: a ValueError", dict(policy=small_policy_and_batch(13)[0],
                                                       mb=small_policy_and_batch(13)[1], cfg=C(objective="a2c")),
             raises=ValueError),
        Case("an unknown ratio level: a ValueError", dict(policy=small_policy_and_batch(14)[0],
                                                         mb=small_policy_and_batch(14)[1], cfg=C(ratio_level="row")),
             raises=ValueError),
    ]


def _update_case(label: str, seed: int, cfg: UpdateConfig, num_tokens: float | None = None, lr: float = 0.05,
                 **batch_kw) -> Case:
    def check(fn, core):
        policy, batch = small_policy_and_batch(seed, B=8, **batch_kw)
        mine = copy.deepcopy(policy)
        passes = core(policy, batch, torch.optim.Adam(policy.parameters(), lr=lr), cfg,
                      torch.Generator().manual_seed(seed), num_tokens)
        given = _copy_batch(batch)
        got = fn(mine, given, torch.optim.Adam(mine.parameters(), lr=lr), cfg, torch.Generator().manual_seed(seed),
                 num_tokens)
        if not isinstance(got, list):
            raise Mismatch(f"should return a list with one dict of statistics per pass, got {type(got).__name__}")
        if len(got) != len(passes):
            raise Mismatch(f"ran {len(got)} pass(es), the core {len(passes)}"
                           + (" (the target-KL stop)" if cfg.target_kl is not None else ""))
        for k, (g, e) in enumerate(zip(got, passes)):
            _compare_stats(g, e, f"pass {k}")
        _compare_parameters(mine, policy, PARAM_RTOL, PARAM_ATOL, "parameters after training")
        _batch_unchanged(given, batch, "batch")
    return Case(label, dict(config=_describe(cfg), num_tokens=num_tokens, **batch_kw), check=check)


def update() -> list[Case]:
    C = UpdateConfig
    return [
        _update_case("μ = 1, one minibatch, π_old not given: π_θ = π_old, one optimiser step", 21, C(), old=False),
        _update_case("μ = 1, one minibatch, π_old given", 22, C()),
        _update_case("μ = 1 pass × M = 2 minibatches: π_old recorded before the first step, so the second "
                     "minibatch's ρ ≠ 1", 31, C(num_minibatches=2), old=False),
        _update_case("μ = 2 × M = 2, π_old given: used as it is, not recorded over", 32, C(mu=2, num_minibatches=2)),
        _update_case("μ = 4 passes × M = 2 shuffled minibatches: record π_old once, before the first pass", 23,
                     C(mu=4, num_minibatches=2), old=False),
        _update_case("the gradient clipped to norm 0.05", 24, C(mu=2, max_grad_norm=0.05), old=False),
        _update_case("no gradient clipping (max_grad_norm None)", 25, C(mu=2, max_grad_norm=None), old=False),
        _update_case("target_kl = 0.001: stop after the pass whose KL(π_old‖π_θ) (k3) exceeds it", 26,
                     C(mu=6, num_minibatches=2, target_kl=0.001), old=False),
        _update_case("sum_over_constant: each of the M = 2 minibatches divides by N / M", 27,
                     C(mu=2, num_minibatches=2, aggregation="sum_over_constant"), 30.0, old=False),
        _update_case("the KL to π_ref in the loss (β = 0.1) and no critic", 28, C(mu=2, kl_coef=0.1), old=False,
                     ref=True, critic=False),
        Case("μ = 0: a ValueError", dict(policy=small_policy_and_batch(29)[0], batch=small_policy_and_batch(29)[1],
                                         optimizer=None, cfg=C(mu=0)), raises=ValueError),
        Case("4 rows cannot be split into 3 minibatches: a ValueError",
             dict(policy=small_policy_and_batch(30)[0], batch=small_policy_and_batch(30)[1], optimizer=None,
                  cfg=C(num_minibatches=3)), raises=ValueError),
    ]


def _grpo_case(label: str, **overrides) -> Case:
    def check(fn, core):
        want_record, want_policy, want_advantages = run_grpo_step(core, **overrides)
        got_record, got_policy, got_advantages = run_grpo_step(fn, **overrides)
        _compare_stats(got_record, want_record, "the record")
        _compare_tensor(got_advantages, want_advantages, "the advantages Â_i returned")
        _compare_parameters(got_policy, want_policy, PARAM_RTOL, PARAM_ATOL, "parameters after the step")
    return Case(label, dict(**overrides), check=check)


def run_grpo_step(grpo_step, **overrides) -> tuple[dict, torch.nn.Module, torch.Tensor]:
    """One ``grpo_step`` on the tiny preset (2 prompts × 4 completions) from seed 0: (record without its
    timings, the policy after, the advantages it returned)."""
    from ladder.rungs import grpo
    from ladder.runtime.distributed import Processes
    from ladder.runtime.runlog import seed_everything, without_timings

    settings = {**grpo.PRESETS["tiny"], "prompts_per_step": 2, "group_size": 4, "steps": 1, "eval_size": 8,
                "threads": 0, **overrides}
    cfg = grpo.Config(**settings)
    grpo.validate(cfg)
    device = torch.device("cpu")
    seed_everything(cfg.seed)
    system_prompt, problems, _, model_path, tokenizer = grpo.load_task(cfg)
    policy, optimizer = grpo.load_policy(cfg, model_path, device)
    procs = Processes(device)
    step = grpo.make_step(cfg, policy=policy, optimizer=optimizer, tokenizer=tokenizer,
                          stream=grpo.ProblemStream(problems, cfg.seed), system_prompt=system_prompt, procs=procs)
    seed_everything(cfg.seed)
    out = grpo_step(step)
    if not (isinstance(out, tuple) and len(out) == 3):
        raise Mismatch(f"should return (record, rollout, advantages), returned {type(out).__name__}"
                       f"{f' of {len(out)}' if isinstance(out, tuple) else ''}")
    record = without_timings(out[0]) if isinstance(out[0], dict) else out[0]
    return record, policy, out[2]


def grpo_step() -> list[Case]:
    return [
        _grpo_case("GRPO: the clipped surrogate, β·k3 in the loss, μ = 1"),
        _grpo_case("μ = 2 × M = 2, DAPO's normaliser and clip-higher", mu=2, num_minibatches=2, loss_type="dapo",
                   clip_eps_high=0.28),
        _grpo_case("RLOO: leave-one-out advantages, the KL in the reward (k1, on π_old)",
                   advantage="rloo", scale_rewards="none", kl_in="reward", kl_estimator="k1", kl_coef=0.03),
        _grpo_case("6 new tokens at most: cut-off completions masked out of the loss (--mask-truncated)",
                   max_new_tokens=6, mask_truncated=True, loss_type="dapo"),
        _grpo_case("Dr. GRPO: Â not divided by the std, ÷ rows × max-new-tokens, no KL", loss_type="dr_grpo",
                   scale_rewards="none", kl_coef=0.0),
        _grpo_case("GSPO: one ratio per completion, 2 minibatches", ratio_level="sequence", clip_eps=3e-4,
                   clip_eps_high=4e-4, kl_coef=0.0, num_minibatches=2),
        _grpo_case("a bf16 sampler (π_sampler ≠ π_old): its log-probs go into the batch, token_truncate at "
                   "C_max = 1.01 and the off-policy mask δ = 0 weigh the policy term (seed 2: Â ≠ 0)", seed=2,
                   sampler_dtype="bfloat16", sampler_correction="token_truncate", sampler_clip_max=1.01,
                   off_policy_mask=0.0),
        _grpo_case("GDPO: each reward function normalised within its group, then summed and whitened",
                   multi_objective_aggregation="normalize_then_sum", seed=2),
        _grpo_case("--adaptive-entropy: c_H moved after the step (target above the entropy: the bonus on), "
                   "SAPO's gate", adaptive_entropy=True, entropy_coef=0.01, entropy_target=10.0, loss_type="sapo"),
    ]


LOOP_CASES = {
    "ex16_token_logp": token_logp, "ex17_compute_loss": compute_loss, "ex18_update": update,
    "ex19_masked_gae": masked_gae,   # ex20's cases: these of grpo_step, and the agent rung's (cases_agent)
}
