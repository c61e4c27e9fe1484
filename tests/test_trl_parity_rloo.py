"""ladder.core computes TRL's RLOO advantages: ``RLOOTrainer._generate_and_score_completions`` run for real
(generation, rewards and the log-prob forwards replaced by fixed tensors) against ``core.kl_in_reward`` +
``core.leave_one_out``; and TRL's RLOO loss, one clipped ratio per completion, documented against ladder's.

The GRPO loss: tests/test_trl_parity_grpo.py; the tolerance of ``close``: tests/trl_helpers.py.
"""

from __future__ import annotations

import pytest
import torch
from trl_helpers import (
    EPSILON,
    MAX_COMPLETION_LENGTH,
    RTOL,
    TEMPERATURE,
    AutoModelForCausalLM,
    Dataset,
    RLOOConfig,
    RLOOTrainer,
    close,
    grads,
    kept_rng,
    one_thread,  # noqa: F401 (autouse fixture)
    tokenizer_of,
)

from ladder import core
from ladder.policies.causal_lm import CausalLMPolicy, lm_batch

RLOO_G = 3
RLOO_REWARDS = [1.0, 0.0, 0.5, -0.2, 0.7, 0.7]


def _reward_from_column(completions, reward, **_):
    return list(reward)


@pytest.fixture(scope="module")
def rloo_trainer(parity_model_dir, tmp_path_factory):
    args = RLOOConfig(output_dir=str(tmp_path_factory.mktemp("rloo-out")), report_to=[], use_cpu=True, bf16=False,
                      per_device_train_batch_size=2 * RLOO_G, num_generations=RLOO_G,
                      max_completion_length=MAX_COMPLETION_LENGTH, temperature=TEMPERATURE, beta=0.05,
                      epsilon=EPSILON, gradient_checkpointing=False, logging_steps=10**9, save_strategy="no",
                      dataloader_num_workers=0)
    with kept_rng():
        trainer = RLOOTrainer(model=AutoModelForCausalLM.from_pretrained(parity_model_dir),
                              reward_funcs=_reward_from_column, args=args,
                              processing_class=tokenizer_of(parity_model_dir),
                              train_dataset=Dataset.from_list([{"prompt": "What is 2 + 3?", "reward": 0.0}] * 6))
    assert trainer.accelerator.num_processes == 1 and trainer.ref_model is not None
    trainer.model.train()
    return trainer


@pytest.fixture(scope="module")
def rloo_rollout(rloo_trainer):
    """Fixed prompts, completions (varying lengths) and log-probs of π_old and π_ref (junk on padding)."""
    gen = torch.Generator().manual_seed(2)
    pad = rloo_trainer.processing_class.pad_token_id
    prompt_ids = [[11, 12, 13], [11, 12, 13], [11, 12, 13], [21, 22], [21, 22], [21, 22]]
    lengths = [5, 2, 4, 3, 5, 1]
    completion_ids = [torch.randint(5, 200, (n,), generator=gen).tolist() for n in lengths]
    T = max(lengths)
    mask = (torch.arange(T)[None] < torch.tensor(lengths)[:, None]).long()
    old = torch.where(mask.bool(), -2.0 + 0.8 * torch.randn(len(lengths), T, generator=gen), 5.0)
    ref = torch.where(mask.bool(), -2.0 + 0.8 * torch.randn(len(lengths), T, generator=gen), -9.0)
    return {"prompt_ids": prompt_ids, "completion_ids": completion_ids, "mask": mask, "old": old, "ref": ref,
            "pad": pad}


@pytest.mark.parametrize("normalize", [False, True], ids=["scale=none", "scale=batch"])
@pytest.mark.parametrize("beta", [0.05, 0.0], ids=["beta=0.05", "beta=0"])
def test_rloo_advantages_with_kl_in_reward_match_trl(rloo_trainer, rloo_rollout, monkeypatch, normalize, beta):
    trainer, r = rloo_trainer, rloo_rollout
    monkeypatch.setattr(trainer, "beta", beta)
    monkeypatch.setattr(trainer, "normalize_advantages", normalize)
    monkeypatch.setattr(trainer, "_generate", lambda prompts: (r["prompt_ids"], r["completion_ids"],
                                                                ["c"] * len(prompts)))

    def fixed_logps(model, input_ids, attention_mask, logits_to_keep, *args, **kwargs):
        assert logits_to_keep == r["mask"].shape[1] and torch.equal(attention_mask[:, -logits_to_keep:], r["mask"])
        return (r["ref"] if model is trainer.ref_model else r["old"]).clone(), None, None

    monkeypatch.setattr(trainer, "_get_per_token_logps_and_entropies", fixed_logps)
    prompts = ["What is 2 + 3?"] * RLOO_G + ["Tom has 4 apples."] * RLOO_G
    out = trainer._generate_and_score_completions([{"prompt": p, "reward": w} for p, w in zip(prompts, RLOO_REWARDS)])
    assert torch.equal(out["completion_mask"], r["mask"])

    rewards = torch.tensor(RLOO_REWARDS)
    shaped, kl = core.kl_in_reward(rewards, r["old"], r["ref"], r["mask"], kl_coef=beta, estimator="k1")
    advantages = core.leave_one_out(shaped, RLOO_G, "batch" if normalize else "none")
    close(advantages, out["advantages"], "RLOO advantages")
    close((r["old"] * r["mask"]).sum(1), out["old_logps"], "summed π_old log-probs")
    if beta:
        assert kl.abs().min() > 0.1 and not torch.allclose(shaped, rewards)  # the KL really shapes the reward


