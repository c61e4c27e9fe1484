"""The cases of the agent exercises: 22, the two masks of a list of turns (compared with the core's, value by
value), and 23, the multi-turn rollout (graded property by property on a scripted random model,
``agent_harness``: each case names the property it checks, then compares what the rollout returns with the
rung's own ``multi_turn`` on the same scripted model, where the script leaves nothing to chance)."""

from __future__ import annotations

import torch

from ladder.tasks import tool_calls

from . import agent_harness as h
from .cases import Case, Mismatch, pick

CALL = '<tool_call>\n{{"name": "{name}", "arguments": {arguments}}}\n</tool_call>'


def call(name: str, **arguments) -> str:
    return CALL.format(name=name, arguments=str(arguments).replace("'", '"'))


# ---- exercise 22 --------------------------------------------------------------------------------------------

def trajectory_tensors() -> list[Case]:
    M, E = "model", "env"
    cases = [
        Case("the sheet's example: a call (3 tokens), the reply (2), the answer (2)",
             dict(trajectories=[[(M, [5, 6, 2]), (E, [7, 8]), (M, [9, 2])]], pad_token_id=0)),
        Case("two trajectories, right-padded to the longer with pad_token_id = 99 (not 0)",
             dict(trajectories=[[(M, [5, 2])], [(M, [5, 6, 2]), (E, [7, 8, 9]), (M, [4, 2])]], pad_token_id=99)),
        Case("a trajectory that ends in the environment's tokens (the budget ran out while its reply was read)",
             dict(trajectories=[[(M, [5, 6, 2]), (E, [7, 8])], [(M, [3, 2])]], pad_token_id=1)),
        Case("two replies in a row (two calls in one turn), then the answer",
             dict(trajectories=[[(M, [5, 2]), (E, [7]), (E, [8, 9]), (M, [4, 4, 2])]], pad_token_id=0)),
        Case("an empty trajectory beside a full one: all pad, both masks 0",
             dict(trajectories=[[], [(M, [5, 6]), (E, [7]), (M, [2])]], pad_token_id=3)),
        Case("three turns: model, env, model, env, model", dict(trajectories=[[
            (M, [10, 11]), (E, [20, 21, 22]), (M, [12]), (E, [23]), (M, [13, 14, 2])]], pad_token_id=0)),
    ]
    g = torch.Generator().manual_seed(22)
    for _ in range(6):
        B = pick(g, (1, 2, 3, 4))
        batch = []
        for _ in range(B):
            segments, kind = [], M
            for _ in range(pick(g, (0, 1, 2, 3, 4, 5))):
                n = pick(g, (1, 2, 3, 4))
                segments.append((kind, torch.randint(4, 300, (n,), generator=g).tolist()))
                kind = E if kind == M else M
            batch.append(segments)
        if not any(batch):
            batch[0] = [(M, [5, 2])]
        cases.append(Case(f"random: {B} trajectories of 0–5 segments", dict(trajectories=batch,
                                                                            pad_token_id=pick(g, (0, 2, 7)))))
    cases.append(Case("completion is token ids (torch.long), the two masks float",
                      dict(trajectories=[[(M, [5, 2]), (E, [7])]], pad_token_id=0), check=_dtypes))
    return cases


def _dtypes(fn, core) -> None:
    completion, mask, attention_mask = fn([[("model", [5, 2]), ("env", [7])]], 0)
    if completion.dtype != torch.long:
        raise Mismatch(f"completion has dtype {completion.dtype}: token ids are torch.long (an embedding's index)")
    if not (mask.is_floating_point() and attention_mask.is_floating_point()):
        raise Mismatch(f"the masks have dtypes {mask.dtype}, {attention_mask.dtype}: the loss multiplies by them "
                       "(float)")


# ---- exercise 23 --------------------------------------------------------------------------------------------

MULTIPLY = call("multiply", a=3, b=4)
QUESTIONS = ["What is 3 * 4?", "Three times four, please: what is it?"]


def _script(*turns):
    """Turn k is ``turns[k]`` (a str, or None: the model's own); after the last, the model's own."""
    return lambda k, reply: turns[k] if k < len(turns) else None


def _again(k: int, reply: str) -> str | None:
    """Call; call again while the reply says so (three calls at most); then answer."""
    if k == 0 or (k < 3 and "again" in reply):
        return MULTIPLY
    return "#### 12" if k < 4 else None


def _run(fn, script, **options):
    trajectories, policy, prompt_ids, prompt_mask = h.rollout(fn, script, **options)
    return trajectories, policy.model, prompt_ids, prompt_mask, policy


