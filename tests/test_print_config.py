"""``--print-config`` prints the values a run uses (and the preset and --algo applied); ``--help`` says each
option's default once."""

from __future__ import annotations

import dataclasses
import json
import re
from types import SimpleNamespace

import pytest
import torch
from transformers import Qwen2Config

from ladder import hub, run
from ladder.policies.low_precision import bf16_native
from ladder.rungs import registry
from ladder.runtime.errors import UsageError
from ladder.specs import options_dict
from ladder.tasks import math_problems

RUNGS = registry.rungs()


def printed(argv: list[str], capsys) -> dict:
    assert run.main([*argv, "--print-config"]) == 0
    return json.loads(capsys.readouterr().out)


def says_its_default(f: dataclasses.Field) -> bool:
    """An option whose None default stands for a value decided from other options ("default: on with --qlora")."""
    return f.default is None and re.search(r"\bdefault[:\s]", f.metadata.get("help", "")) is not None


def cases():
    for name, rung in RUNGS.items():
        yield pytest.param(name, [], id=name)
        for preset in getattr(rung, "PRESETS", {}):
            yield pytest.param(name, ["--preset", preset], id=f"{name}-{preset}")
        for algo in getattr(rung, "ALGOS", {}):
            yield pytest.param(name, ["--algo", algo], id=f"{name}-{algo}")


