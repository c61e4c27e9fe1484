"""grpo's fifth policy (``ladder.rungs.grpo.staleness``): the rollout of update u is drawn by the weights of
update max(0, u − k), the trainer's weights come back bit for bit, k = 0 changes nothing, and the queue
survives a checkpoint. A tiny Qwen2 on the CPU, with a LoRA adapter and in full fine-tuning."""

import io

import pytest
import torch
from lm_helpers import GSM8K_ROWS, one_thread_then_back, save_tiny_qwen  # noqa: F401 (autouse fixture)

from ladder.policies import quant
from ladder.policies.causal_lm import CausalLMPolicy, lm_batch
from ladder.rungs.grpo.rollout import Rollout
from ladder.rungs.grpo.staleness import STAT, LaggingRollout
from ladder.tasks import arithmetic


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    return save_tiny_qwen(tmp_path_factory.mktemp("tiny") / "model")


def _policy(model_dir, lora):
    torch.manual_seed(0)
    model = quant.load_causal_lm(model_dir, torch.device("cpu"), lora=lora, lora_r=4, lora_alpha=8)
    return CausalLMPolicy(model)


class Sampler:
    """A rollout callable: 2 prompts × 2 completions of 6 tokens with their recorded log-probs; it keeps
    the weights it sampled with and every rollout it drew."""

    def __init__(self, policy, tokenizer):
        self.policy, self.tokenizer = policy, tokenizer
        prompts = [arithmetic.chat_prompt(tokenizer, r["question"], "") for r in GSM8K_ROWS[:2]]
        enc = tokenizer(prompts, return_tensors="pt", padding=True)
        self.ids, self.mask = enc.input_ids.repeat_interleave(2, 0), enc.attention_mask.repeat_interleave(2, 0)
        self.seen, self.drawn = [], []

    def __call__(self, step):
        self.seen.append(trainable(self.policy))
        completion, mask, logp = self.policy.generate(self.ids, self.mask, 6, self.tokenizer.pad_token_id,
                                                      self.tokenizer.eos_token_id, record_logp=True)
        n = len(completion)
        rollout = Rollout(self.ids, self.mask, completion, mask, torch.zeros(n), {}, torch.zeros(n, dtype=bool),
                          [""] * n, [""] * n, sampling_logp=logp)
        self.drawn.append(rollout)
        return rollout, 1, n

    def logp(self, rollout) -> torch.Tensor:
        """log π of the rollout's tokens under the model's weights now (the trainer's forward)."""
        batch = lm_batch(rollout.prompt_ids, rollout.prompt_mask, rollout.completion, rollout.mask,
                         self.tokenizer.pad_token_id)
        with torch.no_grad():
            return self.policy.evaluate(batch)[0].float()


def trainable(policy) -> dict[str, torch.Tensor]:
    return {n: p.detach().clone() for n, p in policy.named_parameters() if p.requires_grad}


def same(a: dict, b: dict) -> bool:
    return a.keys() == b.keys() and all(torch.equal(a[n], b[n]) for n in a)


def load(policy, weights: dict) -> None:
    with torch.no_grad():
        for n, p in policy.named_parameters():
            if n in weights:
                p.copy_(weights[n])


def train(policy, sampler, lagging, updates, lr=0.05):
    """``updates`` updates: a rollout through ``lagging``, then a real Adam step raising its tokens' log π.
    Returns the trainable weights at the start of each update and the rollouts."""
    optimizer = torch.optim.Adam([p for p in policy.parameters() if p.requires_grad], lr=lr)
    starts, rollouts = [], []
    for _ in range(updates):
        starts.append(trainable(policy))
        rollout, _, _ = lagging(None)
        assert same(trainable(policy), starts[-1])  # the trainer's weights are back, bit for bit
        rollouts.append(rollout)
        batch = lm_batch(rollout.prompt_ids, rollout.prompt_mask, rollout.completion, rollout.mask,
                         sampler.tokenizer.pad_token_id)
        loss = -(policy.evaluate(batch)[0] * rollout.mask).sum() / rollout.mask.sum()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    return starts, rollouts


