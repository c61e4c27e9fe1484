"""TRL 1.16's advantages from several reward functions through TRL's own ``_generate_and_score_completions``
and through the grpo rung, on fixed rewards. Each case sets TRL's trainer as ``--export-trl`` writes it (its
reward functions and ``reward_weights``) and checks ladder's advantages against TRL's:

    multi_objective_aggregation     normalize_then_sum (GDPO)               decoupled_group_relative
                                    sum_then_normalize                      group_relative
    --overlong-penalty p            get_soft_overlong_punishment, weight p  with_overlong_penalty, weight p

The tiny saved Qwen2 (``parity_model_dir``) is tests/conftest.py's; the rewards ignore what it samples.
"""

from __future__ import annotations

import dataclasses
from types import SimpleNamespace

import pytest
import torch
from trl_helpers import (
    TEMPERATURE,
    AutoModelForCausalLM,
    Dataset,
    GRPOConfig,
    GRPOTrainer,
    close,
    kept_rng,
    one_thread,  # noqa: F401 (autouse fixture)
    tokenizer_of,
)

from ladder import core, rewards
from ladder import trl_rows as trl_mapping
from ladder.rungs import grpo
from ladder.rungs.grpo.rollout import with_overlong_penalty

# --- GDPO's advantages: TRL's own _generate_and_score_completions on fixed rewards -------------------

GDPO_G = 3
SMALL = [1.0, 0.0, 1.0, 0.0, 0.0, 1.0, 1.0, 1.0, 1.0]                # 0/1, one group without spread
LARGE = [120.0, -40.0, 300.0, 5.0, 17.0, -200.0, 50.0, -75.0, 8.0]    # spread of hundreds
WEIGHTS = [1.0, 0.3]


def small(completions, **_):
    return SMALL[:len(completions)]


def large(completions, **_):
    return LARGE[:len(completions)]


@pytest.fixture(scope="module")
def gdpo_trainer(parity_model_dir, tmp_path_factory):
    args = GRPOConfig(output_dir=str(tmp_path_factory.mktemp("gdpo-out")), report_to=[], use_cpu=True, bf16=False,
                      per_device_train_batch_size=len(SMALL), num_generations=GDPO_G, max_completion_length=4,
                      temperature=TEMPERATURE, beta=0.0, reward_weights=WEIGHTS, gradient_checkpointing=False,
                      logging_steps=10**9, save_strategy="no", dataloader_num_workers=0)
    with kept_rng():
        trainer = GRPOTrainer(model=AutoModelForCausalLM.from_pretrained(parity_model_dir), reward_funcs=[small, large],
                              args=args, train_dataset=Dataset.from_list([{"prompt": "What is 2 + 3?"}] * 3),
                              processing_class=tokenizer_of(parity_model_dir))
    trainer.model.train()
    return trainer


def trl_advantages(trainer, aggregation: str) -> torch.Tensor:
    trainer.multi_objective_aggregation = trainer.args.multi_objective_aggregation = aggregation
    prompts = ["What is 2 + 3?", "Tom has 4 apples.", "How many are left?"]
    inputs = [{"prompt": p} for p in prompts for _ in range(GDPO_G)]
    with kept_rng(), torch.no_grad():
        return trainer._generate_and_score_completions(inputs)["advantages"]


def test_gdpo_advantages_match_trl(gdpo_trainer):
    per_function = torch.tensor([SMALL, LARGE]).T                      # [N, F]
    weights = torch.tensor(WEIGHTS)
    expected = trl_advantages(gdpo_trainer, "normalize_then_sum")
    close(core.decoupled_group_relative(per_function, weights, GDPO_G), expected, "normalize_then_sum", rtol=0.0)
    summed = trl_advantages(gdpo_trainer, "sum_then_normalize")
    close(core.group_relative(per_function @ weights, GDPO_G), summed, "sum_then_normalize", rtol=0.0)
    assert (expected - summed).abs().max() > 0.1  # the large reward decides the summed advantage, not GDPO's

    # the rung's batch_advantages, one process
    class Rollout(SimpleNamespace):
        def __len__(self):
            return len(SMALL)

    rollout = Rollout(per_function={"small": per_function[:, 0], "large": per_function[:, 1]})
    for aggregation, trl_result in (("normalize_then_sum", expected), ("sum_then_normalize", summed)):
        step = SimpleNamespace(cfg=grpo.Config(group_size=GDPO_G, multi_objective_aggregation=aggregation),
                               procs=SimpleNamespace(rank=0, gather=lambda x: x), advantages=grpo.group_advantages,
                               reward_weights={"small": WEIGHTS[0], "large": WEIGHTS[1]})
        close(grpo.batch_advantages(step, rollout, per_function @ weights), trl_result, aggregation, rtol=0.0)


# --- GDPO with the soft overlong penalty: --overlong-penalty p is the penalty's reward weight -------------

