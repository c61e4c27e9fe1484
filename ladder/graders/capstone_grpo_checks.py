"""Capstone II's properties: each takes the learner's module and raises ``Broken`` (one or two lines: on what
input, expected vs got) when the property does not hold. ``capstone_grpo.check`` runs one by name.

Here: the sampler, the log-probs of given completions, the reward and the advantages (each a few seconds
on a CPU). The loss, the update and the training check are ``capstone_grpo_update``.
"""

from __future__ import annotations

import torch
from torch import Tensor

from .capstone_grpo_task import (
    MAX_NEW_TOKENS,
    Broken,
    bits,
    fmt,
    fresh,
    greedy_completions,
    load_model,
    load_tokenizer,
    max_difference,
    prompt_batch,
    reference_logp,
    sampled_completions,
)

LOGP_ATOL = 1e-5              # log-probs of one full forward: the same up to float32 rounding
DECODE_ATOL = 1e-4            # a cached decode step against the full forward: float32 rounding reaches 3e-5 here
QUESTIONS = ["What is 5 + 17?", "What is 48 + 36?", "What is 123 + 9?", "What is 67 + 25?"]   # two prompt lengths


# --- the sampler ------------------------------------------------------------------------------

def _sample(sol, model, ids: Tensor, mask: Tensor, temperature: float, seed: int = 0,
            max_new_tokens: int = MAX_NEW_TOKENS) -> tuple[Tensor, Tensor, Tensor]:
    tokenizer = load_tokenizer()
    out = sol.sample(model, ids, mask, max_new_tokens, temperature, tokenizer.eos_token_id,
                     torch.Generator().manual_seed(seed))
    if not (isinstance(out, tuple) and len(out) == 3 and all(isinstance(x, Tensor) for x in out)):
        raise Broken(f"sample should return (ids, mask, logp), three tensors; got {type(out).__name__}")
    tokens, cmask, logp = out
    B = ids.shape[0]
    if tokens.dim() != 2 or tokens.shape[0] != B or not 1 <= tokens.shape[1] <= max_new_tokens:
        raise Broken(f"ids should be [B = {B}, T] with 1 ≤ T ≤ max_new_tokens = {max_new_tokens}, got "
                     f"{list(tokens.shape)}")
    if cmask.shape != tokens.shape or logp.shape != tokens.shape:
        raise Broken(f"ids, mask and logp should share one shape; got {list(tokens.shape)}, {list(cmask.shape)}, "
                     f"{list(logp.shape)}")
    if tokens.dtype != torch.long or logp.dtype != torch.float32:
        raise Broken(f"ids should be int64 and logp float32; got {tokens.dtype} and {logp.dtype}")
    return tokens, cmask.float(), logp


def sampler_is_a_cached_loop(sol) -> None:
    """Not ``generate``: the prompt in one forward, then one new token per forward (the KV cache)."""
    model, tokenizer = fresh(load_model()), load_tokenizer()
    lengths = []
    model.register_forward_pre_hook(lambda m, args, kwargs: lengths.append(
        (kwargs.get("input_ids") if "input_ids" in kwargs else args[0]).shape[1]), with_kwargs=True)
    ids, mask = prompt_batch(tokenizer, QUESTIONS)
    _sample(sol, model, ids, mask, 1.0)
    if len(lengths) < 2 or lengths[0] != ids.shape[1] or any(n != 1 for n in lengths[1:]):
        raise Broken(f"on 4 prompts of {ids.shape[1]} columns the forwards took {lengths[:8]} tokens; expected "
                     f"{ids.shape[1]}, then 1 per step (use_cache=True, the returned cache passed back)")


def sampler_records_logp(sol) -> None:
    """The recorded log π of each sampled token equals the model's own full forward on it (to float32 rounding)."""
    model, tokenizer = fresh(load_model()), load_tokenizer()
    ids, mask = prompt_batch(tokenizer, QUESTIONS)
    for temperature in (1.0, 0.7):
        tokens, cmask, logp = _sample(sol, model, ids, mask, temperature)
        want = reference_logp(model, ids, mask, tokens, cmask, temperature)
        diff = max_difference(logp, want, cmask)
        if diff > DECODE_ATOL:
            row = int(((logp - want).abs() * cmask).amax(1).argmax())
            raise Broken(f"at τ = {temperature}, {QUESTIONS[row]!r}: recorded log π {fmt(logp[row][:6])}…, the "
                         f"model's forward gives {fmt(want[row][:6])}… (max difference {diff:.2g} > {DECODE_ATOL:g})")


