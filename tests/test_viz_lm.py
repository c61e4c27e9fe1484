"""The language-model widgets: drive the controls and check the plotted numbers move as the math says.

All views train for real on the tiny offline models: the β runs are notebook 4's (kept on disk, made once),
a few tens of seconds for π_old and the fixed GRPO batch (once per process).
"""

import matplotlib

matplotlib.use("Agg")

import ipywidgets  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402

from ladder import viz  # noqa: E402
from ladder.rungs import ppo_sentiment  # noqa: E402
from ladder.viz import lm_lab, lm_tokens, lm_views  # noqa: E402

pytestmark = pytest.mark.notebook_runs  # reads runs a notebook makes (run right after the notebooks)

BETAS, STEPS, BATCH = (0.0, 0.2, 1.0), 30, 32  # notebook 4's runs (kl_tradeoff_view): made once, kept on disk


@pytest.fixture(scope="module")
def beta_view():
    return viz.kl_tradeoff_view(betas=BETAS, steps=STEPS, batch_size=BATCH)


@pytest.fixture(scope="module")
def lm_mu_view():
    return viz.lm_mu_view(mu=1)


def test_beta_view_is_a_widget_with_samples(beta_view):
    assert isinstance(beta_view, ipywidgets.VBox)
    assert set(beta_view.controls) == {"beta", "steps"}
    assert beta_view.image.value[:8] == b"\x89PNG\r\n\x1a\n"
    assert beta_view.samples in beta_view.children and "<table>" in beta_view.samples.value
    assert len(beta_view.data["samples"]) == 6


def test_beta_view_plots_the_rungs_metrics(beta_view):
    beta_view.controls["steps"].value = STEPS
    for b in BETAS:
        run = viz.ppo_run(b, STEPS, BATCH, 0)
        plotted = beta_view.data["runs"][b]
        assert np.array_equal(plotted["kl"], run["kl"]) and np.array_equal(plotted["score"], run["score"])
        # what PPO maximises: the score minus β times the per-sequence KL (core.kl_penalized_rewards)
        assert np.allclose(run["reward"], np.array(run["score"]) - b * np.array(run["kl"]), atol=1e-5)
        assert plotted["kl_end"] == pytest.approx(np.mean(run["kl"][-5:]))
    assert beta_view.data["runs"][0.0]["kl"][0] == pytest.approx(0.0, abs=1e-6)   # first batch: π_θ = π_ref


@pytest.mark.trained
def test_larger_beta_ends_closer_to_pi_ref_with_a_lower_score(beta_view):
    beta_view.controls["steps"].value = STEPS
    free, anchored = beta_view.data["runs"][0.0], beta_view.data["runs"][1.0]
    assert anchored["kl_end"] < 0.5 * free["kl_end"]
    assert anchored["score_end"] < free["score_end"]
    assert free["kl_end"] > beta_view.data["runs"][0.0]["kl_avg"][2]      # with β = 0 the KL only grows


def test_beta_view_controls_move_the_reading_and_the_samples(beta_view):
    beta_view.controls["steps"].value = 4
    d = beta_view.data
    assert all(len(r["kl"]) == 4 for r in d["runs"].values())
    assert d["runs"][0.0]["kl_end"] == pytest.approx(np.mean(viz.ppo_run(0.0, STEPS, BATCH, 0)["kl"][:4]))
    beta_view.controls["beta"].value = 0.0
    free = beta_view.data["samples"]
    beta_view.controls["beta"].value = 1.0
    anchored = beta_view.data["samples"]
    assert "β = 1" in beta_view.samples.value
    # same prompts, same sampling seed, same starting model: identical "before", different "after"
    assert [s["before"] for s in free] == [s["before"] for s in anchored]
    assert [s["after"] for s in free] != [s["after"] for s in anchored]


@pytest.fixture(scope="module")
def ppo_batch():
    return lm_tokens.ppo_batch()


