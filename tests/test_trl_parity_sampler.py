"""ladder's sampler corrections are TRL 1.16's: the importance weight π_old/π_sampler in each mode, the
off-policy sequence mask, and the loss and gradient they make — on the very same tensors.

TRL computes the weight inline in ``GRPOTrainer._generate_and_score_completions``; the test runs that very
block of TRL's source (cut out of the installed trl and executed on the test's tensors), so the oracle
is TRL's code, not a copy of it. The mask is ``GRPOTrainer.get_off_policy_mask``; the loss is
``GRPOTrainer._compute_loss`` with ``use_vllm`` and the weight in its inputs, as TRL hands them over.

    vllm_importance_sampling_correction / _mode      --sampler-correction (False: "none")
    vllm_importance_sampling_clip_min / _clip_max    --sampler-clip-min / --sampler-clip-max
    off_policy_mask_threshold                        --off-policy-mask
    inputs["sampling_per_token_logps"]               Batch.sampling_logp
"""

from __future__ import annotations

import inspect
import math
import textwrap
from types import SimpleNamespace

import pytest
import torch
from test_trl_parity_grpo import (  # noqa: F401 (fixtures)
    BETA,
    configure,
    grpo_inputs,
    grpo_trainer,
    ladder_config,
    ladder_num_tokens,
    policy,
    trl_loss,
)
from trl_helpers import GRPOTrainer, close, grads, one_thread  # noqa: F401 (autouse fixture)

from ladder import core
from ladder.policies.causal_lm import lm_batch

MODES = [m for m in core.CORRECTIONS if m != "none"]
BOUNDS = {"C_max=3": (None, 3.0), "C=[0.5,2]": (0.5, 2.0), "C_min=0.8,no C_max": (0.8, None)}


def trl_weights(mode, clip_min, clip_max, old, sampling, mask):
    """The weight as TRL computes it: the block of ``_generate_and_score_completions`` between its two
    comments, run as it stands."""
    source = inspect.getsource(GRPOTrainer._generate_and_score_completions)
    start = source.index("            # Compute the importance sampling ratio when using vLLM")
    end = source.index("            # Compute the per-token log probabilities for the reference model")
    trainer = SimpleNamespace(use_vllm=True, vllm_importance_sampling_correction=True,
                              vllm_importance_sampling_mode=mode, vllm_importance_sampling_clip_min=clip_min,
                              vllm_importance_sampling_clip_max=clip_max)
    scope = {"self": trainer, "torch": torch, "math": math, "old_per_token_logps": old,
             "sampling_per_token_logps": sampling, "completion_mask": mask, "tool_mask": None}
    exec(textwrap.dedent(source[start:end]), scope)  # noqa: S102 - TRL's own code, the oracle
    return scope["vllm_importance_sampling_ratio"]


@pytest.fixture(scope="module")
def sampling_logp(grpo_inputs):  # noqa: F811
    """π_sampler: π_old plus a bf16-sized error, with token weights beyond both bounds, sequences whose
    weight is above 3 and below 0.5, and one token the sampler could not score (NaN)."""
    old, mask = grpo_inputs["old_per_token_logps"], grpo_inputs["completion_mask"]
    gen = torch.Generator().manual_seed(7)
    sampling = old + 0.02 * torch.randn(old.shape, generator=gen)
    sampling[0, 1] = old[0, 1] - 1.5   # token weight e^1.5 = 4.5 > C_max; row 0's weight > 3
    sampling[0, 4] = old[0, 4] - 0.3
    sampling[2, 0] = old[2, 0] + 0.9   # token weight e^-0.9 = 0.41 < C_min; row 2's < 0.5
    sampling[3, 1] = float("nan")
    return torch.where(mask.bool(), sampling, -5.0)


def test_the_tensors_reach_every_bound(grpo_inputs, sampling_logp):  # noqa: F811
    old, mask = grpo_inputs["old_per_token_logps"], grpo_inputs["completion_mask"]
    token = trl_weights("token_mask", None, None, old, sampling_logp, mask)[mask.bool()]
    sequence = trl_weights("sequence_mask", None, None, old, sampling_logp, mask).squeeze(1)
    assert (token > 3.0).any() and (token < 0.5).any() and ((token > 0.8) & (token < 1.25)).any()
    assert (sequence > 3.0).any() and (sequence < 0.5).any() and ((sequence > 0.8) & (sequence < 2.0)).any()


