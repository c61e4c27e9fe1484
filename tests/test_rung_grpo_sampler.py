"""grpo's fourth policy: --sampler-dtype samples from the rounded weights and records π_sampler's log-probs as
it samples; --sampler-correction and --off-policy-mask reach core.update; bad values are one line, exit 2."""

import json

import pytest
import torch
from cli_helpers import run_cli

from ladder import run
from ladder.policies import low_precision
from ladder.policies.causal_lm import lm_batch
from ladder.rungs import grpo
from ladder.rungs.grpo import sampler as grpo_sampler
from ladder.runtime.runlog import UsageError, seed_everything
from ladder.tasks import arithmetic

TINY = {**grpo.PRESETS["tiny"], "steps": 2, "eval_size": 8, "eval_every": 0, "print_samples": 0, "progress": False}


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    cfg = grpo.Config(**TINY, out=str(tmp_path_factory.mktemp("s") / "run"))
    seed_everything(0)
    system_prompt, problems, _, model_path, tokenizer = grpo.load_task(cfg)
    policy, _ = grpo.load_policy(cfg, model_path, torch.device("cpu"))
    prompts = [arithmetic.chat_prompt(tokenizer, p["question"], system_prompt) for p in problems[:2]]
    enc = tokenizer(prompts, return_tensors="pt", padding=True)
    return policy, tokenizer, enc.input_ids.repeat_interleave(4, 0), enc.attention_mask.repeat_interleave(4, 0)


def _sample(tiny, dtype):
    policy, tokenizer, ids, mask = tiny
    policy.sampler_dtype = dtype
    try:
        torch.manual_seed(0)
        completion, cmask, sampling_logp = policy.generate(ids, mask, 20, tokenizer.pad_token_id,
                                                           tokenizer.eos_token_id, record_logp=True)
        with torch.no_grad():
            old_logp = policy.evaluate(lm_batch(ids, mask, completion, cmask, tokenizer.pad_token_id))[0].float()
    finally:
        policy.sampler_dtype = None
    gap = ((old_logp - sampling_logp).abs() * cmask)[cmask.bool()]
    return completion, gap


def test_the_recorded_log_probs_are_pi_old_s_when_the_sampler_is_the_trainer(tiny):
    completion, gap = _sample(tiny, None)
    assert gap.max() < 1e-5  # the cached incremental decode against the full forward: kernel noise only
    policy, tokenizer, ids, mask = tiny
    torch.manual_seed(0)
    plain, _ = policy.generate(ids, mask, 20, tokenizer.pad_token_id, tokenizer.eos_token_id)
    assert torch.equal(plain, completion)  # recording changes nothing that is sampled


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_a_lower_precision_sampler_differs_from_pi_old_by_its_rounding(tiny, dtype):
    _, gap = _sample(tiny, dtype)
    assert 1e-5 < gap.mean() < 5e-2
    policy = tiny[0]
    weights = [p.detach().clone() for p in policy.parameters()]
    assert all(torch.equal(a, b) for a, b in zip(weights, policy.parameters()))  # the trainer's weights untouched
    assert all(not hasattr(m, "forward") or "forward" not in vars(m) for m in policy.model.modules())


def test_the_record_logp_processor_holds_one_step_and_takes_the_last_token():
    rec = low_precision.RecordLogp(temperature=2.0)
    scores = [torch.tensor([[0.0, 2.0, 4.0]]), torch.tensor([[1.0, 1.0, 1.0]])]
    rec(torch.tensor([[5]]), scores[0].clone())
    rec(torch.tensor([[5, 2]]), scores[1].clone())
    got = rec.finish(torch.tensor([[2, 0]]))
    expected = torch.stack([torch.log_softmax(scores[0] / 2, -1)[0, 2], torch.log_softmax(scores[1] / 2, -1)[0, 0]])
    assert torch.allclose(got[0], expected)


def _run(tmp_path, *args):
    return run_cli("grpo", "--preset", "tiny", "--steps", "2", "--eval-size", "8", "--eval-every", "0",
                   "--print-samples", "0", "--no-progress", "--out", str(tmp_path / "run"), *args, cwd=tmp_path)


