"""doctor.png read as a picture is read: which panels, thresholds, labels and marks the figure holds (its axes'
titles, the legends' labels, the collections and texts), for a healthy run, broken ones, a CartPole run, a TRL run
and runs compared; and the command line's figure options, in-process. Synthetic runs from test_doctor: no training,
so nothing here rests on a trained run's numbers."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_doctor import CONFIG, N, case_run, healthy_series, write_run

from ladder.doctor import diagnose, read_run
from ladder.doctor.__main__ import main
from ladder.doctor.chart import run_figure
from ladder.doctor.chart_parts import NOTE, PROBLEM
from ladder.doctor.compare import compare_figure


def figure_of(run_dir: Path):
    run = read_run(run_dir)
    return run_figure(run, diagnose(run))


def panels(fig) -> dict[str, object]:
    """The first line of each panel's title → its axes."""
    return {ax.get_title().split("\n")[0]: ax for ax in fig.axes}


def legend_labels(ax) -> list[str]:
    legend = ax.get_legend()
    return [text.get_text() for text in legend.get_texts()] if legend else []


def texts(fig) -> list[str]:
    """The figure's own texts but its title: the verdict line."""
    return [text.get_text() for text in fig.texts if text is not fig._suptitle]


def trl_run(directory: Path) -> Path:
    """A TRL output directory: trainer_state.json's log_history under TRL's names, training_args.json."""
    directory.mkdir(parents=True)
    log = [{"step": s, "loss": 0.001 * (-1) ** s, "grad_norm": 0.4, "learning_rate": 1e-5, "reward": 0.4 + 0.02 * s,
            "reward_std": 0.3, "frac_reward_zero_std": 0.2, "completions/mean_length": 120.0,
            "completions/clipped_ratio": 0.02, "kl": 0.001 * s, "entropy": 0.9 - 0.01 * s,
            "clip_ratio/region_mean": 0.0, "rewards/correctness/mean": 0.3 + 0.01 * s} for s in range(1, N + 1)]
    state = {"log_history": log + [{"train_runtime": 1.0, "train_loss": 0.0}]}
    (directory / "trainer_state.json").write_text(json.dumps(state))
    (directory / "training_args.json").write_text(json.dumps({"learning_rate": 1e-5, "num_iterations": 1,
                                                              "max_completion_length": 256, "beta": 0.04}))
    return directory


def test_a_healthy_run_shows_its_vital_signs_and_thresholds(tmp_path):
    fig = figure_of(write_run(tmp_path / "ok", healthy_series()))
    shown = panels(fig)
    assert {"reward", "reward functions", "KL(π_θ‖π_ref)", "entropy of π_θ", "clip fraction", "completion length",
            "cut off at the token budget", "groups with zero spread", "gradient norm", "sampler correction",
            "sampler gap to π_old"} == set(shown)  # no eval_accuracy or ratio logged: no empty panel
    assert fig._suptitle.get_text() == "grpo · ok"
    assert texts(fig) == ["healthy: none of the known failure signatures"]
    assert legend_labels(shown["KL(π_θ‖π_ref)"]) == ["blow-up ≥ 0.3", "hardly moved < 0.001"]
    assert shown["KL(π_θ‖π_ref)"].get_yscale() == "symlog"
    assert "healthy < 0.25" in legend_labels(shown["clip fraction"])
    assert "token budget 28" in legend_labels(shown["completion length"])
    assert {"collapse ≤ 0.1 × start", "floor 0.001"} <= set(legend_labels(shown["entropy of π_θ"]))
    assert legend_labels(shown["reward functions"]) == ["correctness", "format"]
    for ax in fig.axes:
        assert ax.get_xlabel() == "update" and ax.get_ylabel() and ax.get_title(loc="center")
        assert ax.title.get_color() == "black" and not ax.collections  # no finding: nothing marked


def test_a_broken_run_names_its_finding_and_marks_its_evidence(tmp_path):
    fig = figure_of(case_run(tmp_path, "entropy_collapse"))
    entropy = panels(fig)["entropy of π_θ"]
    assert entropy.get_title() == "entropy of π_θ\n⚠ entropy collapse" and entropy.title.get_color() == PROBLEM
    (evidence,) = entropy.collections
    assert len(evidence.get_offsets()) == N // 3  # the last third, where the median fell
    assert "evidence: entropy_collapse" in legend_labels(entropy)
    assert texts(fig) == ["1 problem: entropy collapse"]
    others = [ax for ax in fig.axes if ax is not entropy]
    assert all(ax.title.get_color() == "black" for ax in others)


def test_a_count_of_skipped_steps_is_marked_on_the_gradient_norm(tmp_path):
    fig = figure_of(case_run(tmp_path, "nonfinite"))
    grad = panels(fig)["gradient norm"]
    marks = [line for line in grad.get_lines() if tuple(line.get_xdata()) in ((5, 5), (6, 6))]
    assert len(marks) == 2 and "⚠ non-finite steps" in grad.get_title()
    assert "skipped_steps" not in panels(fig)  # a count, not a panel of its own


def test_a_harmless_note_gets_a_quiet_panel_of_its_own(tmp_path):
    fig = figure_of(case_run(tmp_path, "loss_zero"))
    loss = fig.axes[-1]
    assert loss.get_title() == "loss\nnote: loss ≈ 0 at μ·M = 1" and loss.title.get_color() == NOTE
    assert texts(fig) == ["healthy: none of the known failure signatures (notes: loss ≈ 0 at μ·M = 1)"]


