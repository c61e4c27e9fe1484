"""β·KL(π_θ‖π_ref): where grpo puts the KL to the reference, how it estimates and corrects it — one spec, its flags.

    KLToReference(coef, where, estimator, correction)
        in_loss()      β of β·KL per token in the loss (--kl-in loss; DeepSeekMath's GRPO), else 0
        in_reward()    β of r_i − β·Σ_t KL_t on π_old, before the advantages (--kl-in reward; RLOO), else 0
        corrected()    the loss's KL term weighted by π_θ/π_old (DeepSeek-V3.2; TRL's use_bias_correction_kl): "on"
                       unless --kl-correction off; None with no KL term in the loss to weigh (what the run does
                       with it is decided once: ``settle.kl_correction``)

``Config.kl`` holds it, built from ``--kl-coef``, ``--kl-in``, ``--kl-estimator``, ``--kl-correction``. How π_ref
moves (``--ref-sync-every``, ``--ref-mixup``) is ``reference_refresh``'s.
"""

from __future__ import annotations

from dataclasses import dataclass

from ladder.core.kl import ESTIMATORS
from ladder.domains import OneOf, coefficient
from ladder.rungs.grpo.settle import kl_correction
from ladder.specs import FixedSpec, Param
from ladder.trl_rows import RLOO, SAME, TRL


@dataclass(frozen=True)
class KLToReference:
    coef: float = 0.04           # β (0: no reference computed at all)
    where: str = "loss"          # "loss" | "reward"
    estimator: str = "k3"        # k1 | k2 | k3
    correction: str | None = None  # "on" | "off" | None: on in the loss

    def in_loss(self) -> float:
        return self.coef if self.where == "loss" else 0.0

    def in_reward(self) -> float:
        return self.coef if self.where == "reward" else 0.0

    def corrected(self) -> str | None:
        return None if self.where == "reward" else "off" if self.correction == "off" else "on"

    def conflict(self) -> str | None:
        if self.where == "reward" and self.correction == "on":
            return ("--kl-correction weighs the KL term of the loss; with --kl-in reward the KL is a constant in the "
                    "reward, taken on π_old, and needs no correction: drop --kl-correction (or say off)")
        return None


# Each flag's names in TRL: GRPOConfig's beta and use_bias_correction_kl, RLOOConfig's beta, and what GRPOTrainer
# cannot do (the KL in the reward, an estimator other than k3).
PARAMS = (
    Param("kl_coef", KLToReference, "coef", "β of the KL to π_ref (0: no reference computed at all)", coefficient(),
          trl=(TRL("beta", "kl_estimate", "β of the per-token KL term in the loss, β·k3 (× π_θ/π_old with "
                   "use_bias_correction_kl); 0 loads no reference model (ladder: computes no π_ref). TRL's default is "
                   "0, ladder's 0.04", SAME),
               TRL("beta", "kl_in_reward", "β of the KL in the reward: --kl-in reward --kl-estimator k1 (Σ_t over "
                   "the completion, on π_old)", cls=RLOO))),
    Param("kl_in", KLToReference, "where", "where the KL to π_ref goes: loss (β·KL per token in the loss) or reward "
          "(r_i − β·Σ_t KL_t on π_old's log-probs, before the advantages; RLOO's choice)", OneOf(("loss", "reward")),
          trl=(TRL(None, "kl_in_reward", "--kl-in reward (r_i − β·Σ_t KL_t on π_old, before the advantages) is "
                   "RLOOTrainer's, not GRPOTrainer's: the script keeps β·k3 in the loss",
                   applies=lambda cfg: cfg.kl.in_reward() > 0),)),
    Param("kl_estimator", KLToReference, "estimator", "KL estimator: k1 | k2 | k3 (k3 in the loss is GRPO's, "
          "DeepSeekMath's; k1 in the reward is RLOO's)", OneOf(ESTIMATORS),
          trl=(TRL(None, "kl_estimate", "GRPOTrainer's KL in the loss is k3 only",
                   applies=lambda cfg: cfg.kl.in_loss() > 0 and cfg.kl.estimator != "k3"),)),
    Param("kl_correction", KLToReference, "correction", "importance-weight the KL term in the loss by π_θ/π_old: "
          "β·r·k3, DeepSeek-V3.2's correction, as TRL 1.16's use_bias_correction_kl, which is on there unless set off "
          "(default: on with --kl-in loss, --algo grpo included); off: plain β·k3, GRPO as DeepSeekMath wrote it",
          OneOf(("on", "off")),
          trl=(TRL("use_bias_correction_kl", "kl_estimate", "the KL term weighted by π_θ/π_old (on by default in "
                   "both: ladder with --kl-in loss, TRL 1.16 True). At ratio level sequence TRL weights by the "
                   "sequence ratio, ladder by each token's (tests/test_trl_parity_grpo)",
                   lambda cfg: kl_correction(cfg) and cfg.kl.where == "loss"),)),  # the settled correction
)


OPTION = FixedSpec("kl", KLToReference, PARAMS)