def _rows(trajectories) -> list[list[tuple[str, list[int]]]]:
    """Each trajectory's segments ("model" | "env", ids), read off its tensors."""
    out = []
    for ids, mask, attended in zip(trajectories.completion.tolist(), trajectories.mask.tolist(),
                                   trajectories.attention_mask.tolist()):
        segments = []
        for token, m, a in zip(ids, mask, attended):
            if not a:
                continue
            kind = "model" if m else "env"
            if not segments or segments[-1][0] != kind:
                segments.append((kind, []))
            segments[-1][1].append(token)
        out.append(segments)
    return out


def _expect_rows(got, want: list[list[tuple[str, list[int]]]], what: str) -> None:
    have = _rows(got)
    for b, (mine, theirs) in enumerate(zip(have, want)):
        if mine != theirs:
            kinds = [f"{k}×{len(ids)}" for k, ids in mine]
            expected = [f"{k}×{len(ids)}" for k, ids in theirs]
            first = next((i for i, (x, y) in enumerate(zip(mine, theirs)) if x != y), min(len(mine), len(theirs)))
            raise Mismatch(f"{what}\n  row {b}: expected segments {expected}\n  got                {kinds} "
                           f"(segment {first} differs)")


def _reply(*messages) -> list[int]:
    return tool_calls.suffix_ids(h.tokenizer(), list(messages))


def _tool(content: str, name: str = "multiply") -> dict:
    return {"role": "tool", "name": name, "content": content}


def _same_as_core(fn, core, script, **options) -> None:
    """Everything the rollout returns equals the rung's own on the same scripted model."""
    got, want = _run(fn, script, **options)[0], _run(core, script, **options)[0]
    for name in ("completion", "mask", "attention_mask", "turn", "truncated", "tool_calls", "tool_failures", "turns"):
        g, w = getattr(got, name), getattr(want, name)
        if not isinstance(g, torch.Tensor) or g.shape != w.shape or not torch.equal(g.to(w.dtype).cpu(), w.cpu()):
            raise Mismatch(f"Trajectories.{name} differs from the rung's\n  expected  {w.tolist()}\n  got       "
                           f"{g.tolist() if isinstance(g, torch.Tensor) else g!r}")
    if not torch.allclose(got.sampling_logp.float().cpu(), want.sampling_logp.float(), atol=1e-4):
        raise Mismatch("Trajectories.sampling_logp differs from the rung's")
    if list(got.answers) != list(want.answers):
        raise Mismatch(f"Trajectories.answers: expected {want.answers}, got {got.answers}")


def _worked_example(fn, core) -> None:
    got = _run(fn, _script(MULTIPLY, "#### 12"), questions=QUESTIONS[:1], max_new_tokens=120)[0]
    want = [[("model", h.spell(MULTIPLY)), ("env", _reply(_tool("12"))), ("model", h.spell("#### 12"))]]
    _expect_rows(got, want, "the model's tokens as drawn (mask 1), the environment's reply as the chat template "
                            "renders it (mask 0, attention 1)")
    _same_as_core(fn, core, _script(MULTIPLY, "#### 12"), questions=QUESTIONS[:1], max_new_tokens=120)


def _once_on_the_cache(fn, core) -> None:
    got, model, prompt_ids, _, _ = _run(fn, _again, questions=QUESTIONS, again=[True, False], max_new_tokens=300)
    P, T = prompt_ids.shape[1], got.completion.shape[1]
    if model.uncached != 1 or model.fed > P + T:
        raise Mismatch(f"the model ran {model.uncached} forwards without a cache and a row was fed {model.fed} "
                       f"positions; one prefill of the prompts ({P}) and each of the {T} tokens of a row once on the "
                       f"cache is at most {P + T}: continue the cache, never re-encode the trajectory")
    own = int(got.mask.sum(1).max())
    if model.cached > own - 1:
        raise Mismatch(f"the model ran {model.cached} forwards on the cache where a row draws at most {own} tokens of "
                       f"its own ({own - 1} forwards): feed the environment's reply whole, with the EOS that ended the "
                       f"turn, in one forward (one chunk, left-padded)")
    if model.idle:
        raise Mismatch(f"a row whose trajectory had ended was fed pad {model.idle} times: drop it from the batch "
                       f"and from the cache (cache.batch_select_indices)")