def sampler_stops_at_eos(sol) -> None:
    """Each row ends at its first EOS (kept, mask 1); after it the mask and the log-prob are 0."""
    model, tokenizer = fresh(load_model()), load_tokenizer()
    eos = tokenizer.eos_token_id
    ids, mask = prompt_batch(tokenizer, QUESTIONS)
    for max_new in (MAX_NEW_TOKENS, 6):
        tokens, cmask, logp = _sample(sol, model, ids, mask, 1.0, max_new_tokens=max_new)
        is_eos = (tokens == eos).long()
        want = ((is_eos.cumsum(1) - is_eos) == 0).float()          # 1 up to and including the first EOS
        if not torch.equal(cmask, want) or torch.any((logp != 0) & (cmask == 0)):
            row = int((cmask != want).any(1).float().argmax()) if not torch.equal(cmask, want) else 0
            raise Broken(f"max_new_tokens = {max_new}, {QUESTIONS[row]!r}: ids {fmt(tokens[row])} (EOS = {eos}), "
                         f"mask {bits(cmask[row])}; expected mask {bits(want[row])} and logp 0 where it is 0")
        if max_new == MAX_NEW_TOKENS and not (want == 0).any():
            raise Broken(f"no row ended before another: ids {fmt(tokens)}; expected the sums' completions to stop "
                         f"at different lengths (EOS = {eos})")


def sampler_left_padding(sol) -> None:
    """Three more pad columns on the left change nothing: the same tokens and log-probs (same seed)."""
    model, tokenizer = fresh(load_model()), load_tokenizer()
    got = []
    for extra in (0, 3):
        ids, mask = prompt_batch(tokenizer, QUESTIONS, extra_left=extra)
        got.append(_sample(sol, model, ids, mask, 1.0, seed=3))
    (t0, m0, l0), (t1, m1, l1) = got
    for row in range(len(QUESTIONS)):
        n = int(m0[row].sum())
        if not torch.equal(m0[row], m1[row]) or not torch.equal(t0[row, :n], t1[row, :n]) or \
                max_difference(l0[row], l1[row]) > DECODE_ATOL:
            raise Broken(f"{QUESTIONS[row]!r} with 3 more pad columns: ids {fmt(t1[row, :n])}, log π "
                         f"{fmt(l1[row, :4])}…; without: {fmt(t0[row, :n])}, {fmt(l0[row, :4])}… (the attention "
                         f"mask on every forward, 0 on the pads and grown by a 1 each step? the generator?)")


def _why_not_greedy(sol) -> str:
    """The likely cause of a τ = 0.01 draw that is not greedy: the pads attended when sampler_left_padding fails,
    else the logits not divided by τ."""
    try:
        sampler_left_padding(sol)
    except Exception:  # noqa: BLE001 - Broken, or the learner's code raising: either way it fails
        return "(sampler_left_padding fails too: the pads are attended; fix the attention mask first)"
    return "(divide the logits by τ before sampling)"


