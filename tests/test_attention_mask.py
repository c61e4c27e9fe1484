"""Two masks: the environment's tokens in a trajectory are attended to, never trained on.

A multi-turn row holds tokens the policy reads but did not choose (a tool's reply): attention 1, loss
mask 0 (``Batch.attention_mask`` ≠ ``Batch.mask``). They must carry no log-prob term, no KL term, no
entropy and no advantage, yet every later token of the model must see them. Checked on a tiny random
Qwen2: the loss and its gradient ignore whatever the batch holds at those positions; one of them changed
changes the log-probs of the model's later tokens (and, with the loss mask as the attention mask, does
not); the shared-prompt and chunked log-prob paths agree with the plain forward; and the loss equals
TRL 1.16's ``GRPOTrainer._compute_loss`` with its ``tool_mask`` on identical tensors.
"""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from ladder import core
from ladder.policies.causal_lm import CausalLMPolicy, lm_batch

G, T = 2, 8
# (row, first environment token, one past the last): a tool's reply inside each of three completions
ENV_SPANS = [(0, 2, 4), (1, 1, 4), (2, 3, 5)]
LENGTHS = [8, 6, 7, 4]  # row 3 is a plain single-turn completion


def trajectory_masks(lengths=LENGTHS, spans=ENV_SPANS):
    """(loss mask, attention mask), each [B, T]: attention 1 on the first ``length`` tokens of a row,
    loss mask 1 there except on the environment's spans."""
    attention = (torch.arange(T)[None] < torch.tensor(lengths)[:, None]).float()
    mask = attention.clone()
    for row, start, stop in spans:
        mask[row, start:stop] = 0.0
    return mask, attention


@pytest.fixture(scope="module")
def lm(tiny_qwen):
    torch.manual_seed(0)
    tokenizer = AutoTokenizer.from_pretrained(tiny_qwen)
    tokenizer.padding_side = "left"
    return AutoModelForCausalLM.from_pretrained(tiny_qwen), tokenizer


@pytest.fixture(scope="module")
def rows(lm):
    """Two prompts (one left-padded) × G completions of random tokens, with environment spans."""
    _, tokenizer = lm
    enc = tokenizer(["Tom has 2 apples and buys 3 more. How many?", "What is 6 + 6?"], return_tensors="pt",
                    padding=True)
    gen = torch.Generator().manual_seed(0)
    completion = torch.randint(5, len(tokenizer), (2 * G, T), generator=gen)
    return {"prompt_ids": enc.input_ids.repeat_interleave(G, 0),
            "prompt_mask": enc.attention_mask.repeat_interleave(G, 0),
            "completion": completion, "pad": tokenizer.pad_token_id, "gen": gen}


def trajectory_batch(rows, completion=None, two_masks=True, **fields) -> core.Batch:
    mask, attention = trajectory_masks()
    return lm_batch(rows["prompt_ids"], rows["prompt_mask"], rows["completion"] if completion is None else completion,
                    mask, rows["pad"], completion_attention_mask=attention if two_masks else None, **fields)


def loss_and_grads(policy, batch, cfg, num_tokens=None):
    policy.zero_grad(set_to_none=True)
    loss, _, _ = core.compute_loss(policy, batch, cfg, num_tokens)
    loss.backward()
    return loss.detach(), {n.removeprefix("model."): p.grad.clone() for n, p in policy.named_parameters()
                           if p.grad is not None}  # named as the model names them (and value_head.*)


