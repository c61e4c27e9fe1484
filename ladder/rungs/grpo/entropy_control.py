"""``--adaptive-entropy``: Skywork-OR1's controller of the entropy bonus's c_H, a spec with its flags and TRL rows.

    AdaptiveEntropy(target, coef_min, coef_max, delta)     after every optimiser step c_H moves by +Δ while the
                                                           entropy of the kept tokens is at or below the target,
                                                           −Δ above it, within [c_min, c_max] (core.AdaptiveEntropyCoef)

``Config.entropy_control`` holds it (``Config.entropy`` the bonus it moves: ``EntropyBonus``, --entropy-coef and
--top-entropy-quantile): picked by ``--adaptive-entropy``, none without it (its four flags are then
refused), built from ``--entropy-target``, ``--entropy-coef-min``, ``--entropy-coef-max``, ``--entropy-coef-delta``.
"""

from __future__ import annotations

from dataclasses import dataclass

from ladder import core
from ladder.domains import MAX_SCALE, coefficient, non_negative, probability
from ladder.runtime.distributed import Processes
from ladder.specs import FixedSpec, Param, switched
from ladder.trl_rows import SAME, TRL


@dataclass(frozen=True)
class AdaptiveEntropy:
    """The controller's settings; the starting c_H is --entropy-coef."""

    target: float = 0.2        # H_target, nats per token over the tokens the policy term keeps
    coef_min: float = 0.0      # c_min
    coef_max: float = 1.0      # c_max
    delta: float = 0.005       # Δ

    def controller(self, coef: float, procs: Processes) -> core.AdaptiveEntropyCoef:
        """The controller, starting at c_H = ``coef``, reading the entropy of every process."""
        return core.AdaptiveEntropyCoef(coef, self.target, self.coef_min, self.coef_max, self.delta,
                                        reduce=lambda x: procs.gather(x[None]).sum(0))


@dataclass(frozen=True)
class EntropyBonus:
    """The entropy bonus −c_H·mean H over the tokens the policy term keeps: the share q of them with the highest
    entropy (1: all), and c_H (with --adaptive-entropy: its starting value)."""

    top_quantile: float = 1.0  # q
    coef: float = 0.0          # c_H


# ``Config.entropy``: built from --top-entropy-quantile and --entropy-coef.
BONUS = FixedSpec("entropy", EntropyBonus, (
    Param("top_entropy_quantile", EntropyBonus, "top_quantile", "q: only the share q of tokens with the highest "
          "entropy take part in the policy term (\"Beyond the 80/20 rule\": 0.2; 1: all; 0: the highest-entropy token "
          "and its ties)", probability(),
          trl=(TRL("top_entropy_quantile", "high_entropy_mask", "q: the top-q entropy tokens take part in the policy "
                   "term. TRL takes the quantile over every process's tokens, ladder over this process's minibatch "
                   "(the same with one process)", SAME),)),
    Param("entropy_coef", EntropyBonus, "coef", "c_H of the entropy bonus −c_H·mean H over the tokens the policy term "
          "keeps (with --adaptive-entropy: its starting value)", coefficient(),
          trl=(TRL("entropy_coef", "entropy_bonus", "c_H of −c_H·mean H over the kept tokens, whatever the loss type",
                   SAME),)),
))

PARAMS = (
    Param("entropy_target", AdaptiveEntropy, "target", "the entropy (nats per token, over the tokens the policy term "
          "keeps) --adaptive-entropy holds the policy above", non_negative(MAX_SCALE),
          trl=(TRL("entropy_target", "AdaptiveEntropyCoef", "H_target", SAME),)),
    Param("entropy_coef_min", AdaptiveEntropy, "coef_min", "the lowest c_H --adaptive-entropy moves to",
          coefficient(), trl=(TRL("entropy_coef_min", "AdaptiveEntropyCoef", "c_min", SAME),)),
    Param("entropy_coef_max", AdaptiveEntropy, "coef_max", "the highest c_H --adaptive-entropy moves to",
          coefficient(), trl=(TRL("entropy_coef_max", "AdaptiveEntropyCoef", "c_max", SAME),)),
    Param("entropy_coef_delta", AdaptiveEntropy, "delta", "Δ: --adaptive-entropy's step of c_H", coefficient(),
          trl=(TRL("entropy_coef_delta", "AdaptiveEntropyCoef", "Δ", SAME),)),
)

OPTION = switched("entropy_control", "adaptive_entropy", "move c_H after every optimiser step: +Δ while the entropy is "
                  "at or below --entropy-target, −Δ above it, applied only at or below it, none on the first step "
                  "(nothing measured yet); the entropy of the tokens the policy term keeps, logged as "
                  "entropy/controlled (Skywork-OR1; TRL's use_adaptive_entropy)", AdaptiveEntropy, PARAMS,
                  trl=(TRL("use_adaptive_entropy", "AdaptiveEntropyCoef", "c_H moved by ±Δ after each optimiser step, "
                           "applied at or below the target", SAME),))


def settings(cfg) -> AdaptiveEntropy | None:
    """This run's controller settings (None without --adaptive-entropy)."""
    return cfg.entropy_control


def controller(cfg, procs: Processes) -> core.AdaptiveEntropyCoef | None:
    """--adaptive-entropy's controller of c_H, starting at --entropy-coef (None without the flag)."""
    spec = settings(cfg)
    return None if spec is None else spec.controller(cfg.entropy.coef, procs)