def _logp_is_a_full_forward(fn, core) -> None:
    got, _, prompt_ids, prompt_mask, policy = _run(fn, _script(MULTIPLY), questions=QUESTIONS, max_new_tokens=90,
                                                   temperature=0.7)
    full = h.full_forward_logp(policy, prompt_ids, prompt_mask, got.completion.cpu(), got.attention_mask.cpu())
    mask = got.mask.bool().cpu()
    recorded = got.sampling_logp.float().cpu()
    gap = (recorded - full).abs().where(mask, 0.0)
    if gap.max() > 1e-4 or recorded.where(~mask, 0.0).abs().max() > 0:
        t = int(gap.max(0).values.argmax())
        raise Mismatch(f"log π recorded as drawn differs from one forward over prompt + trajectory (the "
                       f"environment's tokens read, positions skipping the left padding, z / τ) by {gap.max():.3g} "
                       f"(at step {t}); or is not 0 off the model's tokens")


def _rows_end_apart(fn, core) -> None:
    options = dict(questions=QUESTIONS, again=[True, False], max_new_tokens=300)
    got = _run(fn, _again, **options)[0]
    answer = [("model", h.spell("#### 12"))]
    want = [[("model", h.spell(MULTIPLY)), ("env", _reply(_tool("12 call again")))] * 3 + answer,
            [("model", h.spell(MULTIPLY)), ("env", _reply(_tool("12")))] + answer]
    _expect_rows(got, want, "each row runs its own environment and ends at its own answer; pad after it")
    _same_as_core(fn, core, _again, **options)


def _errors_are_text(fn, core) -> None:
    turns = ('<tool_call>\n{"name": "multiply", "arguments": {"a": 3,}}\n</tool_call>', call("square", a=3),
             call("divide", a=3, b=0), "#### 1")
    got = _run(fn, _script(*turns), questions=QUESTIONS[:1], max_new_tokens=400, max_tool_calls=5)[0]
    replies = [tool_calls.call_tool(tool_calls.tools_of(h.Abacus()), tool_calls.parse_tool_calls(t)[0])[0]
               for t in turns[:3]]
    want = [[seg for t, r in zip(turns, replies) for seg in (("model", h.spell(t)), ("env", _reply(r)))]
            + [("model", h.spell(turns[3]))]]
    _expect_rows(got, want, "a malformed call, an unknown tool and a tool that raises are each answered with the "
                            "error as text (tool_calls.call_tool), and the model goes on")
    if got.tool_failures.tolist() != [3]:
        raise Mismatch(f"tool_failures should count the 3 calls answered with an error, got {got.tool_failures}")


def _calls_budget(fn, core) -> None:
    """--max-tool-calls counts the turns that call tools (TRL's count), not the calls: past it, every call of a
    calling turn is answered with tool_calls.over_budget's error, and each counts as a failure."""
    two = MULTIPLY + MULTIPLY
    script = _script(two, two, "#### 12")
    first = [("model", h.spell(two)), ("env", _reply(_tool("12"), _tool("12"))), ("model", h.spell(two))]
    over = tool_calls.over_budget({"name": "multiply"}, 1)
    for limit, second, failures in ((1, [over, over], 2), (2, [_tool("12"), _tool("12")], 0)):
        got = _run(fn, script, questions=QUESTIONS[:1], max_new_tokens=400, max_tool_calls=limit)[0]
        want = [first + [("env", _reply(*second)), ("model", h.spell("#### 12"))]]
        _expect_rows(got, want, f"--max-tool-calls {limit}, two turns of two calls: the budget counts calling turns, "
                                "not calls; every call of a turn past it is answered with tool_calls.over_budget's "
                                "error, not run")
        if got.tool_calls.tolist() != [4] or got.tool_failures.tolist() != [failures]:
            raise Mismatch(f"--max-tool-calls {limit}: 4 calls, {failures} failed (each call past the budget is a "
                           f"failure); got {got.tool_calls.tolist()} calls, {got.tool_failures.tolist()} failed")
    _same_as_core(fn, core, script, questions=QUESTIONS[:1], max_new_tokens=400, max_tool_calls=1)


def _token_budget(fn, core) -> None:
    turn = len(h.spell(MULTIPLY))
    budget = turn + len(_reply(_tool("12"))) // 2
    got = _run(fn, _script(MULTIPLY, "#### 12"), questions=QUESTIONS[:1], max_new_tokens=budget)[0]
    _expect_rows(got, [[("model", h.spell(MULTIPLY))]], f"--max-new-tokens {budget}: a reply that cannot be read "
                 "with room to answer is dropped and the trajectory ends there, truncated")
    if not bool(got.truncated.all()):
        raise Mismatch("the trajectory ran out of budget: truncated should be True")
    free = _run(fn, _script(None), questions=QUESTIONS, max_new_tokens=7)[0]
    if free.completion.shape[1] > 7 or free.mask.sum(1).max() > 7:
        raise Mismatch(f"--max-new-tokens 7: the trajectories are {free.completion.shape[1]} tokens long")
    _same_as_core(fn, core, _script(MULTIPLY, "#### 12"), questions=QUESTIONS[:1], max_new_tokens=budget)


