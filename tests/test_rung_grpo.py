"""Rung 4, GRPO: the same core.update, the QLoRA path, the real loading code on saved tiny models."""

import json
import platform
import subprocess
import sys

import pytest
import torch
from cli_helpers import run_main
from lm_helpers import GSM8K_ROWS

import ladder.core
from ladder.policies import quant
from ladder.policies.causal_lm import CausalLMPolicy, lm_batch
from ladder.rungs import grpo
from ladder.tasks import arithmetic


@pytest.fixture
def gsm8k_file(tmp_path):
    path = tmp_path / "gsm8k.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in GSM8K_ROWS))
    return str(path)


@pytest.fixture
def spy_update(monkeypatch):
    calls = []
    real = ladder.core.update

    def spy(policy, batch, optimizer, cfg, *args, **kwargs):
        calls.append((policy, batch, cfg))
        return real(policy, batch, optimizer, cfg, *args, **kwargs)

    monkeypatch.setattr(ladder.core, "update", spy)
    return calls


def _config(tmp_path, model, dataset, **kw):
    base = dict(model=model, dataset=dataset, steps=2, prompts_per_step=2, group_size=4, max_new_tokens=8,
                eval_size=2, lr=1e-3, lora=True, out=str(tmp_path / "run"), progress=False, print_samples=0)
    return grpo.Config(**{**base, **kw})


def test_grpo_goes_through_core_update_with_local_model_and_dataset(tmp_path, tiny_qwen, gsm8k_file, spy_update):
    summary = grpo.train(_config(tmp_path, tiny_qwen, gsm8k_file))
    assert len(spy_update) == 2
    policy, batch, cfg = spy_update[0]
    assert isinstance(policy, CausalLMPolicy)
    assert batch.actions.shape[0] == 2 * 4 and batch.ref_logp is not None
    assert cfg.objective == ladder.core.Clipped() and cfg.kl_coef == 0.04 and cfg.aggregation == "seq_mean_token_mean"
    # every token of a completion carries its completion's advantage
    adv = batch.advantages
    per_row = [adv[i][batch.mask[i].bool()] for i in range(len(batch))]
    assert all(torch.allclose(r, r[0].expand_as(r)) for r in per_row if r.numel())
    assert {"accuracy_before", "accuracy_after", "reward_first5", "final_kl"} <= set(summary)
    records = [json.loads(line) for line in open(tmp_path / "run" / "metrics.jsonl")]
    for key in ("reward", "rewards/correctness/mean", "rewards/format/mean", "frac_reward_zero_std",
                "completions/mean_length", "completions/clipped_ratio", "kl_ref", "entropy", "clip_frac_low",
                "clip_frac_high", "clip_frac", "approx_kl_old_k3", "ratio_max"):
        assert key in records[0], key
    from peft import PeftModel

    from ladder.patches import peft_wraps_quietly
    base = quant.load_causal_lm(tiny_qwen, torch.device("cpu"))
    with peft_wraps_quietly():
        assert isinstance(PeftModel.from_pretrained(base, str(tmp_path / "run" / "adapter")), PeftModel)


def test_mu_one_skips_the_old_logp_forward_and_kl_zero_skips_reference(tmp_path, tiny_qwen, gsm8k_file,
                                                                          monkeypatch):
    calls = {"evaluate": 0}
    real = CausalLMPolicy.evaluate

    def counting(self, batch):
        calls["evaluate"] += 1
        return real(self, batch)

    def no_reference(self, batch):
        raise AssertionError("π_ref computed although kl_coef = 0")

    monkeypatch.setattr(CausalLMPolicy, "evaluate", counting)
    monkeypatch.setattr(CausalLMPolicy, "ref_logp", no_reference)
    grpo.train(_config(tmp_path, tiny_qwen, gsm8k_file, steps=1, kl_coef=0.0, mu=1))
    assert calls["evaluate"] == 1  # one forward with grad; π_old = π_θ.detach()
    calls["evaluate"] = 0
    grpo.train(_config(tmp_path, tiny_qwen, gsm8k_file, steps=1, kl_coef=0.0, mu=2, overwrite=True))
    assert calls["evaluate"] == 1 + 2  # π_old recorded once, then two passes


