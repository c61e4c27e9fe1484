"""ladder.core computes TRL's GRPO loss: the same tensors through TRL 1.16's ``GRPOTrainer`` and through ladder.

``GRPOTrainer._compute_loss`` (the trainer built offline on a tiny saved Qwen2) against
``core.compute_loss`` with a ``CausalLMPolicy`` on the very same model, for every loss type ×
ratio level × KL correction × clipping variant both implement: equal loss and equal gradient of
every parameter. Mapping of TRL's options onto ``core.UpdateConfig`` (loss types: the GRPO rung's own
``LOSS_TYPES`` and ``loss_normaliser``, so the rung's mapping is what is checked):

    loss_type grpo / bnpo                      objective "clipped", aggregation seq_mean_token_mean / token_mean
    loss_type dr_grpo / dapo                   objective "clipped", aggregation sum_over_constant, num_tokens
                                               rows · max_completion_length / num_items_in_batch / P · accum / spg
    loss_type cispo                            objective "cispo", otherwise as dapo, cispo_max_weight = ε_high
    epsilon, epsilon_high, delta               clip_eps_low, clip_eps_high, delta
    beta, use_bias_correction_kl               kl_coef (kl_estimator "k3"), kl_correction
    importance_sampling_level                  ratio_level

One deliberate difference is pinned rather than matched: with a sequence-level ratio and the KL
correction, TRL weights each token's KL by the row's sequence ratio, ladder by the token's own
π_θ/π_old (TRL issue #6586).

The RLOO advantages: tests/test_trl_parity_rloo.py; the tolerance of ``close``: tests/trl_helpers.py.
"""

from __future__ import annotations

import pytest
import torch
from trl_helpers import (
    ATOL,
    EPSILON,
    MAX_COMPLETION_LENGTH,
    TEMPERATURE,
    AutoModelForCausalLM,
    Dataset,
    GRPOConfig,
    GRPOTrainer,
    close,
    grads,
    kept_rng,
    one_thread,  # noqa: F401 (autouse fixture)
    tokenizer_of,
)

from ladder import core
from ladder.policies.causal_lm import CausalLMPolicy, lm_batch
from ladder.rungs.grpo import LOSS_TYPES, loss_normaliser
from ladder.rungs.grpo.loss_types import objective_from_trl

BETA = 0.04
G = 2

# (epsilon_high, delta); for cispo epsilon_high is the cap on the detached weight and delta is unused
CLIPS = {"eps_high=eps": (EPSILON, None), "eps_high=0.28": (0.28, None), "delta=1.5": (0.28, 1.5)}
CISPO_CLIPS = {"eps_high=eps": (EPSILON, None), "eps_high=0.28": (0.28, None), "cap=1.3": (1.3, None)}


def _zero_reward(completions, **_):
    return [0.0] * len(completions)


@pytest.fixture(scope="module")
def grpo_trainer(parity_model_dir, tmp_path_factory):
    args = GRPOConfig(output_dir=str(tmp_path_factory.mktemp("grpo-out")), report_to=[], use_cpu=True, bf16=False,
                      per_device_train_batch_size=2 * G, num_generations=G, max_completion_length=MAX_COMPLETION_LENGTH,
                      temperature=TEMPERATURE, beta=BETA, epsilon=EPSILON, gradient_checkpointing=False,
                      disable_dropout=True, logging_steps=10**9, save_strategy="no", dataloader_num_workers=0)
    with kept_rng():
        trainer = GRPOTrainer(model=AutoModelForCausalLM.from_pretrained(parity_model_dir), reward_funcs=_zero_reward,
                              args=args, train_dataset=Dataset.from_list([{"prompt": "What is 2 + 3?"}] * 4),
                              processing_class=tokenizer_of(parity_model_dir))
    assert not hasattr(trainer, "current_gradient_accumulation_steps")
    # What the DAPO / CISPO normaliser and the other losses' 1/accumulation assume: one process, no accumulation.
    assert trainer.accelerator.num_processes == 1
    assert trainer.args.steps_per_generation == 1 and trainer.args.gradient_accumulation_steps == 1
    # Set by Trainer's training loop only (absent before train(), asserted above); _compute_loss divides by it.
    trainer.current_gradient_accumulation_steps = 1
    trainer.model.train()  # mode "train", as in training (the normalisers differ in "eval")
    return trainer


@pytest.fixture(scope="module")
def policy(grpo_trainer):
    """ladder's policy on the trainer's own model object (TRL's fused forward is not used by ladder)."""
    return CausalLMPolicy(grpo_trainer.model, temperature=TEMPERATURE)


