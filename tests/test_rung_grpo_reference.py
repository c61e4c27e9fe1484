"""GRPO's reference policy on tiny models (CPU, seeded): π_ref refreshable (LoRA, QLoRA, full fine-tuning)
towards π_θ, an exact resume after a refresh, and the KL to π_ref moved into the reward."""

import json
import shutil

import pytest
import torch
from lm_helpers import GSM8K_ROWS, grpo_config, one_thread_then_back, read_metrics  # noqa: F401 (autouse fixture)
from safetensors.torch import load_file

from ladder import core, run
from ladder.policies import quant
from ladder.policies.causal_lm import REFERENCE_ADAPTER, CausalLMPolicy, lm_batch
from ladder.rungs import grpo
from ladder.runtime.runlog import RunLog, without_timings
from ladder.tasks import arithmetic

# ----------------------------------------------------------------------------------------------------------
# 1. π_ref refreshed: a second frozen adapter (LoRA, QLoRA) or the frozen copy (full fine-tuning)


def _policy(tiny_qwen, kind):
    cpu = torch.device("cpu")
    if kind == "full":
        return CausalLMPolicy(quant.load_causal_lm(tiny_qwen, cpu), ref_model=quant.load_causal_lm(tiny_qwen, cpu))
    model = quant.load_causal_lm(tiny_qwen, cpu, qlora=kind == "qlora", lora=kind == "lora",
                                 gradient_checkpointing=kind == "qlora")
    return CausalLMPolicy(model)


def _batch(tiny_qwen):
    tokenizer = quant.load_tokenizer(tiny_qwen)
    enc = tokenizer([arithmetic.chat_prompt(tokenizer, q["question"], "Solve.") for q in GSM8K_ROWS[:3]],
                    return_tensors="pt", padding=True)
    ids, mask = enc.input_ids.repeat_interleave(2, 0), enc.attention_mask.repeat_interleave(2, 0)
    completion = torch.randint(5, len(tokenizer) - 5, (6, 7), generator=torch.Generator().manual_seed(0))
    completion_mask = torch.ones(6, 7)
    completion_mask[1, 4:] = 0  # one shorter completion
    return lm_batch(ids, mask, completion, completion_mask, tokenizer.pad_token_id)


def _reference_and_theta(policy):
    """name → (π_ref's parameter, π_θ's parameter) for every parameter the refresh mixes."""
    if policy.ref_model is not None:
        theta = dict(policy.model.named_parameters())
        return {n: (p, theta[n]) for n, p in policy.ref_model.named_parameters()}
    params = dict(policy.model.named_parameters())
    active = policy.model.active_adapter
    return {n: (p, params[n.replace(f".{REFERENCE_ADAPTER}.", f".{active}.")]) for n, p in params.items()
            if f".{REFERENCE_ADAPTER}." in n}


@torch.no_grad()
def _logp(policy, batch):
    return policy.evaluate(batch)[0]


def _masked_max(x, batch):
    return (x.abs() * batch.mask).max().item()


