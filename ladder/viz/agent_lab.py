"""Notebook 7's numbers: the agent rung's trajectories on the tiny tool-calling model, token by token (the widgets
are in ``agent_views``).

Every number here comes from the rung's own functions (``agent.agent_task``, ``grpo.load_policy``, ``grpo.build``,
``grpo.grpo_step``, ``agent.sample_trajectories``, ``agent.turn_credit``), on the tiny presets, on the CPU.

One trajectory, two masks (section 1). One ``grpo_step`` of the tiny calculator preset; the batch that
``core.update`` receives is recorded as it is called. A trajectory is one row ``[T]`` of it:

    mask_t        1 on the model's tokens (its actions: log-prob, KL, Â), 0 on the environment's and on pad
    attention_t   1 on every token the model reads: its own and the environment's
    Â_t           the trajectory's Â_i on the model's tokens, 0 elsewhere (Â · mask)

The environment's tokens in the loss (section 2). Two short runs of the tiny calculator preset from the same seed,
each through the training loop held in memory (``agent_run``: ``loop.in_memory``), the default and
``--train-env-tokens`` (mask = attention: the tool's reply trained on as if the model wrote it).
After every update a fixed probe — held-out products, each with the right ``multiply`` call and the tool's reply —
measures how well the model predicts the reply's digits itself, and how far π_θ moved from π_ref there:

    log π(reply digits)   mean over the probe's reply digits d_t of log π_θ(d_t | prompt, call, d_<t)
    KL at model / env     Σ_v π_θ(v|s_t) log π_θ(v|s_t)/π_ref(v|s_t), mean over the call's positions / the reply's

Per-trajectory vs per-turn credit (section 3). One group of the guessing game sampled by the tiny model; its Â per
token under ``--credit trajectory`` (Â_i on every model token) and ``--credit turn``
(``core.group_relative_turns``: r̃_{i,k} normalised over the group's turns, Â_{i,k} = Σ_{j ≥ k} r̃_{i,j}).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import torch

from ladder.policies.causal_lm import position_ids_for
from ladder.rungs import agent, grpo
from ladder.runtime import loop
from ladder.runtime.distributed import Processes
from ladder.runtime.loop import Recipe
from ladder.runtime.session import RunSession
from ladder.tasks import agent_envs, tiny_agent, tool_calls
from ladder.viz import lab_cache
from ladder.viz.lm_lab import quiet_run

CPU = torch.device("cpu")


def agent_step(preset: str = "tiny", seed: int = 0, **overrides) -> tuple[grpo.Step, grpo.Task]:
    """The agent rung's Step and Task for ``preset`` (with ``overrides``), built as ``grpo.task_recipe`` builds them,
    on the CPU, without a run directory."""
    cfg = agent.Config(**{**agent.PRESETS[preset], "seed": seed, **overrides}, progress=False)
    agent.validate(cfg)
    torch.manual_seed(seed)
    task = agent.agent_task(cfg)
    policy, optimizer = grpo.load_policy(cfg, task.model_path, CPU)
    step = grpo.make_step(cfg, policy=policy, optimizer=optimizer, tokenizer=task.tokenizer,
                          stream=grpo.ProblemStream(task.problems, cfg.seed, task.source),
                          system_prompt=task.system_prompt, procs=Processes(CPU), rollout=task.rollout,
                          credit=task.credit)
    return step, task


def agent_run(preset: str = "tiny", seed: int = 0, **overrides) -> tuple[RunSession, Recipe, grpo.Step, grpo.Task]:
    """A run of the agent rung held in memory and begun (``loop.in_memory``: the step-0 evaluation done), built by
    the rung's own ``agent.build``, on the CPU: its session, its recipe (one update: ``loop.one_update``), its Step
    and its Task."""
    cfg = agent.Config(**{**agent.PRESETS[preset], "seed": seed, **overrides}, progress=False)
    agent.validate(cfg)
    torch.manual_seed(seed)
    session, recipe = loop.in_memory(cfg, agent.NAME, agent.build)
    return session, recipe, recipe.step, recipe.task


def token_pieces(tokenizer, completion: torch.Tensor, attention_mask: torch.Tensor) -> list[list[str]]:
    """Each row's tokens decoded one by one, padding left out."""
    return [[tokenizer.decode([int(c)]) for c in row[a.bool()]] for row, a in zip(completion, attention_mask)]