@pytest.mark.parametrize("loss_type", list(grpo.LOSS_TYPES))
def test_each_minibatch_divides_by_the_loss_types_constant(loss_type, monkeypatch):
    """The rung computes the constant, core.update shares it out over the M minibatches: len(mb) · L_max for
    dr_grpo (Dr. GRPO's budget), the whole batch's active tokens (Σ over processes ÷ P) ÷ M for dapo, cispo and
    vespo; grpo, bnpo, sapo and luspo average and need none."""
    from core_update_helpers import LinearPolicy, make_batch

    update_module, seen = sys.modules["ladder.core.update"], []
    real = update_module.compute_loss

    def spy(policy, mb, cfg, num_tokens=None):
        seen.append((len(mb), num_tokens))
        return real(policy, mb, cfg, num_tokens)

    monkeypatch.setattr(update_module, "compute_loss", spy)
    cfg = grpo.Config(loss_type=loss_type, max_new_tokens=7, mu=2, num_minibatches=2)
    policy = LinearPolicy(seed=1)
    batch = make_batch(policy, B=8, T=5, seed=1)
    num_tokens = grpo.loss_normaliser(loss_type, len(batch), cfg.max_new_tokens, active_tokens=12.5)
    ladder.core.update(policy, batch, torch.optim.SGD(policy.parameters(), lr=0.1), grpo.update_config(cfg),
                       num_tokens=num_tokens)
    by_active_tokens = {"dapo": 12.5 / 2, "cispo": 12.5 / 2, "vespo": 12.5 / 2}
    assert seen == [(4, {"dr_grpo": 4 * 7, **by_active_tokens}.get(loss_type))] * 4


def test_the_rung_hands_its_normaliser_to_core_update(tmp_path, tiny_qwen, gsm8k_file, monkeypatch):
    """dr_grpo: this process's rows × --max-new-tokens, whatever the active tokens (truncated rows masked out)."""
    seen, real = [], ladder.core.update

    def spy(policy, batch, optimizer, cfg, **kwargs):
        seen.append((len(batch), batch.num_tokens, kwargs))
        return real(policy, batch, optimizer, cfg, **kwargs)

    monkeypatch.setattr(ladder.core, "update", spy)
    grpo.train(_config(tmp_path, tiny_qwen, gsm8k_file, steps=1, kl_coef=0.0, loss_type="dr_grpo",
                       mask_truncated=True))
    ((rows, active, kwargs),) = seen
    assert rows == 2 * 4 and kwargs == {"num_tokens": rows * 8} and active < rows * 8


def test_qlora_loads_4bit_and_reference_is_the_base_model(tiny_qwen):
    from transformers import AutoModelForCausalLM, BitsAndBytesConfig

    device = torch.device("cpu")
    model = quant.load_causal_lm(tiny_qwen, device, qlora=True, gradient_checkpointing=True)
    assert any(type(m).__name__ == "Linear4bit" for m in model.modules())
    trainable = [n for n, p in model.named_parameters() if p.requires_grad]
    assert trainable and all("lora_" in n for n in trainable)
    torch.manual_seed(1)
    for name, p in model.named_parameters():  # make the adapter non-trivial (LoRA B starts at zero)
        if "lora_B" in name:
            p.data.normal_(0, 0.5)
    policy = CausalLMPolicy(model, temperature=0.7)
    tokenizer = quant.load_tokenizer(tiny_qwen)
    enc = tokenizer([arithmetic.chat_prompt(tokenizer, q["question"], "Solve.") for q in GSM8K_ROWS[:3]],
                    return_tensors="pt", padding=True)
    completion = torch.randint(5, len(tokenizer) - 5, (3, 6))
    batch = lm_batch(enc.input_ids, enc.attention_mask, completion, torch.ones(3, 6), tokenizer.pad_token_id)

    bnb = BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_quant_type="nf4", bnb_4bit_use_double_quant=True,
                             bnb_4bit_compute_dtype=torch.float32)
    base = AutoModelForCausalLM.from_pretrained(tiny_qwen, quantization_config=bnb, dtype=torch.float32,
                                                device_map={"": "cpu"})
    with torch.no_grad():
        base_logp = CausalLMPolicy(base, temperature=0.7).evaluate(batch)[0]
        theta_logp = policy.evaluate(batch)[0]
    ref_logp = policy.ref_logp(batch)
    assert torch.allclose(ref_logp, base_logp, atol=1e-5)
    assert not torch.allclose(theta_logp, base_logp, atol=1e-3)
    logp, _, _ = policy.evaluate(batch)
    logp.sum().backward()  # gradients reach the adapters through the 4-bit base
    assert all(p.grad is not None for p in model.parameters() if p.requires_grad)


