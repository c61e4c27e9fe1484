"""The agent rung's options: one ``Config`` (GRPO's and the agent's own), the tiny presets, the built-in
environments, and the rules that relate several options — what ``ladder.rungs.agent`` and ``--export-trl`` share.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass, replace

from ladder import rewards
from ladder.domains import MAX_PASSES, Text, count, interval
from ladder.options import option
from ladder.rungs.grpo import advantage_spec, scoring, settle
from ladder.rungs.grpo import generation as generation_settings
from ladder.rungs.grpo import options as grpo_options
from ladder.rungs.grpo import rules as grpo_rules
from ladder.rungs.grpo.generation import GRPOGeneration
from ladder.rungs.grpo.sampler import AUTO, Sampler
from ladder.rungs.grpo.scoring import Rewards
from ladder.runtime.errors import UsageError
from ladder.specs import accepts_flags
from ladder.tasks import agent_envs, math_problems, tiny_agent
from ladder.trl_rows import GRPO_TRAINER, SAME, TRL

TRAJECTORY_HELP = ("token budget of a whole trajectory: the model's tokens and the environment's (TRL's "
                   "max_completion_length)")
TRAJECTORY_TRL = (TRL("max_completion_length", "aggregate", "the token budget of the whole trajectory, the tools' "
                      "replies included; a reply that would not fit ends the trajectory in both"),)
TINY_MODEL = "@tiny-agent"
TINY_GUESS_MODEL = "@tiny-guess"
# --model NAME → the shipped tiny model's directory (built on first use with LADDER_BUILD_TINY=1)
TINY_MODELS = {TINY_MODEL: tiny_agent.tiny_agent_model, TINY_GUESS_MODEL: tiny_agent.tiny_guess_model}
# --env NAME → (the environment class, its problems (training, held out), its system prompt); gsm8k's problems
# are --dataset's (math_problems.split).
ENVIRONMENTS = {"calculator": (agent_envs.Calculator, agent_envs.product_problems, agent_envs.CALCULATOR_PROMPT),
                "guess": (agent_envs.GuessingGame, agent_envs.guess_problems, agent_envs.GUESS_PROMPT),
                "gsm8k": (agent_envs.GSM8KCalculator, None, agent_envs.GSM8K_PROMPT)}
@accepts_flags
@dataclass
class Config(grpo_options.Config):
    env: str = option("gsm8k", "the environment: calculator (products, a multiply tool) | guess (a number from 1 to "
                               "10, replies higher/lower and the numbers left) | gsm8k (GSM8K, a calculate tool) | "
                               "FILE.py:Class | MODULE:Class (TRL's protocol: reset, tools as methods, optional "
                               "get_reward; its problems are --task's)", Text(),
                     trl=(TRL("environment_factory", note="the environment class itself: TRL makes one instance per "
                              "trajectory and calls reset(**row) with the dataset row (the problem's fields and the "
                              "prompt); built-ins are ladder.tasks.agent_envs' classes, a FILE.py:Class is loaded by "
                              "the script", cls=GRPO_TRAINER),))
    max_tool_calls: int = option(5, "turns that call tools, per trajectory (TRL's max_tool_calling_iterations); a "
                                    "call in a later turn is answered with an error, where TRL ends the "
                                    "trajectory", count(0, MAX_PASSES),
                                 trl=(TRL("max_tool_calling_iterations", note="both count the turns that call tools "
                                          "(TRL's rounds of its tool loop: all the calls of one turn in one round), "
                                          "not the calls; past the limit TRL ends the trajectory, the turn's calls "
                                          "unanswered, while ladder answers each of them with an error the model reads "
                                          "(a tool failure) and lets it answer", value=SAME),))
    generation: GRPOGeneration = option(GRPOGeneration(max_new_tokens=1024), "grpo's, --max-new-tokens a whole "
                                                                             "trajectory's budget",
                                        spec=generation_settings.option(1024, TRAJECTORY_HELP, TRAJECTORY_TRL))
    credit: str = option("trajectory", "trajectory: every model token gets its trajectory's Â | turn: a turn's "
                                       "tokens get the normalised per-turn rewards from it on (the environment's "
                                       "turn_rewards, the trajectory's reward on its last turn)",
                         choices=("trajectory", "turn"),
                         trl=(TRL(None, "group_relative_turns", "GRPOTrainer gives every model token its trajectory's "
                                  "advantage (--credit trajectory); --credit turn (turn_rewards, per-turn advantages) "
                                  "is not in TRL: the script trains with the trajectory's",
                                  applies=lambda cfg: cfg.credit == "turn"),))
    train_env_tokens: bool = option(False, "the mistake, to see it: put the environment's tokens in the loss as if "
                                           "the model had written them (mask = attention mask)",
                                   trl=(TRL(None, "aggregate", "TRL always keeps the tools' tokens out of the loss "
                                            "(tool_mask); ladder's --train-env-tokens, the mistake made to be seen, "
                                            "has no TRL switch: the script trains as without it",
                                            applies=lambda cfg: cfg.train_env_tokens),))
    rewards: Rewards = option(Rewards(funcs="correctness"), "grpo's, with --reward-funcs of the last model turn",
                              spec=scoring.option_with_funcs(
                                  "correctness", "reward functions of the last model turn, comma-separated (as "
                                                 "grpo's --reward-funcs); an environment's get_reward is added with "
                                                 "weight 1",
                                  (TRL("reward_funcs", note="TRL passes a trajectory as its messages (the model's "
                                       "turns, the tools' replies): the script's rewards read the last assistant "
                                       "message, as ladder's read the last model turn; an environment's get_reward is "
                                       "added by both, weight 1, logged under the class's name", cls=GRPO_TRAINER),)))
    env_timeout: float = option(60.0, "seconds each call into the environment may take: making it, reset, a tool, "
                                      "get_reward. A tool past it is a failed call the model reads; the others "
                                      "stop the run in one line", interval(0, 86400, open_low=True),
                                trl=(TRL(None, note="TRL puts no time limit on the environment's calls (a tool or "
                                         "reset that hangs holds the training); the script's environment runs without "
                                         "one"),))

    # grpo's rules of ``settle``, with the agent's own model, system prompt and sampler:
    def model_source(self) -> str:
        return model_path(self)

    def chosen_system_prompt(self) -> str:
        return system_prompt(self)

    def sampler_before_settling(self) -> Sampler:
        """Under --train-env-tokens, auto is the trainer's own weights, uncorrected (``pinned_sampler``)."""
        return pinned_sampler(self).sampler