def sampler_temperature(sol) -> None:
    """τ → 0 draws the greedy completion; τ = 1 draws different completions of one prompt."""
    model, tokenizer = fresh(load_model()), load_tokenizer()
    ids, mask = prompt_batch(tokenizer, QUESTIONS)
    tokens, cmask, _ = _sample(sol, model, ids, mask, 0.01)
    drawn = tokenizer.batch_decode(torch.where(cmask.bool(), tokens, tokenizer.pad_token_id), skip_special_tokens=True)
    greedy = greedy_completions(load_model(), tokenizer, ids, mask)
    for question, d, g in zip(QUESTIONS, drawn, greedy):
        if d != g:
            raise Broken(f"τ = 0.01, {question!r}: drew {d!r}, greedy decoding gives {g!r} {_why_not_greedy(sol)}")
    ids, mask = prompt_batch(tokenizer, [QUESTIONS[1]] * 8)
    tokens, cmask, _ = _sample(sol, model, ids, mask, 1.0)
    if len({tuple(r[m.bool()].tolist()) for r, m in zip(tokens, cmask)}) < 2:
        raise Broken(f"τ = 1, {QUESTIONS[1]!r} 8 times: all 8 completions are the same; sample (torch.multinomial "
                     f"with the generator), do not take the argmax")
    if not torch.equal(_sample(sol, model, ids, mask, 1.0)[0], tokens):
        raise Broken(f"τ = 1, {QUESTIONS[1]!r} 8 times, twice with generators seeded alike: different tokens; draw "
                     f"with the generator you are given (torch.multinomial(..., generator=generator))")


# --- log-probs of given completions -------------------------------------------------------------

def _completions(seed: int = 1) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """(prompt ids, prompt mask, completion ids, completion mask) of QUESTIONS: sampled by ``generate`` at
    τ = 1, rows of different lengths, random junk tokens after each row's EOS."""
    model, tokenizer = load_model(), load_tokenizer()
    ids, mask = prompt_batch(tokenizer, QUESTIONS)
    out, cmask = sampled_completions(model, tokenizer, ids, mask, seed)
    cmask[0, 12:] = 0                                  # a shorter row, cut off before its EOS
    junk = torch.randint(len(tokenizer), out.shape, generator=torch.Generator().manual_seed(seed))
    return ids, mask, torch.where(cmask.bool(), out, junk), cmask


def _logp(sol, ids, mask, tokens, cmask, temperature, what: str) -> Tensor:
    got = sol.completion_logp(fresh(load_model()), ids, mask, tokens, cmask, temperature)
    if not isinstance(got, Tensor) or got.shape != tokens.shape or got.dtype != torch.float32:
        shape = (list(got.shape), got.dtype) if isinstance(got, Tensor) else type(got).__name__
        raise Broken(f"{what}: should be a float32 tensor of shape {list(tokens.shape)}, got {shape}")
    return got.detach()


def completion_logp_matches_forward(sol) -> None:
    """log π_θ(c_t | prompt, c_<t) at τ, from the logits one position before each token; 0 on padding."""
    ids, mask, tokens, cmask = _completions()
    for temperature in (1.0, 0.8):
        want = reference_logp(load_model(), ids, mask, tokens, cmask, temperature)
        got = _logp(sol, ids, mask, tokens, cmask, temperature, "completion_logp")
        if max_difference(got, want) > LOGP_ATOL:
            row = int((got - want).abs().amax(1).argmax())
            untempered = temperature != 1.0 and max_difference(
                got, reference_logp(load_model(), ids, mask, tokens, cmask, 1.0)) <= LOGP_ATOL
            why = "; that is log π at τ = 1: divide the logits by τ before the log-softmax" if untempered else ""
            raise Broken(f"τ = {temperature}, {QUESTIONS[row]!r} (mask {bits(cmask[row])}): got {fmt(got[row][:8])}…, "
                         f"expected {fmt(want[row][:8])}… (max difference {max_difference(got, want):.2g}){why}")


def completion_logp_padding(sol) -> None:
    """More left padding of the prompts, more right padding of the completions: the same log-probs."""
    ids, mask, tokens, cmask = _completions()
    base = _logp(sol, ids, mask, tokens, cmask, 1.0, "completion_logp")
    pad = torch.zeros(len(ids), 3, dtype=torch.long)
    left = _logp(sol, torch.cat([pad, ids], 1), torch.cat([pad, mask], 1), tokens, cmask, 1.0, "3 more on the left")
    if max_difference(left, base) > LOGP_ATOL:
        raise Broken(f"3 more pad columns left of the prompts: {fmt(left[1][:6])}…, without {fmt(base[1][:6])}… "
                     f"(max difference {max_difference(left, base):.2g}; the attention mask, 0 on the pads?)")
    junk = torch.full((len(ids), 4), 7)
    right = _logp(sol, ids, mask, torch.cat([tokens, junk], 1), torch.cat([cmask, torch.zeros(len(ids), 4)], 1),
                  1.0, "4 more on the right")
    if max_difference(right[:, :tokens.shape[1]], base) > LOGP_ATOL or right[:, tokens.shape[1]:].abs().max() > 0:
        raise Broken(f"4 more padding columns right of the completions: {fmt(right[0])}, expected {fmt(base[0])} "
                     f"then 0s")


