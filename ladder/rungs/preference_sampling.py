"""What a policy trained on preferences writes: completions sampled on held-out prompts, measured the same way for
DPO as ppo-sentiment measures RM + PPO, so that the two can be set side by side.

    sample_kl          KL(π_θ‖π_ref) of the completions, summed over each: mean_i Σ_t (log π_θ − log π_ref)(y_i,t),
                       an unbiased estimate since the y_i are drawn from π_θ (ppo-sentiment's kl_ref, with k1); log π_θ
                       is what the sampler recorded as it drew them (no second forward), log π_ref one forward
    true_reward_mean   the task's true reward r* of the completions, where it knows one (the tiny task's)
    response_length    completion tokens (mean)

The completions are drawn under a fixed seed (the global generator left as it was), so evaluations differ only by
the policy. The prompts are the held-out pairs' first distinct ones (``eval_prompts``) — the training pairs' where
none are held out (``--eval-pairs 0``: the KL and the true reward then measured on prompts π_θ was trained on, though
never on its own samples) — each checked with ``--max-new-tokens`` to fit the model's context before any weight
loads (``check_dpo``).
"""

from __future__ import annotations

from pathlib import Path

import torch

from ladder import core, hub
from ladder.policies.causal_lm import CausalLMPolicy, is_peft, lm_batch
from ladder.policies.dpo_batch import check_pairs, context_limit, padded, prompt_ids
from ladder.runtime.errors import UsageError
from ladder.tasks import preference_pairs, tiny_preferences

SAMPLING_SEED = 54_321


def prompt_rows(pairs: list[dict], n: int) -> list[int]:
    """The indices of the pairs that bring the first ``n`` distinct prompts (in their order)."""
    rows, seen = [], set()
    for i, pair in enumerate(pairs):
        key = str(pair["prompt"])
        if key not in seen and len(rows) < n:
            seen.add(key)
            rows.append(i)
    return rows


def held_out_prompts(pairs: list[dict], n: int) -> list:
    """The first ``n`` distinct prompts of the held-out pairs (in their order)."""
    return [pairs[i]["prompt"] for i in prompt_rows(pairs, n)]


def eval_prompts(train: list[dict], held_out: list[dict], n: int) -> list:
    """The prompts sampled on: the held-out pairs' first ``n`` distinct ones; with none held out (--eval-pairs 0),
    the training pairs'."""
    return held_out_prompts(held_out or train, n)


def check_dpo(tokenizer, config, train: list[tuple[str, dict]], held_out: list[tuple[str, dict]], cfg) -> None:
    """dpo's pairs (each with its row) before any weight loads: ``dpo_batch.check_pairs`` (a prompt in each), the
    prompts sampled on within the context with ``--max-new-tokens``, and a true reward only for plain text."""
    check_pairs(tokenizer, config, train + held_out, cfg.dataset, cfg.model, need_prompt=True)
    tiny_preferences.check_plain_text(cfg.true_reward, cfg.dataset,
                                      preference_pairs.conversational([p for _, p in train + held_out]))
    limit = context_limit(config)
    if not cfg.num_eval_prompts or limit is None:
        return
    source = held_out or train
    for i in prompt_rows([p for _, p in source], cfg.num_eval_prompts):
        where, pair = source[i]
        length = len(prompt_ids(tokenizer, pair["prompt"]))
        if length + cfg.max_new_tokens > limit:
            raise UsageError(f"--dataset {cfg.dataset}: {where}: a prompt of {length} tokens plus --max-new-tokens "
                             f"{cfg.max_new_tokens} exceeds the model's context of {limit} tokens (--model "
                             f"{cfg.model}); lower --max-new-tokens or use shorter prompts")


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
        report.update(tiny_preferences.anatomy_means(texts))
    return report


def save_policy(policy: CausalLMPolicy, tokenizer, target: Path) -> None:
    """The trained model (or LoRA adapter) and its tokenizer in ``target``."""
    with hub.quiet_progress():
        policy.model.save_pretrained(target)
    tokenizer.save_pretrained(target)
    if is_peft(policy.model):
        (target / "README.ladder.txt").write_text("LoRA adapter: load the base model, then PeftModel.from_pretrained\n")
