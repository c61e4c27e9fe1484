"""Planted wrong implementations of the agent exercises (22, 23): each is the solution with one mistake a learner
might make, and the property of the grader that must catch it. ``PLANTED_AGENT[stem][label]`` is the function;
``CAUGHT_BY[stem][label]`` the label of the case that must be the first to fail."""

from __future__ import annotations

from pathlib import Path

import planted_bugs_loop
from planted_bugs_loop import SOLUTIONS

from ladder.graders import load


def mutant(stem: str, function: str, *edits: tuple[str, str]):
    """The solution of ``stem`` with each ``(old, new)`` of ``edits`` applied once (each ``old`` must occur)."""
    source = (SOLUTIONS / f"{stem}.py").read_text()
    for old, new in edits:
        assert old in source, f"{stem}: {old!r} is not in the solution"
        source = source.replace(old, new, 1)
    planted_bugs_loop._count += 1
    path = planted_bugs_loop._HERE / f"{stem}_agent{planted_bugs_loop._count}.py"
    path.write_text(source)
    return getattr(load(path), function)


WORKED = "the worked example: a call, the reply, an answer"
ONCE = "each token through the model once, on one cache"
FULL = "log π as drawn = one full forward (left padding of two lengths, τ = 0.7)"
ERRORS = "tool errors become text"
FORWARD = ("out = model(input_ids=chunk, attention_mask=attention, position_ids=positions, use_cache=True,\n"
           "                        **with_cache(cache))")

# label → (the case that catches it, the edits)
TENSORS = {
    "the environment's tokens trained on (mask 1 on every segment)": (
        "the sheet's example", [('1.0 if kind == "model" else 0.0', "1.0")]),
    "the environment's tokens not read (attention 0 on them)": (
        "the sheet's example", [("attention_mask[b, start:end] = 1.0",
                                 'attention_mask[b, start:end] = 1.0 if kind == "model" else 0.0')]),
    "left-padded like the prompts": ("two trajectories", [("start = 0", "start = T - lengths[b]")]),
    "padded with 0, not pad_token_id": (
        "two trajectories", [("torch.full((len(trajectories), T), pad_token_id, dtype=torch.long)",
                              "torch.zeros(len(trajectories), T, dtype=torch.long)")]),
    "off by one: T one longer than the longest row": ("the sheet's example", [("T = max(lengths + [1])",
                                                                              "T = max(lengths) + 1")]),
    "each segment written from the row's start (the offset not carried on)": (
        "the sheet's example", [("start = end", "start = 0")]),
    "the pad read (attention 1 on the whole row)": (
        "two trajectories", [("attention_mask = torch.zeros(len(trajectories), T)",
                              "attention_mask = torch.ones(len(trajectories), T)")]),
    "token ids as floats": ("completion is token ids", [
        ("torch.full((len(trajectories), T), pad_token_id, dtype=torch.long)",
         "torch.full((len(trajectories), T), float(pad_token_id))"),
        ("torch.tensor(ids, dtype=torch.long)", "torch.tensor(ids, dtype=torch.float)")]),
}

