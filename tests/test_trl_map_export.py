"""ladder.trl.map (TRL's names → ladder's options → ladder.core) and ladder.trl.export (a grpo run as a TRL script).

(a) every row names a real ladder option, a real ladder.core function and, with TRL installed, a real TRL field;
    the classic PPOConfig rows are checked against the names recorded from TRL ≤ 0.11 (TRL 1.16 has no such class).
(b) ``python -m ladder.run grpo --preset tiny --qlora --export-trl OUT.py`` writes the script and no run
    directory, and the script trains 2 steps offline on the CPU, 4-bit nf4 + LoRA as exported.
(c) a user's FILE.py:FN reward, a local .jsonl dataset and the values of the GRPOConfig come through.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import inspect
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from cli_helpers import run_cli

import ladder.core
from ladder.rungs import agent, distill, dpo, grpo, ppo_sentiment, reward_model
from ladder.rungs.grpo.loss_types import objective
from ladder.runtime.runlog import UsageError
from ladder.specs import option_names
from ladder.tasks import arithmetic, math_problems
from ladder.trl import export as export_trl
from ladder.trl import map as trl_map

CONFIGS = {"grpo": grpo.Config, "ppo-sentiment": ppo_sentiment.Config, "agent": agent.Config,
           "reward-model": reward_model.Config, "dpo": dpo.Config, "distill": distill.Config}
ROOT = Path(__file__).resolve().parents[1]


def _tiny(**kw) -> grpo.Config:
    return grpo.Config(**{**grpo.PRESETS["tiny"], "progress": False, **kw})


def _load_script(path: Path):
    spec = importlib.util.spec_from_file_location(f"exported_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# --- (a) the map names real things ------------------------------------------------------------------

@pytest.mark.parametrize("row", trl_map.ROWS, ids=lambda r: f"{r.trl_class}.{r.trl_field}<-{r.ladder_option}")
def test_every_row_names_a_real_ladder_option_and_core_function(row):
    assert row.ladder_rung in CONFIGS
    if row.ladder_option is not None:
        assert row.ladder_option in option_names(CONFIGS[row.ladder_rung])
    if row.core_function is not None:
        assert row.core_function in ladder.core.__all__ and callable(getattr(ladder.core, row.core_function))
    assert row.trl_field is not None or row.note, "an option with no TRL equivalent says what to do instead"
    assert (row.value is None) or row.trl_class in ("GRPOConfig", "RewardConfig", "DPOConfig", "GKDConfig"), \
        "only the exported configs' rows carry a value"


def test_every_grpo_option_is_in_the_map():
    options = set(option_names(grpo.Config))  # a spec's fields by their flags
    assert options <= trl_map.ladder_options("grpo"), options - trl_map.ladder_options("grpo")


def test_lookups():
    assert [r.ladder_option for r in trl_map.for_field("GRPOConfig", "num_iterations")] == ["mu"]
    assert {r.ladder_option for r in trl_map.for_field("GRPOConfig", "epsilon_high")} == {"clip_eps_high",
                                                                                           "cispo_max_weight"}
    assert {r.trl_field for r in trl_map.for_option("ref_sync_every")} >= {"sync_ref_model", "ref_model_sync_steps"}
    ppo = {r.trl_field: r.ladder_option for r in trl_map.rows("PPOConfig")}
    assert ppo["init_kl_coef"] == "kl_coef" and ppo["lam"] == "gae_lambda" and ppo["ppo_epochs"] == "mu"
    assert ppo["mini_batch_size"] == "num_minibatches" and ppo["cliprange_value"] == "value_clip"
    assert {"dynamic_sampling", "kl_in", "advantage"} <= {r.ladder_option for r in trl_map.not_in_trl()}
    assert set(trl_map.trl_classes()) >= {"GRPOConfig", "RLOOConfig", "PPOConfig", "PPOTrainer", "GRPOTrainer"}


def test_classic_ppo_rows_use_the_classic_names():
    for row in trl_map.rows("PPOConfig"):
        assert row.trl_field in trl_map.CLASSIC_PPO_CONFIG_FIELDS, row.trl_field


def _trl_names(trl, trl_class: str) -> set[str]:
    if trl_class in ("GRPOConfig", "RLOOConfig", "RewardConfig", "DPOConfig"):
        return {f.name for f in dataclasses.fields(getattr(trl, trl_class))}
    if trl_class == "GRPOTrainer":
        return set(inspect.signature(trl.GRPOTrainer.__init__).parameters)
    if trl_class == "GRPOTrainer.train":
        return set(inspect.signature(trl.GRPOTrainer.train).parameters)
    if trl_class in ("GKDConfig", "GKDTrainer"):  # the distill rung's (ladder.trl.export_distill)
        gkd = importlib.import_module("trl.experimental.gkd")
        return ({f.name for f in dataclasses.fields(gkd.GKDConfig)} if trl_class == "GKDConfig"
                else set(inspect.signature(gkd.GKDTrainer.__init__).parameters))
    if trl_class == "trl.rewards":
        import trl.rewards

        return {name for name in ("get_soft_overlong_punishment",) if callable(getattr(trl.rewards, name, None))}
    raise AssertionError(f"no check for {trl_class}")


@pytest.mark.parametrize("trl_class", [c for c in trl_map.trl_classes() if c not in trl_map.CLASSIC])
def test_every_mapped_trl_field_exists_in_installed_trl(trl_class):
    trl = pytest.importorskip("trl", minversion="1.16")
    names = _trl_names(trl, trl_class)
    missing = {r.trl_field for r in trl_map.rows(trl_class) if r.trl_field is not None} - names
    assert not missing, f"{trl_class} of TRL {trl.__version__} has no {sorted(missing)}"


def test_classic_ppo_config_is_not_in_trl_1_16():
    """The classic PPOConfig/PPOTrainer.step (init_kl_coef, adap_kl_ctrl, ...) is TRL ≤ 0.11's; TRL 1.16 has no
    PPOConfig at all, not even under trl.experimental. Its rows are mapped by name (checked against
    CLASSIC_PPO_CONFIG_FIELDS above); should a TRL bring the classic class back, they are checked here."""
    trl = pytest.importorskip("trl", minversion="1.16")
    found = getattr(trl, "PPOConfig", None)
    if found is None and importlib.util.find_spec("trl.experimental.ppo") is not None:
        found = getattr(importlib.import_module("trl.experimental.ppo"), "PPOConfig", None)
    if found is None or not {"init_kl_coef", "adap_kl_ctrl"} <= {f.name for f in dataclasses.fields(found)}:
        pytest.skip(f"TRL {trl.__version__} has no classic PPOConfig (trl.PPOConfig, trl.experimental.ppo): "
                    "the PPOConfig rows are checked by name only")
    assert {r.trl_field for r in trl_map.rows("PPOConfig")} <= {f.name for f in dataclasses.fields(found)}


ALGO_CASES = {"tiny": {}, **{f"algo-{name}": flags for name, flags in grpo.ALGOS.items()},
              "minibatches": dict(mu=2, num_minibatches=4, ref_sync_every=5, lora=False, min_new_tokens=2)}


@pytest.mark.parametrize("flags", ALGO_CASES.values(), ids=ALGO_CASES.keys())
def test_values_make_a_grpo_config_trl_accepts(flags, tmp_path):
    trl = pytest.importorskip("trl", minversion="1.16")
    cfg = _tiny(**flags)
    grpo.validate(cfg)
    values = {k: v for k, (v, _) in trl_map.trl_values(cfg).items()}
    values["output_dir"] = str(tmp_path)
    args = trl.GRPOConfig(**values)
    M, mu = cfg.num_minibatches, cfg.mu
    assert args.num_generations == cfg.group_size and args.num_iterations == mu and args.steps_per_generation == M
    assert args.per_device_train_batch_size * M == cfg.prompts_per_step * cfg.group_size
    assert args.max_steps == cfg.steps * mu * M and args.gradient_accumulation_steps == 1
    assert args.beta == cfg.kl.coef and args.loss_type == cfg.loss_type and args.epsilon == cfg.ratio.clip_eps
    assert args.epsilon_high == (objective(cfg).max_weight if cfg.loss_type == "cispo" else cfg.ratio.clip_eps_high)
    assert args.importance_sampling_level == cfg.ratio.level
    assert args.scale_rewards == (grpo.advantage_spec.scale(cfg) or "group")  # GDPO's: left at the default
    assert args.use_cpu and not args.bf16 and args.learning_rate == cfg.optimisation.lr
    assert args.sync_ref_model == bool(cfg.ref_sync_every and not cfg.adapter.lora)
    if cfg.ref_sync_every:
        assert args.ref_model_sync_steps == cfg.ref_sync_every * mu * M
    if cfg.generation.min_new_tokens:
        assert args.generation_kwargs == {"min_new_tokens": cfg.generation.min_new_tokens}
    assert len(args.reward_weights) == 2 + bool(cfg.rewards.overlong_buffer)


# --- (b) the command line writes the script, which trains with TRL ------------------------------------

def _env(**extra) -> dict:
    env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""),
           "OMP_NUM_THREADS": "1", **extra}
    return env


@pytest.mark.timeout(240)
def test_export_cli_writes_a_script_that_trains_two_steps_offline(tmp_path):
    pytest.importorskip("trl", minversion="1.16")
    from ladder.tasks import arithmetic

    arithmetic.tiny_math_model()  # cached (built once, ~1.5 min, if this machine has never built it)
    script = tmp_path / "export" / "grpo_trl.py"
    done = run_cli("grpo", "--preset", "tiny", "--qlora", "--export-trl", str(script), cwd=tmp_path, env=_env(),
                   timeout=120)
    assert done.returncode == 0, done.stderr
    assert script.is_file() and not (tmp_path / "runs").exists()
    text = script.read_text()
    compile(text, str(script), "exec")
    assert "BitsAndBytesConfig(load_in_4bit=True" in text and "LoraConfig(r=16, lora_alpha=32" in text
    assert "--dynamic-sampling" in text and "--kl-in" in text and "--advantage" in text  # named, though off here
    assert "trainer.train()" in text and 'if __name__ == "__main__":' in text

    out = tmp_path / "trl-out"
    done = subprocess.run([sys.executable, str(script), "--max-steps", "2", "--output-dir", str(out)],
                          cwd=tmp_path, env=_env(HF_HUB_OFFLINE="1", HF_DATASETS_OFFLINE="1", TQDM_DISABLE="1"),
                          capture_output=True, text=True, timeout=200)
    assert done.returncode == 0, done.stderr[-3000:]
    assert (out / "adapter_config.json").is_file() and (out / "adapter_model.safetensors").is_file()
    assert "'rewards/correctness/mean'" in done.stdout + done.stderr
    assert "deprecated" not in done.stderr  # e.g. gradient_checkpointing, renamed activation_checkpointing
    adapter = json.loads((out / "adapter_config.json").read_text())
    assert adapter["r"] == 16 and adapter["lora_alpha"] == 32


# --- (c) the script's contents --------------------------------------------------------------------

def test_script_config_is_the_maps_and_a_user_reward_is_referenced(tmp_path, monkeypatch):
    pytest.importorskip("trl", minversion="1.16")
    monkeypatch.chdir(tmp_path)
    (tmp_path / "my_rewards.py").write_text("def brevity(completions, answers):\n"
                                            "    return [1.0 if len(c) < 10 else 0.0 for c in completions]\n")
    cfg = _tiny(reward_funcs="correctness,my_rewards.py:brevity", reward_weights="1,0.5", overlong_buffer=0.25,
                mu=2, export_trl=str(tmp_path / "s.py"), out=str(tmp_path / "run"))
    summary = export_trl.write(cfg, cfg.export_trl)
    assert summary["export_trl"] == cfg.export_trl and not (tmp_path / "run").exists()
    text = Path(cfg.export_trl).read_text()
    assert "load_user_function('my_rewards.py:brevity')" in text
    assert "get_soft_overlong_punishment(max_completion_len=28, soft_punish_cache=7)" in text

    module = _load_script(Path(cfg.export_trl))
    expected = {k: v for k, (v, _) in trl_map.trl_values(cfg).items()}
    assert {**module.GRPO_CONFIG, **module.BY_DEVICE["cpu"]} == expected
    assert module.GRPO_CONFIG["reward_weights"] == [1.0, 0.5, 1.0]  # the overlong penalty's weight last
    on_cuda = {**module.GRPO_CONFIG, **module.BY_DEVICE["cuda"]}
    assert on_cuda["optim"] == "adamw_torch" and on_cuda["bf16"] and not on_cuda["use_cpu"]  # LoRA, not QLoRA
    funcs = module.reward_funcs()
    assert [getattr(f, "__name__", "") for f in funcs] == ["correctness", "brevity", "soft_overlong_punishment_reward"]
    completions = [[{"role": "assistant", "content": "#### 5"}], [{"role": "assistant", "content": "it is #### 7"}]]
    assert funcs[0](completions=completions, answer=["5", "8"], prompts=None) == [1.0, 0.0]
    assert funcs[1](completions=completions, answer=["5", "8"]) == [1.0, 0.0]
    assert funcs[2](completion_ids=[[1] * 20, [1] * 28]) == [0.0, -1.0]

    monkeypatch.chdir(ROOT)  # a relative FILE.py is found from where the script was exported
    assert module.reward_funcs()[1](completions=["short"], answer=["1"]) == [1.0]


def test_local_dataset_and_missing_user_reward(tmp_path, monkeypatch):
    pytest.importorskip("trl", minversion="1.16")
    monkeypatch.chdir(tmp_path)
    rows = [{"question": f"What is {a} + 1?", "answer": f"{a}+1\n#### {a + 1:,}"} for a in range(998, 1018)]
    (tmp_path / "rows.jsonl").write_text("\n".join(json.dumps(r) for r in rows))
    cfg = _tiny(task="gsm8k", dataset="rows.jsonl", export_trl="gsm.py")
    export_trl.write(cfg, cfg.export_trl)
    text = Path("gsm.py").read_text()
    assert "math_problems.split('gsm8k', str(local_path(DATASET)), EVAL_SIZE, TRAIN_SIZE)" in text
    assert "SYSTEM_PROMPT = arithmetic.SYSTEM_PROMPT" in text
    data = _load_script(tmp_path / "gsm.py").train_dataset()
    assert len(data) == 16  # the last 20 // 5 rows are held out, as ladder does with a one-split file
    assert data[0]["answer"] == "999" and data[15]["answer"] == "1014"
    assert data[0]["prompt"][0] == {"role": "system", "content": arithmetic.SYSTEM_PROMPT}
    # the evaluation the script names scores the rows held out of its training data
    eval_size = cfg.problems.eval_size
    assert f"ladder.run eval --model @tiny-math --task gsm8k --dataset rows.jsonl --eval-size {eval_size}" in text
    _, held_out = math_problems.split("gsm8k", "rows.jsonl", cfg.problems.eval_size)
    assert [p["answer"] for p in held_out] == ["1015", "1016", "1017", "1018"]
    assert not {p["question"] for p in held_out} & {d["prompt"][1]["content"] for d in data}

    default = grpo.Config(export_trl="default.py")
    export_trl.write(default, default.export_trl)
    assert "math_problems.split('gsm8k', DATASET, EVAL_SIZE, TRAIN_SIZE)" in Path("default.py").read_text()
    assert "DATASET = 'openai/gsm8k'" in Path("default.py").read_text()

    with pytest.raises(UsageError, match="cannot load 'nowhere.py:fn'"):
        export_trl.write(_tiny(reward_funcs="correctness,nowhere.py:fn"), "bad.py")
    assert not Path("bad.py").exists()
    with pytest.raises(UsageError, match="--train-size 17 is more than the 16 training problems"):
        export_trl.write(_tiny(task="gsm8k", dataset="rows.jsonl", train_size=17), "big.py")
    assert not Path("big.py").exists()
