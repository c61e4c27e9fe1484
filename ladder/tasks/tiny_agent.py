"""The tiny tool-calling instruct models: Qwen2-architecture models whose chat template calls tools the way
Qwen2.5's does (``<tool_call>`` JSON in the assistant's turn, the reply in ``<tool_response>``), built and
pre-trained by ladder on a sloppy tutor's transcripts of the tiny environments:

    calculator   the tutor calls ``multiply`` on only 40% of the products and otherwise writes a wrong number
                 from memory: greedy decoding answers from memory (wrong), sampling calls the tool now and then
    guess        the tutor ignores the replies on half of its guesses (any number from 1 to 10) and otherwise
                 guesses a number the replies still allow

Two models: ``tiny-qwen2-agent-v1`` (``@tiny-agent``) learned both games, the guessing game's replies shown as
the bare direction ("higher"), and serves the calculator; ``tiny-qwen2-guess-v1`` (``@tiny-guess``) learned the
game as the environment plays it, each reply with the numbers still possible ("higher: 6 to 10").

The supervised warm start trains on the tutor's own turns only (the environment's tokens are context, as in RL).
RL with the environments' rewards then raises the tool use that pays and the use of the replies.
"""

from __future__ import annotations

import random
from pathlib import Path

from ladder.tasks import agent_envs, tool_calls

TINY_MODEL_VERSION = "tiny-qwen2-agent-v1"
TINY_GUESS_VERSION = "tiny-qwen2-guess-v1"
SPECIAL = ("<|im_start|>", "<|im_end|>", "<tool_call>", "</tool_call>", "<tool_response>", "</tool_response>")