# A preset pins --sampler-dtype: what it learns does not depend on the CPU it runs on.
PRESETS = {
    "tiny": dict(model=TINY_MODEL, env="calculator", lora=True, lora_r=16, lora_alpha=32, steps=40, prompts_per_step=8,
                 group_size=8, lr=1e-3, warmup_steps=5, max_new_tokens=64, max_tool_calls=2, kl_coef=0.04,
                 eval_every=10, eval_size=100, print_samples=10, threads=1, sampler_dtype="same"),
    # The game scores itself (get_reward: the secret found); the correctness of the last turn is logged, weight 0.
    # A warm-up of 15 updates: reaching lr 3e-3 in 5 broke the calls' JSON for a few updates before it recovered.
    "tiny-guess": dict(model=TINY_GUESS_MODEL, env="guess", lora=True, lora_r=16, lora_alpha=32, steps=60,
                       prompts_per_step=8, group_size=8, lr=3e-3, credit="turn", reward_weights="0", warmup_steps=15,
                       max_new_tokens=256, max_tool_calls=5, kl_coef=0.04, eval_every=10, eval_size=100,
                       print_samples=10, threads=1, sampler_dtype="same"),
}


def sampler(cfg: Config) -> Sampler:
    """grpo's sampler rule on --model's config (``settle.settle_known``); under --train-env-tokens auto is the
    trainer's own weights, uncorrected (the environment's tokens in the loss have no π_sampler log-prob:
    ``pinned_sampler``)."""
    return settle.settle_known(cfg).sampler


RESOLVED = grpo_options.RESOLVED  # settle's, read through the Config's own model, system prompt and sampler


def pinned_sampler(cfg: Config) -> Config:
    """``cfg``, with --sampler-dtype and --sampler-correction auto set to same and none under --train-env-tokens:
    the mistake it shows is the masks', not a sampler's."""
    if not cfg.train_env_tokens:
        return cfg
    dtype = "same" if cfg.sampler.dtype == AUTO else cfg.sampler.dtype
    correction = "none" if cfg.sampler.correction == AUTO else cfg.sampler.correction
    return replace(cfg, sampler=replace(cfg.sampler, dtype=dtype, correction=correction))