# --- reward and advantages ------------------------------------------------------------------------

REWARD_CASES = [   # (completion, answer, reward)
    ("7 + 5 = 12\n3 + 4 + 1 = 8\n#### 82", "82", 1.0),
    ("7 + 5 = 12\n3 + 4 + 0 = 7\n#### 72", "82", 0.0),
    ("####82", "82", 1.0),
    ("#### 8", "82", 0.0),
    ("#### 820", "82", 0.0),
    ("the answer is 82", "82", 0.0),
    ("#### 72\n#### 82", "82", 1.0),
    ("#### 82\n#### 72", "82", 0.0),
    ("", "82", 0.0),
    ("#### 109", "109", 1.0),
    ("#### -7", "-7", 1.0),                # an optional minus sign
    ("#### 7", "-7", 0.0),
    ("#### -7", "7", 0.0),
    ("####   82", "82", 1.0),              # any whitespace between
    ("#### 082", "82", 1.0),               # read as int() reads it: 082 is 82
    ("#### +82", "82", 1.0),               # and +82 is 82
]


def reward_on_strings(sol) -> None:
    """1 when the integer after the last '####' (whitespace between, an optional sign, read by int()) is
    int(answer), else 0, on handcrafted completions."""
    completions, answers, want = zip(*REWARD_CASES)
    got = sol.reward(list(completions), list(answers))
    if not isinstance(got, Tensor) or got.shape != (len(want),) or not got.is_floating_point():
        raise Broken(f"should return a float tensor of shape [{len(want)}], got {fmt(got)}")
    for completion, answer, g, w in zip(completions, answers, got.tolist(), want):
        if abs(g - w) > 1e-6:
            raise Broken(f"completion {completion!r}, answer {answer!r}: reward {g:g}, expected {w:g}")


def group_advantages(sol) -> None:
    """Â_i = (r_i − mean of its group) / (std + 1e-4) equals ``ladder.core.group_relative`` within 1e-6."""
    from ladder.core import group_relative

    g = torch.Generator().manual_seed(10)
    cases = [(torch.tensor([1.0, 0, 0, 0, 1, 1, 1, 1]), 4), (torch.tensor([0.0, 1, 1, 0, 1, 0]), 2),
             (torch.randint(2, (24,), generator=g).float(), 8), (torch.rand(12, generator=g), 3)]
    for rewards, G in cases:
        want = group_relative(rewards.clone(), G)
        got = sol.group_advantages(rewards.clone(), G)
        if not isinstance(got, Tensor) or got.shape != want.shape or \
                not torch.allclose(got.float(), want, rtol=1e-6, atol=1e-6):
            raise Broken(f"rewards {fmt(rewards)}, G = {G}: got {fmt(got)}, expected {fmt(want)}"
                         f"{_advantage_misreading(rewards, G, got)}")


def _advantage_misreading(rewards: Tensor, G: int, got) -> str:
    """'; that is …' when ``got`` is a known variant of Â (the population std, the batch's std), else ''."""
    from ladder.core import group_relative

    grouped = rewards.view(-1, G)
    centred = grouped - grouped.mean(1, keepdim=True)
    variants = {"the group's population std (÷ n): the contract wants the sample std (÷ (n − 1)), torch's default":
                (centred / (grouped.std(1, unbiased=False, keepdim=True) + 1e-4)).reshape(-1),
                "the whole batch's std: the contract wants each group's": group_relative(rewards, G, scale="batch")}
    for cause, value in variants.items():
        if isinstance(got, Tensor) and got.shape == value.shape and \
                torch.allclose(got.float(), value, rtol=1e-6, atol=1e-6):
            return f"; that is Â scaled by {cause}"
    return ""