@pytest.mark.parametrize("lora", [True, False])
def test_the_rollout_of_update_u_is_drawn_by_the_weights_of_update_u_minus_k(model_dir, lora):
    policy, k = _policy(model_dir, lora), 2
    sampler = Sampler(policy, quant.load_tokenizer(model_dir))
    lagging = LaggingRollout(sampler, policy, max_staleness=k)
    assert all(("lora_" in n) == lora for n in lagging.params)  # the adapter only, or every weight
    starts, rollouts = train(policy, sampler, lagging, updates=5)
    for u, rollout in enumerate(rollouts):
        lag = min(u, k)
        assert same(sampler.seen[u], starts[u - lag])
        assert torch.equal(rollout.stats[STAT], torch.full((len(rollout),), float(lag)))
        assert torch.equal(rollout.completion, sampler.drawn[u].completion)  # the rollout itself, passed on
    current = trainable(policy)
    for u in (3, 4):  # drawn by θ_{u−2}: the recorded log-probs are its forward's, not θ_u's
        rollout, mask = rollouts[u], rollouts[u].mask.bool()
        load(policy, starts[u - k])
        gap_rollout = (sampler.logp(rollout) - rollout.sampling_logp)[mask].abs()
        load(policy, starts[u])
        gap_now = (sampler.logp(rollout) - rollout.sampling_logp)[mask].abs()
        assert gap_rollout.max() < 1e-4 < gap_now.mean()
    load(policy, current)


def test_a_rollout_that_fails_still_leaves_the_current_weights(model_dir):
    policy = _policy(model_dir, lora=False)
    sampler = Sampler(policy, quant.load_tokenizer(model_dir))
    lagging = LaggingRollout(sampler, policy, max_staleness=1)
    train(policy, sampler, lagging, updates=2)
    now = trainable(policy)

    def failing(step):
        sampler.seen.append(trainable(policy))
        raise RuntimeError("out of memory while sampling")

    lagging.rollout = failing
    with pytest.raises(RuntimeError, match="out of memory"):
        lagging(None)
    assert not same(sampler.seen[-1], now)  # it did sample with other weights
    assert same(trainable(policy), now)


def test_zero_staleness_is_the_rollout_itself(model_dir):
    policy = _policy(model_dir, lora=True)
    sampler = Sampler(policy, quant.load_tokenizer(model_dir))
    lagging = LaggingRollout(sampler, policy, max_staleness=0)
    starts, rollouts = train(policy, sampler, lagging, updates=3)
    assert all(r is d for r, d in zip(rollouts, sampler.drawn))  # nothing added, not even the stat
    assert all(same(seen, start) for seen, start in zip(sampler.seen, starts))
    assert len(lagging.snapshots) == 0 and lagging.state_dict()["snapshots"] == []


def test_the_queue_survives_a_checkpoint(model_dir):
    policy = _policy(model_dir, lora=True)
    sampler = Sampler(policy, quant.load_tokenizer(model_dir))
    lagging = LaggingRollout(sampler, policy, max_staleness=2)
    starts, _ = train(policy, sampler, lagging, updates=4)
    saved = io.BytesIO()
    torch.save(lagging.state_dict(), saved)   # as run.checkpoint saves a part
    saved.seek(0)
    resumed = LaggingRollout(sampler, policy, max_staleness=2)
    resumed.load_state_dict(torch.load(saved, weights_only=False))
    fresh = LaggingRollout(sampler, policy, max_staleness=2)
    for wrapper in (resumed, lagging, fresh):  # update 4: drawn by θ_2 after the resume too
        rollout, _, _ = wrapper(None)
    assert same(sampler.seen[-3], starts[2]) and same(sampler.seen[-2], starts[2])
    assert not same(sampler.seen[-1], starts[2])  # without the queue the lag starts again at 0
    assert same(trainable(policy), sampler.seen[-1])


def test_a_queue_of_another_model_does_not_load(model_dir):
    lora, full = _policy(model_dir, lora=True), _policy(model_dir, lora=False)
    sampler = Sampler(lora, quant.load_tokenizer(model_dir))
    lagging = LaggingRollout(sampler, lora, max_staleness=1)
    lagging(None)
    with pytest.raises(KeyError):
        LaggingRollout(sampler, full, max_staleness=1).load_state_dict(lagging.state_dict())
    with pytest.raises(ValueError):
        LaggingRollout(sampler, lora, max_staleness=-1)
