"""The run doctor on rung 6's runs: RLHF PPO with a learned reward and a KL penalty (ppo-sentiment), DPO and the
reward model. Each rule on a small run written here: series copied (every third or sixth update, three significant
figures) from real tiny runs — a healthy β = 0.05 run, a settled β = 0.005 run, one at β = 0, one at 25× the preset's
learning rate, a DPO run at β = 0.3 — or constructed where the rule itself is what is tested. No training here."""

from __future__ import annotations

import json
import math
from pathlib import Path

from ladder.doctor import diagnose, read_run
from ladder.doctor.chart import run_figure
from ladder.doctor.chart_parts import PROBLEM
from ladder.doctor.report import text_report
from ladder.doctor.signatures import T
from ladder.doctor.verdict import verdict_line
from ladder.doctor.wording import WORDING
from ladder.rungs import registry

PPO_CONFIG = {"rung": "ppo-sentiment", "mu": 4, "num_minibatches": 2, "lr": 2e-4, "max_new_tokens": 32,
              "kl_coef": 0.05, "adaptive_kl": False, "kl_target": 6.0, "value_coef": 0.1}
DPO_CONFIG = {"rung": "dpo", "lr": 1e-4, "beta": 0.3, "max_new_tokens": 32}

# ppo-sentiment --kl-coef 0.05 --no-adaptive-kl --lr 2e-4, seed 0, 60 updates: every third from update 3. The doctor
# used to name kl_blowup (kl_ref_token_k3 ≥ 0.3 per token) and critic_not_learning (EV < 0) on it.
HEALTHY = {
    "kl_ref": [0.616, 1.86, 4.79, 4.35, 6.22, 6.66, 7.17, 6.8, 7.01, 9.16, 7.76, 7.41, 6.98, 7.47, 8.68, 10.6, 11.6,
               9.04, 10.9, 9.02],
    "kl_ref_token_k3": [0.127, 0.211, 0.424, 0.493, 0.526, 0.391, 0.406, 0.407, 0.556, 0.454, 0.731, 0.597, 0.424,
                        0.429, 0.429, 0.569, 0.607, 0.478, 0.713, 0.491],
    "score_mean": [1.21, 2.46, 2.49, 2.27, 2.65, 2.87, 2.96, 3.01, 3.14, 3.14, 3.17, 3.04, 3.12, 3.17, 3.19, 3.13,
                   3.09, 3.19, 3.15, 3.1],
    "reward_mean": [1.18, 2.37, 2.25, 2.06, 2.34, 2.54, 2.61, 2.67, 2.79, 2.68, 2.79, 2.67, 2.77, 2.8, 2.76, 2.6, 2.51,
                    2.74, 2.6, 2.65],
    "reward_std": [1.83, 1.14, 1.02, 1.18, 0.713, 0.664, 0.409, 0.429, 0.288, 0.353, 0.329, 0.622, 0.331, 0.319,
                   0.306, 0.581, 0.848, 0.511, 0.419, 0.78],
    "true_reward_mean": [-0.019, 0.275, 0.44, 0.315, 0.485, 0.486, 0.518, 0.539, 0.522, 0.28, 0.641, 0.641, 0.648,
                         0.721, 0.644, 0.372, 0.494, 0.676, 0.693, 0.731],
    "entropy": [1.14, 0.937, 1.12, 1.06, 1.07, 1.05, 0.871, 0.751, 0.687, 0.587, 0.553, 0.591, 0.498, 0.454, 0.485,
                0.642, 0.709, 0.431, 0.546, 0.407],
    "explained_variance": [-0.00571, 0.00298, -0.0149, -0.0137, -0.375, -0.396, -1, -0.255, -0.906, -0.495, -0.413,
                           -0.0949, -0.506, -0.12, -0.479, -0.388, -0.0604, 0.372, -0.0276, 0.129],
    "value_loss": [1.28, 1.37, 0.738, 0.521, 0.26, 0.223, 0.156, 0.109, 0.066, 0.0636, 0.0675, 0.12, 0.0597, 0.0371,
                   0.0523, 0.094, 0.143, 0.0612, 0.0668, 0.114],
    "kl_coef": [0.05] * 20,
    "clip_frac": [0.14, 0.0853, 0.14, 0.111, 0.113, 0.107, 0.102, 0.11, 0.07, 0.0625, 0.0474, 0.0565, 0.0589, 0.0431,
                  0.0558, 0.0845, 0.113, 0.0676, 0.0941, 0.0349],
}
# --kl-coef 0.005, seed 0, every third from update 2: the KL high (~30 nats, 1.5 per token) but settled.
SETTLED = {
    "kl_ref": [0.327, 2.49, 4.52, 7.41, 8.77, 16.8, 21.6, 24.8, 28.1, 27.5, 26.3, 30, 23.5, 25.8, 35, 28.3, 32.2, 34,
               26.8, 30.8],
    "kl_ref_token_k3": [0.0612, 0.242, 0.377, 0.646, 0.723, 1.38, 1.37, 1.47, 1.55, 1.66, 1.58, 1.45, 1.65, 1.46,
                        1.56, 1.36, 1.41, 1.45, 1.52, 1.6],
    "reward_mean": [0.792, 2.37, 2.57, 2.49, 2.72, 2.66, 2.78, 2.86, 2.88, 2.84, 2.86, 2.91, 2.91, 2.9, 2.88, 2.98,
                    2.96, 2.96, 2.97, 2.99],
    "kl_coef": [0.005] * 20,
}
# --kl-coef 0 --lr 1e-3 --max-new-tokens 16: nothing holds the KL, it climbs every third (43 → 85 → 122 nats, 1.4×).
NO_PENALTY = {
    "kl_ref": [0, 10.4, 23.1, 43.1, 54.6, 58.7, 60.5, 75.9, 78.2, 85.7, 84.8, 90.1, 101, 104, 108, 115, 118, 123, 125,
               127],
    "reward_mean": [0.617, 2.64, 2.84, 2.94, 3, 3.02, 3.16, 3.12, 3.1, 3.17, 3.19, 3.11, 3.16, 3.16, 3.17, 3.19, 3.15,
                    3.15, 3.16, 3.14],
    "kl_coef": [0.0] * 20,
}
# --kl-coef 0.05 --lr 5e-3 --max-new-tokens 16, every third from update 2: the KL jumps to ~40 nats at once and stays;
# r_φ − β·KL falls back most of its gain.
FELL_BACK = {
    "kl_ref": [13.6, 35.6, 37.7, 26.6, 56.2, 52, 49.7, 38.7, 35, 34.3, 35.6, 31.7, 26.6, 42, 44.5, 37.5, 45, 37.7,
               43.5, 55.7],
    "reward_mean": [1.29, 1.08, 0.892, 1.23, 0.23, 0.136, 0.435, 1.05, 1.26, 1.31, 1.21, 1.5, 1.78, 0.825, 0.599, 0.93,
                    0.646, 1.15, 0.805, 0.218],
    "kl_coef": [0.05] * 20,
}
# dpo --beta 0.3 --lr 1e-4, seed 0, 120 updates: every sixth from update 6. The margin widens, both log-probs fall.
DISPLACED = {
    "rewards/chosen": [0.0109, 0.111, -0.0421, 0.039, 0.0887, -0.0868, 0.129, -0.154, -0.219, -0.0426, -0.0997,
                       -0.236, -0.391, -0.314, -0.184, -0.631, -0.262, -0.324, -0.564, -0.761],
    "rewards/rejected": [-0.0631, -0.0894, -0.158, -0.258, -0.336, -0.45, -0.599, -0.39, -0.597, -0.671, -0.977,
                         -0.84, -1.08, -1.22, -1.4, -1.15, -1.64, -1.1, -1.93, -1.96],
    "rewards/margins": [0.0741, 0.2, 0.116, 0.297, 0.425, 0.363, 0.728, 0.236, 0.378, 0.628, 0.877, 0.604, 0.685,
                        0.907, 1.22, 0.515, 1.38, 0.779, 1.36, 1.2],
    "logps/chosen": [-12.4, -14.6, -12.8, -13.6, -15.5, -11.7, -13.4, -12, -13.4, -14.9, -13.9, -14.3, -14.6, -14.7,
                     -14.6, -14.5, -14.3, -16.8, -13.7, -16.8],
    "logps/rejected": [-9.65, -12, -10.7, -12.5, -12.6, -9.57, -11.4, -12.7, -11.6, -14.3, -13.7, -14.1, -14.7, -13.7,
                       -15.9, -15.4, -16.1, -15.5, -15.2, -16.9],
}