@dataclass
class Group:
    """G trajectories of one problem, ``[G, T]`` each, and their advantages per token."""

    question: str
    pieces: list[list[str]]           # each trajectory's tokens (pad left out)
    completion: torch.Tensor          # [G, T] token ids
    mask: torch.Tensor                # [G, T] 1 on the model's tokens
    attention_mask: torch.Tensor      # [G, T] 1 on every token read
    turn: torch.Tensor                # [G, T] the model turn of a token, −1 on the environment's and on pad
    rewards: torch.Tensor             # [G]
    advantages: dict                  # credit ("trajectory", "turn") → Â per token [G, T], 0 off the mask
    turn_rewards: torch.Tensor | None  # [G, K] per-turn rewards (the guessing game), else None
    tool_calls: torch.Tensor          # [G]


def _group_of(rollout, token_advantages: dict, G: int, g: int, tokenizer, tool_calls_: torch.Tensor) -> Group:
    rows = slice(g * G, (g + 1) * G)
    attention = rollout.attention_mask[rows].cpu()
    return Group(question=rollout.questions[g * G], completion=rollout.completion[rows].cpu(),
                 pieces=token_pieces(tokenizer, rollout.completion[rows].cpu(), attention),
                 mask=rollout.mask[rows].cpu().float(), attention_mask=attention.float(),
                 turn=rollout.turn[rows].cpu(), rewards=rollout.rewards[rows].cpu(),
                 advantages={k: v[rows].cpu() for k, v in token_advantages.items()},
                 turn_rewards=None if rollout.turn_rewards is None else rollout.turn_rewards[rows].cpu(),
                 tool_calls=tool_calls_[rows])


def _pick(rewards: torch.Tensor, tool_calls_: torch.Tensor, G: int) -> int:
    """The first group with a reward spread and a tool call (else the first with a spread, else group 0)."""
    spread = rewards.view(-1, G).std(1) > 0
    called = tool_calls_.view(-1, G).sum(1) > 0
    for wanted in (spread & called, spread):
        if wanted.any():
            return int(wanted.nonzero()[0])
    return 0


@functools.lru_cache(maxsize=2)
def calculator_update(seed: int = 0, prompts: int = 4, group_size: int = 8) -> dict:
    """The batch of one update of the tiny calculator preset (``prompts`` × G trajectories): ``grpo.grpo_batch``, the
    batch ``grpo_step`` hands ``core.update``. Returns ``group`` (a Group with Â), ``batch`` (the ``core.Batch``),
    ``record`` (the batch's statistics, as the update's record has them) and the rollout's masks. Cached."""
    with quiet_run():
        step, _ = agent_step("tiny", seed, prompts_per_step=prompts, group_size=group_size)
        got = grpo.grpo_batch(step)
    rollout, batch = got.rollout, got.batch
    record = grpo.batch_statistics(rollout, got.rewards, step.procs, group_size)
    calls = torch.as_tensor(rollout.stats["agent/tool_calls"]).cpu()
    g = _pick(rollout.rewards.cpu(), calls, group_size)
    group = _group_of(rollout, {"trajectory": batch.advantages}, group_size, g, step.tokenizer, calls)
    return {"group": group, "batch": batch, "record": record, "group_index": g,
            "rollout_mask": rollout.mask.cpu(), "rollout_attention": rollout.attention_mask.cpu()}


# --------------------------------------------------------------------- the environment's tokens in the loss
@dataclass
class Probe:
    """Held-out products, each as prompt + the right call (the model's turn) + the tool's reply (the environment's),
    right-padded ``[N, L]``; boolean masks ``[N, L]`` of the positions whose token is the call's, the reply's, or
    one of the reply's digits."""

    questions: list[str]
    input_ids: torch.Tensor
    attention_mask: torch.Tensor
    call: torch.Tensor
    reply: torch.Tensor
    digits: torch.Tensor
    pieces: list[list[str]]           # each probe's reply tokens (what ``digits`` marks among them)


