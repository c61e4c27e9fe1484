"""Exercise 17 — the whole loss of one minibatch, assembled from your pieces (``core.compute_loss``).

Goes with notebook 2, section “From REINFORCE to PPO's surrogate”.

Every rung's loss is this one function (notebook 2 derives it; notebooks 3–6 vary its parts):

    logp, H, V = policy.evaluate(mb)                 log π_θ [b, T] (float it), entropy, values (or None)
    old_logp   = mb.old_logp, or logp.detach() when it is None (π_old = π_θ: nothing recorded yet)
    mask       = mb.mask.float()                 1 on the real tokens, 0 on padding [b, T]
    Â          = mb.advantages, whitened over the real tokens if cfg.normalize_advantages (ex04),
                 then 0 on padding (select with torch.where)
    log ρ      = logp − old_logp on real tokens, 0 on padding       ratio_level "token"
                 sequence_log_ratio(logp, old_logp, mask) [b, 1], broadcast to every   "sequence" (ex12)
                 position of its row, padding included
                 anything else: raise ValueError
    ρ          = exp(log ρ)
    w          = corrected_weights(old_logp, mb.sampling_logp, mask, cfg.sampler)     (ladder.core; exercise 21
                 writes its weights): π_old/π_sampler, truncated or masked, or None (no sampler's log-probs)
    objective  = objective_spec(cfg.objective)     (ladder.core) the objective's spec: cfg.objective itself
                 (Clipped(delta=1.5), CISPO(max_weight=5.0), …), or for a registered name ("clipped", "cispo",
                 "soft_gate", "gamma_weighted", "reinforce", "bradley_terry", "dpo") that spec with its
                 defaults; an unknown name raises ValueError. grpo's --loss-type picks one: grpo, bnpo, dr_grpo,
                 dapo and luspo the Clipped spec, cispo CISPO, sapo SoftGate, vespo GammaWeighted; the
                 reward-model rung BradleyTerry, the dpo rung DPO(beta)
    L_t        = objective.term(PolicyInputs(logp, log ρ, ρ, log ρ_token, Â, mask, w, mb.ref_logp), cfg)
                 (ladder.core's PolicyInputs dataclass, fields in this order; the spec's term calls
                 clipped_surrogate (ex05), cispo_loss, soft_gated_surrogate (ex24), gamma_weight, pg_loss
                 (ex02), bradley_terry_loss (ex26) or dpo_loss (ex27) with its own parameters); log ρ_token is
                 the token level's log ρ whatever cfg.ratio_level; DPO reads log π_ref (mb.ref_logp)
    L_t, s     = sampler_correction(L_t, logp, old_logp, mb.sampling_logp, Â, mask, cfg.sampler, w,
                                    weigh=not objective.folds_sampler_weight)
                 (ladder.core): when a sampler π_sampler ≠ π_old drew the tokens, L_t × w × the off-policy
                 mask, per token, before the aggregation and on the policy term alone — GammaWeighted folds w
                 into its own weight (folds_sampler_weight), so it is not multiplied again; s, its statistics
                 ({} and L_t unchanged when mb.sampling_logp and cfg.sampler.off_policy_mask are both None);
                 a spec with statistics of its own — only BradleyTerry and DPO have a ``statistics`` method
                 (check with hasattr) — adds objective.statistics(the same PolicyInputs, cfg) to s (their
                 accuracy and margin); DPO's β is its spec's field (DPO(beta=0.1)), not cfg.kl_coef
    kept       = mask, or high_entropy_mask(H, mask, q) if H is not None and q = cfg.entropy_quantile < 1
                 (ladder.core: the top-q share of the real tokens by entropy); then L_t ← L_t · kept and
                 s["entropy/kept_frac"] = Σ kept / max(Σ mask, 1)
    L_pg       = agg(L_t)
    L          = L_pg
               + c_v · agg(value_loss(V, V_old, R, cfg.value_clip))   if V and mb.returns are not None (ex06);
                                                                       V_old = mb.values, or V.detach() if None
               + c_H · masked_mean(entropy_bonus(H), kept)            if H is not None (ladder.core;
                                                                       add only if c_H ≠ 0): a token mean
                                                                       whatever cfg.aggregation, masked_mean(x,
                                                                       m) = Σ m·x / Σ m (ladder.core)
               + β · agg(kl_estimate(logp, ref_logp, k, old_logp if cfg.kl_correction else None))
                                                                       if mb.ref_logp is not None (ex08;
                                                                       add only if β ≠ 0)
    agg(x)     = aggregate(x, mask, cfg.aggregation, num_tokens)     (ex11)
    the config's names: ε_low = cfg.clip_eps_low, ε_high = cfg.clip_eps_high (None → ε_low, in the
    statistics below), c_v = cfg.value_coef, c_H = cfg.entropy_coef, β = cfg.kl_coef, k = cfg.kl_estimator;
    the objective's own parameters (the two-sided cap δ, ε_max, τ_pos/τ_neg, the gamma weight's k and λ)
    are its spec's fields

    policy      anything with evaluate(batch) -> (logp, entropy or None, values or None), each [b, T]
    mb          a Batch (one minibatch): actions, mask, advantages, old_logp, ref_logp, sampling_logp, values,
                returns
    cfg         a ladder.core.UpdateConfig (mu, clip_eps_low, clip_eps_high, objective, …)
    num_tokens  the constant of aggregation "sum_over_constant" for this minibatch (else None)
    result      (loss, stats, tensors):
                loss    the scalar L, with its graph
                stats   ladder.core.stats.minibatch_stats(terms, ρ, Â, mask, logp, old_logp, ε_low, ε_high)
                        (ε_high resolved: a number, never None), where
                        terms = {"loss_pg": L_pg, **s, "value_loss": …, "entropy": masked_mean(H, mask) detached,
                        "kl_ref": agg(KL), "loss": L} — each term present when it was computed, whatever its
                        coefficient
                tensors {"ratio": ρ.detach(), "advantages": Â, "mask": mask, "values": V.detach() or None,
                         "returns": mb.returns, "entropy": H.detach() or None, "kept": kept} (exercise 18
                         hands H and kept to an adaptive c_H)

Import your earlier exercises from the same directory (``from ex04_whiten import whiten``; the grader
and ``--use-exercises`` give you your own files), or ladder.core's until yours pass. The policy terms
come from the specs: they call ladder.core's functions, which ``--use-exercises`` replaces with your
exercises 2, 5, 24, 26 and 27. Worked example: before any optimiser step π_θ = π_old, so every ratio is 1 and
nothing is clipped:

    >>> from ladder.core import UpdateConfig
    >>> from ladder.graders.cases_loop import small_policy_and_batch
    >>> policy, mb = small_policy_and_batch(seed=1, old=False)       # an MLP actor-critic, 4 rows × 5 steps [B, T]
    >>> loss, stats, tensors = compute_loss(policy, mb, UpdateConfig())
    >>> stats["ratio_mean"], stats["clip_frac_low"] + stats["clip_frac_high"], loss.requires_grad
    (1.0, 0.0, True)

Mirrors ``ladder.core.compute_loss``. Grade it: ``pytest exercises/`` (on a small policy: the loss,
its gradient and the statistics); once it passes, every rung's ``--use-exercises`` trains with it.
"""

from __future__ import annotations

import torch  # noqa: F401 - you will need it
from torch import Tensor

from ladder.core import Batch, PolicyInputs, UpdateConfig, objective_spec  # noqa: F401 - you will need them


def compute_loss(policy, mb: Batch, cfg: UpdateConfig, num_tokens: float | None = None
                 ) -> tuple[Tensor, dict, dict]:
    """(L, its statistics, the tensors behind them) of one minibatch."""
    raise NotImplementedError
