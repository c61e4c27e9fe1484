"""TRL 1.16's newer GRPO options through TRL's ``GRPOTrainer`` and through ladder, on identical tensors.

Each case is one grpo rung ``Config``: TRL's trainer is set from ``trl_map.trl_values(cfg)`` (what
``--export-trl`` writes) and ladder's update from ``core_settings.update_config(cfg)`` (what the rung
trains with), so both mappings are what is checked. Loss and every gradient agree to ``close``'s tolerance:

    top_entropy_quantile ρ          get_high_entropy_mask(H, m, 1 − ρ)      high_entropy_mask(H, m, ρ)
    entropy_coef c_H                −c_H · mean H over the kept tokens      CausalLMPolicy(entropy_grad=True)
    use_adaptive_entropy            self.entropy_coef after each step       core.update(entropy_control=…)
    sapo_temperature_*, vespo_*     _compute_loss                           core.SoftGate, core.GammaWeighted
    --export-trl                    the script's GRPOConfig fields          the rung's options

The fixtures (a GRPOTrainer on the tiny saved Qwen2, the hand-made inputs) are tests/test_trl_parity_grpo.py's.
The advantages of several rewards (GDPO's aggregation, the overlong penalty's weight) are
tests/test_trl_parity_rewards.py's.
"""

from __future__ import annotations

import dataclasses
import importlib.util

import pytest
import test_trl_parity_grpo as parity
import torch
from test_trl_parity_grpo import G, assert_same, ladder_num_tokens, trl_loss
from trl_helpers import (
    MAX_COMPLETION_LENGTH,
    TEMPERATURE,
    GRPOConfig,
    GRPOTrainer,
    close,
    grads,
    one_thread,  # noqa: F401 (autouse fixture)
)

from ladder import core, run
from ladder.policies.causal_lm import CausalLMPolicy, lm_batch
from ladder.rungs import grpo
from ladder.rungs.grpo.core_settings import update_config
from ladder.trl import export as export_trl
from ladder.trl import map as trl_map

# the module-scoped fixtures of tests/test_trl_parity_grpo.py, one trainer for this module
grpo_trainer, policy, grpo_inputs = parity.grpo_trainer, parity.policy, parity.grpo_inputs

# The GRPOConfig fields these tests set on the trainer (each copied by GRPOTrainer.__init__ as below).
FIELDS = ("loss_type", "epsilon", "epsilon_high", "delta", "beta", "importance_sampling_level",
          "use_bias_correction_kl", "sapo_temperature_pos", "sapo_temperature_neg", "vespo_k_pos",
          "vespo_lambda_pos", "vespo_k_neg", "vespo_lambda_neg", "top_entropy_quantile", "entropy_coef",
          "use_adaptive_entropy", "entropy_target", "entropy_coef_min", "entropy_coef_max", "entropy_coef_delta")
TRAINER_COPIES = {"loss_type": "loss_type", "epsilon": "epsilon_low", "epsilon_high": "epsilon_high", "beta": "beta",
                  "importance_sampling_level": "importance_sampling_level",
                  "top_entropy_quantile": "top_entropy_quantile", "entropy_coef": "entropy_coef",
                  "use_adaptive_entropy": "use_adaptive_entropy"}
LOSSES = {"grpo": dict(loss_type="grpo"), "dapo": dict(loss_type="dapo"),
          "sapo-tau": dict(loss_type="sapo", sapo_temperature_pos=0.5, sapo_temperature_neg=2.0),
          "vespo-k-lambda": dict(loss_type="vespo", vespo_k_pos=1.5, vespo_lambda_pos=2.5, vespo_k_neg=2.0,
                                 vespo_lambda_neg=4.0)}
ENTROPY = {"all": (1.0, 0.0), "rho=0": (0.0, 0.0), "rho=0.2": (0.2, 0.0), "rho=0.5": (0.5, 0.0),
           "bonus": (1.0, 0.02), "rho=0.2+bonus": (0.2, 0.02), "rho=0.5+bonus": (0.5, 0.02)}


def rung_config(**options) -> grpo.Config:
    """The rung's defaults (β = 0.04 with the KL correction, ε = 0.2) on the fixture's sizes; a gradient-norm
    clip that never binds, so ``core.update`` leaves the gradient as ``_compute_loss``'s backward makes it."""
    return grpo.Config(**{"max_new_tokens": MAX_COMPLETION_LENGTH, "temperature": TEMPERATURE,
                          "group_size": G, "max_grad_norm": 1e9, **options})