def reply_probe(tokenizer, problems: list[dict], system_prompt: str) -> Probe:
    """The probe: for "What is a * b?", the prompt, ``multiply(a, b)`` as the model calls it, and the reply a·b
    (``tool_calls.suffix_ids``, the tokens the rollout feeds)."""
    tools = tool_calls.tool_schemas(agent_envs.Calculator())
    rows, kinds = [], []
    for p in problems:
        a, b = (int(x) for x in p["question"].removeprefix("What is ").rstrip("?").split(" * "))
        prompt = tokenizer(agent.chat_prompt(tokenizer, p, system_prompt, tools, None)).input_ids
        call_text = tiny_agent.turn_text(tiny_agent.call("multiply", a=a, b=b)) + tokenizer.eos_token
        call = tokenizer(call_text, add_special_tokens=False).input_ids
        reply = tool_calls.suffix_ids(tokenizer, [{"role": "tool", "name": "multiply", "content": str(a * b)}])
        rows.append(prompt + call + reply)
        kinds.append([0] * len(prompt) + [1] * len(call) + [2] * len(reply))
    L = max(len(r) for r in rows)
    ids = torch.full((len(rows), L), tokenizer.pad_token_id, dtype=torch.long)
    kind = torch.full((len(rows), L), -1, dtype=torch.long)
    for i, (r, k) in enumerate(zip(rows, kinds)):
        ids[i, :len(r)], kind[i, :len(k)] = torch.tensor(r), torch.tensor(k)
    pieces = [[tokenizer.decode([int(t)]) for t in ids[i][kind[i] == 2]] for i in range(len(rows))]
    is_digit = torch.tensor([[tokenizer.decode([int(t)]).strip().isdigit() for t in row] for row in ids])
    return Probe([p["question"] for p in problems], ids, (kind >= 0).long(), kind == 1, kind == 2,
                 (kind == 2) & is_digit, pieces)


@torch.no_grad()
def probe_log_probs(policy, probe: Probe) -> dict:
    """log π_θ(x_t | x_<t) at every probe position ``[N, L]`` (0 at the first), and the exact KL(π_θ‖π_ref) at each
    position ``[N, L]`` (the same positions: the distribution that predicts x_t)."""
    model = policy.model

    def all_logp() -> torch.Tensor:
        logits = model(input_ids=probe.input_ids, attention_mask=probe.attention_mask,
                       position_ids=position_ids_for(probe.attention_mask)).logits.float()
        return torch.log_softmax(logits[:, :-1] / policy.temperature, dim=-1)

    logp_all = all_logp()
    with policy.reference_context():
        ref_all = all_logp()
    taken = logp_all.gather(-1, probe.input_ids[:, 1:, None]).squeeze(-1)
    kl = (logp_all.exp() * (logp_all - ref_all)).sum(-1)
    pad = torch.zeros(len(taken), 1)
    return {"logp": torch.cat([pad, taken], 1), "kl": torch.cat([pad, kl], 1)}


def probe_record(policy, probe: Probe) -> dict:
    """The probe's means: log π of the reply's digits, of all the reply's tokens, of the call's; the exact KL at the
    call's positions (the model's tokens) and at the reply's (the environment's)."""
    out = probe_log_probs(policy, probe)
    digits = out["logp"][probe.digits]
    return {"logp_digits": digits.mean().item(), "logp_reply": out["logp"][probe.reply].mean().item(),
            "logp_call": out["logp"][probe.call].mean().item(), "kl_model": out["kl"][probe.call].mean().item(),
            "kl_env": out["kl"][probe.reply].mean().item(),
            "reply_logp": [out["logp"][i][probe.reply[i]].tolist() for i in range(len(probe.questions))]}


