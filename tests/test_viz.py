"""The widgets: drive every control and check the plotted numbers move as the math says."""

import matplotlib

matplotlib.use("Agg")

import numpy as np  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402

from ladder import core, viz  # noqa: E402


@pytest.fixture(scope="module")
def mu_view():
    return viz.mu_view(mu=1, lr=2e-3, clip_eps=0.2)


def test_every_view_is_a_widget_with_controls_data_and_a_png():
    import ipywidgets

    for view in (viz.clipped_objective_view(ratios=[1.0], advantages=[1.0]), viz.kl_estimators_view(),
                 viz.group_advantages_view()):
        assert isinstance(view, ipywidgets.VBox)
        assert view.controls and view.data
        assert view.image.value[:8] == b"\x89PNG\r\n\x1a\n"


def test_clipped_objective_curve_is_the_core_surrogate_and_eps_moves_the_clip_fraction():
    ratios = np.array([0.5, 0.7, 0.85, 0.95, 1.05, 1.15, 1.3, 1.6])
    advantages = np.array([-1.0, -1.0, -1.0, 1.0, -1.0, 1.0, 1.0, 1.0])
    view = viz.clipped_objective_view(ratios, advantages)
    d = view.data
    r = torch.as_tensor(d["r"])
    assert np.allclose(d["objective_pos"], -core.clipped_surrogate(r, torch.ones_like(r), 0.2).numpy())
    assert np.allclose(d["objective_neg"], -core.clipped_surrogate(r, -torch.ones_like(r), 0.2).numpy())
    # ε = 0.2: clipped are r = 0.5, 0.7 (Â < 0, r < 0.8) and r = 1.3, 1.6 (Â > 0, r > 1.2)
    assert d["clip_frac"] == pytest.approx(4 / 8)
    assert d["clip_frac_low"] == pytest.approx(2 / 8) and d["clip_frac_high"] == pytest.approx(2 / 8)
    view.controls["eps_low"].value = 0.4       # only r = 0.5 is below 0.6
    assert view.data["clip_frac_low"] == pytest.approx(1 / 8)
    view.controls["eps_high"].value = 0.1      # now r = 1.15 is above 1.1 too
    assert view.data["clip_frac_high"] == pytest.approx(3 / 8)
    # the flat part of the curve for Â > 0 starts at 1 + ε_high
    pos = view.data["objective_pos"]
    assert np.allclose(pos[view.data["r"] > 1.1], 1.1)


@pytest.mark.trained
def test_clipped_objective_default_overlays_real_ratios_of_a_cartpole_update():
    view = viz.clipped_objective_view()
    assert view.data["ratios"].size == 1024
    assert view.data["ratios"].std() > 0.01        # a real 4-pass update moved π_θ away from π_old
    before = view.data["clip_frac"]
    view.controls["eps_low"].value = 0.05
    view.controls["eps_high"].value = 0.05
    assert view.data["clip_frac"] > before


@pytest.mark.trained
def test_mu_view_wider_ratios_and_more_clipping_with_larger_mu(mu_view):
    d1 = mu_view.data
    assert len(d1["ratios"]) == 1
    assert d1["clip_frac"] == [0.0]                  # μ = 1: the only pass sees r = 1 exactly
    mu_view.controls["mu"].value = 8
    d8 = mu_view.data
    assert len(d8["ratios"]) == 8 and len(d8["kl_ref_exact"]) == 8
    assert d8["ratio_std"][-1] > 2 * d1["ratio_std"][-1]
    assert d8["clip_frac_after"][-1] > d1["clip_frac_after"][-1] + 0.05
    assert max(d8["clip_frac"]) > 0.05
    assert d8["kl_old_exact"][-1] > d1["kl_old_exact"][-1]
    # the passes of μ = 8 start as μ = 1 did: same batch, same π_old, same first step
    assert d8["ratio_std"][0] == pytest.approx(d1["ratio_std"][0], rel=1e-5)


@pytest.mark.trained
def test_mu_view_importance_corrected_kl_is_closer_to_exact_than_biased(mu_view):
    mu_view.controls["mu"].value = 6
    d = mu_view.data
    for k in range(1, 6):  # every pass after the first: π_θ ≠ π_old
        assert abs(d["kl_ref_corrected"][k] - d["kl_ref_exact"][k]) < abs(d["kl_ref_biased"][k] - d["kl_ref_exact"][k])
    assert abs(d["bias_biased"][-1]) > 3 * abs(d["bias_corrected"][-1])


