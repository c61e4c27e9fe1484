"""No library's warning reaches a run's output (``ladder.patches.quiet_the_stack``), whatever a new release of
transformers/peft/accelerate/bitsandbytes deprecates; the notebooks are read the same way (``notebooks/conftest.py``).

Against a new release, a maintainer runs these with ``LADDER_SHOW_WARNINGS=1`` (the README's release check): nothing
is hidden then, and a release that deprecates a call ladder makes fails here, not in front of a learner."""

from __future__ import annotations

import os
import subprocess
import sys

from ladder.patches import cache_arg, library_deprecations
from ladder.tasks import arithmetic, review_models


def test_deprecations_of_the_watched_libraries_are_found_and_torchs_own_are_not():
    output = "\n".join([
        "[transformers] `past_key_values`/`cache_params` are deprecated. Use `cache` instead.",
        "/venv/lib/python3.11/site-packages/peft/tuners/lora.py:12: FutureWarning: `x` is deprecated",
        "/venv/lib/python3.11/site-packages/accelerate/state.py:3: DeprecationWarning: old",
        "/home/me/ladder/.venv/lib/python3.11/site-packages/torch/jit/_script.py:365: DeprecationWarning: "
        "`torch.jit.script_method` is deprecated.",
        "ladder: error: --lr must be > 0, got 0",
        "update 3: reward 0.41",
    ])
    assert library_deprecations(output) == [output.splitlines()[i] for i in (0, 1, 2)]


def test_the_stack_is_quieted_and_ladder_show_warnings_shows_it_again():
    """A FutureWarning raised in transformers' code, and a DeprecationWarning its stack level puts in ladder's call,
    reach a run's stderr only with LADDER_SHOW_WARNINGS=1."""
    code = ("import warnings, types, sys\n"
            "from ladder.patches import quiet_the_stack\n"
            "quiet_the_stack()\n"
            "g = {'__name__': 'transformers.modeling_utils'}\n"
            "exec(\"import warnings\\nwarnings.warn('`x` is deprecated', FutureWarning)\", g)\n"
            "warnings.warn('`y` is deprecated', DeprecationWarning)\n"
            "warnings.warn('a warning of ladder itself', UserWarning)\n")
    for shown in ("", "1"):
        env = {**os.environ, "PYTHONWARNINGS": "default", "LADDER_SHOW_WARNINGS": shown}
        err = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env).stderr
        assert ("`x` is deprecated" in err, "`y` is deprecated" in err) == (bool(shown), bool(shown)), err
        assert "a warning of ladder itself" in err


def test_the_cache_travels_under_the_name_this_transformers_expects():
    from transformers.modeling_outputs import BaseModelOutputWithPast

    assert cache_arg() in BaseModelOutputWithPast.__dataclass_fields__


def _run(*args, tmp_path, out: str = "run") -> str:
    env = {**os.environ, "PYTHONWARNINGS": "default"}  # DeprecationWarnings are hidden outside __main__ otherwise
    progress = ["--no-progress"] if args[0] != "eval" else []
    result = subprocess.run([sys.executable, "-m", "ladder.run", *args, "--out", str(tmp_path / out), *progress],
                            capture_output=True, text=True, cwd=tmp_path, env=env, timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    return result.stdout + result.stderr


def test_a_tiny_grpo_run_and_the_eval_of_its_adapter_print_no_library_deprecation(tmp_path):
    """QLoRA: transformers' 4-bit loading, bitsandbytes, peft's wrapping and adapter loading, generate."""
    arithmetic.tiny_math_model()  # built once into the cache, outside the run's output
    flag = "--qlora"
    output = _run("grpo", "--preset", "tiny", "--steps", "2", "--eval-size", "8", "--print-samples", "1", flag,
                  tmp_path=tmp_path)
    output += _run("eval", "--preset", "tiny", "--eval-size", "4", flag, "--adapter", str(tmp_path / "run/adapter"),
                   tmp_path=tmp_path, out="eval")
    assert library_deprecations(output) == []


def test_a_tiny_ppo_sentiment_run_prints_no_library_deprecation(tmp_path):
    """GPT-2 with LoRA on its Conv1D layers, the value head, the reward model."""
    review_models.tiny_model_path()
    output = _run("ppo-sentiment", "--preset", "tiny", "--steps", "2", "--batch-size", "16",
                  "--num-eval-prompts", "4", "--lora", tmp_path=tmp_path)
    assert library_deprecations(output) == []