@pytest.mark.parametrize("name, argv", list(cases()))
def test_print_config_is_the_config_with_every_default_resolved(name, argv, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    rung = RUNGS[name]
    shown = printed([name, *argv], capsys)
    cfg = run.make_config(name, rung, argv)
    given = dict(zip(argv[::2], argv[1::2]))
    assert shown.pop("rung") == name
    assert shown.pop("preset") == given.get("--preset")
    if getattr(rung, "ALGOS", None):
        assert shown.pop("algo") == given.get("--algo")
    assert list(shown) == list(options_dict(cfg))  # a spec's fields as the flags that set them
    for option, value in options_dict(cfg).items():
        if option not in rung.RESOLVED:
            assert shown[option] == value, option
    unresolved = [f.name for f in dataclasses.fields(rung.Config) if f.name in shown and says_its_default(f)
                  and shown[f.name] is None
                  and not (f.name == "kl_correction" and cfg.kl.where == "reward")]
    assert not unresolved, f"{name}: printed as null, though the run decides them: {unresolved}"
    assert "auto" not in [value for option, value in shown.items() if option not in SAMPLER_AUTO]
    if any(shown.get(option) == "auto" for option in SAMPLER_AUTO):  # decided from the model's config when it starts
        with pytest.raises(UsageError):
            hub.resolve(math_problems.resolve_math_model(shown["model"]), "--model")
    assert list(tmp_path.iterdir()) == []


SAMPLER_AUTO = ("sampler_dtype", "sampler_correction")


def test_the_sampler_auto_is_decided_from_the_models_config(tmp_path, capsys):
    """auto is bfloat16 (and TRL's sequence_mask) for a model of Qwen2.5-0.5B's size where bf16 is native; the
    trainer's own weights (uncorrected) for the tiny model and where it is not; what is given stays."""
    Qwen2Config(hidden_size=896, intermediate_size=4864, num_hidden_layers=24, num_attention_heads=14,
                num_key_value_heads=2, vocab_size=151936, tie_word_embeddings=True).save_pretrained(tmp_path)
    native = bf16_native(torch.device("cpu"))
    shown = printed(["grpo", "--model", str(tmp_path)], capsys)
    expected = ("bfloat16", "sequence_mask") if native else ("same", "none")
    assert (shown["sampler_dtype"], shown["sampler_correction"]) == expected
    shown = printed(["grpo", "--model", str(tmp_path), "--sampler-correction", "token_truncate"], capsys)
    assert shown["sampler_correction"] == "token_truncate"
    shown = printed(["grpo", "--model", "@tiny-math"], capsys)
    assert (shown["sampler_dtype"], shown["sampler_correction"]) == ("same", "none")
    shown = printed(["agent", "--model", str(tmp_path), "--train-env-tokens"], capsys)
    assert (shown["sampler_dtype"], shown["sampler_correction"]) == ("same", "none")


@pytest.mark.parametrize("argv", [[], ["--algo", "dapo"], ["--algo", "gspo"], ["--algo", "rloo"], ["--algo", "cispo"],
                                  ["--clip-eps", "0.1"], ["--kl-correction", "off"],
                                  ["--algo", "gspo", "--clip-eps-high", "5e-4"]])
def test_grpo_prints_the_clip_and_kl_correction_its_update_uses(argv, capsys):
    grpo = RUNGS["grpo"]
    shown = printed(["grpo", *argv], capsys)
    cfg = run.make_config("grpo", grpo, argv)
    update = grpo.update_config(dataclasses.replace(cfg, sampler=cfg.sampler.settled(bf16_native=False, parameters=0)))
    assert shown["clip_eps_high"] == update.clip_eps_high
    if shown["kl_in"] == "loss":
        assert (shown["kl_correction"] == "on") == update.kl_correction
    else:
        assert shown["kl_correction"] is None and update.kl_coef == 0  # no KL term in the loss to correct


def test_gspo_prints_its_algo_and_your_override(capsys):
    shown = printed(["grpo", "--algo", "gspo", "--clip-eps-high", "5e-4"], capsys)
    assert shown["algo"] == "gspo"
    assert (shown["clip_eps"], shown["clip_eps_high"], shown["ratio_level"]) == (3e-4, 5e-4, "sequence")


@pytest.mark.parametrize("argv, weights", [([], "1,1"), (["--reward-weights", "1,0.5"], "1,0.5"),
                                           (["--reward-funcs", "correctness"], "1")])
def test_grpo_prints_one_weight_per_reward_function(argv, weights, capsys):
    shown = printed(["grpo", *argv], capsys)
    assert shown["reward_weights"] == weights
    cfg = run.make_config("grpo", RUNGS["grpo"], argv)
    assert [float(w) for w in weights.split(",")] == list(RUNGS["grpo"].reward_weights(cfg).values())


@pytest.mark.parametrize("name", ["grpo", "eval"])
def test_the_system_prompt_is_the_tasks_unless_given(name, capsys):
    for task in math_problems.TASKS:
        assert printed([name, "--task", task], capsys)["system_prompt"] == math_problems.system_prompt(task)
    assert printed([name, "--system-prompt", "Be brief."], capsys)["system_prompt"] == "Be brief."


class Loaded(Exception):
    """Stops a rung's loader once it has said what it would load."""


def lm_flag_cases():
    for qlora in ([], ["--qlora"], ["--lora"]):
        for extra in ([], ["--gradient-checkpointing"], ["--no-gradient-checkpointing"], ["--no-dequantize-once"],
                      ["--release-memory"], ["--optim", "adamw"]):
            yield qlora + extra


@pytest.mark.parametrize("argv", list(lm_flag_cases()), ids=" ".join)
def test_grpo_prints_what_load_policy_uses(argv, monkeypatch, capsys):
    grpo = RUNGS["grpo"]
    seen = {"release_memory": False}
    monkeypatch.setattr(grpo.quant, "release_freed_memory", lambda: seen.update(release_memory=True))
    model = SimpleNamespace(config=grpo.quant.load_config(math_problems.resolve_math_model("@tiny-math")))
    monkeypatch.setattr(grpo.quant, "load_causal_lm", lambda path, device, **kw: seen.update(kw) or model)

    class Policy:
        def __init__(self, model, dequantize_once, **kw):
            seen["dequantize_once"] = dequantize_once

        def parameters(self):
            return []

    monkeypatch.setattr(grpo.recipe, "CausalLMPolicy", Policy)
    monkeypatch.setattr(grpo.quant, "make_optimizer", lambda params, lr, name, device: seen.update(optim=name))
    cfg = run.make_config("grpo", grpo, argv)
    grpo.load_policy(cfg, "a-model", torch.device(cfg.device))
    shown = printed(["grpo", *argv], capsys)
    for option in ("gradient_checkpointing", "dequantize_once", "release_memory", "optim"):
        assert shown[option] == seen[option], option
    assert shown["lora"] == (seen["lora"] or seen["qlora"])  # quant.load_causal_lm: LoRA with either


@pytest.mark.parametrize("argv", [[], ["--qlora"], ["--qlora", "--no-gradient-checkpointing"],
                                  ["--gradient-checkpointing"]], ids=" ".join)
def test_ppo_sentiment_prints_what_load_model_uses(argv, monkeypatch, capsys):
    ppo = RUNGS["ppo-sentiment"]
    seen = {}

    def load_causal_lm(path, device, **kw):
        seen.update(kw)
        raise Loaded

    monkeypatch.setattr(ppo.setup.hub, "resolve", lambda path, flag: path)
    monkeypatch.setattr(ppo.setup.quant, "load_causal_lm", load_causal_lm)
    with pytest.raises(Loaded):
        ppo.load_model(run.make_config("ppo-sentiment", ppo, argv))
    shown = printed(["ppo-sentiment", *argv], capsys)
    assert shown["gradient_checkpointing"] == seen["gradient_checkpointing"]
    assert shown["lora"] == (seen["lora"] or seen["qlora"])


def test_a_resumed_run_prints_the_options_it_started_with(tmp_path, capsys):
    grpo = RUNGS["grpo"]
    started = grpo.Config(clip_eps=0.1, out=str(tmp_path))
    (tmp_path / "config.json").write_text(json.dumps({"rung": "grpo", **options_dict(started)}))
    shown = printed(["grpo", "--resume", str(tmp_path), "--algo", "dapo", "--clip-eps", "0.3"], capsys)
    assert "preset" not in shown and "algo" not in shown  # the saved options apply, not these flags
    assert (shown["clip_eps"], shown["clip_eps_high"], shown["loss_type"]) == (0.1, 0.1, "grpo")


# --- --help --------------------------------------------------------------------------------------

def option_entries(help_text: str) -> dict[str, str]:
    """``--flag`` → its entry in ``--help`` (one line, whitespace collapsed)."""
    options = help_text.split("\noptions:\n", 1)[1]
    entries = re.split(r"\n  (?=-)", "\n" + options)
    return {entry.split()[0].rstrip(","): " ".join(entry.split()) for entry in entries if entry.strip()}


def _options(config_cls):
    """(flag, default, help) of every option: the plain fields, and each spec field's params."""
    for f in dataclasses.fields(config_cls):
        spec = f.metadata.get("spec")
        if spec:
            yield from ((p.dashed, p.default, p.help() if callable(p.help) else p.help) for p in spec.params())
        else:
            said = f.metadata.get("help", "")
            yield "--" + f.name.replace("_", "-"), f.default, said() if callable(said) else said


@pytest.mark.parametrize("name", list(RUNGS))
def test_help_says_each_default_once(name, capsys):
    with pytest.raises(SystemExit) as done:
        run.main([name, "--help"])
    assert done.value.code == 0
    help_text = capsys.readouterr().out
    assert (RUNGS[name].__doc__ or "").strip() in help_text  # the rung's docstring, its layout kept
    entries = option_entries(help_text)
    for flag, default, said in _options(RUNGS[name].Config):
        entry = entries[flag]
        defaults = re.findall(r"\bdefault[:\s]", entry)
        assert len(defaults) <= 1, entry
        assert "(default: None)" not in entry, entry
        if default is not None and not re.search(r"\bdefault[:\s]", said):
            assert f"(default: {default})" in entry, entry  # said once, by argparse
