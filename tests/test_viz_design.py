"""Notebook 6's widgets: drive every control and check what each one claims.

The schedule and the KL gradients are pure functions (milliseconds); the token view runs μ passes on a
real tiny-GRPO batch (about ten seconds, once); the parity view builds TRL's GRPOTrainer offline (needs
trl ≥ 1.16, skipped otherwise); the league trains two methods for two updates each.
"""


import matplotlib

matplotlib.use("Agg")

import ipywidgets  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402

from ladder import core, viz  # noqa: E402
from ladder.viz import token_clipping  # noqa: E402

PNG = b"\x89PNG\r\n\x1a\n"


# ---------------------------------------------------------------------------------- the KL's gradient
@pytest.mark.parametrize("ref_distance", [0.3, 1.0, 2.5])
def test_kl_gradients_on_policy(ref_distance):
    g = viz.kl_gradients(ref_distance, old_distance=0.0)
    rev, fwd = g["error_reverse"], g["error_forward"]
    assert np.linalg.norm(g["grads"]["k1 in the loss"]) < 1e-12              # k1 in the loss: no gradient at all
    assert rev["k2 in the loss"] < 1e-6 and rev["k3·π_θ/π_old in the loss"] < 1e-6 and rev["k1 in the reward"] < 1e-6
    assert fwd["k3 in the loss"] < 1e-6                                       # plain k3 follows the forward KL
    assert rev["k3 in the loss"] > 1e-3 and fwd["k2 in the loss"] > 1e-3      # ... and the two gradients differ
    assert g["norm_reverse"] > 0.1


@pytest.mark.parametrize("old_distance", [0.3, 0.8, 2.0])
def test_kl_gradients_off_policy_only_the_weighted_k3_stays_exact(old_distance):
    g = viz.kl_gradients(1.0, old_distance)
    assert g["error_reverse"]["k3·π_θ/π_old in the loss"] < 1e-6
    for way in ("k1 in the loss", "k2 in the loss", "k3 in the loss", "k1 in the reward"):
        assert min(g["error_reverse"][way], g["error_forward"][way]) > 1e-3, way


def test_kl_gradients_match_autograd_of_the_core_estimators_by_hand():
    """The k2 entry is Σ_a π_old(a) ∇k2(a) written out: −Σ_a π_old(a) ℓ(a) (onehot(a) − π_θ)."""
    g = viz.kl_gradients(1.5, 0.5)
    p, q, w = (torch.as_tensor(g[k], dtype=torch.float64) for k in ("p_theta", "p_ref", "p_old"))
    ell = q.log() - p.log()
    jac = torch.eye(5, dtype=torch.float64) - p[None]                        # ∇_θ log π_θ(a), row a
    assert np.allclose(g["grads"]["k2 in the loss"], (-(w * ell)[:, None] * jac).sum(0).numpy(), atol=1e-12)
    assert np.allclose(g["forward"], (-(q[:, None] * jac)).sum(0).numpy(), atol=1e-12)


def test_kl_gradient_view_sliders():
    view = viz.kl_gradient_view(ref_distance=1.0, old_distance=0.0)
    assert view.image.value[:8] == PNG and len(view.data["sweep"]["ref_distance"]) == 16
    assert view.data["error_forward"]["k3 in the loss"] < 1e-6
    view.controls["old_distance"].value = 1.0
    d = view.data
    assert d["old_distance"] == 1.0 and d["error_reverse"]["k3·π_θ/π_old in the loss"] < 1e-6
    assert d["error_forward"]["k3 in the loss"] > 1e-3
    assert all(e < 1e-6 for e in d["sweep"]["k3·π_θ/π_old in the loss"])
    view.controls["ref_distance"].value = 0.0                                # π_ref = π_θ: the true gradients vanish
    assert view.data["norm_reverse"] < 1e-12 and view.data["norm_forward"] < 1e-12


