"""The distill rung's ``--export-trl``: the run as a TRL 1.16 script, ``trl.experimental.gkd.GKDTrainer``.

(a) the map's distill rows are GKDConfig / GKDTrainer rows only, name real options of the rung, real ``ladder.core``
    functions and real TRL names, and give a GKDConfig TRL accepts: on-policy (``lmbda`` 1), the reverse KL
    (``beta`` 1), ``--steps`` × μ × M steps of P·G/M completions, the teacher, τ and the length as the run's; γ > 0,
    μ > 1 and the rule rewards are named as not in TRL where the run uses them;
(b) ``python -m ladder.run distill --preset tiny --export-trl F`` writes the script and no run directory, and the
    script trains a step on the CPU (the tiny student, its tutor as the teacher, LoRA; both local directories) and
    saves the adapter; without TRL it stops with one line saying how to install it;
(c) a misused ``--export-trl`` (no file name, a directory) is one line, exit 2, and writes nothing.
"""

from __future__ import annotations

import dataclasses
import importlib
import importlib.util
import inspect
import random
import sys
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pytest
import torch
from cli_helpers import run_main

import ladder.core
from ladder import run
from ladder.rungs import distill
from ladder.specs import option_names
from ladder.trl import export_distill
from ladder.trl import map as trl_map


def _tiny(**kw) -> distill.Config:
    return distill.Config(**{**distill.PRESETS["tiny"], "progress": False, **kw})


def _gkd():
    pytest.importorskip("trl", minversion="1.16")
    return importlib.import_module("trl.experimental.gkd")


# --- (a) the map ----------------------------------------------------------------------------------------------

def test_distill_rows_are_gkds_and_name_real_things():
    gkd = _gkd()
    rows = trl_map.rung_rows(distill)
    assert rows and {r.trl_class for r in rows} == {"GKDConfig", "GKDTrainer"}
    assert not [r for r in trl_map.all_rows() if r.ladder_rung != "distill" and r.trl_class.startswith("GKD")]
    names = {"GKDConfig": {f.name for f in dataclasses.fields(gkd.GKDConfig)},
             "GKDTrainer": set(inspect.signature(gkd.GKDTrainer.__init__).parameters)}
    for row in rows:
        assert row.ladder_option is None or row.ladder_option in option_names(distill.Config), row
        assert row.core_function is None or callable(getattr(ladder.core, row.core_function)), row
        assert row.trl_field is None and row.note or row.trl_field in names[row.trl_class], row
    assert {"teacher", "discount", "export_trl"} <= trl_map.ladder_options("distill")


@pytest.mark.parametrize("flags", [{}, dict(mu=2, num_minibatches=4, discount=1.0, reward_weights="1",
                                             temperature=0.7, lora=False)], ids=["tiny", "mu-minibatches-gamma1"])
def test_values_make_a_gkd_config_trl_accepts(flags, tmp_path):
    gkd = _gkd()
    cfg = _tiny(**flags)
    distill.validate(cfg)
    values = {k: v for k, (v, _) in trl_map.trl_values(cfg, "GKDConfig").items()}
    args = gkd.GKDConfig(**{**values, "output_dir": str(tmp_path)})
    M, mu = cfg.num_minibatches, cfg.mu
    assert args.lmbda == 1.0 and args.beta == 1.0 and not args.seq_kd and args.disable_dropout
    assert args.max_steps == cfg.steps * mu * M and args.gradient_accumulation_steps == 1
    assert args.per_device_train_batch_size * M == cfg.prompts_per_step * cfg.group_size
    assert args.teacher_model_name_or_path == cfg.teacher_source() and Path(args.teacher_model_name_or_path).is_dir()
    assert args.temperature == cfg.generation.temperature and args.max_new_tokens == cfg.generation.max_new_tokens
    assert args.learning_rate == cfg.optimisation.lr and args.use_cpu and not args.bf16
    assert args.teacher_model_init_kwargs == args.model_init_kwargs == {"dtype": "float32"}
    used = {r.ladder_option for r in trl_map.not_in_trl("distill") if r.applies is not None and r.applies_to(cfg)}
    assert ("discount" in used) == (cfg.discount > 0) and ("mu" in used) == (mu > 1)
    assert ("reward_weights" in used) == bool(flags) and ("temperature" in used) == bool(flags)


