"""``--loss-type``: the objectives grpo trains with, each registered once with its flags and its TRL rows.

    register_objective(spec, params, refusal, rules)
                                              a ``ladder.core`` objective spec (its parameters are its fields),
                                              a flag per field (``Param``, with its TRL names), and what it
                                              refuses of the run's other options (``rules``)
    register_loss_type(name, spec, aggregation, help)
                                              a ``--loss-type`` value (TRL's name): the objective and the mode of
                                              ``core.aggregate``, and the class that says it (``Grpo``, ``Dapo``, …:
                                              a subclass of the objective's spec, ``LossSpec``)

From these come, with nothing declared twice: the choices and help of ``--loss-type``, the objective's flags
(``--delta``, ``--cispo-max-weight``, ``--sapo-temperature-pos``, …: their defaults are the spec's), the refusal of
a flag the chosen objective does not read, the spec ``Config.objective`` holds (``Dapo(delta=None)``: the class is
the loss type, ``--loss-type`` reads it off), the objective ``core.update`` gets (``objective(cfg)``), and the rows
``ladder.trl.map`` and ``--export-trl`` read. A new objective is one module that registers a spec and a loss type
(``tests/test_toy_objective.py``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from typing import ClassVar

from ladder import core
from ladder.domains import MAX_COEF, MAX_SCALE, Number, OneOf, non_negative, positive
from ladder.rungs.grpo.settle import eps_high
from ladder.specs import Param, UnionSpec, choice_param
from ladder.trl_rows import SAME, TRL


@dataclass(frozen=True)
class LossType:
    """``--loss-type NAME``: the objective's spec class, the aggregation (``core.aggregate``'s mode) and, for
    "sum_over_constant", its constant (``grpo.loss_normaliser``): "budget" (rows · L_max) or "tokens" (the real
    tokens). ``in_trl``: TRL's ``GRPOConfig.loss_type`` has the same name. ``spec``: the class ``Config.objective``
    holds for it (``LossSpec``)."""

    name: str
    objective: type
    aggregation: str
    help: str
    constant: str | None = None
    in_trl: bool = True
    spec: type | None = None


class LossSpec:
    """What ``Config.objective`` holds: a loss type's class, a subclass of its objective's spec (the same fields), so
    that the class says the loss type (``Dapo(delta=1.5)``: ``--loss-type dapo --delta 1.5``). It owns what its
    objective refuses of the run's other options (``refusal``)."""

    loss_type: ClassVar[str]

    def refusal(self, cfg) -> str | None:
        """What the objective refuses of ``cfg``'s other options, in one line (None: nothing): its ``rules``."""
        rules = RULES.get(LOSS_TYPES[self.loss_type].objective)
        return None if rules is None else rules(self, cfg)


LOSS_TYPES: dict[str, LossType] = {}
PARAMS: dict[type, tuple[Param, ...]] = {}   # objective spec → its flags
REFUSALS: dict[type, str] = {}               # objective spec → the line that refuses its flags without it
RULES: dict[type, Callable] = {}             # objective spec → rules(spec, cfg): what it refuses of other options


def register_objective(spec: type, params: tuple[Param, ...] = (), refusal: str | None = None,
                       rules: Callable | None = None) -> type:
    """An objective's flags (``Param(flag, spec, field, help, domain, trl=...)``), the line that refuses
    its flags when another objective is chosen (``{flags}``, ``{value}``: the --loss-type; default: "... has no effect
    without --loss-type ..."), and ``rules(spec, cfg)``: the line that refuses another option of a run that trains
    with it (None: nothing), ``grpo.validate`` asks it."""
    if any(p.spec is not spec for p in params):
        raise ValueError(f"{spec.__name__}: a param sets a field of the spec it is registered with")
    PARAMS[spec] = tuple(params)
    if refusal is not None:
        REFUSALS[spec] = refusal
    if rules is not None:
        RULES[spec] = rules
    return spec


def register_loss_type(name: str, objective: type, aggregation: str, help: str, constant: str | None = None,
                       in_trl: bool = True) -> LossType:
    if (aggregation == "sum_over_constant") != (constant in ("budget", "tokens")):
        raise ValueError(f"loss type {name}: sum_over_constant takes a constant, budget or tokens; no other "
                         f"aggregation does (got {aggregation}, {constant})")
    spec = dataclasses.make_dataclass(
        "".join(part.capitalize() for part in name.split("_")), [], bases=(objective, LossSpec), frozen=True,
        namespace={"loss_type": name, "__doc__": f"``--loss-type {name}``: {objective.__name__}, {help}."})
    spec.__module__ = __name__
    LOSS_TYPES[name] = LossType(name, objective, aggregation, help, constant, in_trl, spec)
    PARAMS.setdefault(objective, ())
    return LOSS_TYPES[name]