@pytest.mark.parametrize("qlora", [False, True])
def test_shared_prompt_forward_equals_the_plain_forward(tiny_qwen, qlora):
    """G rows with one prompt: the prompt encoded once gives the same log-probs, gradients and samples."""
    model = quant.load_causal_lm(tiny_qwen, torch.device("cpu"), qlora=qlora, lora=not qlora,
                                 gradient_checkpointing=qlora)
    for name, p in model.named_parameters():
        if "lora_B" in name:
            torch.nn.init.normal_(p, 0, 0.3, generator=torch.Generator().manual_seed(len(name)))
    tokenizer = quant.load_tokenizer(tiny_qwen)
    enc = tokenizer([arithmetic.chat_prompt(tokenizer, q["question"], "Solve.") for q in GSM8K_ROWS[:2]],
                    return_tensors="pt", padding=True)
    assert sorted(enc.attention_mask[:, 0].tolist()) == [0, 1]  # one prompt is left-padded
    ids, mask = enc.input_ids.repeat_interleave(3, 0), enc.attention_mask.repeat_interleave(3, 0)
    shared, plain = CausalLMPolicy(model, share_prompts=True), CausalLMPolicy(model, share_prompts=False)

    samples = []
    for policy in (shared, plain):
        torch.manual_seed(3)
        samples.append(policy.generate(ids, mask, 8, tokenizer.pad_token_id, tokenizer.eos_token_id))
    assert torch.equal(samples[0][0], samples[1][0])
    batch = lm_batch(ids, mask, *samples[0], tokenizer.pad_token_id)

    results, tokens_seen = [], []
    embed = model.get_input_embeddings()
    for policy in (shared, plain):
        model.zero_grad()
        seen = []
        hook = embed.register_forward_hook(lambda module, args, out, seen=seen: seen.append(args[0].numel()))
        logp, entropy, _ = policy.evaluate(batch)
        hook.remove()
        tokens_seen.append(sum(seen))
        (logp * batch.mask).sum().backward()
        grads = torch.cat([p.grad.flatten() for p in model.parameters() if p.requires_grad])
        results.append((logp.detach(), entropy.detach(), grads, policy.ref_logp(batch)))
    for a, b in zip(*results):
        assert torch.allclose(a, b, atol=1e-5, rtol=1e-4)
    assert results[0][2].abs().sum() > 0
    # the training forward (checkpointed or not) encodes each of the 2 prompts once, not once per row
    P, T = ids.shape[1], batch.actions.shape[1]
    assert tokens_seen == [2 * (P - 1) + len(ids) * (T + 1), len(ids) * (P + T)]


def test_entropy_is_a_statistic_unless_asked_for_its_graph(tiny_qwen):
    """H has no graph by default (its backward would hold [B, n, V] probabilities); entropy_grad=True
    gives the same values with a graph, and an entropy bonus on a graphless H is refused."""
    model = quant.load_causal_lm(tiny_qwen, torch.device("cpu"), lora=True)
    tokenizer = quant.load_tokenizer(tiny_qwen)
    enc = tokenizer([arithmetic.chat_prompt(tokenizer, GSM8K_ROWS[0]["question"], "Solve.")], return_tensors="pt")
    ids, mask = enc.input_ids.repeat(2, 1), enc.attention_mask.repeat(2, 1)
    torch.manual_seed(0)
    statistic, graphed = CausalLMPolicy(model, chunk_size=3), CausalLMPolicy(model, chunk_size=3, entropy_grad=True)
    batch = lm_batch(ids, mask, *statistic.generate(ids, mask, 7, tokenizer.pad_token_id, None),
                     tokenizer.pad_token_id)
    (logp_a, h_a, _), (logp_b, h_b, _) = statistic.evaluate(batch), graphed.evaluate(batch)
    assert logp_a.requires_grad and not h_a.requires_grad and h_b.requires_grad
    assert torch.equal(logp_a, logp_b) and torch.equal(h_a, h_b.detach())
    (h_b * batch.mask).sum().backward()
    assert any(p.grad is not None and p.grad.abs().sum() > 0 for p in model.parameters() if p.requires_grad)

    batch.advantages = torch.ones(len(ids), 1).expand_as(batch.mask).clone()
    opt = torch.optim.SGD([p for p in model.parameters() if p.requires_grad], lr=0.0)
    with pytest.raises(ValueError, match="needs an entropy with a graph"):   # CausalLMPolicy(entropy_grad=True)
        ladder.core.update(statistic, batch, opt, ladder.core.UpdateConfig(entropy_coef=0.01))
    assert ladder.core.update(graphed, batch, opt, ladder.core.UpdateConfig(entropy_coef=0.01))[0]["entropy"] > 0