def _eos_ends_a_turn(fn, core) -> None:
    turns = (MULTIPLY + " now", "#### 12")
    got = _run(fn, _script(*turns), questions=QUESTIONS[:1], max_new_tokens=140)[0]
    want = [[("model", h.spell(turns[0])), ("env", _reply(_tool("12"))), ("model", h.spell(turns[1]))]]
    _expect_rows(got, want, "the turn ends at the model's EOS (text after </tool_call> is still the model's), "
                            "and its calls run then")
    _same_as_core(fn, core, _script(*turns), questions=QUESTIONS[:1], max_new_tokens=140)


def _answer_ends(fn, core) -> None:
    got = _run(fn, _script("#### 12", MULTIPLY), questions=QUESTIONS, max_new_tokens=100)[0]
    _expect_rows(got, [[("model", h.spell("#### 12"))]] * 2, "a turn without a call is the answer: the "
                                                            "trajectory ends at its EOS")
    if got.truncated.any() or got.turns.tolist() != [1, 1] or got.answers != ["#### 12"] * 2:
        raise Mismatch(f"answered in one turn: truncated {got.truncated.tolist()}, turns {got.turns.tolist()}, "
                       f"answers {got.answers} (expected False, 1, '#### 12')")


def multi_turn() -> list[Case]:
    def case(label: str, check, **shown) -> Case:
        return Case(label, shown, check=check)

    return [
        case("the worked example: a call, the reply, an answer", _worked_example, script="call, '#### 12'"),
        case("each token through the model once, on one cache", _once_on_the_cache, rows=2),
        case("log π as drawn = one full forward (left padding of two lengths, τ = 0.7)", _logp_is_a_full_forward,
             script="call, then the model's own", temperature=0.7),
        case("two rows that end apart", _rows_end_apart, script="call while the reply says again, then answer"),
        case("tool errors become text", _errors_are_text, script="malformed, unknown tool, divide by 0, answer"),
        case("--max-tool-calls respected", _calls_budget, script="two calls, two calls, answer",
             max_tool_calls="1, then 2"),
        case("--max-new-tokens respected", _token_budget, script="call, '#### 12'; then the model's own"),
        case("EOS ends a turn", _eos_ends_a_turn, script="call + ' now', '#### 12'"),
        case("a turn without a call ends the trajectory", _answer_ends, script="'#### 12', call"),
    ]



def worked_example(multi_turn):
    """Exercise 23's worked example: ``multi_turn`` on the scripted model, one row, the script "call
    multiply(3, 4), then answer #### 12", a budget of 120 tokens."""
    return _run(multi_turn, _script(MULTIPLY, "#### 12"), questions=QUESTIONS[:1], max_new_tokens=120)[0]


def segments(trajectories, row: int = 0) -> list[tuple[str, int]]:
    """(kind, length) of each segment of one trajectory, read off its two masks."""
    return [(kind, len(ids)) for kind, ids in _rows(trajectories)[row]]


# ---- exercise 20, on both rungs that run it ------------------------------------------------------------------

AGENT_STEP = dict(env="guess", credit="turn", max_new_tokens=96, max_tool_calls=3)

def grpo_step() -> list[Case]:
    """Exercise 20's cases: the grpo rung's (``cases_loop``), then the agent rung's step, whose trajectories hold
    the environment's tokens (read: the attention mask goes to ``lm_batch``; not trained on) and whose credit is
    per turn (``step.credit``)."""
    from .cases_loop import PARAM_ATOL, PARAM_RTOL, _compare_parameters, _compare_stats, _compare_tensor
    from .cases_loop import grpo_step as grpo_rung_cases

    def check(fn, core):
        want_record, want_policy, want_advantages = h.run_agent_step(core, **AGENT_STEP)
        got_record, got_policy, got_advantages = h.run_agent_step(fn, **AGENT_STEP)
        _compare_stats(got_record, want_record, "the record")
        _compare_tensor(got_advantages, want_advantages, "the advantages Â_i returned")
        _compare_parameters(got_policy, want_policy, PARAM_RTOL, PARAM_ATOL, "parameters after the step")

    return grpo_rung_cases() + [Case("the agent rung (tiny, the guessing game): the environment's tokens read but "
                                     "not trained on, credit per turn", dict(rung="agent", **AGENT_STEP),
                                     check=check)]


AGENT_CASES = {"ex20_grpo_step": grpo_step, "ex22_trajectory_tensors": trajectory_tensors,
               "ex23_multi_turn": multi_turn}