@pytest.mark.trained
def test_a_bf16_sampler_with_a_correction_logs_what_it_did(tmp_path):
    result = _run(tmp_path, "--sampler-dtype", "bfloat16", "--sampler-correction", "sequence_mask",
                  "--sampler-clip-max", "1.02", "--off-policy-mask", "0")
    assert result.returncode == 0, result.stderr[-2000:]
    records = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    for r in records:
        assert 0 < r["sampler/logp_diff_mean"] < r["sampler/logp_diff_max"]
        assert r["sampler/seq_log_ratio_std"] > 0
        assert 0 <= r["sampler/is_ratio_min"] <= r["sampler/is_ratio_max"]
        assert 0 <= r["sampler/corrected_frac"] <= 1 and 0 <= r["off_policy/masked_frac"] <= 1
    assert any(r["sampler/corrected_frac"] > 0 for r in records)  # C_max 1.02 masks some sequences


def test_same_sampler_and_no_correction_records_nothing(tiny_grpo_run):
    record = json.loads((tiny_grpo_run[1] / "metrics.jsonl").read_text().splitlines()[0])   # the defaults
    assert not any(k.startswith(("sampler/", "off_policy/")) for k in record)


def test_the_run_records_the_sampler_it_settled_on(tiny_grpo_run):
    config = json.loads((tiny_grpo_run[1] / "config.json").read_text())
    assert (config["sampler_dtype"], config["sampler_correction"]) == ("same", "none")  # the preset's pin; auto: none


def test_auto_samples_in_bf16_where_it_pays_and_says_so_first(tmp_path, monkeypatch, capsys):
    """Where bf16 is native and the model large enough (both made true here for the tiny model), auto is a bf16
    sampler with TRL's correction: the first line says so, config.json and the update's weights have it."""
    monkeypatch.setattr(grpo_sampler, "BF16_FROM_PARAMETERS", 0)
    monkeypatch.setattr(grpo_sampler, "bf16_native", lambda device: True)
    out = tmp_path / "run"
    assert run.main(["grpo", "--preset", "tiny", "--sampler-dtype", "auto", "--steps", "1", "--eval-size", "8",
                     "--eval-every", "0", "--print-samples", "0", "--no-progress", "--out", str(out)]) == 0
    first = capsys.readouterr().err.splitlines()[0]
    assert first.startswith("sampler: bfloat16 weights, --sampler-correction sequence_mask, C_max 3.0 "
                            "(--sampler-dtype auto: cpu computes bfloat16 natively"), first
    config = json.loads((out / "config.json").read_text())
    assert (config["sampler_dtype"], config["sampler_correction"]) == ("bfloat16", "sequence_mask")
    record = json.loads((out / "metrics.jsonl").read_text().splitlines()[0])
    assert record["sampler/logp_diff_max"] > 0 and 0 <= record["sampler/corrected_frac"] <= 1


@pytest.mark.parametrize("args, needle", [
    (["--sampler-clip-min", "3", "--sampler-clip-max", "2"], "--sampler-clip-min 3 must be below --sampler-clip-max 2"),
    (["--off-policy-mask", "-0.1"], "--off-policy-mask must be ≥ 0"),
    (["--sampler-correction", "token_clip"], "invalid choice"),
    (["--sampler-dtype", "int8"], "invalid choice"),
])
def test_bad_sampler_options_are_one_line_before_any_model_loads(tmp_path, args, needle, capsys):
    with pytest.raises(SystemExit) as exit_:   # the command line's own main, in this process
        run.main(["grpo", "--preset", "tiny", "--steps", "2", "--no-progress", "--out", str(tmp_path / "run"), *args])
    err = capsys.readouterr().err
    assert exit_.value.code == 2 and needle in err and err.count("\n") == 1, err
    assert not (tmp_path / "run").exists()


def test_a_dtype_the_device_cannot_compute_is_one_line(monkeypatch):
    def refuse(*args, **kwargs):
        raise RuntimeError('"addmm_impl_cpu_" not implemented for \'Half\'\nmore')
    monkeypatch.setattr(torch, "ones", refuse)
    with pytest.raises(UsageError, match=r"^--sampler-dtype float16: cpu cannot compute in it \(\"addmm_impl_cpu_\" "
                                         r"not implemented for 'Half'\)$"):
        low_precision.check_sampler_dtype("float16", torch.device("cpu"))
    assert low_precision.check_sampler_dtype("same", torch.device("cpu")) is None
