"""The core's side of Capstone II's loss and update checks: the batch, the config and the policy with which
``ladder.core.compute_loss`` and ``ladder.core.update`` compute what the learner's ``grpo_loss`` and ``update``
must match (plain k3, no importance correction, GRPO's per-completion mean)."""

from __future__ import annotations

import torch

TEMPERATURE, CLIP_EPS, BETA = 0.9, 0.2, 0.1


def core_batch(r: dict):
    from ladder.core import Batch

    mask = r["completion_mask"]
    return Batch(actions=r["completion_ids"], mask=mask, advantages=r["advantages"][:, None] * mask,
                 old_logp=r.get("old_logp"), ref_logp=r["ref_logp"],
                 inputs={"input_ids": torch.cat([r["prompt_ids"], r["completion_ids"]], 1),
                         "attention_mask": torch.cat([r["prompt_mask"].long(), mask.long()], 1)})


def core_config(mu: int = 1):
    from ladder.core import UpdateConfig

    return UpdateConfig(mu=mu, clip_eps_low=CLIP_EPS, kl_coef=BETA, kl_estimator="k3", kl_correction=False,
                        aggregation="seq_mean_token_mean", max_grad_norm=1.0)


def core_policy(model):
    from ladder.policies.causal_lm import CausalLMPolicy

    return CausalLMPolicy(model, temperature=TEMPERATURE, share_prompts=False)
