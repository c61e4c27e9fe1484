"""The run doctor (``ladder.doctor``): each signature on a synthetic run that has it and nothing else, the command
line's exit codes, bad input, a real tiny grpo run, and a real TRL 1.16 GRPOTrainer run read from its
trainer_state.json.

The synthetic runs are written as real run directories (config.json + metrics.jsonl) and read back through
``read_run``: a healthy baseline of every metric ladder's grpo logs, one or two series changed per failure."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from cli_helpers import run_cli

from ladder.doctor import diagnose, read_run
from ladder.doctor.runs import TRL_FACTS, TRL_NAMES
from ladder.doctor.signatures import SIGNATURES, WORDING
from ladder.runtime.runlog import UsageError

ROOT = Path(__file__).resolve().parents[1]
N = 12  # logged steps of a synthetic run

CONFIG = {"rung": "grpo", "mu": 2, "num_minibatches": 1, "loss_type": "grpo", "lr": 1e-3, "lora": True,
          "qlora": False, "max_new_tokens": 28, "kl_coef": 0.04, "sampler_correction": "token_truncate"}


def healthy_series() -> dict[str, list[float]]:
    """A run that learns: reward and correctness up, KL growing slowly, entropy easing, nothing extreme."""
    wiggle = [0.01 * (-1) ** i for i in range(N)]
    return {
        "reward": [1.0 + 0.05 * i + w for i, w in enumerate(wiggle)],
        "reward_std": [0.5] * N,
        "frac_reward_zero_std": [0.2 + w for w in wiggle],
        "completions/clipped_ratio": [0.02] * N,
        "completions/mean_length": [25.0 + 10 * w for w in wiggle],
        "completions/max_length": [27.0] * N,
        "rewards/correctness/mean": [0.4 + 0.04 * i for i in range(N)],
        "rewards/format/mean": [0.9 + 0.005 * i for i in range(N)],
        "entropy": [0.5 - 0.01 * i for i in range(N)],
        "kl_ref": [0.002 * i for i in range(N)],
        "loss": [0.03 + w for w in wiggle],
        "grad_norm": [0.3] * N,
        "clip_frac": [0.05 + w for w in wiggle],
        "skipped_steps": [0.0] * N,
        "sampler/logp_diff_mean": [0.01] * N,
        "sampler/corrected_frac": [0.01] * N,
    }


def write_run(directory: Path, series: dict[str, list[float]], config: dict | None = None) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "config.json").write_text(json.dumps({**CONFIG, **(config or {})}))
    lines = [json.dumps({"step": i + 1, **{k: v[i] for k, v in series.items()}}) for i in range(N)]
    (directory / "metrics.jsonl").write_text("\n".join(lines) + "\n")
    return directory


def ramp(start: float, end: float) -> list[float]:
    return [start + (end - start) * i / (N - 1) for i in range(N)]


# name → (series changed, config changed); each must trigger that signature and no other.
CASES = {
    "loss_zero": ({"loss": [1e-5] * N, "clip_frac": None}, {"mu": 1}),
    "clip_zero": ({"clip_frac": [0.0] * N}, {"mu": 1}),
    "truncation": ({"completions/clipped_ratio": [0.6] * N, "frac_reward_zero_std": [0.7] * N}, {}),
    "no_signal": ({"frac_reward_zero_std": [0.8] * N, "rewards/correctness/mean": [0.02] * N,
                   "reward": [0.92 + 0.005 * (-1) ** i for i in range(N)]}, {}),
    "entropy_collapse": ({"entropy": [0.5 * 0.6 ** i for i in range(N)]}, {}),
    "kl_blowup": ({"kl_ref": [0.01 * 1.5 ** i for i in range(N)]}, {}),
    "length_drift": ({"completions/mean_length": ramp(20.0, 40.0), "completions/max_length": [60.0] * N,
                      "reward": [1.0 + 0.01 * (-1) ** i for i in range(N)]}, {"max_new_tokens": 64}),
    "format_hacking": ({"rewards/format/mean": ramp(0.2, 0.9), "rewards/correctness/mean": [0.4] * N,
                        "reward": ramp(0.6, 1.3)}, {}),
    "nothing_moving": ({"reward": [1.0 + 0.005 * (-1) ** i for i in range(N)], "kl_ref": [1e-5] * N,
                        "rewards/correctness/mean": [0.4] * N}, {"lr": 1e-6}),
    "nonfinite": ({"skipped_steps": [0, 0, 0, 0, 1, 1, 0, 0, 0, 0, 0, 0]}, {}),
    "sampler_mismatch": ({"sampler/corrected_frac": [0.3] * N, "sampler/logp_diff_mean": [0.2] * N}, {}),
    "critic_not_learning": ({"explained_variance": [-0.3 + 0.01 * (-1) ** i for i in range(N)]},
                            {"rung": "ppo-sentiment", "mu": 4, "num_minibatches": 2}),
    "clip_too_high": ({"clip_frac": [0.45] * N}, {"mu": 4}),
    "likelihood_displacement": ({"rewards/margins": ramp(0.0, 0.5), "rewards/chosen": ramp(0.0, -0.3),
                                 "rewards/rejected": ramp(0.0, -0.8), "logps/chosen": ramp(-13.6, -16.8)},
                                {"rung": "dpo", "beta": 0.1}),
    "reward_overoptimised": ({"score_mean": ramp(0.5, 3.0),
                              "true_reward_mean": [0.1, 0.15, 0.2, 0.3, 0.5, 0.55, 0.5, 0.45, 0.35, 0.3, 0.25, 0.2]},
                             {}),
    "nothing_to_teach": ({"distill/reverse_kl": [0.0] * N}, {"rung": "distill"}),
}


def case_run(tmp_path: Path, name: str) -> Path:
    changes, config = CASES[name]
    series = healthy_series()
    for key, values in changes.items():
        if values is None:
            series.pop(key)
        else:
            series[key] = values
    return write_run(tmp_path / name, series, config)


def doctor(*args, env_extra: dict | None = None) -> subprocess.CompletedProcess:
    env = {**os.environ, "OMP_NUM_THREADS": "1", **(env_extra or {})}
    return subprocess.run([sys.executable, "-m", "ladder.doctor", *map(str, args)], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=120)


def test_every_signature_has_a_case_and_wording():
    assert {s.__name__ for s in SIGNATURES} == set(CASES) == set(WORDING)


def test_healthy_baseline_has_no_finding(tmp_path):
    assert diagnose(read_run(write_run(tmp_path / "ok", healthy_series()))) == []


@pytest.mark.parametrize("name", sorted(CASES))
def test_each_signature_alone(tmp_path, name):
    findings = diagnose(read_run(case_run(tmp_path, name)))
    assert [f.name for f in findings] == [name]
    found = findings[0]
    assert found.severity == ("harmless" if name in ("loss_zero", "clip_zero") else "problem")
    assert found.steps and len(found.steps) == len(found.values)
    ladder_part, trl_part = found.change.split("; TRL: ")
    assert "--" in ladder_part and trl_part  # a ladder flag, and TRL's name
    assert found.section.startswith(("notebooks/", "README.md"))


def test_groups_without_signal_say_too_easy_or_too_hard(tmp_path):
    hard = diagnose(read_run(case_run(tmp_path, "no_signal")))[0]
    assert "too hard" in hard.means
    series = healthy_series() | {"frac_reward_zero_std": [0.8] * N, "rewards/correctness/mean": [0.97] * N}
    easy = diagnose(read_run(write_run(tmp_path / "easy", series)))
    assert [f.name for f in easy] == ["no_signal"] and "too easy" in easy[0].means
    taught = healthy_series() | {"frac_reward_zero_std": [1.0] * N, "distill/reverse_kl": ramp(4.0, 1.0)}
    assert diagnose(read_run(write_run(tmp_path / "taught", taught, {"rung": "distill"}))) == []  # a teacher's tokens


def test_length_drift_needs_the_per_sequence_mean(tmp_path):
    changes, _ = CASES["length_drift"]
    series = healthy_series() | changes
    assert diagnose(read_run(write_run(tmp_path / "dr", series, {"loss_type": "dr_grpo", "max_new_tokens": 64}))) == []


def test_a_stale_rollout_is_named_in_the_sampler_finding(tmp_path):
    """--max-staleness k logs sampling/staleness; an uncorrected gap then says how stale π_rollout was."""
    series = healthy_series() | {"sampler/logp_diff_mean": [0.25] * N, "sampling/staleness": [0, 1] + [2] * (N - 2)}
    findings = diagnose(read_run(write_run(tmp_path / "stale", series, {"sampler_correction": "none",
                                                                        "max_staleness": 2})))
    assert [f.name for f in findings] == ["sampler_mismatch"]
    assert "π_rollout 2 updates stale" in findings[0].saw and "--max-staleness" in WORDING["sampler_mismatch"].ladder
    fresh = healthy_series() | {"sampler/logp_diff_mean": [0.25] * N}
    assert "stale" not in diagnose(read_run(write_run(tmp_path / "fresh", fresh)))[0].saw


def test_the_critic_learning_is_not_flagged(tmp_path):
    series = healthy_series() | {"explained_variance": ramp(-0.5, 0.6)}
    run = write_run(tmp_path / "ev", series, {"rung": "ppo-sentiment", "mu": 4, "num_minibatches": 2})
    assert diagnose(read_run(run)) == []


def test_sections_name_real_headings():
    for wording in WORDING.values():
        file, heading = wording.section
        text = (ROOT / file).read_text()
        assert heading in (text if file.endswith(".md") else "".join(
            "".join(c["source"]) for c in json.loads(text)["cells"] if c["cell_type"] == "markdown")), heading


def test_trl_names_are_trl_1_16s():
    trl = pytest.importorskip("trl", minversion="1.16")
    source = (Path(trl.__file__).parent / "trainer" / "grpo_trainer.py").read_text()
    logged = set(re.findall(r'_metrics\[mode\]\["([^"]+)"\]', source)) | {"loss", "grad_norm", "learning_rate"}
    assert set(TRL_NAMES) <= logged, set(TRL_NAMES) - logged
    fields = set(trl.GRPOConfig.__dataclass_fields__)
    assert set(TRL_FACTS) <= fields, set(TRL_FACTS) - fields


# --- the command line ----------------------------------------------------------------------------------------

def test_exit_codes_and_plot(tmp_path):
    harmless = doctor(case_run(tmp_path, "loss_zero"))
    assert harmless.returncode == 0, harmless.stderr
    assert "healthy" in harmless.stdout and "[harmless] loss_zero" in harmless.stdout
    sick = case_run(tmp_path, "kl_blowup")
    problem = doctor(sick, "--plot", "--json")
    assert problem.returncode == 1, problem.stderr
    verdict = json.loads(problem.stdout)
    assert not verdict["healthy"] and [f["name"] for f in verdict["findings"]] == ["kl_blowup"]
    assert (sick / "doctor.png").stat().st_size > 0
    via_run = run_cli("doctor", str(sick), cwd=ROOT, timeout=120)
    assert via_run.returncode == 1 and "[problem] kl_blowup" in via_run.stdout


def test_torn_last_line_is_read_up_to_it_and_said(tmp_path):
    run = case_run(tmp_path, "clip_too_high")
    with (run / "metrics.jsonl").open("a") as f:
        f.write('{"step": 13, "reward": 1.')  # an interrupted write
    done = doctor(run)
    assert done.returncode == 1 and "last line is torn" in done.stdout and "clip_too_high" in done.stdout


def _bad_inputs(tmp_path: Path) -> dict[str, Path]:
    not_a_run = tmp_path / "notes"
    not_a_run.mkdir()
    (not_a_run / "todo.txt").write_text("nothing here\n")
    garbage = write_run(tmp_path / "garbage", healthy_series())
    lines = (garbage / "metrics.jsonl").read_text().splitlines()
    lines[4] = "<<< not json >>>"
    (garbage / "metrics.jsonl").write_text("\n".join(lines) + "\n")
    bad_config = write_run(tmp_path / "bad_config", healthy_series())
    (bad_config / "config.json").write_text("{\"rung\": ")
    torn_state = tmp_path / "trl_torn"
    torn_state.mkdir()
    (torn_state / "trainer_state.json").write_text('{"log_history": [{"loss": 0.1, "step": 1}, {"lo')
    return {"missing": tmp_path / "nowhere", "not a run": not_a_run, "garbage line": garbage,
            "torn config": bad_config, "torn trainer_state": torn_state}


def test_bad_input_is_one_line_and_exit_2(tmp_path):
    for what, path in _bad_inputs(tmp_path).items():
        before = sorted(p.name for p in path.iterdir()) if path.exists() else None
        done = doctor(path, "--plot")
        assert done.returncode == 2, (what, done.stdout, done.stderr)
        assert done.stdout == "" and len(done.stderr.strip().splitlines()) == 1, (what, done.stderr)
        assert done.stderr.startswith("ladder: error: ") and "Traceback" not in done.stderr
        assert (sorted(p.name for p in path.iterdir()) if path.exists() else None) == before, what
        with pytest.raises(UsageError):
            read_run(path)


def test_trl_names_become_ladders_and_the_newest_checkpoint_is_read(tmp_path):
    """checkpoint-10 is newer than checkpoint-9 (by number, not by name); a NaN gradient norm (Python's json
    writes NaN) is a non-finite step."""
    out = tmp_path / "trl"
    for checkpoint, steps in (("checkpoint-9", 9), ("checkpoint-10", 10)):
        log = [{"step": s, "loss": 0.0, "grad_norm": float("nan") if s == 7 else 0.2, "learning_rate": 1e-5,
                "reward": 0.5, "reward_std": 0.4, "frac_reward_zero_std": 0.1, "kl": 0.001, "entropy": 1.0,
                "clip_ratio/region_mean": 0.0, "rewards/correctness/mean": 0.5} for s in range(1, steps + 1)]
        (out / checkpoint).mkdir(parents=True)
        (out / checkpoint / "trainer_state.json").write_text(json.dumps({"log_history": log + [{"train_loss": 0.0,
                                                                                               "train_runtime": 1.0}]}))
    run = read_run(out)
    assert run.get("reward").steps == list(range(1, 11)) and run.facts.lr == 1e-5
    assert run.get("kl_ref").values == [0.001] * 10 and run.get("clip_frac") is not None
    assert 7 not in run.get("grad_norm").steps
    assert [f.name for f in diagnose(run) if f.severity == "problem"] == ["nonfinite"]


# --- real runs ------------------------------------------------------------------------------------------------

@pytest.mark.trained
@pytest.mark.notebook_runs  # notebook 8 makes the gallery's healthy run
def test_a_real_tiny_grpo_run_is_healthy():
    """The gallery's healthy grpo run (8 updates of the tiny preset, made once for the gallery's tests and notebook 8
    in ``$LADDER_CACHE/gallery``), read by the doctor's command line."""
    from ladder.run_cache import run_healthy

    out = run_healthy("grpo")
    run = read_run(out)
    assert run.source == "ladder" and len(run.get("reward")) == 8 and run.facts.updates_per_batch == 1
    verdict = doctor(out, "--json")
    assert verdict.returncode == 0, verdict.stdout
    names = [f["name"] for f in json.loads(verdict.stdout)["findings"]]
    assert set(names) <= {"loss_zero", "clip_zero"} and "clip_zero" in names  # μ·M = 1: the ratio is 1


