"""What a policy trained on preferences writes: completions sampled on held-out prompts, measured the same way for
DPO as ppo-sentiment measures RM + PPO, so that the two can be set side by side.

    sample_kl          KL(π_θ‖π_ref) of the completions, summed over each: mean_i Σ_t (log π_θ − log π_ref)(y_i,t),
                       an unbiased estimate since the y_i are drawn from π_θ (ppo-sentiment's kl_ref, with k1); log π_θ
                       is what the sampler recorded as it drew them (no second forward), log π_ref one forward
    true_reward_mean   the task's true reward r* of the completions, where it knows one (the tiny task's)
    response_length    completion tokens (mean)

The completions are drawn under a fixed seed (the global generator left as it was), so evaluations differ only by
the policy.
"""

from __future__ import annotations

from pathlib import Path

import torch

from ladder import core
from ladder.policies.causal_lm import CausalLMPolicy, is_peft, lm_batch
from ladder.policies.dpo_batch import padded, prompt_ids
from ladder.tasks import sentiment

SAMPLING_SEED = 54_321


def held_out_prompts(pairs: list[dict], n: int) -> list:
    """The first ``n`` distinct prompts of the held-out pairs (in their order)."""
    prompts, seen = [], set()
    for pair in pairs:
        key = str(pair["prompt"])
        if key not in seen:
            seen.add(key)
            prompts.append(pair["prompt"])
    return prompts[:n]


@torch.no_grad()
def sampled_report(policy: CausalLMPolicy, tokenizer, prompts: list, reward, cfg) -> dict:
    """sample_kl, response_length and (with a true reward) true_reward_mean of one completion per prompt."""
    if not prompts:
        return {}
    ids, mask = padded([prompt_ids(tokenizer, p) for p in prompts], tokenizer.pad_token_id, left=True)
    ids, mask = ids.to(cfg.device), mask.to(cfg.device)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(cfg.seed + SAMPLING_SEED)
        completion, completion_mask, logp = policy.generate(ids, mask, cfg.max_new_tokens, tokenizer.pad_token_id,
                                                            tokenizer.eos_token_id, record_logp=True)
    batch = lm_batch(ids, mask, completion, completion_mask, tokenizer.pad_token_id)
    kl = core.sequence_logp(logp.float() - policy.ref_logp(batch).float(), batch.mask)
    report = {"sample_kl": kl.mean().item(), "response_length": batch.mask.sum(dim=1).mean().item()}
    if reward is not None:
        texts = [tokenizer.decode(c[m.bool()], skip_special_tokens=True) for c, m in zip(completion, completion_mask)]
        report["true_reward_mean"] = reward(prompts, texts).mean().item()
    return report


def save_policy(policy: CausalLMPolicy, tokenizer, target: Path) -> None:
    """The trained model (or LoRA adapter) and its tokenizer in ``target``."""
    with sentiment.quiet_progress():
        policy.model.save_pretrained(target)
    tokenizer.save_pretrained(target)
    if is_peft(policy.model):
        (target / "README.ladder.txt").write_text("LoRA adapter: load the base model, then PeftModel.from_pretrained\n")