def test_token_table_is_the_rungs_targets(ppo_batch):
    f = ppo_batch
    targets = ppo_sentiment.ppo_targets(f.scores, f.old_logp, f.ref_logp, f.values, f.mask, f.kl_coef, f.cfg)
    assert f.mask.sum() > 2 * len(f.tokens) and f.kl_coef == 0.2
    for row in range(len(f.tokens)):
        table = lm_tokens.token_table(f, row)                  # the preset's γ, λ
        real = f.mask[row].bool()
        assert len(table["token"]) == int(real.sum()) == len(table["advantage"])
        assert np.allclose(table["advantage_whitened"], targets["advantages"][row][real], atol=1e-6)
        assert np.allclose(table["ret"], targets["returns"][row][real], atol=1e-6)
        kl = (f.old_logp - f.ref_logp)[row][real].numpy()                          # k1 on π_old
        reward = -f.kl_coef * kl
        reward[-1] += f.scores[row].item()                                            # score on the last real token
        assert np.allclose(table["kl"], kl, atol=1e-6) and np.allclose(table["reward"], reward, atol=1e-6)
    assert any(abs(k) > 1e-3 for k in lm_tokens.token_table(f, 0)["kl"])              # π_old has left π_ref
    assert any(abs(v) > 1e-3 for v in lm_tokens.token_table(f, 0)["value"])           # the value head has learnt


def test_token_table_telescopes_with_gamma_and_lambda_one(ppo_batch):
    for row in range(len(ppo_batch.tokens)):
        t = lm_tokens.token_table(ppo_batch, row, gamma=1.0, lam=1.0)
        r, v, a = np.array(t["reward"]), np.array(t["value"]), np.array(t["advantage"])
        to_go = np.cumsum(r[::-1])[::-1]                      # Σ_{t' ≥ t} r_t'
        assert np.allclose(a, to_go - v, atol=1e-5)           # Â_t = Σ_{t'≥t} r_t' − V_t
        assert a[0] == pytest.approx(r.sum() - v[0], abs=1e-5)
        assert np.allclose(t["ret"], to_go, atol=1e-5)        # R_t: the reward to go, no bootstrap past the end
    t = lm_tokens.token_table(ppo_batch, 0, gamma=1.0, lam=0.0)  # λ = 0: Â_t = δ_t (one-step TD error)
    assert np.allclose(t["advantage"], t["delta"], atol=1e-6)
    assert t["delta"][-1] == pytest.approx(t["reward"][-1] - t["value"][-1], abs=1e-6)   # V = 0 past the end


def test_gae_tokens_view_lambda_moves_early_tokens_only(ppo_batch):
    view = lm_views.gae_tokens_view()
    assert set(view.controls) == {"row", "gamma", "lam"} and view.image.value[:4] == b"\x89PNG"
    view.controls["lam"].value = 1.0
    a1 = view.data["advantage"]
    view.controls["lam"].value = 0.0
    a0 = view.data["advantage"]
    assert a0[-1] == pytest.approx(a1[-1]) and a0[0] != pytest.approx(a1[0], abs=1e-3)
    view.controls["row"].value = 3
    assert view.data["token"] == ppo_batch.tokens[3]


def test_learning_curves_count_updates_in_integers(tmp_path):
    records = [{"step": k, "score_mean": 0.1 * k, "reward_mean": 0.0, "kl_ref": 0.0, "clip_frac": 0.0,
                "value_loss": 1.0, "explained_variance": 0.0} for k in (1, 2, 3, 4)]
    assert lm_views.learning_curves(records)[:4] == b"\x89PNG"


def test_beta_view_ticks_and_the_dashed_reference(beta_view):
    beta_view.controls["steps"].value = 4
    beta_view.controls["beta"].value = 0.0
    ax_kl, ax_score = beta_view.figure.axes[1], beta_view.figure.axes[2]
    for ax in (ax_kl, ax_score):
        ticks = [x for x in ax.get_xticks() if 1 <= x <= 4]
        assert ticks and all(float(x).is_integer() for x in ticks)           # updates are integers
    dashed = [line for line in ax_score.get_lines() if line.get_linestyle() == "--"]
    assert len(dashed) == 1 and dashed[0].get_zorder() > max(line.get_zorder() for line in ax_score.get_lines()
                                                           if line is not dashed[0])  # drawn on top of the score
    assert np.allclose(dashed[0].get_ydata(), beta_view.data["runs"][0.0]["score_avg"])    # β = 0: it is the score


def test_trailing_mean():
    assert np.allclose(lm_lab.trailing_mean([1, 2, 3, 4, 5], 2), [1, 1.5, 2.5, 3.5, 4.5])


