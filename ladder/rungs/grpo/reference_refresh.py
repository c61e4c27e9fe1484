"""``--ref-sync-every``: π_ref refreshed toward π_θ every N updates, π_ref ← α·π_θ + (1 − α)·π_ref (TRL's
``sync_ref_model``): ``Config.reference_refresh`` holds ``ReferenceRefresh(every, mixup)`` with a positive N, None
at 0 (π_ref stays the starting model); α = ``--ref-mixup`` (refused without a refresh)."""

from __future__ import annotations

from dataclasses import dataclass

from ladder.domains import MAX_STEPS, count, probability
from ladder.specs import Param, UnionSpec, choice_param
from ladder.trl_rows import RLOO, SAME, TRL, optimizer_steps, peft


@dataclass(frozen=True)
class ReferenceRefresh:
    every: int = 1       # N: updates between refreshes (at least 1)
    mixup: float = 0.6   # α


EVERY_TRL = (
    TRL("sync_ref_model", "soft_update", "TRL 1.16 refuses sync_ref_model with a PEFT model (ladder refreshes a "
        "second, frozen adapter): with --lora/--qlora the export leaves π_ref fixed",
        lambda cfg: cfg.reference_refresh is not None and not peft(cfg)),
    TRL("ref_model_sync_steps", "soft_update", "TRL counts optimiser steps: --ref-sync-every × μ × M",
        lambda cfg: optimizer_steps(cfg, cfg.reference_refresh.every), lambda cfg: cfg.reference_refresh is not None),
    TRL("sync_ref_model", "soft_update", "as GRPOConfig's", cls=RLOO),
    TRL("ref_model_sync_steps", "soft_update", "optimiser steps", cls=RLOO),
)
MIXUP_TRL = (  # its default written whether or not π_ref is refreshed
    TRL("ref_model_mixup_alpha", "soft_update", "π_ref ← α·π_θ + (1 − α)·π_ref", SAME, always=True),
    TRL("ref_model_mixup_alpha", "soft_update", cls=RLOO, always=True),
)
EVERY = choice_param("ref_sync_every", "refresh π_ref every N updates: π_ref ← α·π_θ + (1 − α)·π_ref (0: π_ref stays "
                     "the starting model; TRL's ref_model_sync_steps)", count(0, MAX_STEPS), 0, EVERY_TRL)
PARAMS = (Param("ref_sync_every", ReferenceRefresh, "every", EVERY.help, EVERY.domain, own_default=0),
          Param("ref_mixup", ReferenceRefresh, "mixup", "α of the π_ref refresh, in [0, 1] (TRL's "
                "ref_model_mixup_alpha)", probability(), trl=MIXUP_TRL))
OPTION = UnionSpec("reference_refresh", EVERY, lambda every: ReferenceRefresh if every else None,
                   lambda held: 0 if held is None else held.every, lambda: {ReferenceRefresh: PARAMS},
                   lambda group: "--ref-sync-every")


def every(cfg) -> int:
    """N of this run's π_ref refresh (0: π_ref stays the starting model)."""
    return 0 if cfg.reference_refresh is None else cfg.reference_refresh.every


def mixup(cfg) -> float | None:
    """α of this run's π_ref refresh (None: π_ref stays the starting model)."""
    return None if cfg.reference_refresh is None else cfg.reference_refresh.mixup
