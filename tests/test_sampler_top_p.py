"""π_sampler under top-k / top-p: the log-prob recorded for a drawn token is that of the distribution it was drawn
from, p = softmax(z / τ) cut to the kept set N (the nucleus) and renormalised,

    log q(a) = log p(a) − log Z,    Z = Σ_{b∈N} p(b),

so the weight π_old / π_sampler of a token is the mass its step kept, Z_t ≤ 1 (1 without a cut).

Checked on a categorical whose answer is known by hand (``RecordLogp``: the kept set exactly HF's warpers' in
generate's order, log q = log(p_a / Z)), end to end through ``CausalLMPolicy.generate`` and the agent's own sampler
(``agent_rollout.multi_turn``) on tiny models, against Z_t computed from the trainer's full forward.
"""

from __future__ import annotations

import math

import pytest
import torch
from agent_helpers import random_model, tiny_tokenizer
from lm_helpers import GSM8K_ROWS
from transformers import TemperatureLogitsWarper, TopKLogitsWarper, TopPLogitsWarper

from ladder.policies.causal_lm import CausalLMPolicy, lm_batch, model_attention_mask, position_ids_for
from ladder.policies.low_precision import RecordLogp
from ladder.rungs import agent
from ladder.rungs.agent.rollout import multi_turn
from ladder.tasks import agent_envs, arithmetic, tiny_lm, tool_calls

TAU = 0.7

# (p, top_k, top_p, the tokens kept, by hand). No case sits on a tie: a cumulative mass equal to top_p is
# rounding's to decide.
CATEGORICALS = [
    ([0.15, 0.5, 0.05, 0.3], 0, 0.75, [1, 3]),        # 0.5 + 0.3 = 0.8 reaches 0.75; 0.5 alone does not
    ([0.15, 0.5, 0.05, 0.3], 0, 0.9, [0, 1, 3]),      # 0.8 < 0.9 ≤ 0.95
    ([0.15, 0.5, 0.05, 0.3], 2, 1.0, [1, 3]),         # the two largest
    ([0.2, 0.1, 0.4, 0.3], 3, 0.75, [2, 3]),          # top-k first: (0.4, 0.3, 0.2) / 0.9, whose top 0.75 is
]                                                     # 0.4 and 0.3; top-p first would have kept 0.2 too


def recorded_log_q(p: list[float], top_k: int, top_p: float) -> tuple[torch.Tensor, torch.Tensor]:
    """(what ``RecordLogp`` records for each token a of the vocabulary [V], the scores it saw): one row per token,
    the logits z = τ · log p (so z / τ = log p), the row's token a drawn."""
    V = len(p)
    scores = (TAU * torch.tensor(p).log()).expand(V, V).contiguous()
    rec = RecordLogp(TAU, top_k, top_p)
    returned = rec(torch.zeros(V, 1, dtype=torch.long), scores.clone())
    assert torch.equal(returned, scores)  # generate samples from the scores as they were
    return rec.finish(torch.arange(V)[:, None])[:, 0], scores


@pytest.mark.parametrize("p, top_k, top_p, kept", CATEGORICALS)
def test_a_kept_token_records_log_p_over_the_kept_mass(p, top_k, top_p, kept):
    got, scores = recorded_log_q(p, top_k, top_p)
    Z = sum(p[a] for a in kept)
    for a in range(len(p)):
        if a in kept:
            assert got[a].item() == pytest.approx(math.log(p[a] / Z), abs=1e-6)
        else:
            assert got[a].item() == -math.inf
    # HF's own warpers, in generate's order, drop exactly the tokens outside
    warped = TemperatureLogitsWarper(TAU)(None, scores[:1])
    if top_k:
        warped = TopKLogitsWarper(top_k, min_tokens_to_keep=1)(None, warped)
    if top_p < 1.0:
        warped = TopPLogitsWarper(top_p, min_tokens_to_keep=1)(None, warped)
    assert warped[0].isfinite().nonzero().flatten().tolist() == kept


def test_without_a_cut_the_record_is_log_p():
    p = [0.15, 0.5, 0.05, 0.3]
    got, _ = recorded_log_q(p, 0, 1.0)
    torch.testing.assert_close(got, torch.tensor(p).log(), atol=1e-6, rtol=0)


def kept_mass(log_p: torch.Tensor, top_k: int, top_p: float) -> torch.Tensor:
    """Z = the mass of p that top-k then top-p keep, from the whole distribution ``[..., V]``: the k most likely
    tokens, renormalised; of those, each one whose more likely tokens hold less than top_p of the mass."""
    p = log_p.exp().sort(dim=-1, descending=True).values
    if top_k:
        p = p[..., :top_k]
    q = p / p.sum(-1, keepdim=True)
    before = q.cumsum(-1) - q
    return torch.where(before < top_p, p, 0.0).sum(-1)


