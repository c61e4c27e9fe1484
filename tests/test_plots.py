"""curves.png: every rung's figure is titled with the rung and the run, labels its y-axes and has no empty
panel; a lone evaluation is a visible, explained dot; CartPole draws its solve line; grpo's accuracy starts
at step 0 (the accuracy before training)."""

import json

import pytest
import torch
from lm_helpers import grpo_config

import ladder.runtime.runlog
from ladder.plots import Panel, figure, plot_curves
from ladder.rungs import cartpole, grpo, reinforce
from ladder.rungs import ppo_sentiment as ps


@pytest.fixture
def drawn(monkeypatch):
    """Every figure a run's finish draws, as (figure, path): the real plot_curves, its result kept."""
    figures = []

    def keep(*args, **kwargs):
        fig = real(*args, **kwargs)
        figures.append((fig, args[2]))
        return fig

    real = ladder.runtime.runlog.plot_curves
    monkeypatch.setattr(ladder.runtime.runlog, "plot_curves", keep)
    return figures


@pytest.fixture(autouse=True)
def threads_back():
    threads = torch.get_num_threads()
    yield
    torch.set_num_threads(threads)


def drawn_lines(ax) -> list:
    """The lines of a panel that carry data (a threshold line is not data)."""
    return [line for line in ax.get_lines() if line.get_linestyle() != "--" and len(line.get_xdata())]


def check_figure(fig, rung: str, run_dir) -> None:
    title = fig.get_suptitle()
    assert rung in title and run_dir.name in title, title
    assert fig.axes, "a figure without panels"
    for ax in fig.axes:
        assert ax.get_ylabel().strip(), f"panel {ax.get_title()!r} has no y-axis label"
        assert ax.get_title().strip() and ax.get_xlabel().strip()
        assert drawn_lines(ax), f"panel {ax.get_title()!r} is empty"


def return_panel(fig):
    return next(ax for ax in fig.axes if ax.get_title() == "episode return")


@pytest.mark.parametrize("rung", [reinforce, cartpole])
def test_cartpole_rungs_one_evaluation_is_a_visible_labelled_dot_beside_the_solve_line(tmp_path, drawn, rung):
    out = tmp_path / f"{rung.NAME}-short"
    cfg = rung.Config(out=str(out), total_steps=600, eval_every=10**6, eval_episodes=2, progress=False)
    summary = rung.train(cfg)
    (fig, path), = drawn
    assert path.parent == out and (out / "curves.png").stat().st_size > 0
    check_figure(fig, rung.NAME, out)
    ax = return_panel(fig)
    evals = [line for line in drawn_lines(ax) if "greedy evaluation" in line.get_label()]
    assert len(evals) == 1 and len(evals[0].get_xdata()) == 1, "the run evaluated once, at its end"
    dot = evals[0]
    assert dot.get_marker() not in (None, "None", "", " ") and dot.get_markersize() >= 6
    assert dot.get_ydata()[0] == pytest.approx(summary["eval_return_mean"])
    assert "2 episodes" in dot.get_label()  # the legend says what the dot measured
    assert [t.get_text() for t in ax.texts] == [f"{summary['eval_return_mean']:.3g}"]  # and its value
    solve = [line for line in ax.get_lines() if line.get_linestyle() == "--"]
    assert len(solve) == 1 and solve[0].get_ydata()[0] == pytest.approx(cfg.solve_return)
    assert f"{cfg.solve_return:g}" in solve[0].get_label()
    assert ax.get_legend() is not None


def test_cartpole_solve_line_is_cartpole_v1s_threshold():
    assert cartpole.Config().solve_return == 475.0  # CartPole-v1's reward_threshold
    assert reinforce.Config().solve_return == 400.0  # REINFORCE's own, looser goal


def test_ppo_sentiment_figure(tmp_path, drawn):
    out = tmp_path / "sentiment"
    ps.train(ps.Config(**{**ps.PRESETS["tiny"], "out": str(out), "progress": False, "steps": 2, "batch_size": 8,
                          "num_minibatches": 2, "num_eval_prompts": 2, "print_samples": 0}))
    (fig, _), = drawn
    check_figure(fig, "ppo-sentiment", out)
    assert len(fig.axes) == 9  # a full 3 × 3 grid: score and score − β·KL share a panel
    reward = next(ax for ax in fig.axes if ax.get_title() == "reward")
    assert len(drawn_lines(reward)) == 2 and reward.get_legend() is not None


def test_grpo_accuracy_curve_starts_at_step_0_with_the_accuracy_before_training(tmp_path, drawn, tiny_qwen,
                                                                                 grpo_files):
    summary = grpo.train(grpo_config(tmp_path, tiny_qwen, grpo_files["gsm8k"], steps=2, eval_every=1))
    (fig, _), = drawn
    check_figure(fig, "grpo", tmp_path / "run")
    accuracy = next(ax for ax in fig.axes if ax.get_title().startswith("greedy accuracy"))
    line, = drawn_lines(accuracy)
    assert list(line.get_xdata()) == [0, 1, 2]
    assert line.get_ydata()[0] == pytest.approx(summary["accuracy_before"])
    assert line.get_ydata()[-1] == pytest.approx(summary["accuracy_after"])
    records = [json.loads(r) for r in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert list(line.get_ydata()[1:]) == pytest.approx([r["eval_accuracy"] for r in records])


@pytest.mark.parametrize("n", [1, 2, 3, 4, 5, 7])
def test_no_empty_panel_for_any_number_of_panels(n):
    records = [{"step": s, **{f"m{i}": s * i for i in range(n)}} for s in (1, 2, 3)]
    fig = figure(records, [Panel(f"m{i}", "units", {f"m{i}": ""}) for i in range(n)], "rung · run")
    assert len(fig.axes) == n
    assert all(drawn_lines(ax) for ax in fig.axes)


def test_a_panel_without_data_is_left_out_and_the_plain_form_still_draws(tmp_path):
    records = [{"step": s, "reward": 0.1 * s} for s in (1, 2, 3)]
    fig = figure(records, [Panel("reward", "mean", {"reward": ""}), Panel("never logged", "x", {"absent": ""})],
                 "grpo · run")
    assert [ax.get_title() for ax in fig.axes] == ["reward"]
    run = tmp_path / "run-a"
    run.mkdir()
    fig = plot_curves(records, {"reward": "reward (mean)"}, run / "c.png", rung="grpo")
    assert fig.get_suptitle() == "grpo · run-a" and fig.axes[0].get_ylabel() == "reward (mean)"
    assert (run / "c.png").read_bytes()[:4] == b"\x89PNG"


def test_filled_and_starting_at():
    panel = Panel("return", "return", {"eval": "greedy ({eval_episodes} episodes)", "train": ""},
                  threshold="{solve_return}", threshold_label="solved ({solve_return:g})")
    filled = panel.filled(eval_episodes=5, solve_return=475.0)
    assert filled.threshold == 475.0 and filled.threshold_label == "solved (475)"
    assert filled.lines["eval"] == "greedy (5 episodes)"
    assert filled.starting_at(eval=0.25, other=1.0).before == {"eval": 0.25}
