"""Solution to exercise 20 — one GRPO step: sample, score, group-relative advantages, update."""

from __future__ import annotations

from dataclasses import replace

import torch
from ex14_kl_in_reward import kl_in_reward
from ex18_update import update

from ladder.policies.causal_lm import lm_batch
from ladder.rungs.grpo import batch_advantages, loss_normaliser
from ladder.rungs.grpo.record import Laps, step_record


def grpo_step(step) -> tuple:
    """One GRPO update: sample → score → group-relative advantages → update; (record, rollout, Â_i)."""
    cfg, procs, policy, laps = step.cfg, step.procs, step.policy, Laps()
    rollout, rounds, sampled = step.rollout(step)                       # P prompts × G completions, scored
    laps.lap("sampling")
    inputs = lm_batch(rollout.prompt_ids, rollout.prompt_mask, rollout.completion, rollout.mask,
                      step.tokenizer.pad_token_id,                      # an agent's: the env's tokens are read
                      completion_attention_mask=rollout.attention_mask)  # (None: one completion per prompt)
    ref_logp = policy.ref_logp(inputs) if cfg.kl.coef > 0 else None
    old_logp, rewards = None, rollout.rewards
    if cfg.kl.in_reward() > 0:                                          # RLOO: the KL is a cost in the reward
        old_logp = policy.old_logp_and_values(inputs)[0].float()
        rewards, _ = kl_in_reward(rewards, old_logp.cpu(), ref_logp.cpu(), rollout.mask.cpu(), cfg.kl.in_reward(),
                                  cfg.kl.estimator)
    B = len(rollout)
    advantages = batch_advantages(step, rollout, rewards)              # whole groups; this process's B rows
    mask = rollout.mask
    if cfg.mask_truncated:                                              # cut-off completions take no part
        mask = mask * (~rollout.truncated).to(mask.device)[:, None]
    token_advantages = step.credit(rollout, advantages, cfg).to(mask.device)   # [B, 1]: Â_i; [B, T] per turn
    batch = replace(inputs, mask=mask.float(), advantages=token_advantages * mask,
                    old_logp=old_logp, ref_logp=ref_logp,               # by default every token of row i gets Â_i
                    sampling_logp=rollout.sampling_logp)                # π_sampler's, when it is not π_old
    active = procs.gather(torch.tensor([float(batch.num_tokens)])).sum().item() / procs.world
    num_tokens = loss_normaliser(cfg.loss_type, B, cfg.max_new_tokens, active)
    laps.lap("reference")
    control = {} if step.entropy_control is None else {"entropy_control": step.entropy_control}
    passes = update(step.trainer, batch, step.optimizer, step.update_cfg, num_tokens=num_tokens, **control)
    laps.lap("update")
    record = step_record(step, rollout, rewards, passes, rounds, sampled, laps)
    return record, rollout, advantages                                  # Â_i: logged beside each completion
