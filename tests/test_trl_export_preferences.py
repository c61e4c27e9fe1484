"""``--export-trl`` of the preference rungs: a runnable TRL script with the run's options — RewardTrainer for
reward-model, DPOTrainer for dpo — that trains on ladder's split of the same pairs; nothing is trained by ladder and
no run directory is made."""

from __future__ import annotations

import importlib.util

import pytest
from trl_helpers import one_thread  # noqa: F401 (autouse fixture)

from ladder import run


def _load(path):
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("rung, flags, trainer", [
    ("reward-model", ["--batch-size", "8", "--num-minibatches", "2", "--lr", "3e-4"], "RewardTrainer"),
    ("dpo", ["--lora", "--beta", "0.2", "--batch-size", "4"], "DPOTrainer")])
def test_the_exported_script_carries_the_options_and_trains_with_trl(rung, flags, trainer, tmp_path, monkeypatch):
    script, out = tmp_path / f"{rung}_trl.py", tmp_path / "run"
    assert run.main([rung, "--preset", "tiny", *flags, "--steps", "5", "--export-trl", str(script),
                     "--out", str(out)]) == 0
    assert script.is_file() and not out.exists()
    module = _load(script)
    config = module.CONFIG
    assert config["lr_scheduler_type"] == "constant" and config["max_length"] is None and config["bf16"] is False
    if rung == "reward-model":
        assert (config["per_device_train_batch_size"], config["max_steps"], config["learning_rate"]) == (4, 10, 3e-4)
        assert module.PEFT_CONFIG is None
    else:
        assert (config["beta"], config["per_device_train_batch_size"], config["max_steps"]) == (0.2, 4, 5)
        assert module.PEFT_CONFIG.task_type == "CAUSAL_LM" and config["loss_type"] == ["sigmoid"]
    assert f"trl.{trainer}" in module.__doc__
    monkeypatch.chdir(tmp_path)
    module.main(["--max-steps", "1", "--output-dir", str(tmp_path / "trl")])
    assert any((tmp_path / "trl").iterdir())
