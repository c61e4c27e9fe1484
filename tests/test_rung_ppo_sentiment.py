"""RLHF-PPO on sentiment: same core as CartPole, correct targets and log-probs, learns offline."""

from __future__ import annotations

import json
import math
import os
import sys
from dataclasses import replace

import pytest
import torch
from cli_helpers import run_cli

import ladder.core
from ladder.policies import quant
from ladder.policies.causal_lm import CausalLMPolicy, is_peft, lm_batch, position_ids_for
from ladder.rungs import cartpole
from ladder.rungs import ppo_sentiment as ps
from ladder.runtime.runlog import UsageError
from ladder.tasks import generated_reviews, review_models, tiny_lm


@pytest.fixture(scope="session")
def tiny_model_dir():
    return review_models.tiny_model_path()


def tiny_config(tmp_path, **overrides) -> ps.Config:
    """The tiny preset, shortened."""
    values = {**ps.PRESETS["tiny"], "out": str(tmp_path / "run"), "progress": False, "steps": 2,
              "batch_size": 16, "num_minibatches": 2, "num_eval_prompts": 4, "print_samples": 0}
    values.update(overrides)
    return ps.Config(**values)


@pytest.fixture
def spy_update(monkeypatch):
    """Replace ladder.core.update by a recording wrapper around the very same function."""
    calls = []
    real = ladder.core.update

    def spy(policy, batch, optimizer, cfg, *args, **kwargs):
        calls.append({"policy": policy, "shape": tuple(batch.actions.shape), "cfg": cfg})
        return real(policy, batch, optimizer, cfg, *args, **kwargs)

    monkeypatch.setattr(ladder.core, "update", spy)
    return calls, real


def test_rung_calls_the_same_core_update_as_cartpole(tmp_path, spy_update, tiny_model_dir):
    calls, real = spy_update
    assert ps.recipe.core is cartpole.recipe.core is ladder.core
    assert not hasattr(ps, "update")  # no private copy of the update
    ps.train(tiny_config(tmp_path))
    cartpole.train(cartpole.Config(out=str(tmp_path / "cp"), total_steps=256, progress=False, eval_every=10**6))
    lm_calls = [c for c in calls if isinstance(c["policy"], CausalLMPolicy)]
    assert len(lm_calls) == 2 and len(calls) == 3
    assert type(calls[-1]["policy"]).__name__ == "MLPActorCritic"
    for call in lm_calls:
        cfg = call["cfg"]
        assert call["shape"][0] == 16
        assert (cfg.objective, cfg.mu, cfg.value_clip, cfg.kl_coef) == ("clipped", 4, 0.2, 0.0)
    assert real is sys.modules["ladder.core.update"].update  # the one update, defined once in the core


