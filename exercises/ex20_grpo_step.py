"""Exercise 20 — one whole GRPO step, as the grpo rung runs it (DeepSeekMath; rung 4, notebook 5).

Goes with notebook 5, section “Run it: a few steps of the tiny preset”.

Sample G completions per prompt, score them, turn the scores into group-relative advantages, and
run the update — in the order the grpo rung runs them, with your exercises 10 and 13 (inside
``group_advantages``), 25 (GDPO's advantages, with --multi-objective-aggregation normalize_then_sum), 14,
16 (inside the policy's log-probs) and 18 (with 17, and through it 5, 8, 11, 12, 24 with --loss-type sapo
and, with a sampler of its own, 21):

    cfg, policy = step.cfg, step.policy                      the run's options, the policy
    laps     = Laps()                                        times the phases: laps.lap("sampling"), …
    procs    = step.procs                                    the data-parallel processes (one, unless launched)
    rollout, rounds, sampled = step.rollout(step)           P prompts × G completions, scored (by default the
                                                             rung's sample_groups; another rung passes its own);
                                                             B rows: this process's share (notebook 6's B is the
                                                             whole update's, over every process)
    laps.lap("sampling")
    inputs   = lm_batch(rollout.prompt_ids, rollout.prompt_mask, rollout.completion, rollout.mask,
                        step.tokenizer.pad_token_id,         the Batch: prompt + completion, [B, T] actions;
                        completion_attention_mask=rollout.attention_mask)   an agent's trajectory (exercise 22):
                                                             the environment's tokens read, not actions (None:
                                                             one completion per prompt, read where it is masked)
    kl       = cfg.kl                                        the KL to π_ref's spec: kl.coef = β, kl.estimator,
                                                             kl.in_reward() = β with --kl-in reward, else 0
    ref_logp = policy.ref_logp(inputs) if kl.coef > 0 else None   π_ref's log-probs (a no-grad forward)
    r_i      = rollout.rewards                               [B] on the CPU
    if kl.in_reward() > 0:                                   (RLOO) the KL goes into the reward, on π_old:
        old_logp = policy.old_logp_and_values(inputs)[0].float()
        r_i, _   = kl_in_reward(r_i, old_logp.cpu(), ref_logp.cpu(), rollout.mask.cpu(), kl.in_reward(),
                                kl.estimator)
    else: old_logp = None
    Â_i      = batch_advantages(step, rollout, r_i)          this process's B rows of the whole batch's Â:
                                                             step.advantages(procs.gather(r_i), cfg) (by default
                                                             group_advantages: ex10 / ex13 inside), or with
                                                             --multi-objective-aggregation normalize_then_sum
                                                             each reward function normalised first (ex25)
    m        = rollout.mask, times ~rollout.truncated per row if cfg.mask_truncated:
               rollout.mask * (~rollout.truncated)[:, None]
    Â_t      = step.credit(rollout, Â_i, cfg)                by default Â_i[:, None], [B, 1]: every token of row i
                                                             gets Â_i; the agent rung's --credit turn gives each
                                                             turn's tokens their own, [B, T]
    batch    = replace(inputs, mask=m.float(), advantages=Â_t · m, old_logp=old_logp, ref_logp=ref_logp,
                       sampling_logp=rollout.sampling_logp)   π_sampler's log-probs (None: π_old sampled);
                                                             with --kl-in reward the KL is not charged twice:
                                                             step.update_cfg's β in the loss is kl.in_loss() = 0
    N        = loss_normaliser(cfg.loss_type, B, cfg.max_new_tokens, active), with active = the real tokens
               of the batch over all processes / the number of processes:
               procs.gather(torch.tensor([float(batch.num_tokens)])).sum().item() / procs.world
    laps.lap("reference")
    passes   = update(step.trainer, batch, step.optimizer, step.update_cfg, num_tokens=N)    (ex18), and
               entropy_control=step.entropy_control when it is not None (--adaptive-entropy's c_H)
    laps.lap("update")
    record   = step_record(step, rollout, r_i, passes, rounds, sampled, laps)     the bookkeeping (a helper):
               the batch's statistics, the passes' over all processes, the times (the grader ignores them)
    return record, rollout, Â_i                              the rung logs Â_i beside each completion
                                                             (OUT/completions.jsonl, grpo.completion_rows)

    step    a ladder.rungs.grpo.Step (made by grpo.make_step): cfg, policy, trainer, tokenizer, optimizer,
            update_cfg, stream, system_prompt, reward_funcs, reward_weights, procs, records_sampler_logp, prompt,
            rollout, advantages, credit, entropy_control
    result  (record: dict, rollout, Â_i: [B] this process's advantages); the batch it builds has [B, T] tensors

The helpers come from the rung: ``from ladder.rungs.grpo.record import Laps, step_record``, ``from
ladder.rungs.grpo import loss_normaliser``, ``from ladder.policies.causal_lm import lm_batch``,
``from ladder.core import kl_in_reward`` (or your ex14), ``from ladder.rungs.grpo import batch_advantages``,
``from ladder.core import update`` (or your ex18).
Worked example (it loads the tiny preset's model, which ships with the package). The harness
``run_grpo_step`` runs your ``grpo_step`` once and returns the record (without its timings), the policy
after the step, and the advantages your step returned:

    >>> from ladder.graders.cases_loop import run_grpo_step
    >>> record, policy, advantages = run_grpo_step(grpo_step)    # 2 prompts × 4 completions, seed 0
    >>> record["num_passes"], record["sampling/completions"], advantages.shape
    (1, 8, torch.Size([8]))

Mirrors ``ladder.rungs.grpo.grpo_step``. Grade it: ``pytest exercises/`` (one step on the tiny LM with
yours and with the rung's, from the same seed: the same record, advantages and parameters after); once it passes,
``python -m ladder.run grpo --preset tiny --use-exercises`` trains with it.
"""

from __future__ import annotations

from dataclasses import replace  # noqa: F401 - you will need it

import torch  # noqa: F401 - you will need it


def grpo_step(step) -> tuple:
    """One GRPO update: sample → score → group-relative advantages → update; (record, rollout, Â_i)."""
    raise NotImplementedError
