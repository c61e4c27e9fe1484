"""Typed specs behind flat flags (``ladder.specs``): a config holds specs, yet takes, prints, saves and resumes its
options by their flags' names, as before the specs. A choice is the class one field holds (a tagged union), its flag
read off it."""

from __future__ import annotations

import dataclasses
import json

import pytest

from ladder import core
from ladder.rungs import agent, grpo
from ladder.rungs.grpo import loss_types
from ladder.rungs.grpo.advantage_spec import NormalizeThenSum, SumThenNormalize
from ladder.rungs.grpo.entropy_control import AdaptiveEntropy
from ladder.rungs.grpo.kl_to_ref import KLToReference
from ladder.rungs.grpo.reference_refresh import ReferenceRefresh
from ladder.rungs.grpo.rollout import DynamicSampling
from ladder.runtime.errors import UsageError
from ladder.specs import option_names, option_value, options_dict


def test_a_config_takes_a_specs_params_by_their_flags():
    cfg = grpo.Config(kl_coef=0.0, kl_in="reward", loss_type="sapo", sapo_temperature_pos=2.0)
    assert cfg.kl == KLToReference(coef=0.0, where="reward") and cfg.kl.in_reward() == 0.0
    assert cfg.objective == loss_types.Sapo(temp_pos=2.0) and cfg.loss_type == "sapo"  # the class says the loss type
    moved = dataclasses.replace(cfg, kl_coef=0.5, sapo_temperature_neg=3.0)  # the other fields kept
    assert moved.kl == KLToReference(coef=0.5, where="reward") and moved.kl.in_reward() == 0.5
    assert moved.objective == loss_types.Sapo(temp_pos=2.0, temp_neg=3.0)
    assert grpo.Config(loss_type="sapo").objective == loss_types.Sapo()  # at its defaults
    assert grpo.Config(objective=loss_types.Dapo(delta=1.5)) == grpo.Config(loss_type="dapo", delta=1.5)
    # core.update gets the objective's own spec: the loss type's aggregation is the UpdateConfig's
    update = grpo.core_settings.update_config(grpo.Config(loss_type="sapo", sapo_temperature_pos=2.0))
    assert update.objective == core.SoftGate(temp_pos=2.0) and update.aggregation == "seq_mean_token_mean"


@pytest.mark.parametrize("flags, held", [
    (dict(), dict(objective=loss_types.Grpo(), advantages=SumThenNormalize(), entropy_control=None,
                  reference_refresh=None, dynamic_sampling=None)),
    (dict(loss_type="cispo", cispo_max_weight=3.0), dict(objective=loss_types.Cispo(max_weight=3.0))),
    (dict(multi_objective_aggregation="normalize_then_sum"), dict(advantages=NormalizeThenSum())),
    (dict(advantage="rloo", scale_rewards="none"), dict(advantages=SumThenNormalize("rloo", "none"))),
    (dict(adaptive_entropy=True, entropy_target=0.3), dict(entropy_control=AdaptiveEntropy(target=0.3))),
    (dict(ref_sync_every=5, ref_mixup=0.5), dict(reference_refresh=ReferenceRefresh(every=5, mixup=0.5))),
    (dict(dynamic_sampling=True, max_sampling_rounds=2), dict(dynamic_sampling=DynamicSampling(max_rounds=2))),
])
def test_each_choice_is_one_field_holding_its_spec(flags, held):
    """The flags build the spec one field holds, and the same flags are read back off it (no switch field)."""
    cfg = grpo.Config(**flags)
    assert {name: getattr(cfg, name) for name in held} == held
    assert grpo.Config(**held) == cfg
    assert {flag: options_dict(cfg)[flag] for flag in flags} == flags
    names = {f.name for f in dataclasses.fields(grpo.Config)}
    assert not names & {"loss_type", "multi_objective_aggregation", "adaptive_entropy", "ref_sync_every",
                        "dynamic_sampling_rounds"}


def test_its_flags_round_trip_through_config_json():
    cfg = agent.Config(loss_type="cispo", cispo_max_weight=3.0, adaptive_entropy=True, entropy_coef=0.01,
                       entropy_target=0.3, ref_sync_every=2, ref_mixup=0.5, overlong_buffer=0.2, overlong_penalty=2.0)
    saved = json.loads(json.dumps(options_dict(cfg)))
    assert list(saved) == [name for name in option_names(agent.Config) if name in saved]
    assert {k: saved[k] for k in ("cispo_max_weight", "entropy_target", "ref_mixup", "overlong_penalty")} == \
        {"cispo_max_weight": 3.0, "entropy_target": 0.3, "ref_mixup": 0.5, "overlong_penalty": 2.0}
    assert "sapo_temperature_pos" not in saved and "delta" not in saved  # other objectives' flags: not this run's
    assert agent.Config(**saved) == cfg
    assert option_value(cfg, "kl_coef") == 0.04 and option_value(cfg, "delta") is None  # another spec's: its default


def test_a_config_json_saved_before_the_specs_still_loads():
    before = {**options_dict(grpo.Config(loss_type="vespo", vespo_k_pos=1.5)), "delta": None, "cispo_max_weight": 5.0,
              "sapo_temperature_pos": 1.0, "sapo_temperature_neg": 1.05}  # every objective's flags, at their defaults
    cfg = grpo.Config(**before)
    assert cfg.objective == loss_types.Vespo(k_pos=1.5)


@pytest.mark.parametrize("options, line", [
    (dict(sapo_temperature_pos=2.0), "--sapo-temperature-pos has no effect without --loss-type sapo"),
    (dict(loss_type="cispo", delta=2.0), "--delta caps the clipped surrogate's ratio; --loss-type cispo has no clip"),
    (dict(entropy_target=0.3), "--entropy-target has no effect without --adaptive-entropy"),
    (dict(multi_objective_aggregation="normalize_then_sum", scale_rewards="none"),
     "--scale-rewards has no effect without --multi-objective-aggregation sum_then_normalize"),
])
def test_a_flag_only_another_choice_reads_is_refused(options, line):
    with pytest.raises(UsageError, match=line.replace("(", r"\(").replace(")", r"\)")):
        grpo.Config(**options)


def test_a_specs_domain_and_its_own_rule_are_value_errors():
    with pytest.raises(ValueError, match="--kl-coef must be ≥ 0, got -1"):
        grpo.Config(kl_coef=-1)
    with pytest.raises(ValueError, match="--kl-correction weighs the KL term of the loss"):
        grpo.Config(kl=KLToReference(where="reward", correction="on"))
    with pytest.raises(ValueError, match="objective must hold what a --loss-type picks, got Clipped"):
        grpo.Config(objective=core.Clipped(delta=1.5))  # the objective's spec alone does not say the loss type
    with pytest.raises(ValueError, match="reference_refresh must hold what a --ref-sync-every picks"):
        grpo.Config(reference_refresh=ReferenceRefresh(every=0))