# --- (b) the command line writes the script, which trains with TRL ---------------------------------------------

@contextmanager
def trainer_state_kept():
    """Run a TRL trainer in this process: torch's threads and random generators as they were afterwards, and the
    accelerate state the trainer made dropped, so that later tests start clean."""
    from accelerate.state import AcceleratorState, GradientState

    threads, py, np_state = torch.get_num_threads(), random.getstate(), np.random.get_state()
    try:
        with torch.random.fork_rng(devices=[]):
            yield
    finally:
        torch.set_num_threads(threads)
        random.setstate(py)
        np.random.set_state(np_state)
        AcceleratorState._reset_state(reset_partial_state=True)
        GradientState._reset_state()


@pytest.mark.timeout(240)
def test_export_cli_writes_a_gkd_script_that_trains_a_step_offline(tmp_path, monkeypatch, capsys):
    _gkd()
    monkeypatch.chdir(tmp_path)
    script = tmp_path / "export" / "distill_trl.py"
    capsys.readouterr()
    assert run.main(["distill", "--preset", "tiny", "--discount", "1", "--export-trl", str(script)]) == 0
    printed = capsys.readouterr().out
    assert script.is_file() and not (tmp_path / "runs").exists()
    assert '"trainer": "trl.experimental.gkd.GKDTrainer"' in printed and '"not_in_trl": "' in printed
    text = script.read_text()
    compile(text, str(script), "exec")
    assert "GKDTrainer(model=MODEL, teacher_model=config.teacher_model_name_or_path" in text
    assert "lmbda=1.0," in text and "beta=1.0," in text and "--discount = 1.0: γ > 0" in text
    assert "LoraConfig(r=16, lora_alpha=32" in text and "--clip-eps:" in text and "--mu:" in text

    spec = importlib.util.spec_from_file_location("exported_distill_trl", script)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    out = tmp_path / "trl-out"  # the models are local directories: nothing is downloaded
    with trainer_state_kept():
        module.main(["--max-steps", "1", "--output-dir", str(out), "--set", "per_device_train_batch_size=4"])
    assert (out / "adapter_config.json").is_file() and (out / "adapter_model.safetensors").is_file()
    assert "'loss'" in capsys.readouterr().out


def test_without_trl_the_script_says_how_to_install_it(tmp_path, monkeypatch):
    pytest.importorskip("peft")
    export_distill.write(_tiny(), tmp_path / "s.py")
    text = (tmp_path / "s.py").read_text()
    imports = text[:text.index("from ladder.tasks import")]  # the script's imports, TRL's among them
    monkeypatch.setitem(sys.modules, "trl", None)  # as if TRL were not installed
    for name in [n for n in sys.modules if n.startswith("trl.")]:
        monkeypatch.delitem(sys.modules, name)
    with pytest.raises(SystemExit) as stop:
        exec(compile(imports, "s.py", "exec"), {"__name__": "exported"})
    assert str(stop.value.code).startswith('this script needs TRL: pip install "trl>=1.16,<2"')


# --- (c) misuse ---------------------------------------------------------------------------------------------------

def test_a_misused_export_trl_is_one_line_exit_2(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    code, err = run_main("distill", "--preset", "tiny", "--export-trl", capsys=capsys)
    assert code == 2 and len(err.strip().splitlines()) == 1 and "--export-trl: expected one argument" in err
    (tmp_path / "scripts").mkdir()
    code, err = run_main("distill", "--preset", "tiny", "--export-trl", "scripts", capsys=capsys)
    assert code == 2 and err == ("ladder: error: --export-trl scripts is a directory; give a file name for the "
                                 "script, such as distill_trl.py\n")
    assert [p.name for p in tmp_path.iterdir()] == ["scripts"] and not any((tmp_path / "scripts").iterdir())