def configure(trainer, cfg: grpo.Config) -> None:
    """TRL's trainer set to ``trl_map.trl_values(cfg)`` (GRPOConfig's defaults for fields the map leaves out)."""
    values = {name: value for name, (value, _) in trl_map.trl_values(cfg).items()}
    defaults = {f.name: f.default for f in dataclasses.fields(GRPOConfig)}
    for name in FIELDS:
        setattr(trainer.args, name, values.get(name, defaults[name]))
    if trainer.args.epsilon_high is None:  # as GRPOConfig.__post_init__
        trainer.args.epsilon_high = trainer.args.epsilon
    for name, attribute in TRAINER_COPIES.items():
        setattr(trainer, attribute, getattr(trainer.args, name))
    trainer._entropy_bonus_enabled = trainer.entropy_coef != 0.0 or trainer.use_adaptive_entropy
    trainer._last_world_entropy = float("inf")
    trainer._entropy_window_stats = None


@pytest.fixture(scope="module")
def entropy_policy(grpo_trainer):
    """ladder's policy on the trainer's model, its entropy with a graph (what the rung builds for c_H > 0)."""
    return CausalLMPolicy(grpo_trainer.model, temperature=TEMPERATURE, entropy_grad=True)


def ladder_batch(policy, inputs):
    mask = inputs["completion_mask"]
    return lm_batch(inputs["prompt_ids"], inputs["prompt_mask"], inputs["completion_ids"], mask,
                    policy.model.config.pad_token_id, advantages=inputs["advantages"][:, None] * mask,
                    old_logp=inputs["old_per_token_logps"], ref_logp=inputs["ref_per_token_logps"])


def ladder_loss(policy, inputs, cfg, num_tokens):
    policy.model.zero_grad(set_to_none=True)
    loss, stats, tensors = core.compute_loss(policy, ladder_batch(policy, inputs), cfg, num_tokens)
    loss.backward()
    return loss.detach(), grads(policy.model), stats


# --- the top-entropy mask ----------------------------------------------------------------------------

@pytest.mark.parametrize("rho", [0.0, 0.2, 0.5, 1.0])
def test_high_entropy_mask_is_trls(grpo_trainer, rho):
    """The same tokens kept, on entropies with ties, junk on the padding and rows of every length."""
    gen = torch.Generator().manual_seed(3)
    entropy = torch.rand(5, 7, generator=gen) * 2.0
    entropy[0, :3] = entropy[2, 1:4] = entropy[4, 5]  # a run of ties
    mask = (torch.arange(7)[None] < torch.tensor([7, 2, 5, 0, 6])[:, None]).long()
    entropy = torch.where(mask.bool(), entropy, 9.0)   # padding above every real entropy: must stay out
    expected = grpo_trainer.get_high_entropy_mask(entropy, mask, 1.0 - rho)
    got = core.high_entropy_mask(entropy, mask, rho)
    assert torch.equal(got.bool(), expected)
    assert 0 < got.sum() <= mask.sum() and (got.sum() == mask.sum()) == (rho == 1.0)


# --- the loss: entropy mask, entropy bonus, SAPO's and VESPO's parameters ---------------------------

def _loss_cases():
    for loss_name, loss_options in LOSSES.items():
        for entropy_name, (rho, coef) in ENTROPY.items():
            yield pytest.param({**loss_options, "top_entropy_quantile": rho, "entropy_coef": coef},
                               id=f"{loss_name}-{entropy_name}")


@pytest.mark.parametrize("options", list(_loss_cases()))
def test_loss_and_gradients_match_trl(grpo_trainer, entropy_policy, grpo_inputs, options):
    cfg = rung_config(**options)
    configure(grpo_trainer, cfg)
    expected = trl_loss(grpo_trainer, grpo_inputs)
    got = ladder_loss(entropy_policy, grpo_inputs, update_config(cfg), ladder_num_tokens(grpo_trainer, grpo_inputs))
    assert_same(expected, got)
    kept = float(got[2].get("entropy/kept_frac", 1.0))
    assert (0.0 < kept < 1.0) == (cfg.entropy.top_quantile < 1.0), kept


def test_options_change_trls_loss(grpo_trainer, grpo_inputs):
    """The parity above means something only if each option moves TRL's loss on these inputs."""
    def loss(**options):
        configure(grpo_trainer, rung_config(**options))
        return trl_loss(grpo_trainer, grpo_inputs)[0].item()

    for options in LOSSES.values():
        if len(options) > 1:  # SAPO's temperatures, VESPO's k and λ against the defaults
            assert abs(loss(**options) - loss(loss_type=options["loss_type"])) > 1e-4, options
        assert abs(loss(**options, top_entropy_quantile=0.2) - loss(**options)) > 1e-4, options
        assert abs(loss(**options, entropy_coef=0.02) - loss(**options)) > 1e-4, options


# --- the adaptive entropy coefficient over several optimiser steps -----------------------------------

