"""GRPO's one update (DeepSeekMath): P prompts × G sampled completions → rule rewards →
Â_i = (r_i − mean_group)/std → every token of completion i gets Â_i → ``Batch`` → ``ladder.core.update`` with the
clipped surrogate and β·KL(π_θ‖π_ref) in the loss.

``grpo_step`` does it on a ``Step``: plain data (the policy, the optimiser, the problems' stream) and the three
choices a new rollout changes (``rollout``, ``advantages``, ``credit``); ``make_step`` makes one by keyword for the
rung's recipe (``ladder.rungs.grpo.recipe``), exercise 20's harness and the labs.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

import torch

from ladder import core, rewards
from ladder.core.swappable import swappable
from ladder.policies.causal_lm import CausalLMPolicy, lm_batch
from ladder.rungs.grpo import advantage_spec as advantage_settings
from ladder.rungs.grpo import entropy_control as entropy_settings
from ladder.rungs.grpo.core_settings import records_sampler_logp, update_config
from ladder.rungs.grpo.loss_types import LOSS_TYPES
from ladder.rungs.grpo.options import Config, reward_weights
from ladder.rungs.grpo.record import Laps, step_record
from ladder.rungs.grpo.rollout import DYNAMIC_SAMPLING, Rollout, dynamic_sample, reward_column_weights, sample
from ladder.rungs.grpo.settle import settle
from ladder.runtime.distributed import Processes
from ladder.tasks import math_problems
from ladder.tasks.math_problems import ProblemStream


def sample_completions(step: Step, problems: list[dict]) -> Rollout:
    """G completions of each of ``problems`` (this process's share), scored: ``grpo_rollout.sample`` on the task's
    prompts (``step.prompt``)."""
    prompts = [step.prompt(step.tokenizer, problem, step.system_prompt) for problem in problems]
    return sample(step.policy, step.tokenizer, step.cfg, problems, prompts, step.reward_weights, step.reward_funcs,
                  step.procs.device, record_logp=step.records_sampler_logp)


def sample_groups(step: Step, sample_share: Callable[[Step, list[dict]], Rollout] = sample_completions
                  ) -> tuple[Rollout, int, int]:
    """This process's share of the next ``--prompts-per-step`` problems, G scored samples each
    (``sample_share``: completions here, trajectories in the agent rung); with ``--dynamic-sampling``, further
    rounds until enough groups have a reward spread. Returns (rollout, sampling rounds, samples drawn here)."""
    cfg, procs = step.cfg, step.procs
    rollout = sample_share(step, procs.shard(step.stream.draw(cfg.prompts_per_step)))
    if not cfg.dynamic_sampling:
        return rollout, 1, len(rollout)

    def sample_more(wanted: bool) -> Rollout | None:
        more = step.stream.draw(cfg.prompts_per_step)  # every process draws: the order stays the same everywhere
        return sample_share(step, procs.shard(more)) if wanted else None

    def all_done(mine: bool) -> bool:
        return bool(procs.gather(torch.tensor([float(mine)])).min().item())

    rounds = DYNAMIC_SAMPLING.resolve(cfg).max_rounds
    return dynamic_sample(rollout, sample_more, cfg.group_size, rounds, all_done,
                          step.tokenizer.pad_token_id)


def group_advantages(rewards: torch.Tensor, cfg: Config) -> torch.Tensor:
    """Â of every completion of the whole batch ``[P·G]`` (all processes), from whole groups."""
    if advantage_settings.estimator(cfg) == "rloo":
        return core.leave_one_out(rewards, cfg.group_size, advantage_settings.scale(cfg))
    return core.group_relative(rewards, cfg.group_size, advantage_settings.scale(cfg))


def batch_advantages(step: Step, rollout: Rollout, rewards: torch.Tensor) -> torch.Tensor:
    """Â ``[n]`` of this process's completions, from whole groups of the whole batch: ``step.advantages`` of the
    summed rewards r_i, or with --multi-objective-aggregation normalize_then_sum each reward function normalised
    within its group first (``core.decoupled_group_relative``; the overlong penalty one more function, weight
    --overlong-penalty: ``reward_column_weights``)."""
    cfg, procs = step.cfg, step.procs
    if cfg.multi_objective_aggregation == "normalize_then_sum":
        names = list(rollout.per_function)
        scores = torch.stack([rollout.per_function[name].float() for name in names], dim=1)    # [n, F]
        weights = reward_column_weights(names, step.reward_weights, cfg)
        whole = core.decoupled_group_relative(procs.gather(scores), weights, cfg.group_size)
    else:
        whole = step.advantages(procs.gather(rewards), cfg)
    return whole[procs.rank * len(rollout):][:len(rollout)]


def same_for_every_token(rollout: Rollout, advantages: torch.Tensor, cfg: Config) -> torch.Tensor:
    """GRPO's credit: every token of completion i gets its completion's Â_i → ``[n, 1]``, broadcast over T."""
    return advantages[:, None]


@dataclass
class Step:
    """What one GRPO step works with; made by ``build``, by keyword. ``rollout`` and ``advantages`` are
    the step's algorithm: a new rung's rollout goes here, not into a copy of ``grpo_step``."""

    cfg: Config
    policy: CausalLMPolicy     # π_θ (π_old while sampling; π_ref with its adapter off or its own weights)
    trainer: object            # the policy, or its data-parallel wrapper (its backward averages gradients)
    tokenizer: object
    optimizer: torch.optim.Optimizer
    update_cfg: core.UpdateConfig
    stream: ProblemStream
    system_prompt: str
    reward_funcs: dict[str, Callable]
    reward_weights: dict[str, float]
    procs: Processes
    records_sampler_logp: bool = False  # sampling keeps π_sampler's own log-probs (core_settings)
    prompt: Callable[[object, dict, str], str] = math_problems.prompt  # (tokenizer, problem, system prompt) → text
    rollout: Callable[[Step], tuple[Rollout, int, int]] = sample_groups          # (rollout, rounds, sampled here)
    advantages: Callable[[torch.Tensor, Config], torch.Tensor] = group_advantages  # rewards [P·G] → Â [P·G]
    credit: Callable[[Rollout, torch.Tensor, Config], torch.Tensor] = same_for_every_token  # Â [n] → tokens' [n, T]
    entropy_control: core.AdaptiveEntropyCoef | None = None  # --adaptive-entropy's c_H (None: c_H fixed)


def make_step(cfg: Config, *, policy: CausalLMPolicy, optimizer: torch.optim.Optimizer, tokenizer, stream,
          system_prompt: str, procs: Processes, trainer=None, update_cfg: core.UpdateConfig | None = None,
          reward_funcs: dict[str, Callable] | None = None, prompt: Callable = math_problems.prompt,
          rollout: Callable = sample_groups, advantages: Callable = group_advantages,
          credit: Callable = same_for_every_token, entropy_control: core.AdaptiveEntropyCoef | None = None) -> Step:
    """The Step that the rung's recipe (``ladder.rungs.grpo.recipe``), exercise 20's harness and the notebooks' labs
    run ``grpo_step`` on. What
    is left out is the rung's own: the trainer ``procs.wrap(policy)`` (the policy itself in one process),
    ``update_config(cfg)``, the ``--reward-funcs`` loaded and weighed by ``reward_weights(cfg)``, and
    ``entropy_settings.controller(cfg, procs)`` (``ladder.rungs.grpo.entropy_control``)."""
    cfg = settle(cfg, policy.model.config, procs.device).cfg  # as train_on did (a lab's, a grader's cfg: not yet)
    return Step(cfg=cfg, policy=policy, trainer=procs.wrap(policy) if trainer is None else trainer,
                tokenizer=tokenizer, optimizer=optimizer,
                update_cfg=update_config(cfg) if update_cfg is None else update_cfg, stream=stream,
                system_prompt=system_prompt,
                reward_funcs=rewards.load_all(cfg.rewards.funcs) if reward_funcs is None else reward_funcs,
                reward_weights=reward_weights(cfg), procs=procs, records_sampler_logp=records_sampler_logp(cfg),
                prompt=prompt, rollout=rollout,
                advantages=advantages, credit=credit,
                entropy_control=entropy_settings.controller(cfg, procs) if entropy_control is None else entropy_control)


def loss_normaliser(loss_type: str, rows: int, max_new_tokens: int, active_tokens: float) -> float | None:
    """The constant N that ``core.aggregate`` divides the summed loss by ("sum_over_constant") for this
    process's whole batch of ``rows`` completions; ``core.update`` gives each minibatch its share.

        dr_grpo               N = rows · L_max     "budget": the generation budget (Dr. GRPO), L_max =
                                                   --max-new-tokens
        dapo, cispo, vespo    N = active_tokens    "tokens": the real tokens of the whole batch, summed over the
                                                   P processes ÷ P (DAPO's token-level normaliser)
        grpo, bnpo, sapo,     None                 they average: no constant
        luspo
    (each loss type's constant is registered with it: ``loss_types.LossType.constant``)
    """
    constant = LOSS_TYPES[loss_type].constant
    if constant is None:
        return None
    if constant == "budget":
        return float(rows * max_new_tokens)
    return active_tokens


@swappable
def grpo_step(step: Step) -> tuple[dict, Rollout, torch.Tensor]:
    """One GRPO update: the batch (``grpo_batch``: sample G completions per prompt, rule rewards, group-relative
    advantages) → ``core.update``; the record is ``step_record``'s. Returns the record, this process's rollout and
    its advantages ``[B]`` (what ``completion_rows`` logs).

        r_i   = Σ_f w_f · f(completion_i)          (− β · Σ_t KL_t with --kl-in reward)
        Â_i   = (r_i − mean_group) / std_group     every token of completion i gets Â_i
    """
    got = grpo_batch(step)
    control = {} if step.entropy_control is None else {"entropy_control": step.entropy_control}
    passes = core.update(step.trainer, got.batch, step.optimizer, step.update_cfg, num_tokens=got.num_tokens,
                         **control)
    got.laps.lap("update")
    record = step_record(step, got.rollout, got.rewards, passes, got.rounds, got.generated, got.laps)
    return record, got.rollout, got.advantages


@dataclass
class Collected:
    """What one GRPO update hands ``core.update``, with what its record reads."""

    batch: core.Batch             # [B, T]: the completions (the loss mask), Â per token, π_old/π_ref/π_sampler
    num_tokens: float | None      # the loss's constant normaliser (``loss_normaliser``; None: it averages)
    rollout: Rollout              # this process's samples, scored
    rewards: torch.Tensor         # r_i [B] (shaped by the KL with --kl-in reward)
    advantages: torch.Tensor      # Â_i [B]
    rounds: int                   # sampling rounds (dynamic sampling)
    generated: int                # samples drawn here
    laps: Laps                    # the phases' times so far


def grpo_batch(step: Step) -> Collected:
    """The batch of one GRPO update, before ``core.update``: sample G completions per prompt (``step.rollout``) →
    rule rewards → group-relative advantages (``step.advantages``) → each token's Â (``step.credit``)."""
    cfg, procs, policy, laps = step.cfg, step.procs, step.policy, Laps()
    rollout, rounds, generated = step.rollout(step)                             # sample, scored: r_i
    laps.lap("sampling")
    inputs = lm_batch(rollout.prompt_ids, rollout.prompt_mask, rollout.completion, rollout.mask,
                      step.tokenizer.pad_token_id, completion_attention_mask=rollout.attention_mask)
    ref_logp = policy.ref_logp(inputs) if cfg.kl.coef > 0 else None
    old_logp, rewards = None, rollout.rewards                                   # this process's [n], CPU
    beta_in_reward = cfg.kl.in_reward()                                         # --kl-in reward's β, else 0
    if beta_in_reward > 0:
        old_logp = policy.old_logp_and_values(inputs)[0].float()                # π_old, used by the update too
        rewards, _ = core.kl_in_reward(rewards, old_logp.cpu(), ref_logp.cpu(), rollout.mask.cpu(), beta_in_reward,
                                       cfg.kl.estimator)
    advantages = batch_advantages(step, rollout, rewards)
    loss_mask = rollout.mask * (~rollout.truncated).to(rollout.mask.device)[:, None] if cfg.mask_truncated \
        else rollout.mask
    token_advantages = step.credit(rollout, advantages, cfg).to(loss_mask.device)  # [n, T] or [n, 1]
    batch = replace(inputs, mask=loss_mask.float(), advantages=token_advantages * loss_mask,
                    old_logp=old_logp, ref_logp=ref_logp, sampling_logp=rollout.sampling_logp)
    # The loss's constant normaliser: the active tokens of the whole batch, shared out over the processes
    # (dapo, cispo), or this process's rows × --max-new-tokens (dr_grpo).
    active_tokens = procs.gather(torch.tensor([float(batch.num_tokens)])).sum().item() / procs.world
    num_tokens = loss_normaliser(cfg.loss_type, len(batch), cfg.generation.max_new_tokens, active_tokens)
    laps.lap("reference")
    return Collected(batch, num_tokens, rollout, rewards, advantages, rounds, generated, laps)