def test_sampling_with_the_base_dequantized_once_gives_the_same_samples(tiny_qwen):
    """quant.dequantized_once: the same logits and samples as dequantizing on every call, layers restored after."""
    import bitsandbytes as bnb

    model = quant.load_causal_lm(tiny_qwen, torch.device("cpu"), qlora=True, gradient_checkpointing=True)
    tokenizer = quant.load_tokenizer(tiny_qwen)
    enc = tokenizer([arithmetic.chat_prompt(tokenizer, q["question"], "Solve.") for q in GSM8K_ROWS[:2]],
                    return_tensors="pt", padding=True)
    ids, mask = enc.input_ids.repeat_interleave(3, 0), enc.attention_mask.repeat_interleave(3, 0)
    samples = []
    for once in (True, False):
        torch.manual_seed(5)
        policy = CausalLMPolicy(model, dequantize_once=once)
        samples.append(policy.generate(ids, mask, 12, tokenizer.pad_token_id, tokenizer.eos_token_id))
    assert torch.equal(samples[0][0], samples[1][0]) and torch.equal(samples[0][1], samples[1][1])
    layers = [m for m in model.modules() if isinstance(m, bnb.nn.Linear4bit)]
    assert layers and all("forward" not in vars(m) for m in layers)  # the 4-bit layers are themselves again
    with torch.no_grad(), quant.dequantized_once(model):
        dense = model(input_ids=ids, attention_mask=mask).logits
        assert all("forward" in vars(m) for m in layers)
    with torch.no_grad():
        assert torch.equal(dense, model(input_ids=ids, attention_mask=mask).logits)


def test_grpo_qlora_run_on_cpu(tmp_path, tiny_qwen, gsm8k_file, monkeypatch):
    released = []
    monkeypatch.setattr(quant, "release_freed_memory", lambda: released.append(True))  # keep pytest's glibc default
    summary = grpo.train(_config(tmp_path, tiny_qwen, gsm8k_file, lora=False, qlora=True, steps=1))
    assert summary["steps"] == 1 and released == [True]  # --release-memory: on by default with --qlora on the CPU
    assert (tmp_path / "run" / "adapter" / "adapter_config.json").exists()


def test_bad_inputs_are_one_line_errors(tmp_path, tiny_qwen, gsm8k_file, monkeypatch, capsys):
    """Through the command line's main in this process (tests/test_bad_inputs.py starts a fresh one per case)."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.chdir(tmp_path)
    cases = [
        (["--model", tiny_qwen, "--dataset", gsm8k_file, "--group-size", "1"], "--group-size"),
        (["--model", tiny_qwen, "--dataset", gsm8k_file, "--clip-eps-high", "1.0"], "--clip-eps-high"),
        (["--model", tiny_qwen, "--dataset", gsm8k_file, "--optim", "paged_adamw_8bit"], "CUDA"),
        (["--model", tiny_qwen, "--dataset", gsm8k_file, "--device", "cuda"], "CUDA"),
        (["--model", tiny_qwen, "--dataset", gsm8k_file, "--max-new-tokens", "400"], "context"),
        (["--model", "Qwen/Qwen2.5-0.5B-Instruct", "--dataset", gsm8k_file], "--preset tiny"),
        (["--model", tiny_qwen], "--preset tiny"),  # the GSM8K hub id, offline
        (["--model", tiny_qwen, "--dataset", str(tmp_path)], "--dataset"),
    ]
    for args, needle in cases:
        out = tmp_path / "out"
        if "--max-new-tokens" not in args:
            args = [*args, "--max-new-tokens", "8"]
        returncode, stderr = run_main("grpo", *args, "--out", str(out), "--steps", "1", capsys=capsys)
        assert returncode == 2, (args, stderr[-2000:])
        assert needle in stderr, (args, stderr)
        assert len(stderr.strip().splitlines()) == 1, (args, stderr)
        assert not out.exists(), args


def test_eval_command_scores_a_model_and_adapter(tmp_path, tiny_qwen, gsm8k_file):
    grpo.train(_config(tmp_path, tiny_qwen, gsm8k_file, steps=1))
    from ladder.rungs import lm_eval
    cfg = lm_eval.Config(model=tiny_qwen, adapter=str(tmp_path / "run" / "adapter"), dataset=gsm8k_file,
                         eval_size=3, max_new_tokens=6, out=str(tmp_path / "eval"))
    summary = lm_eval.train(cfg)
    assert summary["problems"] == 1  # 6 rows: the last one is held out
    scored = [json.loads(line) for line in open(tmp_path / "eval" / "completions.jsonl")]
    assert [(r["question"], r["answer"]) for r in scored] == [(GSM8K_ROWS[-1]["question"], "12")]
    # the accuracy and format rate are those of the completions written, checked again by the task's rules
    completions, answers = [r["completion"] for r in scored], [r["answer"] for r in scored]
    assert summary["accuracy"] == sum(arithmetic.correctness_reward(completions, answers)) / len(scored)
    assert summary["format"] == sum(arithmetic.format_reward(completions, answers)) / len(scored)
    assert json.loads((tmp_path / "eval" / "summary.json").read_text()) == summary


@pytest.fixture(scope="module")
def tiny_math():
    """The preset's tiny instruct model (the copy the package ships)."""
    return str(arithmetic.tiny_math_model())