@pytest.fixture(scope="module")
def grpo_inputs(grpo_trainer, policy, parity_model_dir):
    """What ``_generate_and_score_completions`` hands to ``_compute_loss``, made by hand: two prompts
    (one left-padded) × G = 2 completions (right-padded, one ending at EOS), advantages of both signs,
    π_old = π_θ perturbed per row and per token (so ratios ≠ 1, clipped at both ends, within-row
    variation), π_ref another perturbation."""
    tokenizer = tokenizer_of(parity_model_dir)
    enc = tokenizer(["What is 2 + 3?", "Tom has 4 apples and buys 3 more. How many?"], return_tensors="pt",
                    padding=True)
    prompt_ids = enc["input_ids"].repeat_interleave(G, dim=0)
    prompt_mask = enc["attention_mask"].repeat_interleave(G, dim=0)
    assert (prompt_mask == 0).any(), "one prompt should be left-padded"
    gen = torch.Generator().manual_seed(1)
    B, T = len(prompt_ids), 6
    completion_ids = torch.randint(5, len(tokenizer), (B, T), generator=gen)
    lengths = torch.tensor([6, 4, 5, 3])
    completion_mask = (torch.arange(T)[None] < lengths[:, None]).long()
    completion_ids[1, 3] = tokenizer.eos_token_id
    completion_ids = completion_ids.masked_fill(completion_mask == 0, tokenizer.pad_token_id)

    with torch.no_grad():
        batch = lm_batch(prompt_ids, prompt_mask, completion_ids, completion_mask, tokenizer.pad_token_id)
        logp = policy.evaluate(batch)[0].float()
    # token noise of zero mean over each row's real tokens: the sequence ratios are exactly exp(row_shift)
    noise = 0.3 * torch.randn(B, T, generator=gen) * completion_mask
    noise = noise - noise.sum(1, keepdim=True) / completion_mask.sum(1, keepdim=True)
    row_shift = torch.tensor([0.22, 0.5, -0.1, -0.35])[:, None]  # sequence ratios 1.25, 1.65, 0.90, 0.70
    old = logp - row_shift - noise
    ref = logp + 0.5 * torch.randn(B, T, generator=gen)
    # padding carries junk in both, as it may in TRL; every consumer must mask it
    old = torch.where(completion_mask.bool(), old, -3.0)
    ref = torch.where(completion_mask.bool(), ref, -7.0)
    return {"prompt_ids": prompt_ids, "prompt_mask": prompt_mask, "completion_ids": completion_ids,
            "completion_mask": completion_mask, "advantages": torch.tensor([0.8, -1.1, 0.6, -0.9]),
            "old_per_token_logps": old, "ref_per_token_logps": ref,
            "num_items_in_batch": completion_mask.sum()}


def configure(trainer, loss_type, level, correction, eps_high, delta, beta):
    """Set TRL's options on the module's trainer the way ``GRPOTrainer.__init__`` copies them from args."""
    trainer.args.loss_type = trainer.loss_type = loss_type
    trainer.args.importance_sampling_level = trainer.importance_sampling_level = level
    trainer.args.use_bias_correction_kl = correction
    trainer.args.epsilon = trainer.epsilon_low = EPSILON
    trainer.args.epsilon_high = trainer.epsilon_high = eps_high
    trainer.args.delta = delta
    trainer.args.beta = trainer.beta = beta


def ladder_config(trainer, loss_type, level, correction, eps_high, delta, beta) -> core.UpdateConfig:
    objective = objective_from_trl(loss_type, {"epsilon_high": eps_high, "delta": delta})
    return core.UpdateConfig(objective=objective, aggregation=LOSS_TYPES[loss_type].aggregation, ratio_level=level,
                             clip_eps_low=EPSILON, clip_eps_high=eps_high, kl_coef=beta, kl_estimator="k3",
                             kl_correction=correction, normalize_advantages=False)


def ladder_num_tokens(trainer, inputs) -> float | None:
    """The rung's normaliser, given TRL's active tokens for one micro-batch in training (DAPO / CISPO's)."""
    active = (inputs["num_items_in_batch"].clamp(min=1.0).item() / trainer.accelerator.num_processes
              * trainer.current_gradient_accumulation_steps / trainer.args.steps_per_generation)
    return loss_normaliser(trainer.loss_type, len(inputs["advantages"]), trainer.max_completion_length, active)


def trl_loss(trainer, inputs):
    model = trainer.model
    model.zero_grad(set_to_none=True)
    loss = trainer._compute_loss(model, inputs)
    loss.backward()
    return loss.detach(), grads(model)


