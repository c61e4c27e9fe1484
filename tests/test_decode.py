"""ladder's sampling loop (``policies.decode``): the log q it records is that of the distribution each token was
drawn from, recomputed here from one forward of the whole sequence; greedy takes that forward's argmax; rows
leave the batch at their EOS; and the model's own generation config (a repetition penalty) does not enter."""

from __future__ import annotations

import pytest
import torch
from lm_helpers import GSM8K_ROWS, save_tiny_qwen
from transformers import AutoModelForCausalLM, AutoTokenizer

from ladder.policies.causal_lm import CausalLMPolicy, lm_batch, position_ids_for
from ladder.policies.decode import Sampling, decode
from ladder.policies.low_precision import sampled_logp, sampling_warpers
from ladder.tasks import arithmetic


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    path = save_tiny_qwen(tmp_path_factory.mktemp("tiny"))
    tokenizer = AutoTokenizer.from_pretrained(path)
    tokenizer.padding_side = "left"
    model = AutoModelForCausalLM.from_pretrained(path).eval()
    model.generation_config.repetition_penalty = 1.5  # generate would apply it; q_t must not
    prompts = [arithmetic.chat_prompt(tokenizer, r["question"], "Solve it.") for r in GSM8K_ROWS[:3]]
    enc = tokenizer(prompts, return_tensors="pt", padding=True)
    ids, mask = enc.input_ids.repeat_interleave(3, 0), enc.attention_mask.repeat_interleave(3, 0)
    return model, tokenizer, ids, mask


def teacher_forced_log_q(model, ids, mask, completion, eos, sampling: Sampling) -> torch.Tensor:
    """[B, T, V] log q_t of every token at every step, from one uncached forward over prompt + completion."""
    full_ids = torch.cat([ids, completion], dim=1)
    full_mask = torch.cat([mask, torch.ones_like(completion)], dim=1)
    with torch.no_grad():
        logits = model(input_ids=full_ids, attention_mask=full_mask, position_ids=position_ids_for(full_mask)).logits
    T = completion.shape[1]
    scores = logits[:, ids.shape[1] - 1:ids.shape[1] - 1 + T].float().clone()
    scores[:, :sampling.min_new_tokens, eos] = -torch.inf
    warpers = sampling_warpers(sampling.temperature, sampling.top_k, sampling.top_p)
    return torch.stack([sampled_logp(None, scores[:, t], warpers) for t in range(T)], dim=1)


@pytest.mark.parametrize("sampling", [Sampling(), Sampling(temperature=0.7, top_p=0.9),
                                      Sampling(temperature=1.3, top_k=20, min_new_tokens=6)])
@pytest.mark.parametrize("share", [True, False])
def test_the_recorded_log_q_is_the_distribution_drawn_from(tiny, sampling, share):
    model, tokenizer, ids, mask = tiny
    torch.manual_seed(0)
    completion, logq = decode(model, ids, mask, 12, tokenizer.pad_token_id, tokenizer.eos_token_id, sampling, share)
    real = torch.ones_like(completion, dtype=torch.bool)
    for b, row in enumerate(completion.tolist()):
        if tokenizer.eos_token_id in row:
            real[b, row.index(tokenizer.eos_token_id) + 1:] = False
    expected = teacher_forced_log_q(model, ids, mask, torch.where(real, completion, tokenizer.pad_token_id),
                                    tokenizer.eos_token_id, sampling)
    want = expected.gather(2, completion[..., None]).squeeze(2)
    assert torch.isfinite(want[real]).all()                                  # every token drawn was in q's support
    torch.testing.assert_close(logq[real], want[real], atol=2e-4, rtol=0)
    assert (logq[~real] == 0).all() and (completion[~real] == tokenizer.pad_token_id).all()
    if sampling.min_new_tokens:
        assert (completion[:, :sampling.min_new_tokens] != tokenizer.eos_token_id).all()


def test_greedy_takes_the_argmax(tiny):
    model, tokenizer, ids, mask = tiny
    sampling = Sampling(do_sample=False)
    completion, _ = decode(model, ids, mask, 10, tokenizer.pad_token_id, None, sampling)
    logq = teacher_forced_log_q(model, ids, mask, completion, tokenizer.eos_token_id, sampling)
    chosen = logq.gather(2, completion[..., None]).squeeze(2)
    assert (chosen >= logq.max(-1).values - 1e-4).all()


def test_finished_rows_leave_the_batch(tiny):
    """A row whose every draw is EOS ends at once; the forwards after it run on the other rows only."""
    model, tokenizer, ids, mask = tiny
    rows_seen = []
    hook = model.get_decoder().register_forward_pre_hook(lambda m, a, k: rows_seen.append(len(k["input_ids"])),
                                                         with_kwargs=True)
    eos = tokenizer.eos_token_id
    bias = torch.zeros(model.config.vocab_size)
    first = {"n": 0}

    def eos_for_row_0(module, inputs, output):  # row 0's logits make EOS certain, at the first step only
        if first["n"] == 0:
            output = output.clone()
            output[0, -1] = bias.scatter(0, torch.tensor([eos]), 1e4)
        first["n"] += 1
        return output
    handle = model.get_output_embeddings().register_forward_hook(eos_for_row_0)
    try:
        completion, logq = decode(model, ids, mask, 6, tokenizer.pad_token_id, eos, Sampling(), share_prompts=False)
    finally:
        hook.remove()
        handle.remove()
    assert completion[0, 0] == eos and (completion[0, 1:] == tokenizer.pad_token_id).all()
    assert rows_seen[0] == len(ids) and rows_seen[1] <= len(ids) - 1


def test_the_policy_samples_with_either_loop(tiny):
    """``CausalLMPolicy.generate`` with ``sampler_loop`` ladder or generate: the same masks, log q recorded alike."""
    model, tokenizer, ids, mask = tiny
    for loop in ("ladder", "generate"):
        policy = CausalLMPolicy(model, temperature=0.8, sampler_loop=loop)
        model.generation_config.repetition_penalty = 1.0
        torch.manual_seed(0)
        completion, cmask, logq = policy.generate(ids, mask, 8, tokenizer.pad_token_id, tokenizer.eos_token_id,
                                                  top_p=0.95, record_logp=True)
        batch = lm_batch(ids, mask, completion, cmask, tokenizer.pad_token_id)
        with torch.no_grad():
            old = policy.evaluate(batch)[0]
        assert ((logq - old)[cmask.bool()] >= -2e-4).all()   # log q ≥ log p: q renormalises the kept mass
    with pytest.raises(ValueError, match="sampler_loop"):
        CausalLMPolicy(model, sampler_loop="vllm")