def loss_type_help() -> str:
    """``--loss-type``'s help: every registered name with what it computes."""
    return "policy loss and aggregation: " + " | ".join(f"{t.name} ({t.help})" for t in LOSS_TYPES.values())


def loss_type(cfg) -> LossType:
    """The ``--loss-type`` of this run: the class ``cfg.objective`` holds says it."""
    return LOSS_TYPES[cfg.objective.loss_type]


def objective(cfg):
    """The objective ``core.update`` trains with: the spec of the loss type's objective (``core.Clipped``, …) with
    the fields ``cfg.objective`` holds."""
    held = cfg.objective
    return loss_type(cfg).objective(**{f.name: getattr(held, f.name) for f in dataclasses.fields(held)})


def aggregation(cfg) -> str:
    return loss_type(cfg).aggregation


def refusal(cfg) -> str | None:
    """What the run's objective refuses of its other options (``LossSpec.refusal``), in one line (None: nothing)."""
    return cfg.objective.refusal(cfg)


def _loss_types_of(spec: type) -> str:
    return " | ".join(t.name for t in LOSS_TYPES.values() if t.objective is spec)


def _pick(name):
    return LOSS_TYPES[name].spec if name in LOSS_TYPES else None


def _objective_of(cls: type):
    name = getattr(cls, "loss_type", None)
    return LOSS_TYPES[name].objective if name in LOSS_TYPES else None


def _needs(spec: type) -> str:
    return f"--loss-type {_loss_types_of(spec)}"


# ``Config.objective``: the spec of the chosen ``--loss-type`` (its class), built from its flags (``ladder.specs``);
# the registries are read when asked, so an objective registered later is a choice too.
def loss_type_trl() -> tuple[TRL, ...]:
    """--loss-type's TRL names: GRPOConfig's loss_type, and where a registered loss type is not TRL's, what the script
    does for it (read when asked: a loss type registered later counts)."""
    names = (TRL("loss_type", "aggregate", "grpo | bnpo | dr_grpo | dapo | cispo | sapo | luspo | vespo, the same "
                 "names (TRL's default is dapo, ladder's grpo)", SAME, in_trl),)
    if all(t.in_trl for t in LOSS_TYPES.values()):
        return names
    return names + (TRL(None, note="a loss type GRPOTrainer does not have: the script leaves GRPOConfig.loss_type at "
                        "TRL's default", applies=lambda cfg: not in_trl(cfg)),)


OPTION = UnionSpec("objective", choice_param("loss_type", loss_type_help, OneOf(LOSS_TYPES), "grpo", loss_type_trl),
                   _pick,
                   lambda held: getattr(held, "loss_type", None), lambda: PARAMS, _needs, _objective_of,
                   lambda: REFUSALS, before="clip_eps")  # --loss-type, then --clip-eps and the objective's flags


def objective_from_trl(loss_type: str, values: dict):
    """The objective spec of ``--loss-type`` that TRL's ``GRPOConfig`` values give: its flags' TRL names read
    backwards (``{"epsilon_high": 3.0}`` with cispo: ``CISPO(max_weight=3.0)``; a None where the param has a default:
    the default)."""
    spec = LOSS_TYPES[loss_type].objective
    kwargs = {}
    for p in PARAMS[spec]:
        for name in (t.field for t in p.trl if t.field is not None):
            if name in values and (values[name] is not None or p.default is None):
                kwargs[p.name] = values[name]
    return spec(**kwargs)


def in_trl(cfg) -> bool:
    """Whether TRL's GRPOConfig has this run's --loss-type."""
    return loss_type(cfg).in_trl


# --- the built-in objectives and loss types -------------------------------------------------------------------------

def _clipped_rules(spec: core.Clipped, cfg) -> str | None:
    """δ caps the ratio where Â < 0 beyond the clip: at or below 1 + ε_high it would cut into the clip."""
    if spec.delta is not None and spec.delta <= 1.0 + eps_high(cfg):
        return f"--delta must exceed 1 + --clip-eps-high = {1.0 + eps_high(cfg):g}, got {spec.delta}"
    return None


def _cispo_rules(spec: core.CISPO, cfg) -> str | None:
    if cfg.ratio.level == "sequence":
        return ("--loss-type cispo weighs every token by its own ratio; --ratio-level sequence is GSPO's clipped "
                "objective (--algo gspo)")
    return None


def _vespo_rules(spec: core.GammaWeighted, cfg) -> str | None:
    """VESPO's weight is of the sequence ratio it computes from the token ratios, π_old/π_sampler folded in per
    token (``core.GammaWeighted``)."""
    if cfg.ratio.level == "sequence":
        return "--loss-type vespo computes its own sequence weight from the token ratios; use --ratio-level token"
    if cfg.sampler.correction.startswith("sequence"):
        return ("--loss-type vespo folds a per-token π_old/π_sampler into its sequence weight: use "
                "--sampler-correction token_truncate or token_mask")
    return None


