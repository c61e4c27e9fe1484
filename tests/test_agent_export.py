"""The agent rung's ``--export-trl``: the run as a TRL 1.16 script, ``GRPOTrainer(environment_factory=…)``.

(a) the map's agent rows name real options of the agent rung and real TRL names, and give GRPOConfig values TRL
    accepts (``max_tool_calling_iterations`` = ``--max-tool-calls``, ``max_completion_length`` = ``--max-new-tokens``);
(b) ``python -m ladder.run agent --preset tiny --export-trl F`` writes the script and no run directory, and the
    script trains one step offline on the CPU with TRL's tool loop, the tiny model calling the calculator;
(c) the guessing game's script: its rows reach ``reset``, its ``get_reward`` is TRL's extra reward column, its
    only tool is ``guess`` (ladder's ``turn_rewards`` an attribute, no tool), the reward reads the last assistant
    message, one step trains, and --credit turn / --train-env-tokens are named as not in TRL;
(d) a user's FILE.py:Class environment is loaded by the script; a bad --env is one line and writes nothing.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import inspect
import os
import subprocess
import sys
from pathlib import Path

import pytest
from cli_helpers import run_cli

from ladder.rungs import agent, grpo
from ladder.runtime.runlog import UsageError
from ladder.specs import option_names
from ladder.tasks import agent_envs
from ladder.trl import export as export_trl
from ladder.trl import map as trl_map

ROOT = Path(__file__).resolve().parents[1]
AGENT_ONLY = {f.name for f in dataclasses.fields(agent.Config)} - {f.name for f in dataclasses.fields(grpo.Config)}


def _tiny(preset: str = "tiny", **kw) -> agent.Config:
    return agent.Config(**{**agent.PRESETS[preset], "progress": False, **kw})


def _load_script(path: Path):
    spec = importlib.util.spec_from_file_location(f"exported_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _env(**extra) -> dict:
    return {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""),
            "OMP_NUM_THREADS": "1", "TRL_EXPERIMENTAL_SILENCE": "1", **extra}


# --- (a) the map ---------------------------------------------------------------------------------------------------

def test_agent_rows_name_the_rungs_options_and_real_trl_names():
    trl = pytest.importorskip("trl", minversion="1.16")
    rows = trl_map.rung_rows(agent)
    options = set(option_names(agent.Config))  # a spec's fields by their flags
    assert all(r.ladder_rung == "agent" and (r.ladder_option is None or r.ladder_option in options) for r in rows)
    assert AGENT_ONLY <= trl_map.ladder_options("agent"), AGENT_ONLY - trl_map.ladder_options("agent")
    names = {"GRPOConfig": {f.name for f in dataclasses.fields(trl.GRPOConfig)},
             "GRPOTrainer": set(inspect.signature(trl.GRPOTrainer.__init__).parameters)}
    assert all(r.trl_field is None or r.trl_field in names[r.trl_class] for r in rows)
    assert {r.ladder_option for r in trl_map.not_in_trl("agent")} == {"credit", "train_env_tokens", "env_timeout"}
    assert {r.ladder_option for r in trl_map.for_field("GRPOTrainer", "environment_factory")} == {"env", None}


@pytest.mark.parametrize("preset", ["tiny", "tiny-guess"])
def test_values_make_an_agent_config_trl_accepts(preset, tmp_path):
    trl = pytest.importorskip("trl", minversion="1.16")
    cfg = _tiny(preset)
    values = {k: v for k, (v, _) in trl_map.trl_values(cfg).items()}
    args = trl.GRPOConfig(**{**values, "output_dir": str(tmp_path)})
    assert args.max_tool_calling_iterations == cfg.max_tool_calls and args.max_completion_length == cfg.max_new_tokens
    assert args.num_generations == cfg.group_size and args.beta == cfg.kl.coef
    assert "max_tool_calling_iterations" not in trl_map.trl_values(grpo.Config(**grpo.PRESETS["tiny"]))


# --- (b) the command line writes the script, which trains one step with TRL's tool loop -------------------------

@pytest.mark.timeout(180)
def test_export_cli_writes_a_script_that_trains_one_step_with_the_calculator(tmp_path):
    pytest.importorskip("trl", minversion="1.16")
    script = tmp_path / "export" / "agent_trl.py"
    done = run_cli("agent", "--preset", "tiny", "--export-trl", str(script), cwd=tmp_path, env=_env(), timeout=120)
    assert done.returncode == 0, done.stderr
    assert script.is_file() and not (tmp_path / "runs").exists()
    text = script.read_text()
    compile(text, str(script), "exec")
    assert "from ladder.tasks.agent_envs import Calculator" in text and "return Calculator" in text
    assert "environment_factory=environment_class()," in text
    assert f"max_tool_calling_iterations={agent.PRESETS['tiny']['max_tool_calls']}," in text
    assert f"max_completion_length={agent.PRESETS['tiny']['max_new_tokens']}," in text

    out = tmp_path / "trl-out"
    done = subprocess.run([sys.executable, str(script), "--max-steps", "1", "--output-dir", str(out)], cwd=tmp_path,
                          env=_env(HF_HUB_OFFLINE="1", HF_DATASETS_OFFLINE="1", TQDM_DISABLE="1"),
                          capture_output=True, text=True, timeout=150)
    assert done.returncode == 0, done.stderr[-3000:]
    assert (out / "adapter_config.json").is_file()
    logged = done.stdout + done.stderr
    assert "'rewards/correctness/mean'" in logged and "'tools/call_frequency'" in logged
    frequency = float(logged.split("'tools/call_frequency': '")[1].split("'")[0])
    assert frequency > 0  # TRL parsed the tiny model's <tool_call> turns and ran the calculator


# --- (c) the guessing game ----------------------------------------------------------------------------------------

def test_guess_script_rows_reset_the_game_and_its_reward_is_trls_extra_column(tmp_path, monkeypatch):
    trl = pytest.importorskip("trl", minversion="1.16")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("TRL_EXPERIMENTAL_SILENCE", "1")
    cfg = _tiny("tiny-guess", credit="turn", train_env_tokens=True, train_size=32)
    summary = export_trl.write_agent(cfg, "guess_trl.py")
    assert set(summary["not_in_trl"].split(", ")[-2:]) == {"train_env_tokens", "credit"}  # the agent's own, last
    text = Path("guess_trl.py").read_text()
    used = text.split("# Used by this run, and GRPOTrainer has no equivalent:")[1].split("# ladder options with")[0]
    assert "--credit = 'turn'" in used and "--train-env-tokens = True" in used

    module = _load_script(tmp_path / "guess_trl.py")
    assert module.GRPO_CONFIG["max_tool_calling_iterations"] == 5
    game_class = module.environment_class()  # the game itself: its turn_rewards is an attribute, not a tool
    assert game_class is agent_envs.GuessingGame
    data = module.train_dataset()
    train, _ = agent.problems(cfg)
    assert len(data) == 32 and [row["secret"] for row in data] == [p["secret"] for p in train]
    assert data[0]["prompt"] == [{"role": "system", "content": agent_envs.GUESS_PROMPT},
                                 {"role": "user", "content": train[0]["question"]}]
    game = game_class()
    game.reset(**data[0])  # TRL's call: the whole row
    assert game.guess(data[0]["secret"]) == "correct" and game.get_reward() == 1.0

    # TRL hands a trajectory to the rewards as its messages: the last assistant message is the answer
    secret = str(data[0]["secret"])
    played = [{"role": "assistant", "content": "", "tool_calls": []}, {"role": "tool", "name": "guess",
                                                                        "content": "correct"},
              {"role": "assistant", "content": f"#### {secret}"}]
    unanswered = played[:2]
    correctness = module.reward_funcs()[0]
    assert correctness(completions=[played, unanswered], answer=[secret, secret]) == [1.0, 0.0]

    tokenizer = module.AutoTokenizer.from_pretrained(module.MODEL)
    module.parse_tool_calls(tokenizer)
    trainer = trl.GRPOTrainer(model=module.MODEL, reward_funcs=module.reward_funcs(), train_dataset=data,
                              args=module.grpo_config(module.argparse.Namespace(
                                  device="cpu", max_steps=1, output_dir=str(tmp_path / "out"), set=[])),
                              processing_class=tokenizer, peft_config=module.PEFT_CONFIG,
                              environment_factory=module.environment_class())
    assert trainer.reward_func_names == ["correctness", "GuessingGame"]  # get_reward, weight 1, as ladder adds it
    assert trainer.max_tool_calling_iterations == cfg.max_tool_calls == 5
    assert trainer.max_completion_length == cfg.max_new_tokens
    assert [tool.__name__ for tool in trainer.tools] == ["guess"]  # as ladder's tools: turn_rewards is an attribute
    trainer.train()  # one step: TRL renders the tools in the prompts, runs its tool loop against the games, scores
    logged = trainer.state.log_history[0]
    assert logged["tools/call_frequency"] > 0 and "rewards/GuessingGame/mean" in logged


# --- (d) a user's environment, a bad one ----------------------------------------------------------------------------

COUNTER = '''
class Counter:
    def reset(self, **row):
        self.n = 0
        return " Count with the tool."

    def step(self) -> str:
        """Count one.
        """
        self.n += 1
        return str(self.n)
'''


def test_a_users_environment_is_loaded_by_the_script_and_a_bad_one_is_one_line(tmp_path, monkeypatch):
    pytest.importorskip("trl", minversion="1.16")
    monkeypatch.chdir(tmp_path)
    (tmp_path / "counter.py").write_text(COUNTER + "\n\ndef not_a_class():\n    return 1\n")
    cfg = _tiny(env="counter.py:Counter", task="arithmetic")
    export_trl.write_agent(cfg, "counter_trl.py")
    text = Path("counter_trl.py").read_text()
    assert "return load_user_function('counter.py:Counter')" in text
    module = _load_script(tmp_path / "counter_trl.py")
    assert module.environment_class().__name__ == "Counter"
    assert module.SYSTEM_PROMPT == agent.system_prompt(cfg)  # --task arithmetic's
    assert len(module.train_problems()) == len(agent.problems(cfg)[0])

    for env, message in [("nowhere", "neither a built-in"), ("counter.py:not_a_class", "not a class with a reset"),
                         ("missing.py:Env", "cannot load")]:
        with pytest.raises(UsageError, match=message):
            export_trl.write_agent(_tiny(env=env), "bad.py")
        assert not Path("bad.py").exists()
