"""DPO's π_θ beside π_ref: loaded with its tokenizer and the training and held-out pairs (``load``), a batch with
log π_ref of every completion token (``with_reference``), and the implicit reward r̂ = β·log π_θ/π_ref of pairs
(``implicit_rewards``)."""

from __future__ import annotations

import copy
from dataclasses import replace

import torch

from ladder import core, hub
from ladder.policies import quant
from ladder.policies.causal_lm import CausalLMPolicy, is_peft
from ladder.policies.dpo_batch import dpo_batch
from ladder.rungs import preference_sampling
from ladder.rungs.dpo.options import Config
from ladder.tasks import preference_pairs, review_models


def load(cfg: Config):
    """(tokenizer, π_θ's policy with π_ref, training pairs, held-out pairs); a loading problem is one line, and so is
    a pair the model cannot take (``preference_sampling.check_dpo``: checked before any weights load)."""
    path = hub.resolve(review_models.resolve_review_model(cfg.model), "--model")
    tokenizer, config = quant.load_tokenizer(path), quant.load_config(path)
    train_pairs, held_out = preference_pairs.train_and_held_out(
        cfg.dataset, cfg.eval_pairs, cfg.max_pairs or None,
        check=lambda train, test: preference_sampling.check_dpo(tokenizer, config, train, test, cfg))
    model = quant.load_causal_lm(path, torch.device(cfg.device), lora=cfg.lora, lora_r=cfg.lora_r,
                                 lora_alpha=cfg.lora_alpha, dtype=torch.float32)
    ref_model = None if is_peft(model) else copy.deepcopy(model)
    policy = CausalLMPolicy(model, chunk_size=cfg.chunk_size, ref_model=ref_model)
    return tokenizer, policy, train_pairs, held_out


@torch.no_grad()
def with_reference(policy: CausalLMPolicy, batch: core.Batch, rows: int) -> core.Batch:
    """The batch with log π_ref of every completion token, ``rows`` rows per forward."""
    ref = [policy.ref_logp(batch.select(torch.arange(start, min(start + rows, len(batch))))).float()
           for start in range(0, len(batch), rows)]
    return replace(batch, ref_logp=torch.cat(ref))


@torch.no_grad()
def implicit_rewards(policy: CausalLMPolicy, tokenizer, pairs: list[dict], cfg: Config):
    """``[P]`` r̂(x, y_w) and ``[P]`` r̂(x, y_l) = β·Σ_t (log π_θ − log π_ref) of ``pairs``."""
    chosen, rejected = [], []
    for start in range(0, len(pairs), cfg.forward_batch_size):
        batch = with_reference(policy, dpo_batch(tokenizer, pairs[start:start + cfg.forward_batch_size], cfg.device),
                               2 * cfg.forward_batch_size)
        logp = core.sequence_logp(policy.evaluate(batch)[0].float(), batch.mask)
        r = core.implicit_reward(logp, core.sequence_logp(batch.ref_logp, batch.mask), cfg.beta).cpu()
        chosen.append(r[0::2])
        rejected.append(r[1::2])
    return torch.cat(chosen), torch.cat(rejected)