# ------------------------------------------------------------------------------------------- tokens
def constructed_table(mu: int = 1) -> token_clipping.TokenTable:
    """Four completions, ε = 0.2 throughout:

        row 0  Â > 0  r = 1.5, 0.8, 0.8     token level clips token 0; s = 0.96^(1/3) ≈ 0.986: no clip
        row 1  Â < 0  r = 0.7, 0.7, 0.7     both levels clip the whole row (s = 0.7)
        row 2  Â > 0  r = 1.19, 1.19, 1.25  token level clips token 2; s ≈ 1.21 > 1.2: the whole row
        row 3  Â = 0                        no signal: nothing to clip
    """
    ratios = torch.tensor([[1.5, 0.8, 0.8], [0.7, 0.7, 0.7], [1.19, 1.19, 1.25], [1.0, 1.3, 1.0]])
    old = torch.full((4, 3), -1.0)
    mask = torch.ones(4, 3)
    return token_clipping.TokenTable(pieces=[["a", "b", "c"], ["d", "e", "f"], ["g", "h", "i"], ["j", "k", "l"]],
                         logp=old + ratios.log(), old_logp=old, advantages=torch.tensor([1.0, -1.0, 1.0, 0.0]),
                         mask=mask, kl_ref=torch.rand(4, 3), entropy=torch.rand(4, 3), rewards=[1.0, 0.0, 1.0, 1.0],
                         prompts=["p0", "p0", "p1", "p1"], group_size=2, mu=mu)


def _cells(mask):
    return {tuple(ix) for ix in mask.nonzero().tolist()}


def test_gradient_mask_token_vs_sequence_on_a_constructed_case():
    t = constructed_table()
    tok = viz.gradient_mask(t.logp, t.old_logp, t.advantages, t.mask, 0.2, 0.2, "token")
    seq = viz.gradient_mask(t.logp, t.old_logp, t.advantages, t.mask, 0.2, 0.2, "sequence")
    assert _cells(tok["no_grad"]) == {(0, 0), (1, 0), (1, 1), (1, 2), (2, 2)}
    assert _cells(seq["no_grad"]) == {(1, 0), (1, 1), (1, 2), (2, 0), (2, 1), (2, 2)}
    assert tok["rows_dropped"].tolist() == [False, True, False, False]
    assert seq["rows_dropped"].tolist() == [False, True, True, False]
    assert seq["ratio"][2, 0].item() == pytest.approx((1.19 * 1.19 * 1.25) ** (1 / 3), rel=1e-6)
    # the token level's set is core.clip_fractions' count
    frac = core.clip_fractions(tok["ratio"], t.advantages[:, None].expand(4, 3), t.mask, 0.2, 0.2)["clip_frac"]
    assert frac == pytest.approx(5 / 12)
    # padding: a padded position never counts, whatever it holds
    t.mask[0, 2] = 0.0
    t.logp[0, 2] = float("nan")
    tok = viz.gradient_mask(t.logp, t.old_logp, t.advantages, t.mask, 0.2, 0.2, "token")
    assert (0, 2) not in _cells(tok["no_grad"]) and torch.isfinite(tok["grad"]).all()


def test_token_view_controls_on_the_constructed_case():
    calls = []

    def passes(mu):
        calls.append(mu)
        return constructed_table(mu)

    view = viz.token_view(mu=1, eps=0.2, level="token", passes=passes)
    assert isinstance(view, ipywidgets.VBox) and view.text in view.children and view.image.value[:8] == PNG
    token_set = _cells(view.data["clip"]["no_grad"])
    assert view.data["html"].count("line-through") == len(token_set) == 5
    view.controls["level"].value = "sequence"
    assert _cells(view.data["clip"]["no_grad"]) != token_set
    assert view.text.value.count("whole completion clipped") == 2 and "s=1.210" in view.text.value
    assert view.data["frac_rows"] == {"token": pytest.approx(1 / 3), "sequence": pytest.approx(2 / 3)}
    view.controls["high"].value = 1.4                     # DAPO's clip-higher: ε_high = 0.28
    assert view.data["eps_high"] == pytest.approx(0.28) and "2.8e-01" in view.data["summary"]
    assert _cells(view.data["clips"]["token"]["no_grad"]) == {(0, 0), (1, 0), (1, 1), (1, 2)}   # r = 1.25 < 1.28 now
    assert view.data["clip"]["rows_dropped"].tolist() == [False, True, False, False]          # s ≈ 1.21 < 1.28 too
    view.controls["high"].value = 1.0
    view.controls["eps"].value = 0.4                      # s_i within [0.6, 1.4] for every row: nothing clipped
    assert not view.data["clip"]["no_grad"].any()
    assert _cells(view.data["clips"]["token"]["no_grad"]) == {(0, 0)}    # but r = 1.5 > 1.4, with Â > 0
    for quantity in token_clipping.TOKEN_QUANTITIES:
        view.controls["quantity"].value = quantity
        assert view.text.value.count("<span title=") == 12
    view.controls["mu"].value = 3
    assert calls[-1] == 3 and view.data["table"].mu == 3


