"""Solution to exercise 20 — one GRPO step: sample, score, group-relative advantages, update."""

from __future__ import annotations

import time
from dataclasses import replace

import torch
from ex14_kl_in_reward import kl_in_reward
from ex18_update import update

from ladder.policies.causal_lm import lm_batch
from ladder.rungs.grpo import batch_statistics, group_advantages, sample_groups
from ladder.rungs.grpo_options import loss_normaliser


def grpo_step(step) -> tuple:
    """One GRPO update: sample → score → group-relative advantages → update; (record, rollout, Â_i)."""
    cfg, procs, policy = step.cfg, step.procs, step.policy
    started = time.perf_counter()
    rollout, rounds, sampled = sample_groups(step)                      # P prompts × G completions, scored
    after_sampling = time.perf_counter()
    inputs = lm_batch(rollout.prompt_ids, rollout.prompt_mask, rollout.completion, rollout.mask,
                      step.tokenizer.pad_token_id)
    ref_logp = policy.ref_logp(inputs) if cfg.kl_coef > 0 else None
    old_logp, rewards = None, rollout.rewards
    if cfg.kl_in == "reward" and cfg.kl_coef > 0:                       # RLOO: the KL is a cost in the reward
        old_logp = policy.old_logp_and_values(inputs)[0].float()
        rewards, _ = kl_in_reward(rewards, old_logp.cpu(), ref_logp.cpu(), rollout.mask.cpu(), cfg.kl_coef,
                                  cfg.kl_estimator)
    B = len(rollout)
    advantages = group_advantages(procs.gather(rewards), cfg)[procs.rank * B:][:B]
    mask = rollout.mask
    if cfg.mask_truncated:                                              # cut-off completions take no part
        mask = mask * (~rollout.truncated).to(mask.device)[:, None]
    batch = replace(inputs, mask=mask.float(), advantages=advantages.to(mask.device)[:, None] * mask,
                    old_logp=old_logp, ref_logp=ref_logp,               # every token of row i gets Â_i
                    sampling_logp=rollout.sampling_logp)                # π_sampler's, when it is not π_old
    active = procs.gather(torch.tensor([float(batch.num_tokens)])).sum().item() / procs.world
    num_tokens = loss_normaliser(cfg.loss_type, B, cfg.max_new_tokens, active)
    after_reference = time.perf_counter()
    passes = update(step.trainer, batch, step.optimizer, step.update_cfg, num_tokens=num_tokens)
    record = batch_statistics(rollout, rewards, procs, cfg.group_size)
    record.update(procs.mean(passes[-1]), num_passes=len(passes), **{
        "time/sampling_s": after_sampling - started, "time/reference_s": after_reference - after_sampling,
        "time/update_s": time.perf_counter() - after_reference, "sampling/rounds": rounds,
        "sampling/completions": int(procs.gather(torch.tensor([float(sampled)])).sum().item())})
    skipped = procs.mean({"skipped_steps": sum(p["skipped_steps"] for p in passes)})["skipped_steps"]
    record["skipped_steps"] = step.skipped_steps([{"skipped_steps": skipped}],
                                                 step.update_cfg.num_minibatches * len(passes))
    return record, rollout, advantages                                  # Â_i: logged beside each completion