def full_log_p(policy: CausalLMPolicy, batch) -> torch.Tensor:
    """``[B, T, V]`` log p = log_softmax(z / τ) at each completion position, from one forward of the trainer."""
    attention = model_attention_mask(batch)
    T = batch.actions.shape[1]
    with torch.no_grad():
        logits = policy.model(input_ids=batch.inputs["input_ids"], attention_mask=attention,
                              position_ids=position_ids_for(attention)).logits
    return torch.log_softmax(logits[:, -T - 1:-1].float() / policy.temperature, dim=-1)


def sharpened(model, gain: float):
    """The model with its final norm's gain × ``gain``: logits ``gain`` times larger, a distribution far from
    uniform (a random model's is nearly flat), so that the kept mass Z_t differs from step to step."""
    with torch.no_grad():
        model.model.norm.weight.mul_(gain)
    return model.eval()


@pytest.fixture(scope="module")
def arithmetic_lm():
    corpus = [r["question"] + " " + r["answer"] for r in GSM8K_ROWS] * 5
    tokenizer = arithmetic.chat_tokenizer(corpus, vocab_size=300)
    torch.manual_seed(0)
    model = tiny_lm.build_model("qwen2", tokenizer, hidden=64, layers=2, heads=2, max_positions=256)
    policy = CausalLMPolicy(sharpened(model, 4.0), temperature=TAU)
    texts = [arithmetic.chat_prompt(tokenizer, r["question"], "Answer.") for r in GSM8K_ROWS[:2]]
    enc = tokenizer(texts, return_tensors="pt", padding=True)
    return policy, tokenizer, enc.input_ids.repeat_interleave(8, 0), enc.attention_mask.repeat_interleave(8, 0)


@pytest.mark.parametrize("top_k, top_p", [(0, 1.0), (0, 0.8), (12, 0.9)])
def test_generate_records_the_truncated_distribution(arithmetic_lm, top_k, top_p):
    """Through ``generate``: on every real token log q ≥ log π_old (q ≥ p on N), and the weight π_old / q is the
    kept mass Z_t of the trainer's own distribution at that step (1 without a cut)."""
    policy, tokenizer, ids, mask = arithmetic_lm
    torch.manual_seed(0)
    completion, cmask, log_q = policy.generate(ids, mask, 24, tokenizer.pad_token_id, tokenizer.eos_token_id,
                                               top_k=top_k, top_p=top_p, record_logp=True)
    torch.manual_seed(0)
    plain, _ = policy.generate(ids, mask, 24, tokenizer.pad_token_id, tokenizer.eos_token_id, top_k=top_k,
                               top_p=top_p)
    assert torch.equal(plain, completion)  # recording changes nothing that is sampled
    batch = lm_batch(ids, mask, completion, cmask, tokenizer.pad_token_id)
    with torch.no_grad():
        old_logp = policy.evaluate(batch)[0].float()
    real = cmask.bool()
    assert real.sum() > 100 and log_q[real].isfinite().all() and (log_q[~real] == 0).all()
    assert (log_q[real] >= old_logp[real] - 1e-5).all()
    weight = (old_logp - log_q)[real].exp()
    Z = kept_mass(full_log_p(policy, batch), top_k, top_p)[real]
    torch.testing.assert_close(weight, Z, atol=1e-4, rtol=0)
    if (top_k, top_p) == (0, 1.0):
        torch.testing.assert_close(weight, torch.ones_like(weight), atol=1e-5, rtol=0)
    else:
        assert weight.mean() < 0.95 and Z.std() > 1e-3  # mass cut off, by a different amount at each step


def test_the_agent_sampler_records_the_truncated_distribution():
    """``multi_turn``'s own sampler at top-p 0.8: each of the model's tokens is in the nucleus of the trainer's full
    forward (prompt + trajectory, the two masks) and recorded as log p − log Z_t."""
    tok = tiny_tokenizer()
    policy = CausalLMPolicy(sharpened(random_model(tok), 10.0), temperature=TAU)
    tools = tool_calls.tool_schemas(agent_envs.Calculator())
    texts = [agent.chat_prompt(tok, {"question": q}, agent_envs.CALCULATOR_PROMPT, tools, None)
             for q in ["What is 12 * 34?", "What is 56 * 78? Use the tool."]]
    enc = tok(texts, return_tensors="pt", padding=True)
    prompt_ids, prompt_mask = enc.input_ids.repeat_interleave(3, 0), enc.attention_mask.repeat_interleave(3, 0)
    envs = [agent_envs.Calculator() for _ in range(len(prompt_ids))]
    t = multi_turn(policy, tok, envs, prompt_ids, prompt_mask, 24, 2, do_sample=True, top_p=0.8,
                   generator=torch.Generator().manual_seed(0))
    batch = lm_batch(prompt_ids, prompt_mask, t.completion, t.mask, tok.pad_token_id,
                     completion_attention_mask=t.attention_mask)
    log_p = full_log_p(policy, batch)
    drawn = t.mask.bool()
    token_log_p = log_p.gather(2, t.completion[:, :, None]).squeeze(2)[drawn]
    Z = kept_mass(log_p, 0, 0.8)[drawn]
    assert drawn.sum() > 20 and Z.std() > 1e-3
    torch.testing.assert_close(t.sampling_logp[drawn], token_log_p - Z.log(), atol=1e-4, rtol=0)