def validate(cfg: Config) -> None:
    """GRPO's rules, and the agent's own."""
    grpo_rules.validate(cfg)
    if cfg.generation.min_new_tokens:
        raise UsageError("--min-new-tokens holds back EOS in one completion; an agent's EOS ends a turn: drop it")
    loop = cfg.efficiency.sampler_loop
    if loop != "ladder":
        raise UsageError(f"--sampler-loop {loop}: an agent's trajectories are sampled by its own "
                         f"multi-turn loop (agent.rollout), which feeds the environment's replies; drop it")
    if cfg.train_env_tokens and (cfg.sampler.correction not in ("none", AUTO) or cfg.max_staleness):
        raise UsageError("--train-env-tokens puts tokens the sampler never drew in the loss: they have no "
                         "π_sampler log-prob to correct with; drop --sampler-correction and --max-staleness")
    if cfg.credit == "turn" and advantage_spec.decoupled(cfg):
        raise UsageError("--credit turn normalises the turns' rewards together (core.group_relative_turns); "
                         "--multi-objective-aggregation normalize_then_sum applies to --credit trajectory")
    environment(cfg)


def environment(cfg: Config) -> type:
    """The class of ``--env``: a built-in name, or ``FILE.py:Class`` / ``MODULE:Class``; one line if it cannot be
    loaded, is not a class with a reset method, or cannot be made without arguments (TRL's environment_factory)."""
    if cfg.env in ENVIRONMENTS:
        return ENVIRONMENTS[cfg.env][0]
    if ":" not in cfg.env:
        raise UsageError(f"--env {cfg.env!r} is neither a built-in ({', '.join(ENVIRONMENTS)}) nor FILE.py:Class / "
                         f"MODULE:Class")
    name, cls = rewards.load_object(cfg.env, "--env")
    if not isinstance(cls, type) or not callable(getattr(cls, "reset", None)):
        got = ("a class without one" if isinstance(cls, type) else "a function" if inspect.isroutine(cls) else
               f"an instance of {type(cls).__name__}: give the class itself, ladder makes one per trajectory")
        raise UsageError(f"--env {cfg.env!r}: {name} is not a class with a reset method (TRL's environment protocol, "
                         f"its environment_factory), it is {got}")
    needed = _required_arguments(cls)
    if needed:
        raise UsageError(f"--env {cfg.env!r}: the environment class {name} cannot be made with {name}(): it needs "
                         f"argument {needed[0]!r} (TRL's environment_factory makes each instance without arguments; "
                         f"give it a default)")
    return cls


def _required_arguments(cls: type) -> list[str]:
    """The arguments ``cls(...)`` cannot do without ([] where its signature cannot be read)."""
    try:
        parameters = inspect.signature(cls).parameters.values()
    except (TypeError, ValueError):
        return []
    return [p.name for p in parameters if p.default is p.empty and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]


def model_path(cfg: Config) -> str:
    """--model, with ladder's tiny models (@tiny-agent, @tiny-guess) resolved to their directories."""
    return str(TINY_MODELS[cfg.model]()) if cfg.model in TINY_MODELS else cfg.model


def system_prompt(cfg: Config) -> str:
    """--system-prompt, or the environment's own (--task's for an environment of the user's)."""
    return cfg.problems.system_prompt or (ENVIRONMENTS[cfg.env][2] if cfg.env in ENVIRONMENTS else
                                 math_problems.system_prompt(cfg.problems.task))


def problems(cfg: Config) -> tuple[list[dict], list[dict]]:
    """(training problems, held-out problems) of the environment."""
    generate = ENVIRONMENTS[cfg.env][1] if cfg.env in ENVIRONMENTS else None
    if generate is not None:
        train, held_out = generate(cfg.problems.eval_size)
        return (train[:cfg.problems.train_size] if cfg.problems.train_size else train), held_out
    task = "gsm8k" if cfg.env == "gsm8k" else cfg.problems.task
    return cfg.problems.split(cfg.prompts_per_step, task)
