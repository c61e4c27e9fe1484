"""Rung 5: agents — GRPO on multi-turn trajectories, where the environment talks back.

A trajectory is the model's turns and the environment's replies, one ``[B, T]`` row with two masks: the
environment's tokens (a tool's reply) are context the model attends to (attention 1) but not actions it is
graded on (mask 0: no log-prob term, no KL, no entropy, no advantage). So the same ``grpo_step`` and the same
``core.update`` train an agent; only the rollout is new (``agent_rollout.multi_turn``: token ids on one cache).

    r_i    = Σ_f w_f · f(last turn of trajectory i) + env_i.get_reward()      (each term where there is one)
    Â_i    = (r_i − mean_group) / std_group          every model token of trajectory i (--credit trajectory)
    Â_i,k  = Σ_{j ≥ k} r̃_i,j                          every model token of turn k (--credit turn: per-turn rewards,
                                                     DeepSeekMath's process supervision; core.group_relative_turns)

The environment is a class in TRL 1.16's protocol (``ladder.tasks.tool_calls``): ``--env calculator | guess |
gsm8k | FILE.py:Class | MODULE:Class``. Every GRPO option applies (``--algo``, ``--loss-type``, the KL, …).

Every call into the environment — making it, ``reset``, each tool, ``get_reward`` — runs within ``--env-timeout``
seconds (``ladder.runtime.limits``: interrupted in this thread, none left running), and what it returns is checked where
it is crossed. A tool that fails is an error the model reads (``tool_calls.call_tool``); the others stop the run in
one line naming the call: a ``UsageError``, which the run session reports with exit 2 and nothing kept before the
run's first checkpoint, and with exit 1 and the run kept (to ``--resume``) after it.
"""

from __future__ import annotations

import math
from functools import partial

import torch

from ladder import core, hub, rewards
from ladder.plots import Panel
from ladder.policies import quant
from ladder.rungs import grpo
from ladder.rungs.agent import options as agent_options
from ladder.rungs.agent.options import (
    ENVIRONMENTS,
    PRESETS,
    RESOLVED,
    TINY_MODEL,
    Config,
    environment,
    problems,
    system_prompt,
    validate,
)
from ladder.rungs.agent.rollout import Trajectories, multi_turn
from ladder.rungs.grpo import options as grpo_options
from ladder.rungs.grpo.rollout import Rollout, with_overlong_penalty
from ladder.rungs.protocol import Rung
from ladder.runtime.errors import UsageError
from ladder.runtime.limits import TimedOut, time_limit
from ladder.runtime.user_code import exited, held_output, one_line, said
from ladder.tasks import arithmetic, math_problems, tool_calls
from ladder.trl_rows import GRPO, GRPO_TRAINER, TRL

__all__ = ["ALGOS", "CURVES", "ENVIRONMENTS", "NAME", "PRESETS", "RESOLVED", "RUNG", "TINY_MODEL", "Config",
           "agent_task", "environment", "problems", "system_prompt", "train", "validate"]
NAME = "agent"
RUNG = Rung(name=NAME, position=5,
            summary="GRPO on multi-turn tool use: the environment's replies are context, not actions",
            export="ladder.trl.export:write_agent_run",
            exercises=(*grpo.RUNG.exercises, "ex22_trajectory_tensors", "ex23_multi_turn"),  # grpo's step, its rollout
            vitals=grpo.RUNG.vitals,
            trl_classes=(GRPO, GRPO_TRAINER),
            trl=(TRL("environment_factory", "aggregate", "the loss mask: TRL's tool_mask (its tool loop; a "
                     "rollout_func returns it as env_mask) is 1 on the model's tokens and 0 on the tools' replies, "
                     "ladder's Trajectories.mask; both attend to every token (ladder's Trajectories.attention_mask)",
                     cls=GRPO_TRAINER),))
ALGOS = grpo_options.ALGOS
CURVES = [Panel("reward", "mean over the update's trajectories", {"reward": ""}),
          Panel("greedy accuracy (held-out)", "share solved", {"eval_accuracy": ""}),
          Panel("tool calls", "per trajectory (mean)", {"agent/tool_calls": ""}),
          Panel("turns", "model turns per trajectory (mean)", {"agent/turns": ""}),
          Panel("environment tokens (masked)", "per trajectory (mean)", {"agent/env_tokens": ""}),
          Panel("the environment's turn rewards", "per trajectory (mean)", {"agent/turn_reward": ""}),
          Panel("KL(π_θ‖π_ref)", "nats per token", {"kl_ref": ""})]