def assert_same_loss(a, b):
    torch.testing.assert_close(a[0], b[0], rtol=1e-6, atol=1e-7)
    assert a[1].keys() == b[1].keys() and len(a[1]) > 0
    for name in a[1]:
        torch.testing.assert_close(a[1][name], b[1][name], rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("ratio_level", ["token", "sequence"])
@pytest.mark.parametrize("aggregation", ["token_mean", "seq_mean_token_mean", "sum_over_constant"])
def test_environment_tokens_carry_no_loss(lm, rows, ratio_level, aggregation):
    """Whatever the batch holds at the environment's positions (Â, log π_old, log π_ref, V_old, R), the loss
    and its gradient are the same: no log-prob, ratio, KL, entropy, value or advantage term reaches them."""
    model, _ = lm
    policy = CausalLMPolicy(model, value_head=True, temperature=0.7, entropy_grad=True)
    cfg = core.UpdateConfig(ratio_level=ratio_level, aggregation=aggregation, kl_coef=0.1, entropy_coef=0.01,
                            value_coef=0.5, clip_eps_low=0.2)
    mask, attention = trajectory_masks()
    environment = (attention - mask).bool()
    gen = rows["gen"]
    with torch.no_grad():
        logp = policy.evaluate(trajectory_batch(rows))[0]
    assert (logp[environment] == 0).all(), "log π of a token the policy did not choose is not a term"
    def noise():
        return torch.randn(2 * G, T, generator=gen)

    fields = {"advantages": noise(), "old_logp": logp + 0.3 * noise(), "ref_logp": logp + 0.3 * noise(),
              "values": noise(), "returns": noise()}
    num_tokens = float(2 * G * T)
    clean = loss_and_grads(policy, trajectory_batch(rows, **fields), cfg, num_tokens)

    junk = {k: torch.where(environment, 30.0 * noise(), v) for k, v in fields.items()}
    assert_same_loss(loss_and_grads(policy, trajectory_batch(rows, **junk), cfg, num_tokens), clean)
    # the comparison can fail: the same change at one of the model's own tokens does change the loss
    own = fields | {"advantages": fields["advantages"].clone()}
    own["advantages"][0, 0] += 5.0
    assert not torch.allclose(loss_and_grads(policy, trajectory_batch(rows, **own), cfg, num_tokens)[0], clean[0])


def test_later_tokens_attend_to_the_environment(lm, rows):
    """One environment token changed: the log-probs of the model's later tokens in that row change, its
    earlier ones do not. With the loss mask as the attention mask (one mask for both) nothing changes:
    the model would never see the tool's reply."""
    policy = CausalLMPolicy(lm[0], temperature=0.7)
    changed = rows["completion"].clone()
    row, start, stop = ENV_SPANS[0]
    changed[row, start] = (changed[row, start] + 7) % len(lm[1])
    with torch.no_grad():
        before, after = (policy.evaluate(trajectory_batch(rows, c))[0] for c in (rows["completion"], changed))
        one_mask = [policy.evaluate(trajectory_batch(rows, c, two_masks=False))[0]
                    for c in (rows["completion"], changed)]
    later = (before - after)[row, stop:].abs()
    print(f"|Δ log π| of the model's later tokens: {later.tolist()}; with one mask: "
          f"{(one_mask[0] - one_mask[1]).abs().max().item():.1e}")
    assert later.min() > 1e-4
    torch.testing.assert_close(before[row, :start], after[row, :start])
    torch.testing.assert_close(before[1:], after[1:])
    torch.testing.assert_close(one_mask[0], one_mask[1])


def test_shared_prompt_and_chunked_paths_honour_the_attention_mask(lm, rows):
    """The prompt's cache shared over its group and the log-probs taken chunk by chunk give the plain
    forward's log π_θ and entropy on a multi-turn batch."""
    batch = trajectory_batch(rows)
    with torch.no_grad():
        plain = CausalLMPolicy(lm[0], share_prompts=False, chunk_size=64).evaluate(batch)
        shared = CausalLMPolicy(lm[0], share_prompts=True, chunk_size=3).evaluate(batch)
    torch.testing.assert_close(shared[0], plain[0], rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(shared[1], plain[1], rtol=1e-5, atol=1e-5)


def test_the_policy_reads_the_batch_attention_mask(lm, rows):
    """The model's attention mask comes from ``Batch.attention_mask`` when the batch has one, even where
    ``inputs`` hold the loss mask for the completion (a batch assembled by hand)."""
    batch = trajectory_batch(rows)
    loss_mask_only = torch.cat([rows["prompt_mask"], batch.mask.long()], dim=1)
    by_hand = replace(batch, inputs={**batch.inputs, "attention_mask": loss_mask_only})
    policy = CausalLMPolicy(lm[0])
    with torch.no_grad():
        torch.testing.assert_close(policy.evaluate(by_hand)[0], policy.evaluate(batch)[0])
        unseen = policy.evaluate(replace(by_hand, attention_mask=None))[0]
    assert not torch.allclose(unseen, policy.evaluate(batch)[0])


def test_the_attention_mask_travels_with_the_rows(rows):
    """select, minibatches, replace and as_transitions keep each row's attention mask with the row."""
    row_ids = torch.arange(2 * G, dtype=torch.float32)[:, None].expand(2 * G, T)
    batch = trajectory_batch(rows, advantages=row_ids)
    assert torch.equal(batch.select(torch.tensor([2, 0])).attention_mask, batch.attention_mask[[2, 0]])
    for mb in batch.minibatches(2, torch.Generator().manual_seed(0)):
        picked = mb.advantages[:, 0].long()
        assert torch.equal(mb.attention_mask, batch.attention_mask[picked])
    assert torch.equal(replace(batch, advantages=None).attention_mask, batch.attention_mask)
    control = core.Batch(actions=batch.actions, mask=batch.mask, attention_mask=batch.attention_mask)
    assert torch.equal(control.as_transitions().attention_mask, batch.attention_mask.reshape(-1, 1))
    single = trajectory_batch(rows, two_masks=False)  # one mask: the single-turn batch as before
    assert single.attention_mask is None
    assert torch.equal(single.inputs["attention_mask"][:, -T:].float(), single.mask)


def test_masks_that_cannot_be_are_refused(rows):
    mask, attention = trajectory_masks()
    with pytest.raises(ValueError, match="must be attended"):  # an action the model would not see
        lm_batch(rows["prompt_ids"], rows["prompt_mask"], rows["completion"], attention, rows["pad"],
                 completion_attention_mask=mask)
    with pytest.raises(ValueError, match=r"\[B, T\]"):
        core.Batch(actions=rows["completion"], mask=mask, attention_mask=attention[:, :-1])


@pytest.fixture(scope="module")
def trl_grpo(parity_model_dir, tmp_path_factory):
    """TRL 1.16's ``GRPOTrainer`` on the TRL parity tests' model, set up as they set it up, with their helpers
    (``tests/test_trl_parity_grpo.py``); skipped without trl 1.16."""
    pytest.importorskip("trl", minversion="1.16")
    import test_trl_parity_grpo as parity
    from trl_helpers import GRPOConfig, GRPOTrainer, kept_rng, tokenizer_of

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    args = GRPOConfig(output_dir=str(tmp_path_factory.mktemp("grpo-tools")), report_to=[], use_cpu=True, bf16=False,
                      per_device_train_batch_size=2 * G, num_generations=G,
                      max_completion_length=parity.MAX_COMPLETION_LENGTH, temperature=parity.TEMPERATURE,
                      beta=parity.BETA, epsilon=parity.EPSILON, gradient_checkpointing=False, disable_dropout=True,
                      logging_steps=10**9, save_strategy="no", dataloader_num_workers=0)
    with kept_rng():
        trainer = GRPOTrainer(model=AutoModelForCausalLM.from_pretrained(parity_model_dir),
                              reward_funcs=parity._zero_reward, args=args,
                              train_dataset=parity.Dataset.from_list([{"prompt": "What is 2 + 3?"}] * 4),
                              processing_class=tokenizer_of(parity_model_dir))
    trainer.current_gradient_accumulation_steps = 1  # set by Trainer's training loop only; _compute_loss reads it
    trainer.model.train()
    yield trainer, parity, tokenizer_of(parity_model_dir)
    torch.set_num_threads(threads)
    from accelerate.state import AcceleratorState, GradientState

    AcceleratorState._reset_state(reset_partial_state=True)
    GradientState._reset_state()


@pytest.fixture(scope="module")
def tool_inputs(trl_grpo):
    """What TRL's tool loop hands to ``_compute_loss``: completions holding a tool's reply (completion_mask 1,
    tool_mask 0 there), advantages of both signs, π_old and π_ref perturbations of π_θ, junk on padding."""
    trainer, parity, tokenizer = trl_grpo
    enc = tokenizer(["What is 2 + 3?", "Tom has 4 apples and buys 3 more. How many?"], return_tensors="pt",
                    padding=True)
    gen = torch.Generator().manual_seed(1)
    loss_mask, completion_mask = trajectory_masks()
    completion_ids = torch.randint(5, len(tokenizer), (2 * G, T), generator=gen)
    completion_ids = completion_ids.masked_fill(completion_mask == 0, tokenizer.pad_token_id)
    inputs = {"prompt_ids": enc.input_ids.repeat_interleave(G, 0),
              "prompt_mask": enc.attention_mask.repeat_interleave(G, 0),
              "completion_ids": completion_ids, "completion_mask": completion_mask.long(),
              "tool_mask": torch.where(completion_mask.bool(), loss_mask, 1.0).long(),  # TRL pads it with 1
              "advantages": torch.tensor([0.8, -1.1, 0.6, -0.9]), "num_items_in_batch": loss_mask.sum()}
    with torch.no_grad():
        logp = CausalLMPolicy(trainer.model, temperature=parity.TEMPERATURE).evaluate(ladder_tool_batch(inputs))[0]
    old, ref = (logp + scale * torch.randn(2 * G, T, generator=gen) for scale in (-0.3, 0.5))
    inputs["old_per_token_logps"] = torch.where(loss_mask.bool(), old, -3.0)
    inputs["ref_per_token_logps"] = torch.where(loss_mask.bool(), ref, -7.0)
    return inputs


def ladder_tool_batch(inputs, two_masks=True) -> core.Batch:
    """TRL's inputs as ladder's batch: the loss mask is completion_mask · tool_mask, the attention mask
    completion_mask (with ``two_masks=False``: the loss mask for both, the one-mask mistake)."""
    mask = (inputs["completion_mask"] * inputs["tool_mask"]).float()
    fields = {"advantages": inputs["advantages"][:, None] * mask, "old_logp": inputs.get("old_per_token_logps"),
              "ref_logp": inputs.get("ref_per_token_logps")}
    return lm_batch(inputs["prompt_ids"], inputs["prompt_mask"], inputs["completion_ids"], mask, 0,
                    completion_attention_mask=inputs["completion_mask"] if two_masks else None, **fields)


def _tool_cases():
    from ladder.rungs.grpo.loss_types import LOSS_TYPES

    for loss_type in LOSS_TYPES:
        yield pytest.param(loss_type, "token", True, id=f"{loss_type}-token")
        yield pytest.param(loss_type, "sequence", False, id=f"{loss_type}-sequence")


@pytest.mark.parametrize("loss_type,level,correction", list(_tool_cases()))
def test_loss_with_tool_tokens_matches_trl(trl_grpo, tool_inputs, loss_type, level, correction):
    """``core.compute_loss`` with the two masks = TRL 1.16's ``_compute_loss`` with its ``tool_mask``: loss and
    the gradient of every parameter (tolerance: tests/trl_helpers.py)."""
    trainer, parity, _ = trl_grpo
    options = (loss_type, level, correction, parity.EPSILON, None, parity.BETA)
    parity.configure(trainer, *options)
    policy = CausalLMPolicy(trainer.model, temperature=parity.TEMPERATURE)
    expected = parity.trl_loss(trainer, tool_inputs)
    cfg = parity.ladder_config(trainer, *options)
    got = loss_and_grads(policy, ladder_tool_batch(tool_inputs), cfg, parity.ladder_num_tokens(trainer, tool_inputs))
    if loss_type not in ("vespo", "luspo"):
        parity.assert_same(expected, got)
        return
    # VESPO's weight φ = exp(λ + k·log w − λ·w) turns an error δ in log w (the two forwards' log-probs differ by
    # float32 rounding, summed over a row) into a relative error (k − λ·w)·δ of φ, large where a row's w is;
    # LUSPO sums each row's T token terms where the means divide them by T, and they cancel to a small loss.
    from trl_helpers import close

    close(got[0], expected[0], "loss", rtol=1e-4)
    for name in expected[1]:
        close(got[1][name], expected[1][name], name, rtol=1e-4)


def test_tool_parity_tells_the_masks_apart(trl_grpo, tool_inputs):
    """The parity above can fail: TRL without its tool_mask (the tool's reply trained on) and ladder with one
    mask (the reply unseen) each give another loss."""
    trainer, parity, _ = trl_grpo
    parity.configure(trainer, "grpo", "token", True, parity.EPSILON, None, parity.BETA)
    cfg = parity.ladder_config(trainer, "grpo", "token", True, parity.EPSILON, None, parity.BETA)
    policy = CausalLMPolicy(trainer.model, temperature=parity.TEMPERATURE)
    expected = parity.trl_loss(trainer, tool_inputs)[0]
    without_tool_mask = {k: v for k, v in tool_inputs.items() if k != "tool_mask"}
    trained_on_tools = parity.trl_loss(trainer, without_tool_mask)[0]
    one_mask = loss_and_grads(policy, ladder_tool_batch(tool_inputs, two_masks=False), cfg)[0]
    from trl_helpers import ATOL, RTOL

    bound = 100 * (ATOL + RTOL * expected.abs().item())  # 100 × the parity tolerance
    print(f"loss {expected.item():.6f}; tools trained on {trained_on_tools.item():.6f}; one mask {one_mask.item():.6f}")
    assert (trained_on_tools - expected).abs() > bound and (one_mask - expected).abs() > bound
