"""``--ref-sync-every``: π_ref refreshed toward π_θ every N updates, π_ref ← α·π_θ + (1 − α)·π_ref (TRL's
``sync_ref_model``), a spec on with a positive N: ``ReferenceRefresh(mixup)``, α = ``--ref-mixup`` (refused
without it)."""

from __future__ import annotations

from dataclasses import dataclass

from ladder.cli import probability
from ladder.specs import Param, switched
from ladder.trl.row import Mapping, same


@dataclass(frozen=True)
class ReferenceRefresh:
    mixup: float = 0.6   # α


OPTION = switched("reference_refresh", "ref_sync_every", ReferenceRefresh, (
    Param("ref_mixup", ReferenceRefresh, "mixup", "α of the π_ref refresh, in [0, 1] (TRL's ref_model_mixup_alpha)",
          probability()),))


def mixup(cfg) -> float | None:
    """α of this run's π_ref refresh (None: π_ref stays the starting model)."""
    refresh = OPTION.resolve(cfg)
    return None if refresh is None else refresh.mixup


G = "GRPOConfig"
TRL_ROWS = (  # --ref-mixup's row of ladder.trl.map (its default written whether or not π_ref is refreshed)
    Mapping(G, "ref_model_mixup_alpha", "grpo", "ref_mixup", "soft_update", "π_ref ← α·π_θ + (1 − α)·π_ref",
            same("ref_mixup")),
)