@pytest.fixture(scope="module")
def real_token_view():
    return viz.token_view(mu=1, eps=0.2)


@pytest.mark.trained
def test_token_view_on_a_real_tiny_grpo_batch(real_token_view):
    view = real_token_view
    t = view.data["table"]
    real = t.mask.bool()
    ratio = torch.exp(t.logp - t.old_logp)[real]
    assert t.mu == 1 and len(t.pieces) == 16 and sum(len(p) for p in t.pieces) == int(real.sum())
    assert ratio.std() > 1e-3                                   # one pass moved π_θ off π_old
    assert (t.kl_ref[real] > -1e-5).all() and (t.entropy[real] >= -1e-5).all() and t.kl_ref[real].max() > 0
    view.controls["mu"].value = 3
    t3 = view.data["table"]
    assert torch.exp(t3.logp - t3.old_logp)[real].std() > ratio.std()          # more passes, wider ratios
    assert torch.equal(t3.old_logp, t.old_logp)                                # the same batch, the same π_old
    view.controls["eps"].value = 3e-3
    d = view.data
    assert d["frac_tokens"]["sequence"] > d["frac_tokens"]["token"] and d["frac_rows"]["sequence"] > 0
    tok, seq = d["clips"]["token"]["no_grad"], d["clips"]["sequence"]["no_grad"]
    assert _cells(tok) != _cells(seq)
    # at the sequence level a completion is all in or all out
    for i in range(len(seq)):
        row = seq[i][d["clips"]["sequence"]["signal"][i]]
        assert row.all() or not row.any()
    # the notebook's claim: at GSPO's pair the sequence level clips a far larger share of the tokens than the token
    # level does at GRPO's 0.2
    view.controls["eps"].value = 0.2
    grpo_share = view.data["frac_tokens"]["token"]
    view.controls["high"].value = 4 / 3
    view.controls["eps"].value = 3e-4
    assert (view.data["eps_low"], view.data["eps_high"]) == pytest.approx((3e-4, 4e-4))
    assert view.data["frac_tokens"]["sequence"] > 2 * grpo_share


# ------------------------------------------------------------------------- the loss's constant normaliser
def test_algo_table_has_every_bundle_and_gspos_small_eps():
    from ladder.rungs import grpo

    text = viz.algo_league.algo_table()
    for name in grpo.ALGOS:
        assert f"| {name} | " in text
    assert "| 0.0003 / 0.0004 | 500× |" in text                   # GRPO's 0.2 ÷ GSPO's ε_high
    assert "| 0.2 / 0.28 | 0.714× |" in text                      # DAPO's clip-higher
    assert "cispo: no clip of the ratio" in text and "soft_gate: no clip of the ratio" in text


LENGTHS = [[8, 2, 5, 1], [3, 3, 7, 4]]      # 2 processes × 4 completions, as in the notebook