def agent_task(cfg: Config) -> grpo.Task:
    """The environment's problems, the model (``@tiny-agent``, ``@tiny-guess``: ladder's tiny tool-calling
    models), the multi-turn rollout and its credit, the held-out share solved, checked to fit the model's context."""
    env_class, prompt = environment(cfg), system_prompt(cfg)
    train, held_out = problems(cfg)
    model_path = hub.resolve(agent_options.model_path(cfg), "--model")
    tokenizer = quant.load_tokenizer(model_path)
    check_context(tokenizer, quant.load_config(model_path), train + held_out, prompt, env_class,
                  cfg.generation.max_new_tokens, cfg.env_timeout)
    dataset = cfg.problems.dataset
    source = (dataset, math_problems.fingerprint("gsm8k", dataset)) if cfg.env == "gsm8k" else (None, None)
    return grpo.Task(prompt, train, held_out, model_path, tokenizer, source,
                     rollout=partial(grpo.sample_groups, sample_share=partial(sample_trajectories,
                                                                              env_class=env_class)),
                     credit=turn_credit if cfg.credit == "turn" else grpo.same_for_every_token,
                     accuracy=partial(held_out_solved, env_class=env_class), curves=CURVES,
                     name=f"env {cfg.env}")


def train(cfg: Config) -> dict:
    """Train an agent with GRPO (``build``: the grpo recipe on ``agent_task``)."""
    validate(cfg)
    return grpo.train_on(agent_options.pinned_sampler(cfg), NAME, build, load_task_model=agent_options.model_path)


def build(cfg: Config, run) -> grpo.GRPO:
    """GRPO on the environment's multi-turn trajectories (``agent_task``), as the loop runs it."""
    return grpo.task_recipe(cfg, run, agent_task(cfg))


def chat_prompt(tokenizer, problem: dict, system: str, tools: list[dict], observation: str | None) -> str:
    """The prompt with the tools in the chat template (``tools=``); ``reset``'s text appended to the question."""
    messages = [{"role": "system", "content": system},
                {"role": "user", "content": problem["question"] + (observation or "")}]
    return tokenizer.apply_chat_template(messages, tools=tools, tokenize=False, add_generation_prompt=True)


def check_context(tokenizer, config, problems: list[dict], system: str, env_class: type, budget: int,
                  seconds: float | None = None) -> None:
    """Before the run: one environment can be made (within ``seconds``) and its tools shown to the model, and the
    longest question's prompt leaves ``budget`` tokens of the model's context."""
    limit = getattr(config, "max_position_embeddings", None)
    longest = max(problems, key=lambda p: len(p["question"]))
    tools = tool_calls.tool_schemas(make_environment(env_class, seconds))
    length = len(tokenizer(chat_prompt(tokenizer, longest, system, tools, None)).input_ids)
    if limit is not None and length + budget > limit:
        raise UsageError(_too_long(length, budget, limit))


def _too_long(length: int, budget: int, limit: int) -> str:
    return (f"a prompt of {length} tokens plus --max-new-tokens {budget} exceeds the model's context of {limit} "
            f"tokens; lower --max-new-tokens")


def user_call(what: str, seconds: float | None, fn, *args, **kwargs):
    """``fn(*args, **kwargs)``, the environment's code, within ``seconds`` (--env-timeout), what it prints held: one
    line naming ``what`` (``environment Env.reset``) if it raises, exits or runs past the limit (a ``UsageError``)."""
    printed = []
    try:
        with held_output(printed), time_limit(seconds, what):
            return fn(*args, **kwargs)
    except TimedOut as e:
        if e.what != what:
            raise
        raise UsageError(f"{e} (--env-timeout){said(printed)}") from None
    except SystemExit as e:  # argparse in the user's code, say: one ladder line, never the process's exit
        raise UsageError(f"{what} called {exited(e)}{said(printed)}") from None
    except Exception as e:  # noqa: BLE001 - the user's environment: name the call
        raise UsageError(f"{what} raised {type(e).__name__}: {one_line(e)}{said(printed)}") from None


def make_environment(env_class: type, seconds: float | None):
    """``env_class()``, TRL's environment_factory, within ``seconds``."""
    return user_call(f"environment {env_class.__name__}()", seconds, env_class)


def reset(env, problem: dict, seconds: float | None) -> str | None:
    """``env.reset(**problem)``: text to append to the question, or None; anything else is one line."""
    what = f"environment {type(env).__name__}.reset"
    text = user_call(what, seconds, env.reset, **problem)
    if text is not None and not isinstance(text, str):
        raise UsageError(f"{what} returned {rewards.described(text)}; it must return text (str) to append to the "
                         f"question, or None")
    return text