# The smallest case: P = 2 prompts × G = 2 completions of at most 4 tokens, the last half of them penalised.
OVERLONG = dict(group_size=2, prompts_per_step=2, max_new_tokens=4, overlong_buffer=0.5, overlong_penalty=0.5,
                reward_funcs="correctness")
CORRECT = [1.0, 0.0, 1.0, 0.0]
LENGTHS = [4, 1, 2, 3]  # tokens: the penalty at p = 1 is −1, 0, 0, −0.5


def correct(completions, **_):
    return CORRECT[:len(completions)]


def overlong_of_lengths(completions, **_):
    """TRL's own ``get_soft_overlong_punishment``, as --export-trl writes it, on completions of LENGTHS tokens."""
    from trl.rewards import get_soft_overlong_punishment

    cfg = grpo.Config(**OVERLONG)
    punish = get_soft_overlong_punishment(max_completion_len=cfg.max_new_tokens,
                                          soft_punish_cache=round(cfg.rewards.overlong_buffer * cfg.max_new_tokens))
    return punish([[0] * n for n in LENGTHS[:len(completions)]])


@pytest.fixture(scope="module")
def overlong_trainer(parity_model_dir, tmp_path_factory):
    """TRL's trainer with the reward functions and weights the export writes: [correctness, overlong], [1, p]."""
    cfg = grpo.Config(**OVERLONG)
    args = GRPOConfig(output_dir=str(tmp_path_factory.mktemp("overlong-out")), report_to=[], use_cpu=True,
                      bf16=False, per_device_train_batch_size=len(CORRECT), num_generations=cfg.group_size,
                      max_completion_length=cfg.max_new_tokens, temperature=TEMPERATURE, beta=0.0,
                      reward_weights=trl_mapping.reward_weights(cfg), gradient_checkpointing=False,
                      logging_steps=10**9, save_strategy="no", dataloader_num_workers=0)
    with kept_rng():
        trainer = GRPOTrainer(model=AutoModelForCausalLM.from_pretrained(parity_model_dir),
                              reward_funcs=[correct, overlong_of_lengths], args=args,
                              train_dataset=Dataset.from_list([{"prompt": "What is 2 + 3?"}] * 2),
                              processing_class=tokenizer_of(parity_model_dir))
    trainer.model.train()
    return trainer


class _Rows(SimpleNamespace):
    def __len__(self):
        return len(next(iter(self.per_function.values())))


def ladder_overlong_advantages(cfg: grpo.Config) -> tuple[torch.Tensor, torch.Tensor, dict]:
    """The rung's code on the smallest case: ``rewards.score``, ``with_overlong_penalty``, ``batch_advantages``
    (one process) → (Â, r, the per-function rewards)."""
    weights = grpo.reward_weights(cfg)
    total, per_function = rewards.score(["?"] * len(CORRECT), ["?"] * len(CORRECT), weights,
                                        {"correctness": lambda completions, answers: CORRECT})
    total, per_function = with_overlong_penalty(total, per_function, torch.tensor(LENGTHS), cfg)
    step = SimpleNamespace(cfg=cfg, procs=SimpleNamespace(rank=0, gather=lambda x: x),
                           advantages=grpo.group_advantages, reward_weights=weights)
    return grpo.batch_advantages(step, _Rows(per_function=per_function), total), total, per_function


@pytest.mark.parametrize("aggregation", ["normalize_then_sum", "sum_then_normalize"])
def test_overlong_penalty_advantages_match_trl(overlong_trainer, aggregation):
    """ladder's advantages with --overlong-penalty p = TRL's with the exported reward weights [1, p], under
    both aggregations: the penalty column is R(L) at p = 1, weighed by p (GDPO normalises a column within its
    group, so a column already scaled by p would lose p)."""
    cfg = grpo.Config(**OVERLONG, multi_objective_aggregation=aggregation)
    overlong_trainer.multi_objective_aggregation = overlong_trainer.args.multi_objective_aggregation = aggregation
    inputs = [{"prompt": p} for p in ("What is 2 + 3?", "Tom has 4 apples.") for _ in range(cfg.group_size)]
    with kept_rng(), torch.no_grad():
        expected = overlong_trainer._generate_and_score_completions(inputs)["advantages"]
    got, total, per_function = ladder_overlong_advantages(cfg)
    close(got, expected, aggregation, rtol=0.0)
    assert torch.equal(per_function["overlong"], torch.tensor([-1.0, 0.0, 0.0, -0.5]))  # R(L) at p = 1
    assert torch.equal(total, torch.tensor(CORRECT) + 0.5 * per_function["overlong"])
    if aggregation == "normalize_then_sum":
        assert torch.allclose(expected, torch.tensor([0.3873, -0.3873, 1.1618, -1.1618]), atol=1e-4, rtol=0.0)
        heavier = ladder_overlong_advantages(dataclasses.replace(cfg, overlong_penalty=1.0))[0]
        assert (heavier - got).abs().max() > 0.1  # p moves GDPO's advantages