def _swapped_completions(inputs: dict) -> dict:
    """The same prompts, the completions (with their masks, log-probs and advantages) in reverse row order:
    a second batch whose entropy differs."""
    completion_side = ("completion_ids", "completion_mask", "old_per_token_logps", "ref_per_token_logps",
                       "advantages")
    return {k: v.flip(0) if k in completion_side else v for k, v in inputs.items()}


def _kept_entropy(policy, inputs, cfg) -> float:
    with torch.no_grad():
        _, _, tensors = core.compute_loss(policy, ladder_batch(policy, inputs), update_config(cfg), 1.0)
    kept = tensors["kept"]
    return ((tensors["entropy"] * kept).sum() / kept.sum()).item()


@pytest.mark.parametrize("loss_type,rho", [("grpo", 1.0), ("dapo", 0.5)])
@pytest.mark.parametrize("target", ["above", "below", "between"])
def test_adaptive_entropy_coefficient_and_losses_match_trl(grpo_trainer, entropy_policy, grpo_inputs, loss_type,
                                                           rho, target):
    """Five optimiser steps on batches A A B B A: TRL's ``_compute_loss`` (train mode, sync_gradients, so each
    call ends a step and moves ``self.entropy_coef``) and ``core.update`` with an ``AdaptiveEntropyCoef`` and
    lr 0 (the weights stay). A target above both batches' entropy moves c_H up to c_max, one below them
    down to c_min, one between them both ways, switching the bonus on and off."""
    batches = {"A": grpo_inputs, "B": _swapped_completions(grpo_inputs)}
    options = dict(loss_type=loss_type, top_entropy_quantile=rho, adaptive_entropy=True, entropy_coef=0.05,
                   entropy_coef_min=0.01, entropy_coef_max=0.09, entropy_coef_delta=0.02)
    entropies = sorted(_kept_entropy(entropy_policy, batch, rung_config(**options)) for batch in batches.values())
    assert entropies[1] - entropies[0] > 0.01, entropies
    options["entropy_target"] = {"above": entropies[1] + 0.05, "below": entropies[0] - 0.05,
                                 "between": sum(entropies) / 2}[target]
    cfg = rung_config(**options)
    configure(grpo_trainer, cfg)
    assert grpo_trainer.model.training and grpo_trainer.accelerator.sync_gradients
    spec = grpo.entropy_control.settings(cfg)
    control = core.AdaptiveEntropyCoef(cfg.entropy.coef, spec.target, spec.coef_min, spec.coef_max, spec.delta)
    optimizer = torch.optim.SGD(entropy_policy.model.parameters(), lr=0.0)
    before = {n: p.detach().clone() for n, p in entropy_policy.model.named_parameters()}
    trl_coefs, ladder_coefs = [], []
    for name in "AABBA":
        inputs = batches[name]
        expected = trl_loss(grpo_trainer, inputs)
        trl_coefs.append(grpo_trainer.entropy_coef)
        num_tokens = ladder_num_tokens(grpo_trainer, inputs)
        record = core.update(entropy_policy, ladder_batch(entropy_policy, inputs), optimizer, update_config(cfg),
                             num_tokens=num_tokens, entropy_control=control)[0]
        ladder_coefs.append(control.coef)
        assert_same(expected, (torch.tensor(record["loss"]), grads(entropy_policy.model)))
        close(torch.tensor(record["entropy_coef"]), torch.tensor(control.coef), "logged c_H")
    close(torch.tensor(ladder_coefs), torch.tensor(trl_coefs), "c_H after each step")
    assert all(torch.equal(p, before[n]) for n, p in entropy_policy.model.named_parameters())
    moves = {round(b - a, 6) for a, b in zip([cfg.entropy.coef] + trl_coefs, trl_coefs)}
    assert moves == {"above": {0.02, 0.0}, "below": {-0.02, 0.0}, "between": {0.02, -0.02}}[target], moves


# --- VESPO's (k, λ) on rows whose first tokens are masked ------------------------------------------------

def test_gamma_weight_sign_matches_trls_on_rows_that_start_masked():
    """TRL's ``get_gamma_weights`` picks (k, λ) by the sign of the row's advantage ``[B, 1]``; ladder's batch
    carries Â·m ``[B, T]``, 0 on masked tokens. Rows that start with masked tokens (an environment's reply, left
    padding) and have Â < 0 get (k_neg, λ_neg) in both."""
    gen = torch.Generator().manual_seed(5)
    log_ratio = 0.2 * torch.randn(4, 6, generator=gen)
    mask = torch.tensor([[0, 0, 1, 1, 1, 0], [0, 1, 1, 1, 1, 1], [1, 1, 1, 0, 0, 0], [0, 0, 0, 1, 1, 0]]).float()
    advantages = torch.tensor([[-0.7], [1.2], [-0.4], [-1.5]])
    k_lambda = dict(k_pos=1.5, lambda_pos=2.5, k_neg=2.0, lambda_neg=4.0)
    expected = GRPOTrainer.get_gamma_weights(advantages, log_ratio, mask, None, **k_lambda)
    got = core.gamma_weight(log_ratio, mask, advantages * mask, **k_lambda)
    close(got, expected, "φ")
    as_positive = GRPOTrainer.get_gamma_weights(advantages.abs(), log_ratio, mask, None, **k_lambda)
    assert ((as_positive - expected).abs() > 1e-3).tolist() == [[True], [False], [True], [True]]