def test_rloo_loss_ratio_is_sequence_level_of_summed_logps(rloo_trainer, rloo_rollout):
    """Documents (does not match) TRL's RLOO loss: one ratio per completion, exp(Σ_t log π_θ − Σ_t log π_old),
    clipped, averaged over completions. ladder's rloo preset keeps GRPO's per-token clipped surrogate
    (aggregation seq_mean_token_mean). On-policy the two gradients differ only by the per-completion
    weight: TRL's Σ_t is ladder's clipped loss with aggregation sum_over_constant and num_tokens = rows (Σ over
    tokens, mean over rows); off-policy TRL clips whole completions on the product of their token ratios."""
    trainer, r = rloo_trainer, rloo_rollout
    pad = r["pad"]
    prompt_ids = torch.tensor([[pad] * (3 - len(p)) + p for p in r["prompt_ids"]])
    prompt_mask = (prompt_ids != pad).long()
    mask = r["mask"]
    completion_ids = torch.tensor([c + [pad] * (mask.shape[1] - len(c)) for c in r["completion_ids"]])
    advantages = core.leave_one_out(torch.tensor(RLOO_REWARDS), RLOO_G)
    policy = CausalLMPolicy(trainer.model, temperature=TEMPERATURE)
    batch = lm_batch(prompt_ids, prompt_mask, completion_ids, mask, pad, advantages=advantages[:, None] * mask)
    with torch.no_grad():
        logp = policy.evaluate(batch)[0].float()

    def trl_rloo(old_per_token):
        inputs = {"prompt_ids": prompt_ids, "prompt_mask": prompt_mask, "completion_ids": completion_ids,
                  "completion_mask": mask, "old_logps": (old_per_token * mask).sum(1), "advantages": advantages}
        trainer.model.zero_grad(set_to_none=True)
        loss = trainer._compute_loss(trainer.model, inputs)
        loss.backward()
        return loss.detach(), grads(trainer.model)

    def ladder(old_per_token, aggregation, num_tokens=None):
        batch.old_logp = old_per_token
        cfg = core.UpdateConfig(objective="clipped", aggregation=aggregation, clip_eps_low=EPSILON)
        trainer.model.zero_grad(set_to_none=True)
        loss, _, _ = core.compute_loss(policy, batch, cfg, num_tokens)
        loss.backward()
        return loss.detach(), grads(trainer.model)

    # on-policy: the same gradient as Σ over tokens, mean over rows; not the length-normalised preset's.
    # Equal in exact arithmetic only: TRL differentiates exp(Σ_t log π_θ − Σ_t log π_old) of float32 sums of
    # up to T log-probs, ladder sums T per-token exp(0)·∇log π; rounding differs by ~1e-5 of the largest entry.
    on_trl, on_sum = trl_rloo(logp), ladder(logp, "sum_over_constant", num_tokens=len(batch))
    for name in on_trl[1]:
        close(on_sum[1][name], on_trl[1][name], name, rtol=5 * RTOL)
    preset = ladder(logp, "seq_mean_token_mean")
    assert max((preset[1][n] - on_trl[1][n]).abs().max() for n in on_trl[1]) > 1e-3

    # off-policy: TRL's one ratio per completion is exp(Σ_t (log π_θ − log π_old)), clipped as a whole
    gen = torch.Generator().manual_seed(3)
    old = logp - 0.15 * torch.randn(logp.shape, generator=gen)
    seq_ratio = torch.exp(((logp - old) * mask).sum(1))
    expected = -torch.min(seq_ratio * advantages, seq_ratio.clamp(1 - EPSILON, 1 + EPSILON) * advantages).mean()
    off_trl = trl_rloo(old)
    close(off_trl[0], expected, "TRL RLOO loss", rtol=5 * RTOL)  # TRL's own forward vs ladder's log-probs, summed
    assert ((seq_ratio - 1).abs() > EPSILON).any()
    assert abs(ladder(old, "sum_over_constant", num_tokens=len(batch))[0] - off_trl[0]) > 1e-4