def environment_reward(env, seconds: float | None) -> float:
    """``env.get_reward()``, a finite number; anything else (None, text, NaN, ±inf) is one line."""
    what = f"environment {type(env).__name__}.get_reward"
    value = user_call(what, seconds, env.get_reward)
    number = rewards.as_number(value)
    if number is None or not math.isfinite(number):
        raise UsageError(f"{what} returned {rewards.described(value)}; it must return a finite number")
    return number


def turn_rewards(env) -> list[float]:
    """``env.turn_rewards`` (none: []), a finite number per model turn that calls a tool; else one line naming the
    entry."""
    given, what = getattr(env, "turn_rewards", []), f"environment {type(env).__name__}.turn_rewards"
    try:
        listed = None if isinstance(given, (str, bytes, dict)) or given is None else list(given)
    except TypeError:
        listed = None
    if listed is None:
        raise UsageError(f"{what} is {rewards.described(given)}; it must be a list with a number per model turn "
                         f"that calls a tool")
    numbers = [rewards.as_number(r) for r in listed]
    for i, (r, number) in enumerate(zip(listed, numbers)):
        if number is None or not math.isfinite(number):
            raise UsageError(f"{what}[{i}] is {rewards.described(r)}; each entry must be a finite number, the reward "
                             f"of a model turn that calls a tool")
    return numbers


def _check_room(tokenizer, lengths: list[int], observations: list, envs: list, budget: int, limit: int | None
                ) -> None:
    """Each prompt, with what reset returned, leaves ``budget`` tokens of the model's context ``limit``."""
    for length, observation, env in zip(lengths, observations, envs):
        if limit is None or length + budget <= limit:
            continue
        if not observation:
            raise UsageError(_too_long(length, budget, limit))
        added = len(tokenizer(observation, add_special_tokens=False).input_ids)
        raise UsageError(f"environment {type(env).__name__}.reset returned text of {added:,} tokens: with it the "
                         f"prompt is {length:,} tokens, which with --max-new-tokens {budget} exceeds the model's "
                         f"context of {limit:,} tokens; return less from reset, or lower --max-new-tokens")


def play(policy, tokenizer, env_class: type, batch: list[dict], system: str, cfg: Config, do_sample: bool
         ) -> tuple[Trajectories, list, dict]:
    """One environment per problem of ``batch``, reset with it, and one trajectory each: (trajectories, the
    environments after them, the tokenized prompts). Every call into an environment within --env-timeout."""
    envs = [make_environment(env_class, cfg.env_timeout) for _ in batch]
    observations = [reset(env, problem, cfg.env_timeout) for env, problem in zip(envs, batch)]
    tools = tool_calls.tool_schemas(envs[0]) if envs else []
    prompts = [chat_prompt(tokenizer, p, system, tools, o) for p, o in zip(batch, observations)]
    enc = tokenizer(prompts, return_tensors="pt", padding=True).to(policy.model.device)
    generation = cfg.generation
    _check_room(tokenizer, enc.attention_mask.sum(1).tolist(), observations, envs, generation.max_new_tokens,
                getattr(getattr(policy.model, "config", None), "max_position_embeddings", None))
    with tool_calls.tool_time_limit(cfg.env_timeout):
        trajectories = multi_turn(policy, tokenizer, envs, enc.input_ids, enc.attention_mask, generation.max_new_tokens,
                                  cfg.max_tool_calls, do_sample=do_sample, top_p=generation.top_p if do_sample else 1.0)
    return trajectories, envs, enc


def score(trajectories: Trajectories, envs: list, batch: list[dict], weights: dict, functions: dict,
          seconds: float | None = None, reward_seconds: float | None = rewards.TIME_LIMIT_S
          ) -> tuple[torch.Tensor, dict]:
    """r_i = Σ_f w_f · f(last turn_i) + get_reward(env_i) (logged under the class's name, as TRL does); each
    get_reward within ``seconds``, each reward function's call within ``reward_seconds``."""
    total, per_function = rewards.score(trajectories.answers, [p["answer"] for p in batch], weights, functions,
                                        seconds=reward_seconds)
    if envs and callable(getattr(envs[0], "get_reward", None)):
        own = torch.tensor([environment_reward(env, seconds) for env in envs])
        total, per_function = total + own, {**per_function, type(envs[0]).__name__: own}
    return total, per_function