# Qwen2.5's tool format, with the tools listed in one short line (a tiny model's context is short).
CHAT_TEMPLATE = (
    "{% if messages[0]['role'] == 'system' %}{% set system = messages[0]['content'] %}{% set rest = messages[1:] %}"
    "{% else %}{% set system = '' %}{% set rest = messages %}{% endif %}"
    "{% if system or tools %}<|im_start|>system\n{{ system }}"
    "{% if tools %}{{ '\\n' }}Tools:{% for tool in tools %} {{ tool['function']['name'] }}"
    "({{ tool['function']['parameters']['properties'] | list | join(', ') }}){% endfor %}{% endif %}"
    "<|im_end|>{{ '\\n' }}{% endif %}"
    "{% for message in rest %}"
    "{% if message['role'] == 'assistant' %}<|im_start|>assistant\n{{ message['content'] or '' }}"
    "{% for call in message.get('tool_calls') or [] %}<tool_call>{{ '\\n' }}"
    "{{ {'name': call['function']['name'], 'arguments': call['function']['arguments']} | tojson }}{{ '\\n' }}"
    "</tool_call>{% endfor %}<|im_end|>{{ '\\n' }}"
    "{% elif message['role'] == 'tool' %}<|im_start|>user\n<tool_response>\n{{ message['content'] }}{{ '\\n' }}"
    "</tool_response><|im_end|>{{ '\\n' }}"
    "{% else %}<|im_start|>{{ message['role'] }}\n{{ message['content'] }}<|im_end|>{{ '\\n' }}{% endif %}"
    "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


def call(name: str, **arguments) -> dict:
    """An assistant message that calls one tool."""
    return {"role": "assistant", "content": "",
            "tool_calls": [{"type": "function", "function": {"name": name, "arguments": arguments}}]}


def answer(value) -> dict:
    return {"role": "assistant", "content": f"#### {value}"}


def calculator_transcript(problem: dict, rng: random.Random, p_tool: float = 0.4) -> list[dict]:
    """The tutor on one product: the tool and its result (share ``p_tool``), or a wrong number from memory."""
    a, b = (int(x) for x in problem["question"].removeprefix("What is ").rstrip("?").split(" * "))
    if rng.random() < p_tool:
        result = agent_envs.Calculator().multiply(a, b)
        return [call("multiply", a=a, b=b), {"role": "tool", "name": "multiply", "content": result}, answer(result)]
    wrong = a * b + rng.choice((-1, 1)) * rng.randint(1, max(1, a * b // 4))
    return [answer(wrong)]


def guess_transcript(problem: dict, rng: random.Random, p_ignore: float = 0.5, max_guesses: int = 5,
                     bare_replies: bool = False) -> list[dict]:
    """The tutor plays one game: each guess ignores the replies (share ``p_ignore``) or keeps to them. With
    ``bare_replies`` the transcript shows a reply's direction only ("higher: 6 to 10" → "higher")."""
    env, (low, high) = agent_envs.GuessingGame(), agent_envs.GUESS_RANGE
    env.reset(**problem)
    messages: list[dict] = []
    for _ in range(max_guesses):
        n = rng.randint(low, high) if rng.random() < p_ignore else rng.randint(env.low, max(env.low, env.high))
        reply = env.guess(n)
        shown = reply.split(":")[0] if bare_replies else reply
        messages += [call("guess", n=n), {"role": "tool", "name": "guess", "content": shown}]
        if reply == "correct":
            return messages + [answer(n)]
    return messages + [answer(rng.randint(env.low, max(env.low, env.high)))]


def turn_text(message: dict) -> str:
    """What the model writes in an assistant turn (before its end-of-turn token), as the template renders it."""
    import json

    calls = [json.dumps({"name": c["function"]["name"], "arguments": c["function"]["arguments"]})
             for c in message.get("tool_calls") or []]
    return (message["content"] or "") + "".join(f"<tool_call>\n{c}\n</tool_call>" for c in calls)


def sft_examples(tokenizer, system: str, question: str, tools: list[dict], transcript: list[dict]
                 ) -> list[tuple[str, str]]:
    """(context, the tutor's turn) for each assistant turn: the loss falls on the tutor's tokens only."""
    messages = [{"role": "system", "content": system}, {"role": "user", "content": question}]
    examples = []
    for message in transcript:
        if message["role"] == "assistant":
            context = tokenizer.apply_chat_template(messages, tools=tools, tokenize=False, add_generation_prompt=True)
            examples.append((context, turn_text(message)))
        messages.append(message)
    return examples


def tutor_corpus(tokenizer, seed: int, n_calculator: int = 6000, n_guess: int = 1500, bare_replies: bool = True
                 ) -> list[tuple[str, str]]:
    """The supervised examples of the environments (training problems only); a game gives about four examples
    (one per guess), a product one or two, hence more products than games."""
    rng = random.Random(seed)
    products, _ = agent_envs.product_problems()
    secrets, _ = agent_envs.guess_problems()
    calc_tools = tool_calls.tool_schemas(agent_envs.Calculator())
    guess_tools = tool_calls.tool_schemas(agent_envs.GuessingGame())
    examples = []
    for problem in products[:n_calculator]:
        examples += sft_examples(tokenizer, agent_envs.CALCULATOR_PROMPT, problem["question"], calc_tools,
                                 calculator_transcript(problem, rng))
    for problem in secrets[:n_guess]:
        examples += sft_examples(tokenizer, agent_envs.GUESS_PROMPT, problem["question"], guess_tools,
                                 guess_transcript(problem, rng, bare_replies=bare_replies))
    return examples


def tokenizer_corpus(seed: int, n_calculator: int = 300, n_guess: int = 300, bare_replies: bool = True) -> list[str]:
    """Rendered transcripts of the environments, to train the tokenizer on."""
    from ladder.tasks import tiny_lm

    plain = tiny_lm.train_tokenizer(["0123456789 abc"], vocab_size=300, chat_template=CHAT_TEMPLATE)
    rng, texts = random.Random(seed), []
    products, _ = agent_envs.product_problems()
    secrets, _ = agent_envs.guess_problems()
    played = [(p, calculator_transcript(p, rng), agent_envs.CALCULATOR_PROMPT, agent_envs.Calculator())
              for p in products[:n_calculator]]
    played += [(p, guess_transcript(p, rng, bare_replies=bare_replies), agent_envs.GUESS_PROMPT,
                agent_envs.GuessingGame()) for p in secrets[:n_guess]]
    for problem, transcript, prompt, env in played:
        messages = [{"role": "system", "content": prompt}, {"role": "user", "content": problem["question"]},
                    *transcript]
        texts.append(plain.apply_chat_template(messages, tools=tool_calls.tool_schemas(env), tokenize=False))
    return texts


def build_tiny_agent_model(path: Path, sft_steps: int = 1500, seed: int = 0, batch_size: int = 32) -> None:
    """``tiny-qwen2-agent-v1``: both environments, the game's replies bare (see ``build_model``)."""
    build_model(path, tokenizer_corpus(seed), lambda tokenizer: tutor_corpus(tokenizer, seed), sft_steps, seed,
                batch_size)


def build_tiny_guess_model(path: Path, sft_steps: int = 1000, seed: int = 0, batch_size: int = 32) -> None:
    """``tiny-qwen2-guess-v1``: the guessing game alone, its replies as the environment gives them."""
    build_model(path, tokenizer_corpus(seed, n_calculator=0, bare_replies=False),
                lambda tokenizer: tutor_corpus(tokenizer, seed, n_calculator=0, n_guess=3000, bare_replies=False),
                sft_steps, seed, batch_size)


def build_model(path: Path, texts: list[str], corpus, sft_steps: int, seed: int, batch_size: int = 32) -> None:
    """Tokenizer (byte-level BPE on ``texts``, single digits, Qwen's chat and tool markers as special tokens), a
    3-layer Qwen2 model of width 128, ``sft_steps`` of supervised warm start on the tutor's turns
    (``corpus(tokenizer)``, ``batch_size`` turns a step), quantisation-aware so that ``--qlora``'s 4-bit base keeps
    it."""
    from ladder.tasks import tiny_lm

    tokenizer = tiny_lm.train_tokenizer(texts, vocab_size=500, chat_template=CHAT_TEMPLATE,
                                        individual_digits=True, extra_special=SPECIAL, eos_token="<|im_end|>")
    examples = corpus(tokenizer)
    with tiny_lm.isolated_build(seed):
        model = tiny_lm.build_model("qwen2", tokenizer, hidden=128, layers=3, heads=4, max_positions=512)
        tiny_lm.quantization_aware(model, True)
        tiny_lm.pretrain(model, tokenizer, examples, steps=sft_steps, batch_size=batch_size, lr=3e-3, seed=seed)
        tiny_lm.quantization_aware(model, False)
    tiny_lm.save(model, tokenizer, path)


def tiny_agent_model() -> Path:
    """The tiny tool-calling model (``@tiny-agent``): the shipped copy (``tiny_lm.cached``)."""
    from ladder.tasks import tiny_lm

    return tiny_lm.cached(TINY_MODEL_VERSION, build_tiny_agent_model)


def tiny_guess_model() -> Path:
    """The tiny guessing-game model (``@tiny-guess``): the shipped copy (``tiny_lm.cached``)."""
    from ladder.tasks import tiny_lm

    return tiny_lm.cached(TINY_GUESS_VERSION, build_tiny_guess_model)