def ladder_loss(policy, inputs, cfg, num_tokens):
    mask = inputs["completion_mask"]
    batch = lm_batch(inputs["prompt_ids"], inputs["prompt_mask"], inputs["completion_ids"], mask,
                     policy.model.config.pad_token_id, advantages=inputs["advantages"][:, None] * mask,
                     old_logp=inputs["old_per_token_logps"], ref_logp=inputs["ref_per_token_logps"])
    policy.model.zero_grad(set_to_none=True)
    loss, stats, _ = core.compute_loss(policy, batch, cfg, num_tokens)
    loss.backward()
    return loss.detach(), grads(policy.model), stats


def assert_same(trl_result, ladder_result):
    (l_trl, g_trl), (l_ladder, g_ladder) = trl_result, ladder_result[:2]
    close(l_ladder, l_trl, "loss")
    assert g_trl.keys() == g_ladder.keys() and len(g_trl) > 0
    for name in g_trl:
        close(g_ladder[name], g_trl[name], name)


def _cases():
    for loss_type in LOSS_TYPES:
        clips = CISPO_CLIPS if loss_type == "cispo" else CLIPS
        for level in ("token", "sequence"):
            for clip, (eps_high, delta) in clips.items():
                for correction in (True, False):
                    if not (level == "sequence" and correction):  # the deliberate difference, pinned below
                        yield pytest.param(loss_type, level, correction, eps_high, delta, BETA,
                                           id=f"{loss_type}-{level}-kl_corr={correction}-{clip}")
                yield pytest.param(loss_type, level, False, eps_high, delta, 0.0,
                                   id=f"{loss_type}-{level}-beta=0-{clip}")


@pytest.mark.parametrize("loss_type,level,correction,eps_high,delta,beta", list(_cases()))
def test_grpo_loss_and_gradients_match_trl(grpo_trainer, policy, grpo_inputs, loss_type, level, correction,
                                           eps_high, delta, beta):
    options = (loss_type, level, correction, eps_high, delta, beta)
    configure(grpo_trainer, *options)
    expected = trl_loss(grpo_trainer, grpo_inputs)
    got = ladder_loss(policy, grpo_inputs, ladder_config(grpo_trainer, *options),
                      ladder_num_tokens(grpo_trainer, grpo_inputs))
    assert_same(expected, got)


def _ladder_ratios(policy, inputs):
    mask = inputs["completion_mask"].float()
    with torch.no_grad():
        batch = lm_batch(inputs["prompt_ids"], inputs["prompt_mask"], inputs["completion_ids"], mask,
                         policy.model.config.pad_token_id)
        logp = policy.evaluate(batch)[0].float()
    token = torch.exp(logp - inputs["old_per_token_logps"])
    sequence = torch.exp(core.sequence_log_ratio(logp, inputs["old_per_token_logps"], mask)).squeeze(1)
    return token, sequence, mask.bool()


def test_inputs_exercise_every_clip(grpo_trainer, policy, grpo_inputs):
    """The parity above means something only if the clip bounds, ε_high and δ are all active."""
    token, sequence, real = _ladder_ratios(policy, grpo_inputs)
    adv = grpo_inputs["advantages"]
    pos, neg = (adv > 0)[:, None].expand_as(real) & real, (adv < 0)[:, None].expand_as(real) & real
    assert (token[pos] > 1.28).any() and (token[neg] < 0.8).any() and (token[neg] > 1.5).any()
    assert ((token[real] > 0.8) & (token[real] < 1.2)).any()
    assert ((sequence > 1.2) & (sequence < 1.28) & (adv > 0)).any()          # only ε_high = 0.2 clips it
    assert ((sequence > 1.5) & (adv < 0)).any() and ((sequence < 0.8) & (adv < 0)).any()
    assert ((sequence > 0.8) & (sequence < 1.2)).any()
    for level in ("token", "sequence"):  # each variant changes TRL's loss
        losses = {}
        for name, (eps_high, delta) in CLIPS.items():
            configure(grpo_trainer, "grpo", level, False, eps_high, delta, 0.0)
            losses[name] = trl_loss(grpo_trainer, grpo_inputs)[0].item()
        assert len({round(v, 6) for v in losses.values()}) == 3, (level, losses)