def test_a_cartpole_run_shows_ppos_vital_signs(tmp_path):
    series = {"episode_return": [10.0 + 5 * i for i in range(N)], "explained_variance": [0.1 * i for i in range(N)],
              "value_loss": [5.0 - 0.3 * i for i in range(N)], "approx_kl_old_k3": [0.01] * N,
              "clip_frac": [0.1] * N, "entropy": [0.69 - 0.01 * i for i in range(N)], "grad_norm": [1.0] * N}
    fig = figure_of(write_run(tmp_path / "cp", series, {"rung": "cartpole", "mu": 15}))
    shown = panels(fig)
    assert list(shown) == ["episode return", "explained variance of V", "value loss",
                           "KL(π_old‖π_θ) in the last pass", "clip fraction", "entropy of π_θ", "gradient norm"]
    assert legend_labels(shown["explained variance of V"]) == ["healthy > 0"]
    assert shown["entropy of π_θ"].get_ylabel() == "nats per action"
    assert fig._suptitle.get_text() == "cartpole · cp"


def test_a_trl_run_is_drawn_from_its_log_history(tmp_path):
    fig = figure_of(trl_run(tmp_path / "trl-out"))
    assert fig._suptitle.get_text() == "grpo · trl-out · TRL"
    shown = panels(fig)
    assert {"reward", "KL(π_θ‖π_ref)", "entropy of π_θ", "clip fraction", "gradient norm"} <= set(shown)
    assert "token budget 256" in legend_labels(shown["completion length"])


def test_runs_compared_on_one_figure(tmp_path):
    runs = [read_run(write_run(tmp_path / "ok", healthy_series())),
            read_run(case_run(tmp_path, "kl_blowup")),
            read_run(trl_run(tmp_path / "trl-out"))]
    (runs[1].path / "config.json").write_text(json.dumps({**CONFIG, "lr": 0.01}))
    runs[1] = read_run(runs[1].path)
    fig = compare_figure(runs, [diagnose(run) for run in runs])
    labels = [text.get_text() for text in fig.legends[0].get_texts()]
    assert labels == ["A · ok · grpo  --lr 0.001 — healthy",
                      "B · kl_blowup · grpo  --lr 0.01 — 1 problem: KL to π_ref blowing up",
                      "C · trl-out · TRL — healthy (notes: loss ≈ 0 at μ·M = 1; clip fraction always 0 at μ·M = 1)"]
    kl = panels(fig)["KL(π_θ‖π_ref)"]
    assert kl.get_title() == "KL(π_θ‖π_ref)\n⚠ KL to π_ref blowing up (B)" and kl.title.get_color() == PROBLEM
    assert {line.get_color() for line in kl.get_lines() if len(line.get_xdata()) == N} == {"C0", "C1", "C2"}
    assert "evidence: kl_blowup (B)" in legend_labels(kl)
    clip = panels(fig)["clip fraction"]
    vital, *finding = clip.get_title().split("\n")   # a finding's words wrapped to the panel's width
    assert vital == "clip fraction" and " ".join(finding) == "note: clip fraction always 0 at μ·M = 1 (C)"


def test_the_command_line_compares_and_refuses_what_it_cannot_write(tmp_path, capsys):
    ok, sick = write_run(tmp_path / "ok", healthy_series()), case_run(tmp_path, "kl_blowup")
    trl = trl_run(tmp_path / "trl-out")
    assert main([str(ok), str(sick), str(trl), "--plot"]) == 1
    out = capsys.readouterr().out
    assert out.count("logged step") == 3 and out.endswith(f"wrote {ok / 'doctor-compare.png'}\n")
    assert (ok / "doctor-compare.png").read_bytes()[:4] == b"\x89PNG"
    assert main([str(ok), "--plot-to", str(tmp_path / "figs" / "a.png")]) == 2  # no such folder
    assert main([str(ok), str(tmp_path / "nowhere"), "--plot"]) == 2  # not a run: nothing said, nothing written
    said = capsys.readouterr()
    assert said.out == "" and said.err.count("\n") == 2 and "Traceback" not in said.err
    assert said.err.startswith(f"ladder: error: cannot write {tmp_path / 'figs' / 'a.png'}: ")
    assert not (tmp_path / "figs").exists() and sorted(p.name for p in ok.iterdir()) == [
        "config.json", "doctor-compare.png", "metrics.jsonl"]
    assert main([str(sick), "--plot-to", str(tmp_path / "one.png"), "--json"]) == 1
    assert json.loads(capsys.readouterr().out)["findings"][0]["name"] == "kl_blowup"
    assert (tmp_path / "one.png").stat().st_size > 0


@pytest.mark.parametrize("name", ["truncation", "sampler_mismatch", "critic_not_learning", "format_hacking"])
def test_every_problem_is_named_on_a_panel(tmp_path, name):
    fig = figure_of(case_run(tmp_path, name))
    titled = [ax for ax in fig.axes if ax.title.get_color() == PROBLEM]
    assert titled and all("⚠" in ax.get_title() for ax in titled)
    assert any(ax.collections for ax in titled)  # its evidence on the curve