@functools.lru_cache(maxsize=4)
@lab_cache.on_disk  # notebook 7 and tests/test_viz_agent.py share these runs
def env_token_run(train_env_tokens: bool, steps: int = 24, seed: int = 0, eval_size: int = 50, eval_every: int = 8,
                  probes: int = 32) -> dict:
    """``steps`` updates of the tiny calculator preset (``--train-env-tokens`` or not) through the training loop
    (``agent_run``), with the probe measured before the first update and after each, greedy held-out accuracy
    before training and every ``eval_every`` updates (the run's ``--eval-every``). Cached, on disk too."""
    with quiet_run():
        session, recipe, step, task = agent_run("tiny", seed, train_env_tokens=train_env_tokens, eval_size=eval_size,
                                                steps=steps, eval_every=eval_every)
        probe = reply_probe(step.tokenizer, task.held_out[:probes], task.system_prompt)
        rows = [{"update": 0, **probe_record(step.policy, probe), "eval_accuracy": recipe.counters["evals"][0][1]}]
        for _ in range(steps):
            loop.one_update(session, recipe)
            record = session.records()[-1]
            row = {"update": record["step"], **probe_record(step.policy, probe), "reward": record["reward"],
                   "kl_ref": record.get("kl_ref", 0.0), "tool_calls": record.get("agent/tool_calls", 0.0),
                   "loss_tokens": record.get("tokens", 0)}
            if "eval_accuracy" in record:
                row["eval_accuracy"] = record["eval_accuracy"]
            rows.append(row)
    return {"train_env_tokens": train_env_tokens, "rows": rows, "probe": probe, "steps": steps,
            "eval_size": len(task.held_out)}


def env_token_runs(steps: int = 24, seed: int = 0, **kwargs) -> dict:
    """{"default": run, "--train-env-tokens": run}, the same seed (each run cached)."""
    return {"default": env_token_run(False, steps, seed, **kwargs),
            "--train-env-tokens": env_token_run(True, steps, seed, **kwargs)}


# ----------------------------------------------------------------------------- per-turn credit (guessing game)
@functools.lru_cache(maxsize=2)
def guess_group(seed: int = 0, group_size: int = 8, tries: int = 8) -> Group:
    """One group of the guessing game sampled by the tiny model (the first of ``tries`` problems whose G rewards are
    not all equal), with Â per token under both credits: ``grpo.same_for_every_token`` and ``agent.turn_credit``."""
    with quiet_run():
        step, _ = agent_step("tiny-guess", seed, credit="turn", prompts_per_step=1, group_size=group_size)
        env_class = agent.environment(step.cfg)
        for _ in range(tries):
            rollout = agent.sample_trajectories(step, step.stream.draw(1), env_class)
            if rollout.rewards.std() > 0:
                break
    cfg = step.cfg
    advantages = grpo.group_advantages(rollout.rewards.cpu(), cfg)
    mask = rollout.mask.cpu().float()
    token_advantages = {"trajectory": grpo.same_for_every_token(rollout, advantages, cfg) * mask,
                        "turn": agent.turn_credit(rollout, advantages, cfg) * mask}
    calls = torch.as_tensor(rollout.stats["agent/tool_calls"]).cpu()
    return _group_of(rollout, token_advantages, group_size, 0, step.tokenizer, calls)


def turn_table(group: Group, row: int) -> list[dict]:
    """Trajectory ``row``'s model turns: each turn's ``index`` k, its text, its reward r_{i,k}, and Â under each
    credit (keyed by the credit's name: ``trajectory``, ``turn``)."""
    out = []
    turns = group.turn[row]
    for k in range(int(turns.max()) + 1):
        on = (turns == k).nonzero().flatten()
        text = "".join(group.pieces[row][int(t)] for t in on)   # pieces are the attended tokens: a prefix of the row
        first = int(on[0])
        out.append({"index": k, "text": text,
                    "reward": None if group.turn_rewards is None else float(group.turn_rewards[row, k]),
                    **{credit: float(a[row, first]) for credit, a in group.advantages.items()}})
    return out


def segments(group: Group, row: int, credit: str = "trajectory") -> list[dict]:
    """Trajectory ``row`` cut where the kind changes: each run of the model's or the environment's tokens with its
    text, its mask and attention (one value each over the run) and the Â its tokens get."""
    out: list[dict] = []
    for t, piece in enumerate(group.pieces[row]):
        kind = "model" if group.mask[row, t] else "environment"
        if not out or out[-1]["kind"] != kind:
            out.append({"kind": kind, "text": "", "tokens": 0, "mask": int(group.mask[row, t]),
                        "attention": int(group.attention_mask[row, t]),
                        "advantage": float(group.advantages[credit][row, t])})
        out[-1]["text"] += piece
        out[-1]["tokens"] += 1
    return out
