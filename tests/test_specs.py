"""Typed specs behind flat flags (``ladder.specs``): a config holds specs, yet takes, prints, saves and resumes its
options by their flags' names, as before the specs."""

from __future__ import annotations

import dataclasses
import json

import pytest

from ladder import core
from ladder.rungs import agent, grpo
from ladder.rungs.grpo.kl_to_ref import KLToReference
from ladder.runtime.errors import UsageError
from ladder.specs import option_names, option_value, options_dict


def test_a_config_takes_a_specs_params_by_their_flags():
    cfg = grpo.Config(kl_coef=0.0, kl_in="reward", loss_type="sapo", sapo_temperature_pos=2.0)
    assert cfg.kl == KLToReference(coef=0.0, where="reward") and cfg.kl.in_reward() == 0.0
    assert cfg.objective == core.SoftGate(temp_pos=2.0)
    moved = dataclasses.replace(cfg, kl_coef=0.5, sapo_temperature_neg=3.0)  # the other fields kept
    assert moved.kl == KLToReference(coef=0.5, where="reward") and moved.kl.in_reward() == 0.5
    assert moved.objective == core.SoftGate(temp_pos=2.0, temp_neg=3.0)
    assert grpo.Config(loss_type="sapo").objective is None  # at its defaults: nothing held
    assert grpo.core_settings.update_config(grpo.Config(loss_type="sapo")).objective == core.SoftGate()


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
    assert cfg.objective == core.GammaWeighted(k_pos=1.5)


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
    with pytest.raises(ValueError, match="is not what --loss-type 'sapo' picks"):
        grpo.Config(loss_type="sapo", objective=core.Clipped(delta=1.5))