def test_vespo_loss_matches_trl_where_the_tool_mask_starts_with_zeros(grpo_trainer, entropy_policy, grpo_inputs):
    """TRL's ``_compute_loss`` with a ``tool_mask`` that masks each row's first two tokens (a tool's reply
    first) = ``core.compute_loss`` with the loss mask completion_mask · tool_mask (tolerance as the tool-mask
    parity's: φ's error grows with (k − λ·w) times the summed log-ratio's rounding)."""
    inputs = {**grpo_inputs, "tool_mask": (torch.arange(grpo_inputs["completion_mask"].shape[1]) >= 2).long()
              .expand_as(grpo_inputs["completion_mask"]).contiguous()}
    assert (inputs["advantages"] < 0).any() and (inputs["completion_mask"] * inputs["tool_mask"]).sum(1).min() > 0
    cfg = rung_config(**LOSSES["vespo-k-lambda"])
    configure(grpo_trainer, cfg)
    expected = trl_loss(grpo_trainer, inputs)
    mask = (inputs["completion_mask"] * inputs["tool_mask"]).float()
    batch = lm_batch(inputs["prompt_ids"], inputs["prompt_mask"], inputs["completion_ids"], mask,
                     entropy_policy.model.config.pad_token_id, completion_attention_mask=inputs["completion_mask"],
                     advantages=inputs["advantages"][:, None] * mask, old_logp=inputs["old_per_token_logps"],
                     ref_logp=inputs["ref_per_token_logps"])
    entropy_policy.model.zero_grad(set_to_none=True)
    loss, _, _ = core.compute_loss(entropy_policy, batch, update_config(cfg), ladder_num_tokens(grpo_trainer, inputs))
    loss.backward()
    close(loss.detach(), expected[0], "loss", rtol=1e-4)
    got = grads(entropy_policy.model)
    for name in expected[1]:
        close(got[name], expected[1][name], name, rtol=1e-4)


# --- --export-trl carries the design options --------------------------------------------------------

EXPORTS = {
    "sapo": (["--algo", "sapo", "--sapo-temperature-neg", "1.3"],
             dict(loss_type="sapo", sapo_temperature_pos=1.0, sapo_temperature_neg=1.3)),
    "vespo": (["--algo", "vespo", "--vespo-k-pos", "1.5", "--vespo-lambda-neg", "4"],
              dict(loss_type="vespo", importance_sampling_level="token", beta=0.0, vespo_k_pos=1.5,
                   vespo_lambda_pos=3.0, vespo_k_neg=3.0, vespo_lambda_neg=4.0)),
    "gdpo": (["--multi-objective-aggregation", "normalize_then_sum"],
             dict(multi_objective_aggregation="normalize_then_sum")),
    "entropy": (["--top-entropy-quantile", "0.2", "--adaptive-entropy", "--entropy-coef", "0.01",
                 "--entropy-target", "0.3", "--entropy-coef-max", "0.5", "--entropy-coef-delta", "0.002"],
                dict(top_entropy_quantile=0.2, use_adaptive_entropy=True, entropy_coef=0.01, entropy_target=0.3,
                     entropy_coef_min=0.0, entropy_coef_max=0.5, entropy_coef_delta=0.002)),
}


@pytest.mark.parametrize("flags,fields", EXPORTS.values(), ids=EXPORTS.keys())
def test_export_trl_carries_the_design_options(tmp_path, monkeypatch, flags, fields):
    monkeypatch.chdir(tmp_path)
    path = tmp_path / "grpo_trl.py"
    cfg = run.make_config("grpo", grpo, ["--preset", "tiny", *flags, "--export-trl", str(path)])
    grpo.validate(cfg)
    export_trl.write(cfg, cfg.export_trl)
    spec = importlib.util.spec_from_file_location("exported_design", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    values = {**module.GRPO_CONFIG, **module.BY_DEVICE["cpu"]}
    args = GRPOConfig(**{**values, "output_dir": str(tmp_path / "out")})  # TRL takes them
    for name, value in fields.items():
        assert values[name] == value and getattr(args, name) == value, (name, values.get(name))