def per_turn_rewards(trajectories: Trajectories, envs: list, total: torch.Tensor) -> torch.Tensor:
    """[n, K]: each model turn's reward from the environment's ``turn_rewards`` (0 where it gives none), the
    trajectory's reward added to its last turn."""
    last = trajectories.turn.cpu().max(1).values.clamp(min=0)  # the index of each trajectory's last model turn
    rewards_ = torch.zeros(len(envs), int(last.max()) + 1)
    for i, env in enumerate(envs):
        given = torch.tensor(turn_rewards(env)[:int(last[i]) + 1])
        rewards_[i, :len(given)] = given
    rewards_[torch.arange(len(envs)), last] += total
    return rewards_


def turn_reward_stats(envs: list) -> dict:
    """[n]: each trajectory's mean of the environment's ``turn_rewards`` (0 where it rewarded no turn; the guessing
    game: the share of its guesses that kept to the replies), for an environment that has them."""
    if not envs or not hasattr(envs[0], "turn_rewards"):
        return {}
    means = [sum(given) / len(given) if (given := turn_rewards(env)) else 0.0 for env in envs]
    return {"agent/turn_reward": torch.tensor(means)}


def turn_credit(rollout: Rollout, advantages: torch.Tensor, cfg: Config) -> torch.Tensor:
    """--credit turn: the tokens of turn k get Â_{i,k} (``core.group_relative_turns``) → [n, T]."""
    K = rollout.turn_rewards.shape[1]
    last = rollout.turn.max(1).values.clamp(min=0)
    present = torch.arange(K)[None, :] <= last[:, None]
    per_turn = core.group_relative_turns(rollout.turn_rewards, present, cfg.group_size)
    on_turn = rollout.turn.cpu() >= 0
    return torch.where(on_turn, per_turn.gather(1, rollout.turn.cpu().clamp(min=0)), 0.0)


def sample_trajectories(step: grpo.Step, problems: list[dict], env_class: type) -> Rollout:
    """G trajectories of each of ``problems`` (this process's share), scored (with ``--overlong-buffer``, DAPO's
    penalty on the trajectory's length, the environment's tokens included: the budget counts them)."""
    cfg, tokenizer = step.cfg, step.tokenizer
    batch = [p for p in problems for _ in range(cfg.group_size)]
    trajectories, envs, enc = play(step.policy, tokenizer, env_class, batch, step.system_prompt, cfg, do_sample=True)
    total, per_function = score(trajectories, envs, batch, step.reward_weights, step.reward_funcs, cfg.env_timeout,
                                cfg.reward_timeout)
    total, per_function = with_overlong_penalty(total, per_function, trajectories.attention_mask.sum(1).cpu(), cfg)
    texts = tokenizer.batch_decode(torch.where(trajectories.attention_mask.bool(), trajectories.completion,
                                               tokenizer.pad_token_id), skip_special_tokens=False)
    rollout = Rollout(prompt_ids=enc.input_ids, prompt_mask=enc.attention_mask, completion=trajectories.completion,
                      mask=trajectories.attention_mask if cfg.train_env_tokens else trajectories.mask,
                      rewards=total, per_function=per_function, truncated=trajectories.truncated,
                      texts=[t.replace(tokenizer.pad_token, "") for t in texts],
                      questions=[p["question"] for p in batch],
                      sampling_logp=trajectories.sampling_logp if step.records_sampler_logp else None,
                      attention_mask=trajectories.attention_mask, turn=trajectories.turn,
                      turn_rewards=per_turn_rewards(trajectories, envs, total) if cfg.credit == "turn" else None,
                      stats={"agent/tool_calls": trajectories.tool_calls, "agent/turns": trajectories.turns,
                             "agent/tool_failures": trajectories.tool_failures,
                             "agent/env_tokens": trajectories.env_tokens, **turn_reward_stats(envs)})
    return rollout


def held_out_solved(step: grpo.Step, held_out: list[dict], env_class: type, chunk: int = 64) -> float:
    """The share of held-out problems solved greedily: the environment's ``get_reward`` ≥ 1 where it has one,
    else a correct final answer. Each process scores its share."""
    procs, mine, solved = step.procs, held_out[step.procs.rank::step.procs.world], 0.0
    for start in range(0, len(mine), chunk):
        batch = mine[start:start + chunk]
        trajectories, envs, _ = play(step.policy, step.tokenizer, env_class, batch, step.system_prompt, step.cfg,
                                     do_sample=False)
        if callable(getattr(env_class, "get_reward", None)):
            solved += sum(environment_reward(env, step.cfg.env_timeout) >= 1.0 for env in envs)
        else:
            solved += sum(arithmetic.correctness_reward(trajectories.answers, [p["answer"] for p in batch]))
    return procs.gather(torch.tensor([solved], dtype=torch.float64)).sum().item() / len(held_out)