@pytest.mark.parametrize("kind", ["lora", "qlora", "full"])
def test_reference_refresh_mixes_parameters_and_never_trains(tiny_qwen, kind):
    torch.manual_seed(0)
    policy, batch = _policy(tiny_qwen, kind), _batch(tiny_qwen)
    base_logp = _logp(policy, batch)  # π_θ starts as the base (LoRA's B = 0)
    count = sum(p.numel() for p in policy.parameters())
    trainable = {n: p for n, p in policy.named_parameters() if p.requires_grad}
    n_4bit = sum(type(m).__name__ == "Linear4bit" for m in policy.modules())

    policy.make_reference_refreshable()
    pairs = _reference_and_theta(policy)
    added = sum(p.numel() for p in policy.parameters()) - count
    if kind == "full":
        assert added == 0  # the frozen copy is π_ref as it is
        assert set(pairs) == {n[len("model."):] for n in trainable}
    else:  # one more adapter the size of π_θ's, on the same (not copied) base
        assert added == sum(p.numel() for p in trainable.values()) > 0
        assert len(pairs) == len(trainable) and all(".lora_" in n for n in pairs)
        assert sum(type(m).__name__ == "Linear4bit" for m in policy.modules()) == n_4bit
        assert sorted(policy.model.peft_config) == ["default", REFERENCE_ADAPTER]
    assert not any(ref.requires_grad for ref, _ in pairs.values())
    assert {n for n, p in policy.named_parameters() if p.requires_grad} == set(trainable)
    assert policy.reference_state().keys() == pairs.keys()

    # π_θ trains a few steps (the optimizer built after the refreshable reference, as train() does)
    optimizer = quant.make_optimizer(policy.parameters(), 1e-2, "adamw", torch.device("cpu"))
    in_optimizer = {id(p) for group in optimizer.param_groups for p in group["params"]}
    assert in_optimizer == {id(p) for p in trainable.values()}
    assert not in_optimizer & {id(ref) for ref, _ in pairs.values()}
    start = {n: ref.detach().clone() for n, (ref, _) in pairs.items()}
    for _ in range(3):
        optimizer.zero_grad()
        logp = policy.evaluate(batch)[0]
        (-(logp * batch.mask).sum() / batch.mask.sum()).backward()
        assert all(ref.grad is None for ref, _ in pairs.values())
        optimizer.step()
        policy.ref_logp(batch)  # switching to π_ref's adapter and back changes no requires_grad
        assert not any(ref.requires_grad for ref, _ in pairs.values())
        assert all(p.requires_grad for p in trainable.values())
    assert all(torch.equal(ref, start[n]) for n, (ref, _) in pairs.items())
    theta_logp = _logp(policy, batch)
    assert _masked_max(theta_logp - base_logp, batch) > 1e-2  # π_θ moved
    ref_logp = policy.ref_logp(batch)
    assert _masked_max(ref_logp - base_logp, batch) < 1e-5  # π_ref has not: it is still the base
    if kind != "full":
        with torch.no_grad(), policy.model.disable_adapter():
            disabled = policy.evaluate(batch)[0]
        assert _masked_max(ref_logp - disabled, batch) < 1e-5

    policy.refresh_reference(0.0)  # α = 0: π_ref as it was
    assert all(torch.equal(ref, start[n]) for n, (ref, _) in pairs.items())
    assert torch.equal(policy.ref_logp(batch), ref_logp)

    policy.refresh_reference(0.5)  # α = 1/2: the parameter midpoint
    for n, (ref, theta) in pairs.items():
        assert torch.allclose(ref, (start[n] + theta.detach()) / 2, atol=1e-7, rtol=1e-6), n
    half_logp = policy.ref_logp(batch)
    assert _masked_max(half_logp - ref_logp, batch) > 1e-4

    policy.refresh_reference(1.0)  # α = 1: π_ref = π_θ, KL(π_θ‖π_ref) = 0
    assert all(torch.equal(ref, theta) for ref, theta in pairs.values())
    ref_logp = policy.ref_logp(batch)
    assert _masked_max(ref_logp - theta_logp, batch) < 1e-6
    assert _masked_max(core.kl_estimate(theta_logp, ref_logp, "k3"), batch) < 1e-6
    assert not any(ref.requires_grad for ref, _ in pairs.values())
    assert torch.equal(_logp(policy, batch), theta_logp)  # π_θ untouched by the refresh

    # a checkpoint's reference state puts π_ref back
    saved = policy.reference_state()
    policy.load_reference_state(start)
    assert _masked_max(policy.ref_logp(batch) - base_logp, batch) < 1e-5
    policy.load_reference_state(saved)
    assert torch.equal(policy.ref_logp(batch), ref_logp)


# ----------------------------------------------------------------------------------------------------------
# 2. A run with π_ref refreshes, killed after a checkpoint and resumed, ends where the straight run ends


class Killed(Exception):
    pass


def _args(tiny_qwen, grpo_files, out):
    return ["grpo", "--model", tiny_qwen, "--dataset", grpo_files["gsm8k"], "--reward-funcs", grpo_files["length"],
            "--lora", "--steps", "4", "--prompts-per-step", "2", "--group-size", "4", "--max-new-tokens", "8",
            "--eval-size", "2", "--eval-every", "0", "--lr", "1e-2", "--kl-coef", "0.1", "--ref-sync-every", "2",
            "--checkpoint-every", "3", "--print-samples", "0", "--no-progress", "--threads", "1", "--out", str(out)]


@pytest.fixture(scope="module")
def straight_run(tiny_qwen, grpo_files, tmp_path_factory):
    out = tmp_path_factory.mktemp("straight") / "run"
    assert run.main(_args(tiny_qwen, grpo_files, out)) == 0
    return out


def _metrics(out):
    return [without_timings(r) for r in read_metrics(out)]


def _summary(out):
    return {k: v for k, v in json.loads((out / "summary.json").read_text()).items() if k != "wall_s"}


def test_saved_adapter_is_the_trained_one_only(straight_run):
    adapter = straight_run / "adapter"
    assert not [p for p in adapter.iterdir() if p.is_dir()]  # no "ref" subfolder
    weights = load_file(adapter / "adapter_model.safetensors")
    parts = torch.load(straight_run / "checkpoint.pt", weights_only=False)["parts"]
    assert weights and not any(f".{REFERENCE_ADAPTER}." in n for n in weights)
    assert len(weights) == len(parts["policy"]) == len(parts["reference"])
    assert all(".default." in n for n in parts["policy"])
    assert all(f".{REFERENCE_ADAPTER}." in n for n in parts["reference"])
    config = json.loads((adapter / "adapter_config.json").read_text())
    assert config["r"] == 16 and config["peft_type"] == "LORA"


