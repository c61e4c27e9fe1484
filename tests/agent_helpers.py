"""What the agent tests share: the tiny tool-calling tokenizer and small random models built from it, Qwen2.5's
own chat template and a tokenizer that uses it, a scripted policy (the real model's forward and cache, its next
token forced from a script), and TRL 1.16's ``_get_tool_suffix_ids`` called on a minimal object."""

from __future__ import annotations

import json
from contextlib import nullcontext
from functools import cache
from types import SimpleNamespace

import torch
from torch import nn

from ladder.patches import cache_arg, cache_of
from ladder.tasks import tiny_agent, tiny_lm

# Qwen/Qwen2.5-0.5B-Instruct's chat template (its tokenizer_config.json), verbatim: TRL 1.16 ships the same text as
# trl/chat_templates/qwen2_5.jinja and recognises the model by it (test_agent_real_preset checks that they agree).
QWEN2_5_CHAT_TEMPLATE = (
    '{%- if tools %}\n'
    "    {{- '<|im_start|>system\\n' }}\n"
    "    {%- if messages[0]['role'] == 'system' %}\n"
    "        {{- messages[0]['content'] }}\n"
    '    {%- else %}\n'
    "        {{- 'You are Qwen, created by Alibaba Cloud. You are a helpful assistant.' }}\n"
    '    {%- endif %}\n'
    '    {{- "\\n\\n# Tools\\n\\nYou may call one or more functions to assist with the user query.\\'
    'n\\nYou are provided with function signatures within <tools></tools> XML tags:\\n<tools>" }}'
    '\n'
    '    {%- for tool in tools %}\n'
    '        {{- "\\n" }}\n'
    '        {{- tool | tojson }}\n'
    '    {%- endfor %}\n'
    '    {{- "\\n</tools>\\n\\nFor each function call, return a json object with function name and'
    ' arguments within <tool_call></tool_call> XML tags:\\n<tool_call>\\n{\\"name\\": <function-nam'
    'e>, \\"arguments\\": <args-json-object>}\\n</tool_call><|im_end|>\\n" }}\n'
    '{%- else %}\n'
    "    {%- if messages[0]['role'] == 'system' %}\n"
    "        {{- '<|im_start|>system\\n' + messages[0]['content'] + '<|im_end|>\\n' }}\n"
    '    {%- else %}\n'
    "        {{- '<|im_start|>system\\nYou are Qwen, created by Alibaba Cloud. You are a helpful"
    " assistant.<|im_end|>\\n' }}\n"
    '    {%- endif %}\n'
    '{%- endif %}\n'
    '{%- for message in messages %}\n'
    '    {%- if (message.role == "user") or (message.role == "system" and not loop.first) or (m'
    'essage.role == "assistant" and not message.tool_calls) %}\n'
    "        {{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>' + '\\n' }}\n"
    '    {%- elif message.role == "assistant" %}\n'
    "        {{- '<|im_start|>' + message.role }}\n"
    '        {%- if message.content %}\n'
    "            {{- '\\n' + message.content }}\n"
    '        {%- endif %}\n'
    '        {%- for tool_call in message.tool_calls %}\n'
    '            {%- if tool_call.function is defined %}\n'
    '                {%- set tool_call = tool_call.function %}\n'
    '            {%- endif %}\n'
    '            {{- \'\\n<tool_call>\\n{"name": "\' }}\n'
    '            {{- tool_call.name }}\n'
    '            {{- \'", "arguments": \' }}\n'
    '            {{- tool_call.arguments | tojson }}\n'
    "            {{- '}\\n</tool_call>' }}\n"
    '        {%- endfor %}\n'
    "        {{- '<|im_end|>\\n' }}\n"
    '    {%- elif message.role == "tool" %}\n'
    '        {%- if (loop.index0 == 0) or (messages[loop.index0 - 1].role != "tool") %}\n'
    "            {{- '<|im_start|>user' }}\n"
    '        {%- endif %}\n'
    "        {{- '\\n<tool_response>\\n' }}\n"
    '        {{- message.content }}\n'
    "        {{- '\\n</tool_response>' }}\n"
    '        {%- if loop.last or (messages[loop.index0 + 1].role != "tool") %}\n'
    "            {{- '<|im_end|>\\n' }}\n"
    '        {%- endif %}\n'
    '    {%- endif %}\n'
    '{%- endfor %}\n'
    '{%- if add_generation_prompt %}\n'
    "    {{- '<|im_start|>assistant\\n' }}\n"
    '{%- endif %}\n'
)
QWEN2_5_SPECIAL = ("<|im_start|>", "<|im_end|>", "<tool_call>", "</tool_call>")


@cache
def tiny_tokenizer():
    """The tiny tool-calling model's tokenizer, trained as ``tiny_agent.build_tiny_agent_model`` trains it (no model:
    the tests do not depend on the shipped model's weights)."""
    return tiny_lm.train_tokenizer(tiny_agent.tokenizer_corpus(0), vocab_size=500,
                                   chat_template=tiny_agent.CHAT_TEMPLATE, individual_digits=True,
                                   extra_special=tiny_agent.SPECIAL, eos_token="<|im_end|>")


@cache
def qwen2_5_tokenizer():
    """A small byte-level BPE tokenizer with Qwen2.5's chat template and its chat and tool-call markers
    (``<|im_end|>`` ends a turn, as in Qwen2.5)."""
    corpus = ["Tom has 2 apples and buys 3 more. How many apples does he have? #### 5",
              '<tool_call>\n{"name": "calculate", "arguments": {"expression": "2 + 3"}}\n</tool_call>',
              "<tool_response>\n5\n</tool_response> You are Qwen, created by Alibaba Cloud."] * 5
    return tiny_lm.train_tokenizer(corpus, vocab_size=400, chat_template=QWEN2_5_CHAT_TEMPLATE,
                                   individual_digits=True, extra_special=QWEN2_5_SPECIAL, eos_token="<|im_end|>")