TRL_SCRIPT = textwrap.dedent("""
    import json, sys
    sys.path.insert(0, sys.argv[2])
    import torch
    from trl_helpers import AutoModelForCausalLM, Dataset, GRPOConfig, GRPOTrainer, save_parity_model, tokenizer_of

    torch.set_num_threads(1)
    out = sys.argv[1]
    model_dir = save_parity_model(out + "-model")

    def correctness(completions, **kw):
        return [1.0 if "5" in c else 0.0 for c in completions]

    def format_reward(completions, **kw):
        return [0.5 if len(c) > 3 else 0.0 for c in completions]

    args = GRPOConfig(output_dir=out, max_steps=3, per_device_train_batch_size=4, num_generations=4,
                      max_completion_length=8, logging_steps=1, save_strategy="steps", save_steps=2,
                      save_only_model=True, report_to="none", use_cpu=True, seed=0, learning_rate=1e-3, beta=0.04,
                      disable_tqdm=True, dataloader_num_workers=0)
    trainer = GRPOTrainer(model=AutoModelForCausalLM.from_pretrained(model_dir), args=args,
                          reward_funcs=[correctness, format_reward], processing_class=tokenizer_of(model_dir),
                          train_dataset=Dataset.from_list([{"prompt": "What is 2 + 3?"}] * 8))
    trainer.train()
    with open(out + "-args.json", "w") as f:
        json.dump(trainer.args.to_dict(), f)
""")