def test_resume_after_a_reference_refresh_equals_the_straight_run(tiny_qwen, grpo_files, straight_run, tmp_path,
                                                                   monkeypatch):
    records = read_metrics(straight_run)
    assert [r["step"] for r in records] == [1, 2, 3, 4]
    assert records[0]["kl_ref"] == 0 and records[2]["kl_ref"] > 0  # π_θ moves, π_ref follows it at step 2

    cut = tmp_path / "cut"
    real_save = RunLog.save_checkpoint

    def save_then_die(self, state):
        real_save(self, state)
        raise Killed

    with monkeypatch.context() as m:
        m.setattr(RunLog, "save_checkpoint", save_then_die)
        with pytest.raises(Killed):
            run.main(_args(tiny_qwen, grpo_files, cut))
    assert len(read_metrics(cut)) == 3 and not (cut / "summary.json").exists()
    assert _metrics(cut) == _metrics(straight_run)[:3]
    copy = tmp_path / "no-reference"
    shutil.copytree(cut, copy)
    # (--resume of a copied run directory resumes the *saved* --out, the original: point the copy at itself)
    config = json.loads((copy / "config.json").read_text())
    (copy / "config.json").write_text(json.dumps({**config, "out": str(copy)}))

    assert run.main(["grpo", "--resume", str(cut), "--no-progress"]) == 0
    assert _metrics(cut) == _metrics(straight_run)
    assert _summary(cut) == _summary(straight_run)
    weights, expected = (load_file(out / "adapter" / "adapter_model.safetensors") for out in (cut, straight_run))
    assert weights.keys() == expected.keys()
    assert all(weights[n].equal(expected[n]) for n in expected)

    # The checkpoint's π_ref matters: resumed with π_ref back at the base, step 4 differs.
    monkeypatch.setattr(CausalLMPolicy, "load_reference_state", lambda self, state: None)
    assert run.main(["grpo", "--resume", str(copy), "--no-progress"]) == 0
    assert _metrics(copy)[:3] == _metrics(straight_run)[:3]
    assert _metrics(copy)[3]["kl_ref"] != _metrics(straight_run)[3]["kl_ref"]


# ----------------------------------------------------------------------------------------------------------
# 3. KL in the reward


@pytest.mark.parametrize("advantage, scale, estimator", [("rloo", "none", "k1"), ("group", "group", "k3")])
def test_kl_in_the_reward_shapes_the_advantages_not_the_loss(tmp_path, tiny_qwen, grpo_files, spy_grpo_update,
                                                               spy_grpo_rollouts, advantage, scale, estimator):
    beta, G = 0.5, 4
    grpo.train(grpo_config(tmp_path, tiny_qwen, grpo_files["gsm8k"], steps=2, group_size=G, lr=1e-2, kl_coef=beta,
                           kl_in="reward", kl_estimator=estimator, advantage=advantage, scale_rewards=scale,
                           reward_funcs=grpo_files["length"]))
    records = read_metrics(tmp_path / "run")
    assert len(spy_grpo_update) == 2 == len(spy_grpo_rollouts)
    for (_, batch, cfg, before, ref), rollout, record in zip(spy_grpo_update, spy_grpo_rollouts, records):
        assert cfg.kl_coef == 0  # no KL term in the loss
        assert batch.old_logp is not None and batch.ref_logp is not None
        assert torch.equal(batch.old_logp, before)  # π_old: taken before the update
        assert torch.equal(batch.ref_logp, ref)
        kl = (core.kl_estimate(before, ref, estimator) * rollout.mask).sum(1)
        shaped = rollout.rewards - beta * kl
        expected = (core.leave_one_out(shaped, G, scale) if advantage == "rloo"
                    else core.group_relative(shaped, G, scale))
        assert torch.allclose(batch.advantages, expected[:, None] * rollout.mask, atol=1e-5)
        assert record["reward_shaped"] == pytest.approx(shaped.mean().item(), abs=1e-6)
    kl = (core.kl_estimate(spy_grpo_update[1][3], spy_grpo_update[1][4], estimator) * spy_grpo_rollouts[1].mask).sum(1)
    assert kl.abs().max() > 1e-3  # by the second update π_θ has left π_ref: the shaping is not a no-op
    unshaped = (core.leave_one_out(spy_grpo_rollouts[1].rewards, G, scale) if advantage == "rloo"
                else core.group_relative(spy_grpo_rollouts[1].rewards, G, scale))
    assert (spy_grpo_update[1][1].advantages[:, 0] - unshaped).abs().max() > 1e-3