def random_model(tokenizer, seed: int = 0, hidden: int = 32, layers: int = 2, heads: int = 2, context: int = 512):
    """A Qwen2 of random weights (seeded) for ``tokenizer``."""
    torch.manual_seed(seed)
    return tiny_lm.build_model("qwen2", tokenizer, hidden=hidden, layers=layers, heads=heads, max_positions=context)


def save_random_model(path, tokenizer, seed: int = 0, context: int = 512) -> str:
    """``random_model`` and its tokenizer saved like a hub snapshot (what ``--model DIR`` loads)."""
    tiny_lm.save(random_model(tokenizer, seed, context=context), tokenizer, path)
    return str(path)


def call_text(name: str, **arguments) -> str:
    """One tool call as the model writes it (Qwen2.5 / Hermes)."""
    return "<tool_call>\n" + json.dumps({"name": name, "arguments": arguments}) + "\n</tool_call>"


def ids(tokenizer, text: str) -> list[int]:
    """``text``'s tokens, no BOS."""
    return tokenizer(text, add_special_tokens=False).input_ids


def turn(tokenizer, text: str) -> list[int]:
    """A model turn: ``text``'s tokens and the end of turn (EOS)."""
    return ids(tokenizer, text) + [tokenizer.eos_token_id]


class ScriptedLM(nn.Module):
    """The real model's forward and cache; the logits it returns force the next token of a script.

    ``turns[b]`` is row b's model turns (token ids, EOS included). A model turn begins after the generation
    prompt (``<|im_start|>assistant\\n``) that ends the environment's reply, so the next token of row b is
    ``turns[b][k][j]``: k = the generation prompts in what the row was fed so far, j = the tokens fed since the
    last one (EOS past the script). It follows the rows the rollout keeps in its cache (``batch_select_indices``).
    ``fed`` keeps every forward's (rows, each row's tokens read: a chunk's pad, attention 0, left out);
    ``real_logp`` every forward's (rows, each row's trajectory length so far — the index of the token it draws
    next —, the real model's log-softmax at the last position: what the model itself would have given)."""

    def __init__(self, model, tokenizer, turns: list[list[list[int]]], temperature: float = 1.0):
        super().__init__()
        self.model, self.turns, self.temperature = model, turns, temperature
        self.eos, self.generation_prompt = tokenizer.eos_token_id, ids(tokenizer, "<|im_start|>assistant\n")
        self.rows: list[int] = []                 # the trajectory row of each row of the batch
        self.history: dict[int, list[int]] = {}   # each trajectory row's tokens fed after its prompt
        self.fed: list[tuple[list[int], list[list[int]]]] = []
        self.real_logp: list[tuple[list[int], list[int], torch.Tensor]] = []

    def next_token(self, row: int, history: list[int]) -> int:
        k, j, n = 0, len(history), len(self.generation_prompt)
        for end in range(n, len(history) + 1):
            if history[end - n:end] == self.generation_prompt:
                k, j = k + 1, len(history) - end
        script = self.turns[row]
        return script[k][j] if k < len(script) and j < len(script[k]) else self.eos

    def forward(self, input_ids, **kwargs):
        out = self.model(input_ids=input_ids, **kwargs)
        read = kwargs["attention_mask"][:, -input_ids.shape[1]:].bool()
        tokens = [row[r].tolist() for row, r in zip(input_ids, read)]
        if kwargs.get(cache_arg()) is None:
            self.rows, self.history = list(range(len(input_ids))), {b: [] for b in range(len(input_ids))}
        else:
            for b, row_tokens in zip(self.rows, tokens):
                self.history[b] += row_tokens
        self.fed.append((list(self.rows), tokens))
        logp = torch.log_softmax(out.logits[:, -1].float() / self.temperature, -1)
        self.real_logp.append((list(self.rows), [len(self.history[b]) for b in self.rows], logp))
        forced = torch.full_like(out.logits[:, -1:], -1e4)
        for i, b in enumerate(self.rows):
            forced[i, 0, self.next_token(b, self.history[b])] = 0.0
        out.logits = forced
        self._follow(cache_of(out))
        return out

    def _follow(self, cache) -> None:
        select = cache.batch_select_indices
        if getattr(select, "followed", False):
            return

        def follow(indices):
            picked = indices.tolist()
            if len(set(picked)) < len(picked):   # the prefill's shared prompts, expanded to their rows
                self.rows, self.history = list(range(len(picked))), {b: [] for b in range(len(picked))}
            else:                                # the rows still going
                self.rows = [self.rows[i] for i in picked]
            return select(indices)
        follow.followed = True
        cache.batch_select_indices = follow


def scripted_policy(model, tokenizer, turns, temperature: float = 1.0) -> SimpleNamespace:
    """What ``multi_turn`` reads of a policy (``model``, ``temperature``, ``sampling_weights``), on a ScriptedLM."""
    return SimpleNamespace(model=ScriptedLM(model, tokenizer, turns, temperature), temperature=temperature,
                           sampling_weights=nullcontext)


def trl_suffix_ids(tokenizer, tool_messages: list[dict]) -> list[int]:
    """TRL 1.16's ``GRPOTrainer._get_tool_suffix_ids`` itself, on an object holding what it reads."""
    from trl import GRPOTrainer

    trainer = SimpleNamespace(processing_class=tokenizer, _tokenizer=tokenizer, chat_template=None,
                              chat_template_kwargs={}, _is_vlm=False)
    return GRPOTrainer._get_tool_suffix_ids(trainer, tool_messages)
