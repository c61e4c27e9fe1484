"""ladder's reward model is TRL 1.16's ``RewardTrainer``'s, on its own tokenization and its own model: the ids of
x + y_w and x + y_l (plain text with EOS appended, or messages through the chat template), and the Bradley–Terry
loss of the scores the scalar head gives them — computed from the same weights by ``core.bradley_terry_loss``."""

from __future__ import annotations

import pytest
import torch
from datasets import Dataset
from trl import RewardConfig, RewardTrainer
from trl_helpers import close, one_thread  # noqa: F401 (autouse fixture)

from ladder import core
from ladder.policies import quant, scalar_head
from ladder.tasks import math_problems, review_models

PLAIN = [{"prompt": "The film was", "chosen": " a delight from start to end.", "rejected": " dull."},
         {"prompt": "I watched it twice:", "chosen": " wonderful.", "rejected": " never again, awful acting."},
         {"prompt": "Honestly,", "chosen": " great fun.", "rejected": " a waste of time."}]
CHAT = [{"prompt": [{"role": "user", "content": "What is 2 + 3?"}],
         "chosen": [{"role": "assistant", "content": "2 + 3 = 5. #### 5"}],
         "rejected": [{"role": "assistant", "content": "#### 6"}]},
        {"prompt": [{"role": "user", "content": "What is 10 + 4?"}],
         "chosen": [{"role": "assistant", "content": "#### 14"}],
         "rejected": [{"role": "assistant", "content": "10 + 4 = 15. #### 15"}]}]
MODELS = {"plain": (review_models.tiny_model_path, PLAIN),
          "conversational": (lambda: math_problems.resolve_math_model("@tiny-math"), CHAT)}


@pytest.mark.parametrize("kind", list(MODELS))
def test_the_reward_model_tokenizes_and_scores_as_trls(kind, tmp_path):
    path, pairs = str(MODELS[kind][0]()), MODELS[kind][1]
    tokenizer = quant.load_tokenizer(path)
    torch.manual_seed(0)
    trainer = RewardTrainer(model=path, processing_class=tokenizer, train_dataset=Dataset.from_list(pairs),
                            args=RewardConfig(output_dir=str(tmp_path), use_cpu=True, report_to="none",
                                              max_length=None))
    for row, pair in zip(trainer.train_dataset, pairs):
        assert scalar_head.pair_ids(tokenizer, pair) == (row["chosen_ids"], row["rejected_ids"])
    batch = trainer.data_collator([dict(row) for row in trainer.train_dataset])
    model = trainer.model.eval()
    theirs = RewardTrainer.compute_loss(trainer, model, dict(batch))

    input_ids, attention_mask = scalar_head.pair_batch(tokenizer, pairs)
    assert torch.equal(input_ids, batch["input_ids"]) and torch.equal(attention_mask, batch["attention_mask"])
    chosen, rejected = scalar_head.rewards(model, input_ids, attention_mask).chunk(2)
    ours = core.bradley_terry_loss(chosen, rejected)
    close(ours, theirs, "loss")


def test_the_loaded_reward_model_has_one_score_and_reads_past_the_padding():
    path = str(review_models.tiny_model_path())
    tokenizer = quant.load_tokenizer(path)
    model = scalar_head.load_reward_model(path, tokenizer, torch.device("cpu")).eval()
    assert model.config.num_labels == 1 and model.config.pad_token_id == tokenizer.pad_token_id
    input_ids, attention_mask = scalar_head.pair_batch(tokenizer, PLAIN)
    scores = scalar_head.rewards(model, input_ids, attention_mask)
    alone = [scalar_head.rewards(model, row[mask.bool()][None], mask[mask.bool()][None]).item()
             for row, mask in zip(input_ids, attention_mask)]
    assert scores.shape == (2 * len(PLAIN),)
    close(scores, torch.tensor(alone), "padded vs alone")