@pytest.mark.trained
def test_lm_mu_exact_tables_match_the_policy_log_probs(lm_mu_view):
    fixed = viz.fixed_grpo_batch(0, 8, qlora=True)
    batch = fixed.batch
    picked = fixed.logp_old_all.gather(-1, batch.actions[..., None]).squeeze(-1)
    assert torch.allclose(picked[batch.mask.bool()], batch.old_logp[batch.mask.bool()], atol=1e-4)
    assert lm_mu_view.data["num_tokens"] == batch.num_tokens == len(lm_mu_view.data["ratios"][0])
    assert 0 < lm_mu_view.data["frac_reward_zero_std"] < 1          # some groups carry a signal


@pytest.mark.trained
def test_lm_mu_view_wider_ratios_more_clipping_and_kl_to_old_grows_with_mu(lm_mu_view):
    lm_mu_view.controls["mu"].value = 1
    d1 = lm_mu_view.data
    assert len(d1["ratios"]) == 1 and d1["clip_frac"] == [0.0]   # μ = M = 1: π_θ = π_old until the only step
    lm_mu_view.controls["mu"].value = 8
    d8 = lm_mu_view.data
    assert len(d8["ratios"]) == 8 and len(d8["kl_ref_exact"]) == 8
    assert d8["ratio_std"][-1] > 1.5 * d1["ratio_std"][-1]
    assert d8["clip_frac_after"][-1] > d1["clip_frac_after"][-1]
    assert max(d8["clip_frac"]) > 0
    after = [d8["kl_old_exact"][mu - 1] for mu in (1, 2, 4, 8)]    # KL(π_θ‖π_old) after μ = 1, 2, 4, 8 passes
    assert all(b > a for a, b in zip(after, after[1:]))              # grows with μ (notebook 5's printout)
    assert d8["kl_old_exact"][-1] > 4 * d1["kl_old_exact"][-1]
    assert d8["ratio_std"][0] == pytest.approx(d1["ratio_std"][0])       # μ = 8 starts as μ = 1 did


@pytest.mark.trained
def test_lm_mu_view_corrected_kl_is_unbiased_and_the_plain_one_drifts(lm_mu_view):
    lm_mu_view.controls["mu"].value = 8
    d = lm_mu_view.data
    # E_{c~π_old}[(π_θ/π_old)·k3] = Σ_v π_θ k3 = KL(π_θ‖π_ref): exact at every pass
    assert np.allclose(d["kl_ref_corrected_expected"], d["kl_ref_exact"], rtol=1e-4)
    # E_{c~π_old}[k3] is not, and drifts further from it as π_θ leaves π_old
    drift = np.abs(np.array(d["kl_ref_biased_expected"]) - d["kl_ref_exact"])
    assert drift[-1] > 5 * drift[0]
    # this batch's estimates: the corrected one within 2 std of the exact KL (one batch is not the expectation:
    # which of the two sits closer on it is the batch's to decide, and the notebook does not claim it)
    for k in range(8):
        assert abs(d["kl_ref_corrected"][k] - d["kl_ref_exact"][k]) < 2 * d["kl_ref_corrected_std"][k]
    corrected_bias = abs(d["kl_ref_corrected_expected"][-1] - d["kl_ref_exact"][-1])
    assert abs(d["bias_biased_expected"][-1]) > 10 * corrected_bias


@pytest.mark.trained
def test_lm_mu_view_eps_and_lr_sliders(lm_mu_view):
    lm_mu_view.controls["mu"].value = 4
    lm_mu_view.controls["clip_eps"].value = 0.2
    wide = lm_mu_view.data["clip_frac_after"][-1]
    lm_mu_view.controls["clip_eps"].value = 0.1
    narrow = lm_mu_view.data["clip_frac_after"][-1]
    assert narrow > wide
    lm_mu_view.controls["mu"].value = 2
    moved = lm_mu_view.data["ratio_std"][-1]
    lm_mu_view.controls["lr"].value = 1e-5
    assert lm_mu_view.data["ratio_std"][-1] < 0.25 * moved                # a tiny step barely moves π_θ


def test_token_logps_on_the_whole_logits_equal_the_policy_chunked_and_shared():
    demo = lm_tokens.token_logps(batch_size=3)
    assert demo["logits_shape"][1] == demo["prompt_len"] + demo["completion_len"]
    assert demo["max_abs_diff"] < 1e-5
    assert demo["first_row"] and all(lp <= 0 for _, lp in demo["first_row"])
    assert (demo["full"] != 0).any()