def test_kl_shaped_reward_and_gae_equal_a_hand_computed_case():
    cfg = ps.Config(gamma=1.0, gae_lambda=0.5, kl_estimator="k1")
    mask = torch.tensor([[1.0, 1.0, 1.0], [1.0, 1.0, 0.0]])
    old_logp = torch.tensor([[-1.0, -2.0, -0.5], [-0.2, -0.4, -9.0]])
    ref_logp = torch.tensor([[-1.5, -1.0, -0.5], [-0.2, -0.8, -1.0]])
    values = torch.tensor([[0.1, 0.2, 0.3], [0.4, 0.5, 7.0]])
    scores = torch.tensor([2.0, -1.0])
    out = ps.ppo_targets(scores, old_logp, ref_logp, values, mask, kl_coef=0.1, cfg=cfg)
    # k1 = log π_old − log π_ref;  r_t = −β·k1_t, plus the score on the last real token
    kl = torch.tensor([[0.5, -1.0, 0.0], [0.0, 0.4, 0.0]])
    rewards = torch.tensor([[-0.05, 0.1, 0.0 + 2.0], [0.0, -0.04 - 1.0, 0.0]])
    torch.testing.assert_close(out["kl"], kl)
    torch.testing.assert_close(out["rewards"], rewards)
    # GAE by hand, γ = 1, λ = 0.5, no bootstrap past the last token, V at padding ignored
    v = torch.tensor([[0.1, 0.2, 0.3], [0.4, 0.5, 0.0]])
    d0 = [rewards[0, 0] + v[0, 1] - v[0, 0], rewards[0, 1] + v[0, 2] - v[0, 1], rewards[0, 2] - v[0, 2]]
    d1 = [rewards[1, 0] + v[1, 1] - v[1, 0], rewards[1, 1] - v[1, 1]]
    a0_2 = d0[2]
    a0_1 = d0[1] + 0.5 * a0_2
    a0_0 = d0[0] + 0.5 * a0_1
    a1_1 = d1[1]
    a1_0 = d1[0] + 0.5 * a1_1
    adv = torch.tensor([[a0_0, a0_1, a0_2], [a1_0, a1_1, 0.0]])
    torch.testing.assert_close(out["returns"], (adv + v) * mask)
    real = adv[mask.bool()]
    whitened = (real - real.mean()) / real.std()
    torch.testing.assert_close(out["advantages"][mask.bool()], whitened, atol=1e-5, rtol=1e-5)
    assert out["advantages"][1, 2] == 0 and out["values"][1, 2] == 0


def test_k3_estimator_is_selectable():
    cfg = ps.Config(kl_estimator="k3")
    mask = torch.ones(1, 2)
    old, ref = torch.tensor([[-1.0, -2.0]]), torch.tensor([[-1.5, -1.0]])
    out = ps.ppo_targets(torch.tensor([1.0]), old, ref, torch.zeros(1, 2), mask, 0.2, cfg)
    log_ratio = ref - old
    torch.testing.assert_close(out["kl"], torch.expm1(log_ratio) - log_ratio)
    torch.testing.assert_close(out["rewards"], -0.2 * out["kl"] + torch.tensor([[0.0, 1.0]]))


def _random_gpt2(seed=0):
    tokenizer = tiny_lm.train_tokenizer(generated_reviews.review_corpus(300, seed=seed), vocab_size=300)
    torch.manual_seed(seed)
    return tiny_lm.build_model("gpt2", tokenizer, hidden=32, layers=2, heads=2, max_positions=64), tokenizer


