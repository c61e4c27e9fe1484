"""ladder's DPO is TRL 1.16's ``DPOTrainer``'s on its own tokenization and its own models: the prompt and completion
ids of every pair (plain text with EOS appended, or messages through the chat template), and the DPO loss of
π_θ against π_ref on them — computed by ladder's ``dpo_batch``, ``CausalLMPolicy`` and ``core.compute_loss`` with
the DPO objective, from the same weights, in float32 (TRL's default would run π_ref under bfloat16 autocast)."""

from __future__ import annotations

import pytest
import torch
from datasets import Dataset
from test_trl_parity_reward_model import MODELS
from trl import DPOConfig, DPOTrainer
from trl_helpers import close, one_thread  # noqa: F401 (autouse fixture)

from ladder import core
from ladder.policies import quant
from ladder.policies.causal_lm import CausalLMPolicy
from ladder.policies.dpo_batch import completion_ids, dpo_batch
from ladder.rungs.dpo import with_reference


@pytest.mark.parametrize("beta", [0.1, 0.5])
@pytest.mark.parametrize("kind", list(MODELS))
def test_dpo_tokenizes_and_scores_pairs_as_trls(kind, beta, tmp_path):
    path, pairs = str(MODELS[kind][0]()), MODELS[kind][1]
    tokenizer = quant.load_tokenizer(path)
    torch.manual_seed(0)
    trainer = DPOTrainer(model=path, processing_class=tokenizer, train_dataset=Dataset.from_list(pairs),
                         args=DPOConfig(output_dir=str(tmp_path), use_cpu=True, report_to="none", max_length=None,
                                        bf16=False, beta=beta))
    for row, pair in zip(trainer.train_dataset, pairs):
        assert completion_ids(tokenizer, pair) == (row["prompt_ids"], row["chosen_ids"], row["rejected_ids"])
    with torch.no_grad():  # π_θ moved away from π_ref, so that the loss is not log 2 at every β
        for p in trainer.model.parameters():
            p.add_(0.05 * torch.randn_like(p))
    model = trainer.model.eval()
    theirs = DPOTrainer.compute_loss(trainer, model, dict(trainer.data_collator([dict(r) for r in
                                                                                   trainer.train_dataset])))
    policy = CausalLMPolicy(model, ref_model=trainer.ref_model)
    batch = with_reference(policy, dpo_batch(tokenizer, pairs), rows=4)
    ours, stats, _ = core.compute_loss(policy, batch, core.UpdateConfig(objective=core.DPO(beta=beta)))
    close(ours, theirs, "loss")
    logged = trainer._metrics["eval"]  # the model is in eval mode: TRL files its statistics there
    assert stats["rewards/margins"] == pytest.approx(logged["rewards/margins"][-1], abs=1e-4)
