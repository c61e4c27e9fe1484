"""What exercise 23 (the multi-turn rollout) is graded on: a small random Qwen2 model whose turns are scripted,
a toy environment, and a full forward to check the recorded log-probs against.

The script is a logit bias, a pure function of the trajectory so far: at each position the next token of the
scripted turn gets +40 (so it is drawn, whatever the sampler's random numbers), and a turn scripted as None is
the random model's own (free sampling). The script's turn k begins after the k-th assistant header of the
trajectory, and may depend on the text of the environment's reply before it. Because the bias depends only on
the tokens before a position, the cached steps of a rollout and one forward over the whole trajectory see the
same logits. The wrapper counts the positions each row is fed (pad with attention 0 is not fed), the forwards
that start without a cache, those on the cache and the rows they fed nothing; it follows the rows a rollout
keeps in its cache (``batch_select_indices``).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from contextlib import nullcontext

import torch
from torch import Tensor, nn

from ladder.patches import cache_arg
from ladder.policies.causal_lm import position_ids_for
from ladder.tasks import tool_calls

FORCE = 40.0   # the logit bonus of a scripted token: drawn with probability 1 − O(V e^−40)
HEADER = "<|im_start|>assistant\n"
SYSTEM = "Use the tools."


class Abacus:
    """The toy environment (TRL's protocol): ``multiply`` and ``divide``; ``reset(again=True)`` makes every reply
    ask for another call."""

    def reset(self, question: str, answer: str, again: bool = False) -> None:
        self.again = again

    def multiply(self, a: int, b: int) -> str:
        """Multiply two whole numbers.

        Args:
            a: the first factor
            b: the second factor
        """
        return str(int(a) * int(b)) + (" call again" if self.again else "")

    def divide(self, a: int, b: int) -> str:
        """Divide a by b.

        Args:
            a: the dividend
            b: the divisor
        """
        return str(int(a) // int(b))


@functools.lru_cache(maxsize=1)
def tokenizer():
    """A small byte-level BPE tokenizer with the tiny agent's chat template and markers, trained on a few
    rendered conversations (so that "multiply" is one token: spelt letter by letter, it is not how the tokenizer
    would encode it)."""
    from ladder.tasks import tiny_agent, tiny_lm

    plain = tiny_lm.train_tokenizer(["0123456789 abc"], vocab_size=300, chat_template=tiny_agent.CHAT_TEMPLATE)
    tools, texts = tool_calls.tool_schemas(Abacus()), []
    for a in range(2, 12):
        messages = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": f"What is {a} * 7?"},
                    tiny_agent.call("multiply", a=a, b=7),
                    {"role": "tool", "name": "multiply", "content": str(7 * a)}, tiny_agent.answer(7 * a)]
        texts.append(plain.apply_chat_template(messages, tools=tools, tokenize=False))
    return tiny_lm.train_tokenizer(texts * 4, vocab_size=320, chat_template=tiny_agent.CHAT_TEMPLATE,
                                   individual_digits=True, extra_special=tiny_agent.SPECIAL, eos_token="<|im_end|>")


@functools.lru_cache(maxsize=1)
def random_model() -> nn.Module:
    """The small random Qwen2 model (seeded), shared by every rollout of the grader; never trained."""
    from ladder.tasks import tiny_lm

    with torch.random.fork_rng():
        torch.manual_seed(0)
        model = tiny_lm.build_model("qwen2", tokenizer(), hidden=32, layers=2, heads=2, max_positions=512)
    return model.eval().requires_grad_(False)


@functools.lru_cache(maxsize=64)
def _spelt(text: str) -> tuple[int, ...]:
    return tuple(spell(text))


def spell(text: str) -> list[int]:
    """The ids of ``text`` one character at a time (a special marker as its one id), then EOS: what a scripted
    turn draws. Decoded, it is ``text``; encoded again, it would be fewer, longer tokens."""
    from ladder.tasks.tiny_agent import SPECIAL

    tok, ids, rest = tokenizer(), [], text
    specials = sorted(SPECIAL, key=len, reverse=True)
    while rest:
        marker = next((s for s in specials if rest.startswith(s)), None)
        piece = marker or rest[0]
        ids += [tok.convert_tokens_to_ids(marker)] if marker else tok.encode(piece, add_special_tokens=False)
        rest = rest[len(piece):]
    return ids + [tok.eos_token_id]


@functools.lru_cache(maxsize=1)
def header_ids() -> list[int]:
    return tokenizer().encode(HEADER, add_special_tokens=False)


class Scripted(nn.Module):
    """The random model plus the script's bias; counts the positions fed and the forwards without a cache."""

    def __init__(self, script: Callable[[int, str], str | None]):
        super().__init__()
        self.inner = random_model()
        self.script, self.config = script, self.inner.config
        self.fed_rows: list[int] = []   # per row, the positions fed: the prompt's, then the trajectory's
        self.uncached, self.prompt_width, self.history = 0, None, None
        self.cached = self.idle = 0     # forwards on the cache; rows in them fed nothing (an ended row's pad)

    @property
    def device(self) -> torch.device:
        return self.inner.device

    def get_decoder(self):
        return self.inner.get_decoder()

    def forced(self, prefix: list[int]) -> int | None:
        """The scripted next token after the trajectory's tokens ``prefix`` (None: the model's own choice)."""
        header, start, k, reply = header_ids(), 0, 0, ""
        while True:
            text = self.script(k, reply)
            if text is None:
                return None
            turn = _spelt(text)
            if len(prefix) < start + len(turn):
                return turn[len(prefix) - start]
            start += len(turn)
            ends = [i for i in range(start, len(prefix) - len(header) + 1) if prefix[i:i + len(header)] == header]
            if not ends:
                return None   # the environment's reply is being read
            reply = tokenizer().decode(prefix[start:ends[0]])
            start, k = ends[0] + len(header), k + 1

    def bias(self, prefixes: list[list[int]], vocab: int) -> Tensor:
        out = torch.zeros(len(prefixes), vocab)
        for row, prefix in enumerate(prefixes):
            token = self.forced(prefix)
            if token is not None:
                out[row, token] = FORCE
        return out

    def forward(self, input_ids: Tensor, **kwargs):
        cache = kwargs.get(cache_arg())
        attended = kwargs["attention_mask"][:, -input_ids.shape[1]:].bool().tolist()
        rows = [self._read(ids, a) for ids, a in zip(input_ids.tolist(), attended)]
        if len(self.fed_rows) != len(rows):   # the first prefill, or a batch the rollout did not select
            self.fed_rows = [0] * len(rows)
        self.fed_rows = [n + len(row) for n, row in zip(self.fed_rows, rows)]
        if cache is None:
            self.uncached += 1
            if self.prompt_width is None:
                self.prompt_width = input_ids.shape[1]
                self.history = [[] for _ in rows]
            else:                              # the trajectory encoded again, prompt and all
                self.history = [self._read(ids[self.prompt_width:], a[self.prompt_width:])
                                for ids, a in zip(input_ids.tolist(), attended)]
        else:
            self.cached += 1
            self.idle += sum(not row for row in rows)
            if self.history is None or len(self.history) != len(rows):
                self.history = [[] for _ in rows]
            self.history = [h + row for h, row in zip(self.history, rows)]
        out = self.inner(input_ids=input_ids, **kwargs)
        last = out.logits[:, -1] + self.bias(self.history, out.logits.shape[-1]).to(out.logits.dtype)
        out.logits = torch.cat([out.logits[:, :-1], last[:, None]], dim=1)
        self._follow_row_selection(getattr(out, cache_arg()))
        return out

    @staticmethod
    def _read(ids: list[int], attended: list[bool]) -> list[int]:
        """A row's tokens in what it was fed: pad with attention 0 (a chunk's, an ended row's) is none of them."""
        pad = tokenizer().pad_token_id
        return [t for t, a in zip(ids, attended) if a or t != pad]

    @property
    def fed(self) -> int:
        """The most positions any row was fed: its prompt once and each token of its trajectory once."""
        return max(self.fed_rows, default=0)

    def _follow_row_selection(self, cache) -> None:
        """Rows the rollout keeps (``cache.batch_select_indices``: a shared prompt's rows, rows that ended) keep
        their history."""
        if cache is None or getattr(cache, "_scripted_follow", False):
            return
        select = cache.batch_select_indices

        def follow(indices, select=select):
            picked = indices.tolist()
            self.history = [list(self.history[i]) for i in picked]
            self.fed_rows = [self.fed_rows[i] for i in picked]
            return select(indices)
        cache.batch_select_indices, cache._scripted_follow = follow, True


class ScriptedPolicy:
    """What ``multi_turn`` reads of a policy: ``model``, ``temperature``, ``sampling_weights()``."""

    def __init__(self, script: Callable[[int, str], str | None], temperature: float = 1.0):
        self.model, self.temperature = Scripted(script), temperature

    def sampling_weights(self):
        return nullcontext()


def prompts(questions: list[str]) -> tuple[Tensor, Tensor]:
    """Left-padded prompts ``[B, P]`` with the tools in the template."""
    tok = tokenizer()
    tools = tool_calls.tool_schemas(Abacus())
    texts = [tok.apply_chat_template([{"role": "system", "content": SYSTEM}, {"role": "user", "content": q}],
                                     tools=tools, tokenize=False, add_generation_prompt=True) for q in questions]
    enc = tok(texts, return_tensors="pt", padding=True)
    return enc.input_ids, enc.attention_mask


def rollout(multi_turn, script, questions: list[str], again: list[bool] | None = None, max_new_tokens: int = 96,
            max_tool_calls: int = 3, temperature: float = 1.0, do_sample: bool = True, seed: int = 0):
    """(trajectories, the policy after it, prompt_ids, prompt_mask): ``multi_turn`` on the scripted policy."""
    policy = ScriptedPolicy(script, temperature)
    envs = []
    for i, q in enumerate(questions):
        envs.append(Abacus())
        envs[-1].reset(question=q, answer="", again=bool(again and again[i]))
    prompt_ids, prompt_mask = prompts(questions)
    generator = torch.Generator().manual_seed(seed)
    trajectories = multi_turn(policy, tokenizer(), envs, prompt_ids, prompt_mask, max_new_tokens, max_tool_calls,
                              do_sample=do_sample, top_p=1.0, generator=generator)
    return trajectories, policy, prompt_ids, prompt_mask


@torch.no_grad()
def full_forward_logp(policy: ScriptedPolicy, prompt_ids: Tensor, prompt_mask: Tensor, completion: Tensor,
                      attention_mask: Tensor) -> Tensor:
    """[B, T] log softmax(z / τ) of each completion token, from one forward over prompt + completion (the
    environment's tokens read, pad not), with the script's bias at every position."""
    model, P = policy.model, prompt_ids.shape[1]
    attention = torch.cat([prompt_mask.long(), attention_mask.long()], dim=1)
    input_ids = torch.cat([prompt_ids, completion], dim=1)
    logits = model.inner(input_ids=input_ids, attention_mask=attention,
                         position_ids=position_ids_for(attention)).logits[:, P - 1:-1].float()
    rows = completion.tolist()
    for t in range(completion.shape[1]):
        logits[:, t] += model.bias([row[:t] for row in rows], logits.shape[-1])
    logp = torch.log_softmax(logits / policy.temperature, dim=-1)
    return logp.gather(2, completion[:, :, None]).squeeze(2)


def run_agent_step(grpo_step, **overrides) -> tuple[dict, nn.Module, Tensor]:
    """Exercise 20 on the agent rung: one ``grpo_step`` of the agent's tiny preset (2 problems × 4 trajectories,
    the rung's own rollout and credit) from seed 0: (record without its timings, the policy after, Â_i)."""
    from ladder.graders.cases import Mismatch
    from ladder.rungs import agent, grpo
    from ladder.runtime.distributed import Processes
    from ladder.runtime.runlog import seed_everything, without_timings

    settings = {**agent.PRESETS["tiny"], "prompts_per_step": 2, "group_size": 4, "steps": 1, "eval_size": 8,
                "threads": 0, **overrides}
    cfg = agent.Config(**settings)
    agent.validate(cfg)
    seed_everything(cfg.seed)
    task = agent.agent_task(cfg)
    policy, optimizer = grpo.load_policy(cfg, task.model_path, torch.device("cpu"))
    step = grpo.make_step(cfg, policy=policy, optimizer=optimizer, tokenizer=task.tokenizer,
                          stream=grpo.ProblemStream(task.problems, cfg.seed), system_prompt=task.system_prompt,
                          procs=Processes(torch.device("cpu")), rollout=task.rollout, credit=task.credit)
    seed_everything(cfg.seed)
    out = grpo_step(step)
    if not (isinstance(out, tuple) and len(out) == 3):
        raise Mismatch(f"should return (record, rollout, advantages), returned {type(out).__name__}")
    record = without_timings(out[0]) if isinstance(out[0], dict) else out[0]
    return record, policy, out[2]