@pytest.mark.parametrize("temperature", [1.0, 0.7])
def test_chunked_logp_equals_full_logits_reference(temperature):
    model, tokenizer = _random_gpt2()
    policy = CausalLMPolicy(model, value_head=True, temperature=temperature, chunk_size=3)
    enc = tokenizer(["This movie", "The acting was really"], padding=True, return_tensors="pt")
    completion = torch.randint(3, len(tokenizer), (2, 7))
    cmask = torch.tensor([[1.0] * 7, [1.0] * 4 + [0.0] * 3])
    batch = lm_batch(enc["input_ids"], enc["attention_mask"], completion, cmask, tokenizer.pad_token_id)

    logp, entropy, values = policy.evaluate(batch)
    (logp * batch.mask).sum().backward()
    chunked_grad = model.transformer.wte.weight.grad.clone()
    model.zero_grad()

    ids, attention = batch.inputs["input_ids"], batch.inputs["attention_mask"]
    P = enc["input_ids"].shape[1]
    logits = model(input_ids=ids, attention_mask=attention, position_ids=position_ids_for(attention)).logits
    full = torch.log_softmax(logits[:, P - 1:-1].float() / temperature, dim=-1)
    reference = full.gather(-1, batch.actions[..., None]).squeeze(-1)
    (reference * batch.mask).sum().backward()
    m = batch.mask.bool()
    torch.testing.assert_close(logp[m], reference[m], atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(entropy[m], -(full.exp() * full).sum(-1)[m], atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(chunked_grad, model.transformer.wte.weight.grad, atol=1e-5, rtol=1e-4)
    assert values.shape == logp.shape


def test_value_head_starts_at_zero(tiny_model_dir, tmp_path):
    cfg = tiny_config(tmp_path)
    model, tokenizer = ps.load_model(cfg)
    policy = ps.build_policy(cfg, model)
    assert torch.count_nonzero(policy.value_head.weight) == 0 and policy.value_head.bias.item() == 0.0
    batch, _, _ = ps.rollout(policy, tokenizer, ["This movie", "The acting was"], cfg)
    _, values, _ = ps.old_and_ref(policy, batch, 1)
    assert torch.equal(values, torch.zeros_like(values))


@pytest.mark.trained
def test_short_seeded_tiny_run_raises_the_reward(tmp_path, tiny_model_dir):
    cfg = tiny_config(tmp_path, steps=20, batch_size=32, num_eval_prompts=6)
    summary = ps.train(cfg)
    records = [json.loads(line) for line in open(tmp_path / "run" / "metrics.jsonl")]
    assert len(records) == 20
    assert summary["score_last5_mean"] > summary["score_first5_mean"] + 0.25
    assert max(r["kl_ref"] for r in records) < 10.0
    keys = {"score_mean", "score_std", "reward_mean", "reward_std", "kl_ref", "kl_coef", "clip_frac",
            "approx_kl_old_k3", "value_loss", "explained_variance", "entropy", "response_length"}
    assert keys <= set(records[-1])
    assert records[0]["kl_coef"] == 0.2 and records[-1]["kl_coef"] != 0.2  # adaptive β moves
    for name in ("metrics.jsonl", "summary.json", "curves.png", "samples.md", "config.json", "policy"):
        assert (tmp_path / "run" / name).exists(), name
    saved = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert {"score_first", "score_last", "kl_final", "samples"} <= set(saved)
    assert len(saved["samples"]) == 6 and {"before", "after"} <= set(saved["samples"][0])


def test_same_seed_same_metrics_and_resume_continues_exactly(tmp_path, tiny_model_dir):
    def metrics(out):
        return [{k: v for k, v in json.loads(line).items() if k != "wall_s"} for line in open(out / "metrics.jsonl")]

    ps.train(tiny_config(tmp_path / "a", steps=3, checkpoint_every=2))
    cut = tmp_path / "b"
    ps.train(tiny_config(cut, steps=3, checkpoint_every=2))
    assert metrics(tmp_path / "a" / "run") == metrics(cut / "run")
    # pretend the run died after the checkpoint at update 2, then resume it
    (cut / "run" / "summary.json").unlink()
    with open(cut / "run" / "metrics.jsonl", "a") as f:
        f.write('{"step": 99}\n')
    ps.train(tiny_config(cut, steps=3, checkpoint_every=2, resume=str(cut / "run")))
    assert metrics(cut / "run") == metrics(tmp_path / "a" / "run")


def test_lora_reference_is_the_disabled_adapter(tmp_path, tiny_model_dir, spy_update):
    calls, _ = spy_update
    cfg = tiny_config(tmp_path, lora=True, lora_r=4, lr=1e-2)
    model, tokenizer = ps.load_model(cfg)
    original, _ = ps.load_model(replace(cfg, lora=False))
    policy = ps.build_policy(cfg, model)
    assert policy.ref_model is None and is_peft(policy.model)
    trainable = {n for n, p in policy.named_parameters() if p.requires_grad}
    assert trainable and all("lora_" in n or n.startswith("value_head") for n in trainable)

    batch, _, _ = ps.rollout(policy, tokenizer, ["This movie", "The plot was"] * 4, cfg)
    reference = CausalLMPolicy(original)
    ref_before = policy.ref_logp(batch)
    old, values, _ = ps.old_and_ref(policy, batch, 8)
    torch.testing.assert_close(ref_before, old)  # LoRA B starts at zero: π_θ = π_ref
    batch.old_logp, batch.values, batch.returns = old, values, torch.ones_like(old) * batch.mask
    batch.advantages = torch.randn_like(old) * batch.mask
    optimizer = torch.optim.Adam([p for p in policy.parameters() if p.requires_grad], lr=cfg.lr)
    ladder.core.update(policy, batch, optimizer, ps.update_config(cfg))
    after, _, _ = ps.old_and_ref(policy, batch, 8)
    assert not torch.allclose(after, old)  # π_θ moved …
    torch.testing.assert_close(policy.ref_logp(batch), reference.evaluate(batch)[0].detach())  # … π_ref did not

    calls.clear()
    summary = ps.train(tiny_config(tmp_path, lora=True, lora_r=4, overwrite=True))
    assert summary["lora"] and len(calls) == 2 and is_peft(calls[0]["policy"].model)
    assert (tmp_path / "run" / "policy" / "adapter_config.json").exists()


def test_saved_gpt2_distilbert_and_local_dataset_load_like_hub_ids(tmp_path):
    model_dir = review_models.save_random_gpt2(tmp_path / "gpt2")
    reward_dir = review_models.save_random_distilbert_classifier(tmp_path / "distilbert")
    data = tmp_path / "imdb.jsonl"
    data.write_text("".join(json.dumps({"text": t, "label": i % 2}) + "\n"
                            for i, t in enumerate(generated_reviews.review_corpus(40, seed=9))))
    cfg = tiny_config(tmp_path, model=str(model_dir), reward_model=str(reward_dir), dataset=str(data),
                      batch_size=8, num_minibatches=2, max_new_tokens=6, lr=1e-4)
    summary = ps.train(cfg)
    assert summary["updates"] == 2 and summary["reward_model"] == str(reward_dir)
    records = [json.loads(line) for line in open(tmp_path / "run" / "metrics.jsonl")]
    assert all(r["score_mean"] is not None and r["response_length"] > 0 for r in records)
    config = json.loads((tmp_path / "run" / "config.json").read_text())
    assert config["model"] == str(model_dir) and config["dataset"] == str(data)


def _cli(*args, cwd, env=None):
    return run_cli("ppo-sentiment", *args, cwd=cwd, env=env, timeout=120)


def test_offline_hub_id_is_one_line_naming_the_tiny_preset(tmp_path):
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_HOME": str(tmp_path / "hf")}
    out = tmp_path / "out"
    result = _cli("--out", str(out), cwd=tmp_path, env=env)
    assert result.returncode == 2, result.stderr
    assert "--preset tiny" in result.stderr and "lvwerra/gpt2-imdb" in result.stderr
    assert "Traceback" not in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert not out.exists()


@pytest.mark.parametrize("override, needle", [
    ({"num_minibatches": 3}, "minibatches"), ({"mu": 0}, "--mu"), ({"clip_eps": 1.5}, "--clip-eps"),
    ({"min_prompt_tokens": 9}, "prompt-tokens"), ({"top_p": 0.0}, "--top-p"), ({"kl_target": 0.0}, "--kl-target"),
])
def test_bad_options_are_usage_errors(tmp_path, override, needle):
    with pytest.raises(UsageError, match=needle):
        ps.validate(tiny_config(tmp_path, **override))


@pytest.mark.parametrize("lora", [True, False])
def test_reference_refresh_moves_pi_ref_to_pi_theta(tmp_path, tiny_model_dir, lora):
    cfg = tiny_config(tmp_path, lora=lora, lora_r=4, lr=1e-2, ref_sync_every=1)
    model, tokenizer = ps.load_model(cfg)
    policy = ps.build_policy(cfg, model)
    assert (policy.ref_model is None) == lora                      # LoRA: a second adapter, no copy of the base
    batch, _, _ = ps.rollout(policy, tokenizer, ["This movie", "The plot was"] * 4, cfg)
    old, values, ref_start = ps.old_and_ref(policy, batch, 8)
    batch.old_logp, batch.values, batch.returns = old, values, torch.ones_like(old) * batch.mask
    batch.advantages = torch.randn_like(old) * batch.mask
    optimizer = torch.optim.Adam([p for p in policy.parameters() if p.requires_grad], lr=cfg.lr)
    ladder.core.update(policy, batch, optimizer, ps.update_config(cfg))
    theta = policy.evaluate(batch)[0].detach()
    policy.refresh_reference(0.0)                                  # α = 0: π_ref stays where it was
    torch.testing.assert_close(policy.ref_logp(batch), ref_start)
    assert not torch.allclose(theta, ref_start)
    policy.refresh_reference(1.0)                                  # α = 1: π_ref = π_θ, KL(π_θ‖π_ref) = 0
    torch.testing.assert_close(policy.ref_logp(batch), theta, rtol=0, atol=1e-6)


def test_resume_after_a_reference_refresh_continues_exactly(tmp_path, tiny_model_dir):
    def metrics(out):
        return [{k: v for k, v in json.loads(line).items() if k != "wall_s"} for line in open(out / "metrics.jsonl")]

    options = dict(steps=3, checkpoint_every=2, ref_sync_every=1, ref_mixup=0.5)
    ps.train(tiny_config(tmp_path / "a", **options))
    cut = tmp_path / "b"
    ps.train(tiny_config(cut, **options))
    (cut / "run" / "summary.json").unlink()                       # as if it died after the checkpoint at 2
    ps.train(tiny_config(cut, **options, resume=str(cut / "run")))
    assert metrics(cut / "run") == metrics(tmp_path / "a" / "run")


def test_qlora_trains_adapters_on_a_4bit_base(tmp_path, tiny_model_dir):
    """--qlora through the one loader both LM rungs use: a 4-bit base, LoRA adapters the only weights trained,
    π_ref the base with the adapter disabled, the adapter saved."""
    cfg = tiny_config(tmp_path, qlora=True, lora_r=4, steps=2)
    model, _ = ps.load_model(cfg)
    assert quant.has_4bit_layers(model) and is_peft(model)
    assert all("lora_" in n for n, p in model.named_parameters() if p.requires_grad)
    summary = ps.train(cfg)
    assert summary["updates"] == 2 and all(map(math.isfinite, (summary["score_last"], summary["kl_final"])))
    assert (tmp_path / "run" / "policy" / "adapter_config.json").exists()


def test_shared_prompts_under_activation_checkpointing_equal_the_plain_forward(tiny_model_dir):
    """GPT-2 hands its blocks no cache while checkpointing in training mode: the shared-prompt forward must
    still see each row's prompt (log-probs and gradients as without sharing)."""
    model = quant.load_causal_lm(str(tiny_model_dir), torch.device("cpu"), lora=True, lora_r=4,
                                 gradient_checkpointing=True)
    tokenizer = quant.load_tokenizer(str(tiny_model_dir))
    enc = tokenizer(["This movie", "The acting was", "This movie"], padding=True, return_tensors="pt")
    completion = torch.tensor([[5, 6, 7], [8, 9, 10], [11, 12, 13]])
    batch = lm_batch(enc.input_ids, enc.attention_mask, completion, torch.ones(3, 3), tokenizer.pad_token_id)
    results = []
    for share in (True, False):
        policy = CausalLMPolicy(model, share_prompts=share)
        model.zero_grad(set_to_none=True)
        logp = policy.evaluate(batch)[0]
        logp.sum().backward()
        grads = {n: p.grad.clone() for n, p in model.named_parameters() if p.requires_grad}
        results.append((logp.detach(), grads))
    torch.testing.assert_close(results[0][0], results[1][0], atol=1e-5, rtol=1e-5)
    for name, grad in results[1][1].items():
        torch.testing.assert_close(results[0][1][name], grad, atol=1e-5, rtol=1e-4)