def test_loss_weights_by_hand():
    """dapo: M / (real tokens of the whole update); dr_grpo: 1 / (P·b·L_max); grpo: 1 / (P·b·|y_i|);
    bnpo: 1 / (P · real tokens of the minibatch on its process)."""
    w = viz.algo_league.loss_weights(LENGTHS, num_minibatches=2, max_new_tokens=8)
    P, M, b, L = 2, 2, 2, 8
    assert w["tokens"] == 33
    for p, lens in enumerate(LENGTHS):
        for i, n in enumerate(lens):
            mb_tokens = sum(lens[(i // b) * b:(i // b + 1) * b])
            assert w["dapo"][p][i] == pytest.approx(M / 33) and w["cispo"][p][i] == w["dapo"][p][i]
            assert w["dr_grpo"][p][i] == pytest.approx(1 / (P * b * L))
            assert w["grpo"][p][i] == pytest.approx(1 / (P * b * n))
            assert w["bnpo"][p][i] == pytest.approx(1 / (P * mb_tokens))
    # every real token of the update, weighted: M in all, one per optimiser step of a pass
    total = sum(n * w["dapo"][p][i] for p, lens in enumerate(LENGTHS) for i, n in enumerate(lens))
    assert total == pytest.approx(M)
    one = viz.algo_league.loss_weights([[8, 2, 5, 1]], num_minibatches=1, max_new_tokens=8)
    assert one["dapo"] == one["bnpo"]                               # one process, M = 1: dapo is bnpo
    table = viz.algo_league.loss_weights_table(w)
    assert "| 0 | 1 | 1 | 1/4 | 1/12 | 1/32 | 1/16.5 | 1/16.5 |" in table
    with pytest.raises(ValueError, match="same number of rows"):
        viz.algo_league.loss_weights([[1, 2], [3]], num_minibatches=1, max_new_tokens=4)


def test_loss_weights_are_what_compute_loss_does_with_the_rungs_constant():
    """The same weights from core.compute_loss on a minibatch, its num_tokens the share N / M that core.update
    gives it: REINFORCE with Â = −1 makes the loss Σ w·log π, so ∂loss/∂log π is the weight."""
    from ladder.rungs.grpo import LOSS_TYPES, loss_normaliser

    class Table(torch.nn.Module):                  # log π_θ of each token is a weight of its own
        def __init__(self, shape):
            super().__init__()
            self.logp = torch.nn.Parameter(torch.zeros(shape))

        def evaluate(self, batch):
            return self.logp, None, None

    w = viz.algo_league.loss_weights(LENGTHS, num_minibatches=2, max_new_tokens=8)
    P, M, L = 2, 2, 8
    for loss_type, registered in LOSS_TYPES.items():
        aggregation = registered.aggregation
        cfg = core.UpdateConfig(objective="reinforce", aggregation=aggregation)
        for p, lens in enumerate(LENGTHS):
            n = loss_normaliser(loss_type, len(lens), L, w["tokens"] / P)
            for k in range(M):
                rows = torch.tensor(lens[2 * k:2 * k + 2])
                mask = (torch.arange(L)[None] < rows[:, None]).float()
                mb = core.Batch(actions=torch.zeros(2, L, dtype=torch.long), mask=mask, advantages=-mask)
                policy = Table((2, L))
                loss, _, _ = core.compute_loss(policy, mb, cfg, None if n is None else n / M)
                loss.backward()
                got = (policy.logp.grad[:, 0] / P).tolist()          # ÷ P: the processes average their gradients
                assert got == pytest.approx(w[loss_type][p][2 * k:2 * k + 2]), (loss_type, p, k)


# ------------------------------------------------------------------------------------------- league
def test_league_view_trains_each_method_at_the_same_budget():
    from ladder.rungs import grpo

    view = viz.league_view(methods=("grpo", "rloo"), max_completions=64, prompts_per_step=4, eval_size=8,
                           eval_every=1)
    runs = view.data["runs"]
    assert set(runs) == {"grpo", "rloo"} and view.image.value[:8] == PNG
    for method, r in runs.items():
        assert r["completions_total"] == 64 and r["completions"] == [32, 64] and r["updates"] == 2
        assert [c for c, _ in r["eval_accuracy"]] == [0, 32, 64]
        assert r["flags"] == grpo.ALGOS[method]
        # the accuracy after training is the curve's last point, a count of the 8 held-out problems
        assert r["accuracy_after"] == r["eval_accuracy"][-1][1] and (8 * r["accuracy_after"]).is_integer()
    assert abs(runs["rloo"]["kl_ref"][-1]) > 0       # rloo keeps a reference (β = 0.03, in the reward)
    view.controls["metric"].value = "reward"
    assert view.data["metric"] == "reward"
    view.controls["highlight"].value = "rloo"
    assert view.data["summary"].startswith("rloo") and "| rloo |" in view.data["table"]
