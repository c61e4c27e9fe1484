"""One batch of RLHF-PPO's experience: a completion sampled per prompt (``rollout``), scored by the reward model
(``score``), log π_old, V_old and log π_ref of its tokens (``old_and_ref``), and the KL-shaped rewards, GAE
advantages and value targets ``core.update`` trains on (``ppo_targets``)."""

from __future__ import annotations

import torch

from ladder import core
from ladder.policies.causal_lm import CausalLMPolicy, lm_batch
from ladder.rungs.ppo_sentiment.options import Config


def rollout(policy: CausalLMPolicy, tokenizer, prompts: list[str], cfg: Config):
    """Sample one completion per prompt; return (batch without advantages, completion texts, full texts)."""
    enc = tokenizer(prompts, padding=True, return_tensors="pt").to(cfg.device)
    completion, mask = policy.generate(enc["input_ids"], enc["attention_mask"], cfg.generation.max_new_tokens,
                                       pad_token_id=tokenizer.pad_token_id, eos_token_id=tokenizer.eos_token_id,
                                       top_k=cfg.top_k, top_p=cfg.generation.top_p)
    batch = lm_batch(enc["input_ids"], enc["attention_mask"], completion, mask, tokenizer.pad_token_id)
    ids, attention = batch.inputs["input_ids"], batch.inputs["attention_mask"].bool()
    completions = [tokenizer.decode(c[m.bool()], skip_special_tokens=True) for c, m in zip(completion, mask)]
    texts = [tokenizer.decode(row[keep], skip_special_tokens=True) for row, keep in zip(ids, attention)]
    return batch, completions, texts


def score(reward_fn, texts: list[str], rows: int) -> torch.Tensor:
    return torch.cat([reward_fn(texts[i:i + rows]) for i in range(0, len(texts), rows)]).float()


@torch.no_grad()
def old_and_ref(policy: CausalLMPolicy, batch: core.Batch, rows_per_forward: int):
    """log π_old, V_old and log π_ref of the completion tokens, ``rows_per_forward`` rows at a time."""
    old, values, ref = [], [], []
    for start in range(0, len(batch), rows_per_forward):
        sub = batch.select(torch.arange(start, min(start + rows_per_forward, len(batch))))
        logp, v = policy.old_logp_and_values(sub)
        old.append(logp.float())
        values.append(v.float())
        ref.append(policy.ref_logp(sub).float())
    return torch.cat(old), torch.cat(values), torch.cat(ref)


def ppo_targets(scores: torch.Tensor, old_logp: torch.Tensor, ref_logp: torch.Tensor, values: torch.Tensor,
                mask: torch.Tensor, kl_coef: float, cfg: Config) -> dict[str, torch.Tensor]:
    """Per-token rewards, advantages and value targets of one batch of completions, all ``[B, T]``.

        KL_t  = k(log π_old(c_t), log π_ref(c_t))               k1 = log π_old − log π_ref (default)
        r_t   = −β · KL_t + [t = last] · score                   core.kl_penalized_rewards
        Â, R  = GAE(r, V_old; γ, λ), the episode ending at the last completion token  core.masked_gae
        Â     ← whiten(Â) over the completion tokens

    Everything is zero on padding.
    """
    rewards, kl = core.kl_penalized_rewards(scores, old_logp, ref_logp, mask, kl_coef, cfg.kl_estimator)
    advantages, returns = core.masked_gae(rewards, values, mask, cfg.gamma, cfg.gae_lambda)
    return {"rewards": rewards, "kl": kl, "values": values * mask, "advantages": core.whiten(advantages, mask),
            "returns": returns}
