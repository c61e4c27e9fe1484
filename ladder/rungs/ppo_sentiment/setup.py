"""What an RLHF-PPO run loads and saves: the policy's model and tokenizer (``load_model``), with the reward function
and the prompt pool (``load_parts``); π_θ with its value head and π_ref (``build_policy``); the trained policy written
to OUT/policy (``save_policy``)."""

from __future__ import annotations

import copy
from pathlib import Path

import torch

from ladder import hub
from ladder.policies import quant
from ladder.policies.causal_lm import CausalLMPolicy, is_peft
from ladder.rungs.lm_options import gradient_checkpointing
from ladder.rungs.ppo_sentiment.options import Config
from ladder.tasks import review_models, review_prompts, sentiment_rewards


def load_model(cfg: Config):
    """(policy model, tokenizer), loaded as every causal LM of the ladder is (``quant.load_causal_lm``):
    full precision, LoRA adapters, or QLoRA's 4-bit base with LoRA adapters."""
    path = hub.resolve(review_models.resolve_review_model(cfg.model), "--model")
    model = quant.load_causal_lm(path, torch.device(cfg.device), qlora=cfg.adapter.qlora, lora=cfg.adapter.lora,
                                 lora_r=cfg.adapter.r, lora_alpha=cfg.adapter.alpha,
                                 gradient_checkpointing=gradient_checkpointing(cfg),
                                 dtype=None if cfg.adapter.qlora else torch.float32)
    return model, quant.load_tokenizer(path)


def load_parts(cfg: Config):
    """(model, tokenizer, reward function, prompt pool); any loading problem is one UsageError line."""
    model, tokenizer = load_model(cfg)
    reward_fn = sentiment_rewards.load_reward(cfg.reward_model, cfg.device, cfg.forward_batch_size)
    prompts = review_prompts.load_prompts(cfg.dataset, tokenizer, cfg.min_prompt_tokens, cfg.max_prompt_tokens,
                                     cfg.max_prompts, cfg.seed)
    return model, tokenizer, reward_fn, prompts


def build_policy(cfg: Config, model) -> CausalLMPolicy:
    """π_θ with a zero-initialised value head; π_ref the disabled adapter (LoRA, QLoRA) or a frozen copy."""
    ref_model = None if is_peft(model) else copy.deepcopy(model)
    policy = CausalLMPolicy(model, value_head=True, temperature=cfg.generation.temperature,
                            chunk_size=cfg.efficiency.chunk_size, ref_model=ref_model,
                            sampler_loop=cfg.efficiency.sampler_loop)
    if cfg.ref_sync_every:
        policy.make_reference_refreshable()  # LoRA: a second, frozen adapter; full: the copy above
    return policy


def save_policy(policy: CausalLMPolicy, tokenizer, out: Path) -> None:
    """The trained model (or LoRA adapter) and tokenizer in ``out/policy``, the value head beside them."""
    target = Path(out) / "policy"
    with hub.quiet_progress():
        policy.model.save_pretrained(target)
    tokenizer.save_pretrained(target)
    torch.save(policy.value_head.state_dict(), target / "value_head.pt")
    if is_peft(policy.model):
        (target / "README.ladder.txt").write_text("LoRA adapter: load the base model, then PeftModel.from_pretrained\n")
