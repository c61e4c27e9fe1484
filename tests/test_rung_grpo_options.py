"""GRPO's ``--algo`` bundles (``ladder.rungs.grpo.options``): each sets its flags, over a preset and under
explicit flags, and an unknown one is a one-line error. The combinations that are refused are rows of
tests/test_bad_inputs.py, and --adaptive-entropy's starting coefficient here."""

import pytest

from ladder import run
from ladder.rungs import grpo
from ladder.rungs.grpo.options import ALGOS
from ladder.specs import option_value


@pytest.mark.parametrize("name", list(ALGOS))
def test_algo_sets_its_flags(name):
    cfg = run.make_config("grpo", grpo, ["--algo", name])
    assert {k: option_value(cfg, k) for k in ALGOS[name]} == ALGOS[name]
    grpo.validate(cfg)  # every bundle is a valid combination


def test_algo_applies_over_the_preset_and_explicit_flags_win():
    cfg = run.make_config("grpo", grpo, ["--preset", "tiny", "--algo", "dapo"])
    assert cfg.kl.coef == 0 and cfg.dynamic_sampling and cfg.ratio.clip_eps_high == 0.28
    assert cfg.model == "@tiny-math" and cfg.optimisation.lr == 1e-3  # the rest of the preset stays
    cfg = run.make_config("grpo", grpo, ["--algo", "gspo", "--clip-eps-low", "0.1"])
    assert cfg.ratio.clip_eps == 0.1 and cfg.ratio.clip_eps_high == 4e-4 and cfg.ratio.level == "sequence"
    cfg = run.make_config("grpo", grpo, ["--preset", "tiny", "--algo", "dapo", "--kl-coef", "0.02",
                                         "--no-dynamic-sampling"])
    assert cfg.kl.coef == 0.02 and not cfg.dynamic_sampling and cfg.mask_truncated


def test_unknown_algo_is_one_line_and_exit_2(tmp_path, capsys):
    with pytest.raises(SystemExit) as e:
        run.main(["grpo", "--algo", "ppo", "--out", str(tmp_path / "out")])
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert "--algo" in err and "'ppo'" in err and "dapo" in err
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("flags, needle", [
    (["--entropy-coef", "5"], "--entropy-coef 5 is --adaptive-entropy's starting c_H: it must lie in "
                              "[--entropy-coef-min, --entropy-coef-max] = [0, 1]"),
    (["--entropy-coef", "0.01", "--entropy-coef-min", "0.02"], "--entropy-coef 0.01 is --adaptive-entropy's "
                                                               "starting c_H: it must lie in "),
])
def test_adaptive_entropy_starts_between_its_bounds(flags, needle, tmp_path, monkeypatch, capsys):
    """c_H starts inside [c_min, c_max], where the controller keeps it."""
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as e:
        run.main(["grpo", "--adaptive-entropy", *flags, "--print-config"])
    err = capsys.readouterr().err
    assert e.value.code == 2 and needle in err, err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
    for edge in (["--entropy-coef", "1"], ["--entropy-coef", "0.02", "--entropy-coef-min", "0.02"]):
        grpo.validate(run.make_config("grpo", grpo, ["--adaptive-entropy", *edge]))  # the bounds themselves
    grpo.validate(run.make_config("grpo", grpo, ["--entropy-coef", "5"]))  # a fixed c_H has no bounds