def write(directory: Path, config: dict, series: dict[str, list[float]]) -> Path:
    """A ladder run directory: ``config`` and one record per update of ``series``, a shorter list logged at even
    intervals ending at the last update, as an evaluation is (4 values over 40 updates: at 10, 20, 30 and 40)."""
    directory.mkdir(parents=True)
    (directory / "config.json").write_text(json.dumps(config))
    n = max(len(v) for v in series.values())
    records = []
    for i in range(n):
        record = {"step": i + 1}
        for key, values in series.items():
            stride = n // len(values)
            if (i + 1) % stride == 0:
                record[key] = values[(i + 1) // stride - 1]
        records.append(record)
    (directory / "metrics.jsonl").write_text("\n".join(json.dumps(r) for r in records) + "\n")
    return directory


def names(run_dir: Path) -> list[str]:
    return [f.name for f in diagnose(read_run(run_dir))]


def ramp(start: float, end: float, n: int) -> list[float]:
    return [start + (end - start) * i / (n - 1) for i in range(n)]


# --- RLHF PPO: the KL per completion, and the critic ---------------------------------------------------------------

def test_a_healthy_rlhf_run_is_healthy(tmp_path):
    assert diagnose(read_run(write(tmp_path / "ok", PPO_CONFIG, HEALTHY))) == []


def test_a_high_kl_the_penalty_holds_is_no_blowup(tmp_path):
    """β = 0.005: ~30 nats per completion, 1.5 per token, settled: the penalty holds it (over-optimisation, where
    the true reward falls, is reward_overoptimised's to name)."""
    run = write(tmp_path / "settled", {**PPO_CONFIG, "kl_coef": 0.005}, SETTLED)
    assert "kl_blowup" not in names(run)


def test_no_penalty_and_a_climbing_kl_is_a_blowup_in_rlhf_words(tmp_path):
    run = read_run(write(tmp_path / "beta0", {**PPO_CONFIG, "kl_coef": 0.0, "lr": 1e-3}, NO_PENALTY))
    (found,) = diagnose(run)
    assert found.name == "kl_blowup" and found.metric == "kl_ref_seq"
    assert "per completion (summed over its tokens)" in found.saw and "β = 0" in found.saw
    assert "group" not in found.means and "group" not in found.change
    assert found.means == registry.find("ppo-sentiment").RUNG.words["kl_blowup"].means
    assert "--kl-coef" in found.change and found.section.startswith("notebooks/4_ppo_rlhf_sentiment.ipynb")


def test_a_penalised_reward_falling_back_is_a_blowup(tmp_path):
    """The KL not climbing between the last two thirds, but r_φ − β·KL lost most of what it gained: the KL costs
    more than r_φ pays."""
    (found,) = diagnose(read_run(write(tmp_path / "lr", {**PPO_CONFIG, "lr": 5e-3}, FELL_BACK)))
    assert found.name == "kl_blowup" and "fell back" in found.saw


def test_the_same_kl_climb_with_the_penalty_paid_is_not_a_blowup(tmp_path):
    """NO_PENALTY's climb at β = 0.05, its penalised reward still rising: r_φ pays for the KL."""
    run = write(tmp_path / "paid", PPO_CONFIG, {**NO_PENALTY, "kl_coef": [0.05] * 20})
    assert names(run) == []


def test_a_climb_at_beta_above_0_is_no_blowup_whatever_the_entropy(tmp_path):
    """At β > 0 a climb alone is no blow-up: the penalty may yet hold it; a collapsing entropy is entropy_collapse's
    to name (a healthy run's entropy halves as its KL climbs)."""
    climbing = {**HEALTHY, "kl_ref": ramp(0.5, 30.0, 20)}
    assert names(write(tmp_path / "climbing", PPO_CONFIG, climbing)) == []
    collapsing = {**climbing, "entropy": [1.1 * 0.8 ** i for i in range(20)]}
    assert names(write(tmp_path / "collapsing", PPO_CONFIG, collapsing)) == ["entropy_collapse"]


def test_a_critic_whose_loss_does_not_fall_is_not_learning(tmp_path):
    flat = {**HEALTHY, "value_loss": [1.3 + 0.02 * (-1) ** i for i in range(20)]}
    (found,) = diagnose(read_run(write(tmp_path / "flat", PPO_CONFIG, flat)))
    assert found.name == "critic_not_learning" and "value loss median" in found.saw
    assert "its loss is not below 0.8× its start" in found.means


def test_an_untrained_critic_is_named_whatever_its_loss(tmp_path):
    (found,) = diagnose(read_run(write(tmp_path / "vc0", {**PPO_CONFIG, "value_coef": 0.0}, HEALTHY)))
    assert found.name == "critic_not_learning" and "never trained" in found.means


def test_every_kl_printed_carries_its_unit(tmp_path):
    beta0 = read_run(write(tmp_path / "beta0", {**PPO_CONFIG, "kl_coef": 0.0}, NO_PENALTY))
    assert "KL(π_θ‖π_ref) per completion (summed over its tokens)" in text_report(beta0, diagnose(beta0))
    grpo = {"kl_ref": [0.01 * 1.5 ** i for i in range(12)]}
    (found,) = diagnose(read_run(write(tmp_path / "grpo", {"rung": "grpo", "mu": 2, "loss_type": "grpo"}, grpo)))
    assert found.saw.startswith("KL(π_θ‖π_ref) per token") and "per token" in WORDING["kl_blowup"].means


def test_a_rungs_own_words_name_real_headings():
    root = Path(__file__).resolve().parents[1]
    own = [w for rung in registry.rungs().values() for w in rung.RUNG.words.values()]
    for words in [*own, WORDING["likelihood_displacement"]]:
        file, heading = words.section
        cells = json.loads((root / file).read_text())["cells"]
        assert heading in "".join("".join(c["source"]) for c in cells if c["cell_type"] == "markdown"), heading


# --- DPO: likelihood displacement, length --------------------------------------------------------------------------

def test_a_dpo_run_whose_chosen_falls_is_displaced(tmp_path):
    run = read_run(write(tmp_path / "dpo", DPO_CONFIG, DISPLACED))
    (found,) = diagnose(run)
    assert found.name == "likelihood_displacement" and found.metric == "logps/chosen"
    assert "nats per completion" in found.saw and "β = 0.3" in found.saw
    assert all(words in found.means for words in ("only the difference", "Razin", "DPOP"))
    assert "--beta" in found.change and "sft" in found.change and "rpo_alpha" in found.change
    assert verdict_line(run, [found]) == "1 problem: likelihood displacement: the chosen made less likely"


def test_an_older_dpo_run_is_read_from_its_implicit_rewards(tmp_path):
    """Runs before logps/chosen was logged: rewards/chosen / β, the chosen's log-ratio to π_ref, is the evidence."""
    older = {k: v for k, v in DISPLACED.items() if not k.startswith("logps/")}
    (found,) = diagnose(read_run(write(tmp_path / "older", DPO_CONFIG, older)))
    assert found.metric == "rewards/chosen" and "log π_θ/π_ref = -1." in found.saw


def test_a_dpo_run_whose_chosen_holds_is_not_displaced(tmp_path):
    """The margin widens by the rejected alone; the chosen's log-ratio stays above −ln 2 (its batches' log-probs
    wander with the pairs drawn, no lower at the end)."""
    held = {**DISPLACED, "rewards/chosen": [0.02 * math.sin(i) - 0.05 for i in range(20)],
            "logps/chosen": [-13.5 + 1.2 * math.sin(2.1 * i) for i in range(20)]}
    assert names(write(tmp_path / "held", DPO_CONFIG, held)) == []
    noisy = {**DISPLACED, "logps/chosen": [-13.5 + 1.2 * math.sin(2.1 * i) for i in range(20)]}
    assert names(write(tmp_path / "noisy", DPO_CONFIG, noisy)) == []  # the per-pair ratio fell, the log-prob did not
    narrowing = {**DISPLACED, "rewards/margins": DISPLACED["rewards/margins"][::-1]}
    assert names(write(tmp_path / "narrowing", DPO_CONFIG, narrowing)) == []


def test_the_threshold_is_the_chosen_half_as_likely(tmp_path):
    """The last third's log-ratio just above and just below −ln 2, at β = 0.1."""
    beta, n = 0.1, 12
    base = {"rewards/margins": ramp(0.0, 0.5, n), "logps/chosen": ramp(-13.0, -15.0, n)}
    for log_ratio, fires in ((-0.6, False), (-0.8, True)):
        chosen = ramp(0.0, beta * log_ratio, n)[:8] + [beta * log_ratio] * 4
        run = write(tmp_path / str(log_ratio), {**DPO_CONFIG, "beta": beta}, {**base, "rewards/chosen": chosen})
        assert ("likelihood_displacement" in names(run)) is fires, log_ratio
    assert math.isclose(T.displaced, math.log(2))


def test_dpo_length_drift_only_where_the_true_reward_does_not_follow(tmp_path):
    """Sampled completions 10.5 → 16 tokens (logged every tenth update): drift where r* is flat; not where r* rose
    with them, nor where no r* is logged (longer cannot be told from better)."""
    longer = {"rewards/margins": ramp(0.0, 0.2, 120), "rewards/chosen": [0.0] * 120,
              "response_length": ramp(10.5, 16.0, 12)}
    flat = write(tmp_path / "flat", DPO_CONFIG, {**longer, "true_reward_mean": [0.1, 0.12] * 6})
    (found,) = diagnose(read_run(flat))
    assert found.name == "length_drift" and "r* (true_reward_mean)" in found.saw
    assert found.title == "length drift: DPO paying for length" and "per-sequence mean" not in found.means
    better = write(tmp_path / "better", DPO_CONFIG, {**longer, "true_reward_mean": ramp(-0.1, 0.4, 12)})
    assert names(better) == []
    assert names(write(tmp_path / "unknown", DPO_CONFIG, longer)) == []


# --- the chart: rung 6's vital signs --------------------------------------------------------------------------------

def panels(fig) -> dict[str, object]:
    return {ax.get_title().split("\n")[0]: ax for ax in fig.axes}


def figure(run_dir: Path):
    run = read_run(run_dir)
    return run_figure(run, diagnose(run))


def test_a_reward_model_run_shows_its_vital_signs(tmp_path):
    n = 40
    series = {"loss": ramp(0.72, 0.35, n), "accuracy": ramp(0.4, 0.85, n), "margin": ramp(-0.05, 2.0, n),
              "grad_norm": [1.5] * n, "eval_accuracy": [0.76, 0.79, 0.80, 0.80],
              "eval_score_accuracy": [0.63, 0.67, 0.69, 0.7], "eval_margin": [1.0, 1.4, 1.7, 1.8],
              "eval_length_corr": [0.29, 0.49, 0.46, 0.48], "eval_calibration_error": [0.04, 0.03, 0.02, 0.02]}
    shown = panels(figure(write(tmp_path / "rm", {"rung": "reward-model"}, series)))
    assert list(shown) == ["loss", "pairs ranked right", "margin r(y_w) − r(y_l)", "what the score pays for length",
                           "calibration error", "gradient norm"]
    ranked = shown["pairs ranked right"]
    assert ranked.get_ylim()[0] <= 0.0 and ranked.get_ylim()[1] >= 1.0  # a share on 0–1: a flat 0.8 stays flat
    assert shown["calibration error"].get_ylim()[0] <= 0.0
    labels = [t.get_text() for t in ranked.get_legend().get_texts()]
    assert labels == ["training batch", "held-out", "held-out, in r*'s order", "chance 0.5"]
    assert "chance: ln 2 (margin 0)" in [t.get_text() for t in shown["loss"].get_legend().get_texts()]


def test_a_dpo_run_shows_its_vital_signs_and_the_displacement(tmp_path):
    n = len(DISPLACED["rewards/chosen"])
    evals = {"eval_accuracy": [0.69, 0.75, 0.76, 0.76], "sample_kl": [0.16, 1.5, 1.7, 2.9],
             "true_reward_mean": [-0.1, 0.24, 0.33, 0.39], "response_length": [12.7, 14.4, 14.3, 15.4]}
    series = {**DISPLACED, "loss": ramp(0.69, 0.41, n), "rewards/accuracies": [0.75] * n, "grad_norm": [0.2] * n,
              **evals}
    shown = panels(figure(write(tmp_path / "dpo", DPO_CONFIG, series)))
    assert list(shown) == ["loss", "pairs ranked right", "implicit reward margin", "implicit rewards β·log π_θ/π_ref",
                           "log π_θ of the pairs", "KL(π_θ‖π_ref) of sampled completions", "true reward r*",
                           "completion length", "gradient norm"]
    logps = shown["log π_θ of the pairs"]
    assert logps.title.get_color() == PROBLEM and logps.collections  # the evidence marked on log π_θ(y_w)
    assert "per completion" in shown["KL(π_θ‖π_ref) of sampled completions"].get_ylabel()
    assert shown["completion length"].get_ylabel() == "tokens (mean of sampled completions)"


def test_an_rlhf_run_draws_its_kl_per_completion(tmp_path):
    shown = panels(figure(write(tmp_path / "ppo", {**PPO_CONFIG, "adaptive_kl": True}, HEALTHY)))
    assert "KL(π_θ‖π_ref)" not in shown  # the per-token k3 of the loss is not the KL in the reward
    kl = shown["KL(π_θ‖π_ref) per completion"]
    assert kl.get_ylabel() == "nats per completion\n(summed over its tokens)"
    assert "the controller's target 6" in [t.get_text() for t in kl.get_legend().get_texts()]
    assert [t.get_text() for t in shown["reward"].get_legend().get_texts()] == ["r_φ (learned)",
                                                                                "r_φ − β·KL (penalised)"]
    assert "true reward r*" in shown and "learnt: ≤ 0.8 × start" in [
        t.get_text() for t in shown["value loss"].get_legend().get_texts()]


def test_runs_of_different_rungs_compared_keep_their_own_panels(tmp_path):
    """A PPO run's loss is not drawn under DPO's loss formula, nor a reward model's margin as DPO's implicit one."""
    from ladder.doctor.compare import compare_figure

    n = len(DISPLACED["rewards/chosen"])
    ppo = read_run(write(tmp_path / "ppo", PPO_CONFIG, {**HEALTHY, "loss": [0.1] * 20}))
    dpo = read_run(write(tmp_path / "dpo", DPO_CONFIG, {**DISPLACED, "loss": ramp(0.69, 0.41, n)}))
    rm = read_run(write(tmp_path / "rm", {"rung": "reward-model"}, {"loss": ramp(0.7, 0.3, n),
                                                                    "margin": ramp(0.0, 2.0, n)}))
    shown = panels(compare_figure([ppo, dpo, rm], [diagnose(run) for run in (ppo, dpo, rm)]))
    colours = {title: {line.get_color() for line in ax.get_lines() if len(line.get_xdata()) == n}
               for title, ax in shown.items()}
    assert colours["loss"] == {"C1", "C2"}  # the DPO and reward-model losses, not PPO's
    assert colours["implicit reward margin"] == {"C1"} and colours["margin r(y_w) − r(y_l)"] == {"C2"}