@pytest.mark.parametrize("bounds", BOUNDS, ids=list(BOUNDS))
@pytest.mark.parametrize("mode", MODES)
def test_the_weights_are_trls(grpo_inputs, sampling_logp, mode, bounds):  # noqa: F811
    old, mask = grpo_inputs["old_per_token_logps"], grpo_inputs["completion_mask"]
    expected = trl_weights(mode, *BOUNDS[bounds], old, sampling_logp, mask)
    got = core.sampler_weights(old, sampling_logp, mask, mode, *BOUNDS[bounds])
    assert got.shape == expected.shape
    real = mask.bool() if mode.startswith("token") else torch.ones_like(got, dtype=torch.bool)
    close(got[real], expected[real], mode)  # TRL's padding holds exp(0) = 1 or its clamp; ladder's is masked anyway


@pytest.mark.parametrize("delta", [0.0, 0.05, 1.0])
def test_the_off_policy_mask_is_trls(policy, grpo_inputs, sampling_logp, delta):  # noqa: F811
    inputs, mask = grpo_inputs, grpo_inputs["completion_mask"]
    logp = _logp(policy, inputs)
    expected = GRPOTrainer.get_off_policy_mask(inputs["advantages"][:, None], logp, sampling_logp, mask, delta)
    got = core.off_policy_keep(inputs["advantages"][:, None].expand_as(logp), logp, sampling_logp, mask, delta)
    assert torch.equal(got, expected.expand_as(got))


def _logp(policy, inputs):  # noqa: F811
    with torch.no_grad():
        batch = lm_batch(inputs["prompt_ids"], inputs["prompt_mask"], inputs["completion_ids"],
                         inputs["completion_mask"], policy.model.config.pad_token_id)
        return policy.evaluate(batch)[0].float()


def _cases():
    for loss_type in ("grpo", "dapo", "cispo"):
        for mode in ["none", *MODES]:
            for bounds in ("C_max=3", "C=[0.5,2]"):
                for delta in (None, 0.05):
                    if mode == "none" and (bounds != "C_max=3" or delta is None):
                        continue  # no weight: the bounds change nothing, and without δ it is the plain parity
                    yield pytest.param(loss_type, mode, bounds, delta, id=f"{loss_type}-{mode}-{bounds}-delta={delta}")


@pytest.mark.parametrize("loss_type,mode,bounds,delta", list(_cases()))
def test_loss_and_gradients_with_a_sampler_match_trl(grpo_trainer, policy, grpo_inputs, sampling_logp,  # noqa: F811
                                                     loss_type, mode, bounds, delta):
    clip_min, clip_max = BOUNDS[bounds]
    eps_high = 0.28 if loss_type != "cispo" else 1.3
    configure(grpo_trainer, loss_type, "token", True, eps_high, None, BETA)
    old, mask = grpo_inputs["old_per_token_logps"], grpo_inputs["completion_mask"]
    trl_inputs = {**grpo_inputs, "sampling_per_token_logps": sampling_logp}
    corrected = mode != "none"
    if corrected:
        trl_inputs["importance_sampling_ratio"] = trl_weights(mode, clip_min, clip_max, old, sampling_logp, mask)
    saved = (grpo_trainer.use_vllm, grpo_trainer.vllm_importance_sampling_correction,
             grpo_trainer.off_policy_mask_threshold)
    grpo_trainer.use_vllm, grpo_trainer.vllm_importance_sampling_correction = True, corrected
    grpo_trainer.off_policy_mask_threshold = delta
    try:
        expected = trl_loss(grpo_trainer, trl_inputs)
    finally:
        (grpo_trainer.use_vllm, grpo_trainer.vllm_importance_sampling_correction,
         grpo_trainer.off_policy_mask_threshold) = saved
    cfg = ladder_config(grpo_trainer, loss_type, "token", True, eps_high, None, BETA)
    cfg.sampler = core.SamplerOptions(mode, clip_min, clip_max, delta)
    batch = lm_batch(grpo_inputs["prompt_ids"], grpo_inputs["prompt_mask"], grpo_inputs["completion_ids"], mask,
                     policy.model.config.pad_token_id, advantages=grpo_inputs["advantages"][:, None] * mask,
                     old_logp=old, ref_logp=grpo_inputs["ref_per_token_logps"], sampling_logp=sampling_logp)
    policy.model.zero_grad(set_to_none=True)
    loss, stats, _ = core.compute_loss(policy, batch, cfg, ladder_num_tokens(grpo_trainer, grpo_inputs))
    loss.backward()
    close(loss.detach(), expected[0], "loss")
    got = grads(policy.model)
    assert got.keys() == expected[1].keys() and got
    for name in got:
        close(got[name], expected[1][name], name)
    assert math.isfinite(stats["sampler/logp_diff_mean"])
    if delta is not None:
        assert 0.0 < stats["off_policy/masked_frac"] < 1.0  # the mask drops some sequences, not all