def test_warmup_ramps_the_learning_rate(tmp_path, tiny_qwen, gsm8k_file):
    grpo.train(_config(tmp_path, tiny_qwen, gsm8k_file, steps=3, warmup_steps=2, kl_coef=0.0))
    records = [json.loads(line) for line in open(tmp_path / "run" / "metrics.jsonl")]
    assert [r["lr"] for r in records] == pytest.approx([5e-4, 1e-3, 1e-3])


@pytest.mark.trained
def test_short_seeded_tiny_qlora_run_improves_reward_and_accuracy(tmp_path, tiny_math):
    """The acceptance run in miniature: the tiny model forgets to carry; twenty GRPO updates fix it."""
    cfg = grpo.Config(**{**grpo.PRESETS["tiny"], "model": tiny_math, "qlora": True, "steps": 20, "eval_every": 0,
                         "eval_size": 100, "seed": 0, "out": str(tmp_path / "run"), "progress": False,
                         "print_samples": 0})
    summary = grpo.train(cfg)
    assert summary["accuracy_before"] < 0.75  # greedy decoding forgets every carry
    assert summary["accuracy_after"] >= summary["accuracy_before"] + 0.2, summary["evals"]
    assert summary["reward_last5"] > summary["reward_first5"]


def test_eval_with_qlora_loads_the_saved_adapter_not_a_fresh_one(tmp_path, tiny_qwen):
    from peft import PeftModel

    trained = quant.load_causal_lm(tiny_qwen, torch.device("cpu"), qlora=True)
    torch.manual_seed(0)
    for name, p in trained.named_parameters():
        if "lora_B" in name:
            p.data.normal_(0, 0.1)
    trained.save_pretrained(tmp_path / "adapter")
    expected = {n: p.detach().clone() for n, p in trained.named_parameters() if "lora_" in n}
    base = quant.load_causal_lm(tiny_qwen, torch.device("cpu"), qlora=True, new_adapter=False)
    loaded = PeftModel.from_pretrained(base, str(tmp_path / "adapter"))
    got = {n: p.detach() for n, p in loaded.named_parameters() if "lora_" in n}
    assert got.keys() == expected.keys()
    assert all(torch.equal(got[n], expected[n]) for n in expected)


RSS_AFTER_FREEING = """
import os, sys, torch
from ladder.policies import quant
if sys.argv[1] == "release":
    assert quant.release_freed_memory()
def rss_mb():
    return int(open("/proc/self/statm").read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20
torch.ones(1024).add_(1)  # torch's own first-use setup, before the baseline
before = rss_mb()
for _ in range(3):  # glibc's default raises its mmap threshold on the first free; the next buffers stay resident
    x = torch.ones(16 * 2**20 // 4)
    del x
print(rss_mb() - before)
"""


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="glibc's allocator")
def test_release_freed_memory_returns_freed_buffers_to_the_system():
    grown = {mode: float(subprocess.run([sys.executable, "-c", RSS_AFTER_FREEING, mode], capture_output=True,
                                        text=True, check=True, timeout=120).stdout)
             for mode in ("release", "default")}
    assert grown["release"] < 8 and grown["default"] > 14  # a 16 MB buffer: gone, or still resident
