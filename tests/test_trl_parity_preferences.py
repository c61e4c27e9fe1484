"""ladder's preference losses are TRL 1.16's, on the very same tensors: ``core.bradley_terry_loss`` is
``RewardTrainer.compute_loss`` (with and without a margin per pair), ``core.dpo_loss`` is ``DPOTrainer._compute_loss``
with ``loss_type="sigmoid"`` — the loss, its gradient with respect to the sequence log-probs and the rewards,
and the implicit rewards and statistics TRL logs.

Both trainers' methods run as they stand on a stand-in ``self`` holding only what they read, and a stand-in model
that returns the test's tensors as its outputs: the reward model's scores [chosen; rejected] (``logits``), and
for DPO the per-token log-probs TRL's fused head returns (0 where the label is masked), with π_ref's sequence
log-probs precomputed in the inputs (``precompute_ref_logps``).
"""

from __future__ import annotations

from collections import defaultdict
from types import SimpleNamespace

import pytest
import torch
from trl.trainer.dpo_trainer import DPOTrainer
from trl.trainer.reward_trainer import RewardTrainer
from trl_helpers import close, one_thread  # noqa: F401 (autouse fixture)

from ladder import core

B, T = 6, 9


class Accelerator:
    device = torch.device("cpu")

    @staticmethod
    def gather(tensor):
        return tensor

    gather_for_metrics = gather


def stand_in(**fields) -> SimpleNamespace:
    """A trainer's ``self`` with what its loss reads: the mode, one process, its metrics and token count."""
    return SimpleNamespace(model=SimpleNamespace(training=True), accelerator=Accelerator(),
                           _metrics=defaultdict(lambda: defaultdict(list)), _total_train_tokens=0, _tp_size=1, **fields)


@pytest.mark.parametrize("with_margin", [False, True], ids=["no margin", "margin"])
def test_the_bradley_terry_loss_is_the_reward_trainers(with_margin):
    generator = torch.Generator().manual_seed(0)
    scores = (2 * torch.randn(2 * B, 1, generator=generator)).requires_grad_()
    margin = torch.rand(B, generator=generator) if with_margin else None
    inputs = {"input_ids": torch.zeros(2 * B, T, dtype=torch.long), "attention_mask": torch.ones(2 * B, T)}
    if with_margin:
        inputs["margin"] = margin
    trainer = stand_in(args=SimpleNamespace(center_rewards_coefficient=None))
    theirs = RewardTrainer.compute_loss(trainer, lambda **_: SimpleNamespace(logits=scores), inputs)
    (their_grad,) = torch.autograd.grad(theirs, scores)

    chosen, rejected = scores.squeeze(-1).chunk(2)
    ours = core.bradley_terry_loss(chosen, rejected, margin)
    stats = core.pair_statistics(chosen, rejected)
    (our_grad,) = torch.autograd.grad(ours, scores)
    close(ours, theirs, "loss")
    close(our_grad, their_grad, "gradient")
    assert stats["accuracy"].item() == pytest.approx(trainer._metrics["train"]["accuracy"][0])
    assert stats["margin"].item() == pytest.approx(trainer._metrics["train"]["margin"][0], abs=1e-6)


def dpo_tensors(generator):
    """Completions of different lengths (right-padded), their tokens' log-probs under π_θ (with grad) and π_ref's
    sequence log-probs: chosen rows first, then rejected, as TRL batches them."""
    lengths = torch.randint(2, T, (2 * B,), generator=generator)
    completion_mask = (torch.arange(T)[None] < lengths[:, None] + 1).float()
    completion_mask[:, 0] = 0  # the prompt's last token: the completion starts after it
    token_logp = (-3 * torch.rand(2 * B, T - 1, generator=generator) * completion_mask[:, 1:]).requires_grad_()
    ref_logp = core.sequence_logp(token_logp.detach(), completion_mask[:, 1:]) + torch.randn(2 * B, generator=generator)
    return completion_mask, token_logp, ref_logp


@pytest.mark.parametrize("beta", [0.1, 0.5])
def test_the_dpo_loss_is_the_dpo_trainers_sigmoid_loss(beta):
    completion_mask, token_logp, ref_logp = dpo_tensors(torch.Generator().manual_seed(1))
    ref_chosen, ref_rejected = ref_logp.chunk(2)
    # TRL's fused head gives 0, with no gradient, where the label is masked
    zeros = torch.zeros(2 * B, T - 1)  # the statistics TRL also logs (entropy, logits, top-1): not compared
    outputs = SimpleNamespace(log_probs=token_logp * completion_mask[:, 1:], entropy=zeros, mean_logits=zeros,
                              is_top1=zeros.bool())
    inputs = {"input_ids": torch.zeros(2 * B, T, dtype=torch.long), "attention_mask": torch.ones(2 * B, T),
              "completion_mask": completion_mask, "ref_chosen_logps": ref_chosen, "ref_rejected_logps": ref_rejected}
    trainer = stand_in(aux_loss_enabled=False, ld_alpha=None, precompute_ref_logps=True,
                       f_divergence_type="reverse_kl", loss_types=["sigmoid"], loss_weights=[1.0], beta=beta,
                       use_weighting=False, label_smoothing=0.0)
    theirs = DPOTrainer._compute_loss(trainer, lambda **_: outputs, inputs, return_outputs=False)
    (their_grad,) = torch.autograd.grad(theirs, token_logp)

    logp = core.sequence_logp(token_logp, completion_mask[:, 1:])
    chosen, rejected = logp.chunk(2)
    ours = core.dpo_loss(chosen, rejected, ref_chosen, ref_rejected, beta)
    stats = core.DPO(beta=beta).statistics(core.PolicyInputs(
        logp=torch.stack([chosen, rejected], 1).reshape(-1, 1), log_ratio=None, ratio=None, token_log_ratio=None,
        advantages=None, mask=torch.ones(2 * len(chosen), 1), sampler_weight=None,
        ref_logp=torch.stack([ref_chosen, ref_rejected], 1).reshape(-1, 1)), None)
    (our_grad,) = torch.autograd.grad(ours, token_logp)
    close(ours, theirs, "loss")
    close(our_grad, their_grad, "gradient")
    logged = trainer._metrics["train"]
    for name in ("rewards/chosen", "rewards/rejected", "rewards/accuracies", "rewards/margins", "logps/chosen",
                 "logps/rejected"):  # TRL's names
        assert stats[name].item() == pytest.approx(logged[name][0], abs=1e-5), name
    close(core.implicit_reward(chosen, ref_chosen, beta), beta * (chosen - ref_chosen), "implicit reward")