@pytest.mark.trained
def test_mu_view_eps_and_lr_sliders_change_clipping(mu_view):
    mu_view.controls["mu"].value = 4
    mu_view.controls["clip_eps"].value = 0.2
    wide = mu_view.data["clip_frac_after"][-1]
    mu_view.controls["clip_eps"].value = 0.05
    narrow = mu_view.data["clip_frac_after"][-1]
    assert narrow > wide
    mu_view.controls["lr"].value = 1e-4
    assert mu_view.data["ratio_std"][-1] < 0.05      # a tiny step barely moves π_θ


def test_kl_estimators_bias_and_variance():
    view = viz.kl_estimators_view(distance=0.0)
    assert view.data["exact"] == pytest.approx(0.0, abs=1e-12)
    view.controls["distance"].value = 2.0
    d = view.data
    for k in ("k1", "k3"):                            # unbiased: within 4 standard errors
        assert abs(d[k]["bias"]) < 4 * d[k]["std"] / np.sqrt(d["trials"])
    assert d["k2"]["bias"] > 0.1                      # k2 is biased far from p = q
    assert d["k3"]["std"] < d["k1"]["std"]            # k3 has the lower variance
    assert d["k2"]["mean"] >= 0 and d["k3"]["mean"] >= 0
    spread = d["k1"]["std"]
    view.controls["num_samples"].value = 64           # 4× the samples: half the spread
    assert view.data["k1"]["std"] == pytest.approx(spread / 2, rel=0.15)
    view.controls["distance"].value = 0.5
    assert view.data["exact"] < d["exact"]


def test_group_advantages_view_follows_core_group_relative():
    view = viz.group_advantages_view("1, 0, 0, 0, 1, 1, 1, 1", group_size=4)
    adv = view.data["advantages"]
    assert adv["group"][4:] == [0.0] * 4                  # all-equal group: no signal, no NaN
    assert adv["none"] == pytest.approx([0.75, -0.25, -0.25, -0.25, 0, 0, 0, 0])
    assert adv["group"][0] == pytest.approx(0.75 / 0.5, rel=1e-3)
    view.controls["rewards"].value = "2, 0, 1, 1"
    view.controls["group_size"].value = 2
    adv = view.data["advantages"]
    assert adv["none"] == pytest.approx([1, -1, 0, 0])
    assert adv["batch"] == pytest.approx(
        core.group_relative(torch.tensor([2.0, 0, 1, 1], dtype=torch.float64), 2, "batch").tolist())
    view.controls["rewards"].value = "1, 0, 1"            # 3 rewards do not form groups of 2
    assert view.data["error"] and view.data["advantages"]["group"] == []


def test_mu_view_one_pass_shows_every_point_inside_the_frame(mu_view):
    mu_view.controls["mu"].value = 1
    for ax in mu_view.figure.axes[1:]:                # clip fraction, exact KLs, KL estimates: one point per pass
        lo, hi = ax.get_xlim()
        assert lo < 1 < hi and min(1 - lo, hi - 1) >= 0.4, ax.get_title()
        for line in ax.get_lines():
            if len(line.get_xdata()) == 1 and line.get_xdata()[0] == 1:   # a per-pass curve, not a reference line
                assert line.get_marker() not in ("None", "", None), f"{ax.get_title()}: {line.get_label()} invisible"
    panel = mu_view.figure.axes[3]
    exact, *estimates = [ln for ln in panel.get_lines()]
    assert exact.get_label() == "exact"
    # drawn first and larger, so the estimates on top of it leave its ring visible
    assert all(exact.get_markersize() > est.get_markersize() for est in estimates)
    assert exact.get_markerfacecolor() == "none"


def test_kl_estimators_exact_curve_stays_visible_under_the_unbiased_estimates():
    view = viz.kl_estimators_view(distance=1.0, num_samples=4)
    exact, *estimates = view.figure.axes[2].get_lines()
    assert exact.get_label() == "exact"
    assert np.allclose(exact.get_ydata(), view.data["sweep"]["exact"])
    assert all(exact.get_linewidth() >= 2 * est.get_linewidth() for est in estimates)   # a band the dashes lie on