def _trl_formula(trainer, inputs, logp, kl_weight):
    """``GRPOTrainer._compute_loss`` at importance_sampling_level="sequence", written out, with the KL
    correction weighted by the sequence ratio (``kl_weight="sequence"``, TRL) or by each token's own
    π_θ/π_old (``"token"``, ladder)."""
    mask = inputs["completion_mask"]
    adv = inputs["advantages"][:, None]
    log_ratio = logp - inputs["old_per_token_logps"]
    coef_1 = torch.exp(((log_ratio * mask).sum(-1) / mask.sum(-1).clamp(min=1.0)).unsqueeze(-1))
    diff = inputs["ref_per_token_logps"] - logp
    kl = torch.exp(diff) - diff - 1
    kl = kl * (coef_1 if kl_weight == "sequence" else torch.exp(log_ratio))
    if trainer.loss_type == "cispo":
        per_token = -torch.clamp(coef_1, max=trainer.epsilon_high).detach() * adv * logp
    else:
        coef_2 = torch.clamp(coef_1, 1 - trainer.epsilon_low, 1 + trainer.epsilon_high)
        if trainer.args.delta is not None:
            coef_1 = torch.clamp(coef_1, max=trainer.args.delta)
        per_token = -torch.min(coef_1 * adv, coef_2 * adv)
    per_token = (per_token + trainer.beta * kl) * mask
    if trainer.loss_type == "grpo":
        return (per_token.sum(-1) / mask.sum(-1).clamp(min=1.0)).mean()
    if trainer.loss_type == "bnpo":
        return per_token.sum() / mask.sum().clamp(min=1.0)
    if trainer.loss_type == "dr_grpo":
        return per_token.sum() / (per_token.size(0) * trainer.max_completion_length)
    return per_token.sum() / ladder_num_tokens(trainer, inputs)


def _sequence_kl_cases():
    for loss_type in ("grpo", "bnpo", "dr_grpo", "dapo", "cispo"):  # the losses _trl_formula writes out
        for clip, (eps_high, delta) in (CISPO_CLIPS if loss_type == "cispo" else CLIPS).items():
            yield pytest.param(loss_type, eps_high, delta, id=f"{loss_type}-{clip}")


@pytest.mark.parametrize("loss_type,eps_high,delta", list(_sequence_kl_cases()))
def test_sequence_ratio_kl_correction_is_per_token_in_ladder(grpo_trainer, policy, grpo_inputs, loss_type, eps_high,
                                                             delta):
    """The one deliberate difference (TRL issue #6586): at importance_sampling_level="sequence" with
    use_bias_correction_kl, TRL weights token t's KL by the row's sequence ratio s_i, ladder by the
    token's own π_θ/π_old(a_t) (the importance weight that makes the KL estimate unbiased for a token
    sampled by π_old). Pinned three ways: TRL's formula written out reproduces TRL; the same formula
    with the per-token weight is exactly ladder (policy term included); and the two differ."""
    options = (loss_type, "sequence", True, eps_high, delta, BETA)
    configure(grpo_trainer, *options)
    trl_result = trl_loss(grpo_trainer, grpo_inputs)
    got = ladder_loss(policy, grpo_inputs, ladder_config(grpo_trainer, *options),
                      ladder_num_tokens(grpo_trainer, grpo_inputs))

    model = grpo_trainer.model
    input_ids = torch.cat([grpo_inputs["prompt_ids"], grpo_inputs["completion_ids"]], dim=1)
    attention_mask = torch.cat([grpo_inputs["prompt_mask"], grpo_inputs["completion_mask"]], dim=1)
    by_hand = {}
    for kl_weight in ("sequence", "token"):
        model.zero_grad(set_to_none=True)
        logp = grpo_trainer._get_per_token_logps_and_entropies(model, input_ids, attention_mask,
                                                               grpo_inputs["completion_ids"].size(1))[0]
        loss = _trl_formula(grpo_trainer, grpo_inputs, logp, kl_weight)
        loss.backward()
        by_hand[kl_weight] = (loss.detach(), grads(model))
    assert_same(trl_result, by_hand["sequence"])  # the formula is TRL's
    assert_same(by_hand["token"], got)            # ladder = TRL's formula with the per-token KL weight

    # ... and that is a real difference here: the token ratios vary within each row
    token, sequence, real = _ladder_ratios(policy, grpo_inputs)
    assert all(token[i][real[i]].std() > 0.1 for i in range(len(token)))
    assert abs(got[0].item() - trl_result[0].item()) > 20 * ATOL  # β · (difference of two small KLs): ~7e-5 here
    with pytest.raises(AssertionError):
        assert_same(trl_result, got)

    # the policy term alone (β = 0) is TRL's
    configure(grpo_trainer, loss_type, "sequence", True, eps_high, delta, 0.0)
    close(torch.tensor(got[2]["loss_pg"]), trl_loss(grpo_trainer, grpo_inputs)[0], "policy term")