register_objective(core.Clipped, (
    Param("delta", core.Clipped, "delta", "δ > 1 + ε_high: two-sided clipping also caps the ratio at δ where Â < 0 "
          "(INTELLECT-2; None: off)", Number(float, low=1.0, open_low=True, high=MAX_SCALE, limit=True),
          trl=(TRL("delta", "clipped_surrogate", "two-sided clipping: ratio capped at c where Â < 0", SAME,
                   always=True),)),),
    refusal="{flags} caps the clipped surrogate's ratio; --loss-type {value} has no clip", rules=_clipped_rules)
register_objective(core.CISPO, (
    Param("cispo_max_weight", core.CISPO, "max_weight", "ε_max: CISPO's cap on the detached importance weight "
          "(ScaleRL: 5)", positive(MAX_SCALE),
          trl=(TRL("epsilon_high", "cispo_loss", "with loss_type cispo TRL's epsilon_high is CISPO's cap ε_max on the "
                   "detached weight", SAME),)),),
    rules=_cispo_rules)
register_objective(core.SoftGate, (
    Param("sapo_temperature_pos", core.SoftGate, "temp_pos", "τ_pos of sapo's gate −(4/τ)·σ(τ(ρ − 1))·Â where "
          "Â > 0: larger fades the gradient sooner as ρ leaves 1 (TRL's name)", positive(MAX_SCALE),
          trl=(TRL("sapo_temperature_pos", "soft_gated_surrogate", "τ_pos of the soft gate −(4/τ)·σ(τ(ρ − 1))·Â "
                   "where Â > 0", SAME),)),
    Param("sapo_temperature_neg", core.SoftGate, "temp_neg", "τ_neg of sapo's gate where Â ≤ 0 (TRL's name)",
          positive(MAX_SCALE),
          trl=(TRL("sapo_temperature_neg", "soft_gated_surrogate", "τ_neg of the soft gate where Â ≤ 0", SAME),))))
register_objective(core.GammaWeighted, (
    Param("vespo_k_pos", core.GammaWeighted, "k_pos", "k of vespo's weight φ(ρ_seq) = e^λ·ρ_seq^k·e^(−λ·ρ_seq) "
          "where Â ≥ 0: larger damps ρ_seq < 1 more (TRL's name)", non_negative(MAX_COEF),
          trl=(TRL("vespo_k_pos", "gamma_weight", "k of φ(ρ_seq) = e^λ·ρ_seq^k·e^(−λ·ρ_seq) where Â ≥ 0", SAME),)),
    Param("vespo_lambda_pos", core.GammaWeighted, "lambda_pos", "λ of φ where Â ≥ 0: larger damps ρ_seq > 1 more "
          "(TRL's name)", positive(MAX_COEF),
          trl=(TRL("vespo_lambda_pos", "gamma_weight", "λ of φ where Â ≥ 0", SAME),)),
    Param("vespo_k_neg", core.GammaWeighted, "k_neg", "k of φ where Â < 0 (TRL's name)", non_negative(MAX_COEF),
          trl=(TRL("vespo_k_neg", "gamma_weight", "k of φ where Â < 0", SAME),)),
    Param("vespo_lambda_neg", core.GammaWeighted, "lambda_neg", "λ of φ where Â < 0 (TRL's name)", positive(MAX_COEF),
          trl=(TRL("vespo_lambda_neg", "gamma_weight", "λ of φ where Â < 0", SAME),))),
    rules=_vespo_rules)

# Each loss type's class, what ``Config.objective`` holds (``Config(objective=Dapo(delta=1.5))``).
Grpo = register_loss_type("grpo", core.Clipped, "seq_mean_token_mean", "per-sequence mean").spec
Bnpo = register_loss_type("bnpo", core.Clipped, "token_mean", "token mean").spec
DrGrpo = register_loss_type("dr_grpo", core.Clipped, "sum_over_constant", "÷ P·G·max-new-tokens", "budget").spec
Dapo = register_loss_type("dapo", core.Clipped, "sum_over_constant", "÷ active tokens", "tokens").spec
Cispo = register_loss_type("cispo", core.CISPO, "sum_over_constant", "clipped detached weight × log π, ÷ active tokens",
                           "tokens").spec
Sapo = register_loss_type("sapo", core.SoftGate, "seq_mean_token_mean", "a soft sigmoid gate in place of the clip, "
                          "per-sequence mean").spec
Luspo = register_loss_type("luspo", core.Clipped, "seq_mean_token_sum", "clipped, each sequence's sum: with "
                           "--ratio-level sequence, GSPO without its length bias").spec
Vespo = register_loss_type("vespo", core.GammaWeighted, "sum_over_constant", "a smooth gamma weight of the sequence "
                           "ratio × log π, ÷ active tokens", "tokens").spec