ROLLOUT = {
    "the environment's tokens returned with mask 1 (the attention mask as the loss mask)": (
        WORKED, [("mask=mask, attention_mask=attention_mask,", "mask=attention_mask, attention_mask=attention_mask,")]),
    "the environment's tokens fed with attention 0 while sampling": (
        FULL, [("attend = torch.tensor([[0] * (k - len(f)) + [1] * len(f) for f in feeds], device=device)",
                "attend = torch.tensor([[0] * (k - len(f)) + [1] + [0] * (len(f) - 1) for f in feeds], "
                "device=device)")]),
    "no cache: the whole trajectory re-encoded at every step": (
        ONCE, [("attention, position = prompt_mask.long(), position_ids_for(prompt_mask)[:, -1]",
                "attention, position, sequence = prompt_mask.long(), position_ids_for(prompt_mask)[:, -1], prompt_ids"),
               ("attention, position = attention[keep], position[keep]",
                "attention, position, sequence = attention[keep], position[keep], sequence[keep]"),
               (FORWARD,
                "sequence = torch.cat([sequence, chunk], dim=1)\n"
                "            out = model(input_ids=sequence, attention_mask=attention, "
                "position_ids=position_ids_for(attention))")]),
    "the whole trajectory re-encoded at the start of each turn": (
        ONCE, [("attention, position = prompt_mask.long(), position_ids_for(prompt_mask)[:, -1]",
                "attention, position, sequence = prompt_mask.long(), position_ids_for(prompt_mask)[:, -1], prompt_ids"),
               ("attention, position = attention[keep], position[keep]",
                "attention, position, sequence = attention[keep], position[keep], sequence[keep]"),
               (FORWARD,
                "sequence = torch.cat([sequence, chunk], dim=1)\n"
                "            if k > 1:   # a reply: a turn begins\n"
                "                out = model(input_ids=sequence, attention_mask=attention,\n"
                "                            position_ids=position_ids_for(attention), use_cache=True)\n"
                "            else:\n"
                "                out = model(input_ids=chunk, attention_mask=attention, position_ids=positions,\n"
                "                            use_cache=True, **with_cache(cache))")]),
    "the model's turn decoded and tokenized again": (
        WORKED, [("        calls = tool_calls.parse_tool_calls(text)\n",
                  "        self.segments[-1] = (\"model\", tokenizer.encode(text, add_special_tokens=False)\n"
                  "                             + [tokenizer.eos_token_id])\n"
                  "        calls = tool_calls.parse_tool_calls(text)\n")]),
    "the reply's text tokenized alone, not the chat template's rendering": (
        WORKED, [("suffix = tool_calls.suffix_ids(tokenizer, replies)",
                  'suffix = tokenizer.encode("".join(r["content"] for r in replies), add_special_tokens=False)')]),
    "position ids forgotten after the prompt": (
        FULL, [("out = model(input_ids=chunk, attention_mask=attention, position_ids=positions, use_cache=True,",
                "out = model(input_ids=chunk, attention_mask=attention, use_cache=True,")]),
    "temperature ignored when drawing": (FULL, [("logits.float() / temperature", "logits.float()")]),
    "a malformed call crashes (json.loads, uncaught)": (
        ERRORS, [("calls = tool_calls.parse_tool_calls(text)",
                  'calls = [__import__("json").loads(b) for b in '
                  '__import__("re").findall(r"<tool_call>(.*?)</tool_call>", text, __import__("re").DOTALL)]')]),
    "a tool that raises crashes the rollout (called directly)": (
        ERRORS, [("reply, failed = tool_calls.call_tool(self.tools, call)",
                  'reply, failed = {"role": "tool", "name": call["name"], '
                  '"content": str(self.tools[call["name"]](**call["arguments"]))}, False')]),
    "--max-tool-calls never checked": ("--max-tool-calls respected", [("if self.calling_turns > max_tool_calls:",
                                                                       "if False:")]),
    "--max-tool-calls counting calls one by one, not calling turns": (
        "--max-tool-calls respected", [("if self.calling_turns > max_tool_calls:", "if self.calls > max_tool_calls:")]),
    "a call past --max-tool-calls not counted as a failure": (
        "--max-tool-calls respected", [("tool_calls.over_budget(call, max_tool_calls), True",
                                        "tool_calls.over_budget(call, max_tool_calls), False")]),
    "a reply that does not fit is fed anyway, cut by the budget": (
        "--max-new-tokens respected", [("if len(suffix) >= room:", "if room <= 0:")]),
    "the turn ended at </tool_call>, not at EOS": (
        WORKED, [("if drawn == tokenizer.eos_token_id:",
                             'if drawn == tokenizer.eos_token_id or tokenizer.decode(self.turn).endswith('
                             '"</tool_call>"):')]),
    "an answer does not end the trajectory": (
        WORKED, [("            self.done = True\n            return\n", "            return\n")]),
}


def _planted(stem: str, function: str, bugs: dict) -> tuple[dict, dict]:
    functions = {label: mutant(stem, function, *edits) for label, (_, edits) in bugs.items()}
    return functions, {label: case for label, (case, _) in bugs.items()}


_tensors, _tensors_caught = _planted("ex22_trajectory_tensors", "trajectory_tensors", TENSORS)
_rollout, _rollout_caught = _planted("ex23_multi_turn", "multi_turn", ROLLOUT)
# the loop the sheet once asked for: each reply token in a forward of its own, ended rows fed pad
ONE_TOKEN = "the reply fed one token per forward, ended rows fed pad (the one-token loop)"
_rollout[ONE_TOKEN] = mutant("ex23_multi_turn", "multi_turn", ((SOLUTIONS / "ex23_multi_turn.py").read_text(),
                                                              (Path(__file__).parent / "ex23_one_token_loop.txt")
                                                              .read_text()))
_rollout_caught[ONE_TOKEN] = ONCE
PLANTED_AGENT = {"ex22_trajectory_tensors": _tensors, "ex23_multi_turn": _rollout}
CAUGHT_BY = {"ex22_trajectory_tensors": _tensors_caught, "ex23_multi_turn": _rollout_caught}