@pytest.mark.trained
@pytest.mark.timeout(240)
def test_a_real_trl_run_is_read_from_its_trainer_state(tmp_path):
    """The slow one (~10 s): TRL 1.16 trains a tiny Qwen2 for 3 steps, 8-token completions (every one cut off),
    checkpoints at 2 and 3; the doctor reads checkpoint-3's trainer_state.json."""
    pytest.importorskip("trl", minversion="1.16")
    script, out = tmp_path / "trl_grpo.py", tmp_path / "trl-out"
    script.write_text(TRL_SCRIPT)
    env = {**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1", "TQDM_DISABLE": "1"}
    done = subprocess.run([sys.executable, str(script), str(out), str(ROOT / "tests")], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=200)
    assert done.returncode == 0, done.stderr[-3000:]
    assert not (out / "trainer_state.json").exists() and (out / "checkpoint-3" / "trainer_state.json").exists()
    run = read_run(out)
    assert run.source == "trl" and run.get("reward").steps == [1, 2, 3]
    logged = {"rewards/correctness/mean", "rewards/format_reward/mean", "kl_ref", "clip_frac", "entropy"}
    assert logged <= set(run.series)
    assert run.facts.max_new_tokens == 8 and "max_new_tokens" not in run.facts.assumed  # read off the log
    assert any("loss_type" in u for u in run.unknown)
    verdict = doctor(out)
    assert verdict.returncode == 1 and "[problem] truncation" in verdict.stdout
    assert "not known" in verdict.stdout and "checkpoint-3/trainer_state.json" in verdict.stdout
    told = read_run(out, trl_config=str(out) + "-args.json")
    assert told.unknown == ["LoRA (no adapter_config.json: taken as full fine-tuning)"]
    assert told.facts.loss_type == "dapo" and told.facts.mu == 1 and told.facts.kl_coef == 0.04


# The same signatures where a closer look clears the run (or convicts it): name → (series changed, config changed,
# whether the signature fires).
SECOND_LOOKS = {
    "longer and better: no length drift": ("length_drift", {"completions/mean_length": ramp(20.0, 40.0)}, {}, False),
    "longer by its tool calls: no length drift": (
        "length_drift", {"completions/mean_length": ramp(20.0, 40.0), "reward": [1.0] * N,
                         "agent/tool_calls": ramp(0.3, 0.9)}, {"rung": "agent"}, False),
    "correctness at weight 0: no format hacking": (
        "format_hacking", {"rewards/format/mean": ramp(0.2, 0.9), "rewards/correctness/mean": [0.4] * N},
        {"reward_funcs": "correctness,format", "reward_weights": "0,1"}, False),
    "no value loss: the critic is not learning": (
        "critic_not_learning", {"explained_variance": [0.05] * N},
        {"rung": "ppo-sentiment", "mu": 4, "num_minibatches": 2, "value_coef": 0.0}, True),
    "a little explained variance with a value loss: no finding": (
        "critic_not_learning", {"explained_variance": [0.05] * N},
        {"rung": "ppo-sentiment", "mu": 4, "num_minibatches": 2, "value_coef": 0.1}, False),
    "deterministic from the first update: entropy collapse": ("entropy_collapse", {"entropy": [0.0] * N}, {}, True),
    "the true reward plateaus: not over-optimised": (
        "reward_overoptimised", {"score_mean": ramp(0.5, 3.0), "true_reward_mean": [0.1, 0.2, 0.3, 0.4, 0.5, 0.5,
                                                                                    0.52, 0.49, 0.5, 0.51, 0.48, 0.5]},
        {"rung": "ppo-sentiment"}, False),
    "both fall together: the policy got worse, not over-optimised": (
        "reward_overoptimised", {"score_mean": [0.5, 1, 1.5, 2, 2.5, 3, 3, 2.5, 2, 1.5, 1, 0.5],
                                 "true_reward_mean": [0.1, 0.15, 0.2, 0.3, 0.5, 0.55, 0.5, 0.45, 0.35, 0.3, 0.25, 0.2]},
        {}, False),
    "DPO's implicit margin up, the true reward down: over-optimised": (
        "reward_overoptimised", {"rewards/margins": ramp(0.0, 2.0),
                                 "true_reward_mean": [0.0, 0.1, 0.2, 0.3, 0.6, 0.7, 0.6, 0.5, 0.4, 0.35, 0.3, 0.3]},
        {"rung": "dpo"}, True),
}


@pytest.mark.parametrize("case", sorted(SECOND_LOOKS))
def test_a_closer_look(tmp_path, case):
    signature, changes, config, fires = SECOND_LOOKS[case]
    run = write_run(tmp_path / "run", {**healthy_series(), **changes}, config)
    assert (signature in [f.name for f in diagnose(read_run(run))]) == fires


def test_a_run_too_short_to_judge_says_so(tmp_path):
    run = tmp_path / "short"
    run.mkdir()
    (run / "config.json").write_text(json.dumps(CONFIG))
    (run / "metrics.jsonl").write_text(json.dumps({"step": 1, **{k: v[0] for k, v in healthy_series().items()}}))
    result = doctor(run)
    assert result.returncode == 0 and "1 logged step\n" in result.stdout and "too short to judge" in result.stdout

