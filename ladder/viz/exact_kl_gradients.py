"""Notebook 6, KL in the loss: what each way of putting the KL into training has for expected gradient.

    kl_gradients        on a 5-action categorical, the EXACT expected gradient (all actions enumerated, no sampling)
                        of each way of putting the KL into training, against ∇KL(π_θ‖π_ref) and ∇KL(π_ref‖π_θ)

and the view ``kl_gradient_view`` (a ``View``: ``.controls``, ``.data``, ``.figure``).
"""

from __future__ import annotations

import ipywidgets as widgets
import numpy as np
import torch
from matplotlib.figure import Figure

from ladder import core
from ladder.viz._widget import View
from ladder.viz.views import _SLIDER

KL_WAYS = ("k1 in the loss", "k2 in the loss", "k3 in the loss", "k3·π_θ/π_old in the loss", "k1 in the reward")
_LOGITS = (1.0, 0.5, 0.0, -0.5, -1.0)            # θ: π_θ = softmax(θ)
_TO_REF = (-1.0, 0.5, 1.0, 0.0, -0.5)            # π_ref = softmax(θ + d_ref · this)
_TO_OLD = (0.5, -1.0, 0.3, 0.8, -0.6)            # π_old = softmax(θ + d_old · this)


def kl_gradients(ref_distance: float = 1.0, old_distance: float = 0.0) -> dict:
    """Exact expected gradients w.r.t. the logits θ of a 5-action categorical: every action enumerated.

    π_θ = softmax(θ), π_ref = softmax(θ + d_ref·u), π_old = softmax(θ + d_old·v) (fixed directions u, v; π_old and
    π_ref are constants). Actions are sampled by π_old, so each way of training is E_{a~π_old}[·] = Σ_a π_old(a)·(·):

        k1, k2, k3 in the loss       Σ_a π_old(a) · ∇k(a)                      core.kl_estimate(logp, ref)
        k3·π_θ/π_old in the loss     Σ_a π_old(a) · ∇[(π_θ/π_old)(a) · k3(a)]  core.kl_estimate(logp, ref, "k3", old)
        k1 in the reward             Σ_a π_old(a) · ∇[−(π_θ/π_old)(a) · Â(a)],  Â = −k1 on π_old, a constant
                                     (core.kl_in_reward; the surrogate r·Â inside the clip. On-policy it is the
                                     REINFORCE gradient E[k1(a)·∇log π_θ(a)])

    against autograd on the exact KLs: ∇KL(π_θ‖π_ref) (reverse) and ∇KL(π_ref‖π_θ) (forward). Each gradient is
    "per unit β": the gradient the loss's β·(term) contributes, divided by β.
    """
    dt = torch.float64
    base = torch.tensor(_LOGITS, dtype=dt)
    theta = base.clone().requires_grad_(True)
    logp = torch.log_softmax(theta, 0)
    ref = torch.log_softmax(base + ref_distance * torch.tensor(_TO_REF, dtype=dt), 0)
    old = torch.log_softmax(base + old_distance * torch.tensor(_TO_OLD, dtype=dt), 0)
    w = old.exp()                                # the sampling weights: a ~ π_old

    def grad(value: torch.Tensor) -> np.ndarray:
        return torch.autograd.grad(value, theta, retain_graph=True)[0].numpy()

    shaped, _ = core.kl_in_reward(torch.zeros(5, dtype=dt), old[:, None], ref[:, None], torch.ones(5, 1, dtype=dt),
                                  kl_coef=1.0, estimator="k1")          # r̃(a) = 0 − 1·k1(a) on π_old
    ratio = torch.exp(logp - old)
    terms = {"k1 in the loss": core.kl_estimate(logp, ref, "k1"), "k2 in the loss": core.kl_estimate(logp, ref, "k2"),
             "k3 in the loss": core.kl_estimate(logp, ref, "k3"),
             "k3·π_θ/π_old in the loss": core.kl_estimate(logp, ref, "k3", old),
             "k1 in the reward": -ratio * shaped}
    grads = {name: grad((w * term).sum()) for name, term in terms.items()}
    p, q = logp.exp(), ref.exp()
    kl_reverse, kl_forward = (p * (logp - ref)).sum(), (q * (ref - logp)).sum()
    reverse, forward = grad(kl_reverse), grad(kl_forward)
    return {"ref_distance": ref_distance, "old_distance": old_distance, "grads": grads, "reverse": reverse,
            "forward": forward, "kl_reverse": kl_reverse.item(), "kl_forward": kl_forward.item(),
            "kl_old": (w * (old - logp)).sum().item(),
            "norm_reverse": float(np.linalg.norm(reverse)), "norm_forward": float(np.linalg.norm(forward)),
            "error_reverse": {k: float(np.linalg.norm(g - reverse)) for k, g in grads.items()},
            "error_forward": {k: float(np.linalg.norm(g - forward)) for k, g in grads.items()},
            "p_theta": p.detach().numpy(), "p_ref": q.numpy(), "p_old": w.numpy()}


def kl_gradient_view(ref_distance: float = 1.0, old_distance: float = 0.0) -> View:
    """Sliders move π_ref and π_old away from π_θ; bars show each way's gradient error against both true gradients."""
    controls = {
        "ref_distance": widgets.FloatSlider(value=ref_distance, min=0.0, max=3.0, step=0.1,
                                            description="how far π_ref is from π_θ", **_SLIDER),
        "old_distance": widgets.FloatSlider(value=old_distance, min=0.0, max=2.0, step=0.1,
                                            description="how far π_old is from π_θ", **_SLIDER),
    }
    sweep = np.linspace(0.0, 3.0, 16)

    def draw(v: dict):
        d = kl_gradients(v["ref_distance"], v["old_distance"])
        d["sweep"] = {"ref_distance": sweep, **{k: [kl_gradients(float(x), v["old_distance"])["error_reverse"][k]
                                                     for x in sweep] for k in KL_WAYS}}
        fig = Figure(figsize=(12, 4.0))
        ax = fig.add_subplot(1, 3, 1)
        x = np.arange(5)
        for i, (key, label) in enumerate((("p_theta", "π_θ"), ("p_old", "π_old (samples)"), ("p_ref", "π_ref"))):
            ax.bar(x + (i - 1) * 0.27, d[key], 0.27, label=label)
        ax.set_xlabel("action")
        ax.set_title(f"KL(π_θ‖π_ref) {d['kl_reverse']:.3f} · KL(π_ref‖π_θ) {d['kl_forward']:.3f}", fontsize=9)
        ax.legend(fontsize=7)
        ax = fig.add_subplot(1, 3, 2)
        y = np.arange(len(KL_WAYS))
        ax.barh(y - 0.2, [d["error_reverse"][k] for k in KL_WAYS], 0.4, label="vs ∇KL(π_θ‖π_ref) (reverse)")
        ax.barh(y + 0.2, [d["error_forward"][k] for k in KL_WAYS], 0.4, label="vs ∇KL(π_ref‖π_θ) (forward)")
        for yi, k in zip(y, KL_WAYS):
            for off, key in ((-0.2, "error_reverse"), (0.2, "error_forward")):
                if d[key][k] < 1e-9:
                    ax.text(0, yi + off, " exact", va="center", fontsize=7, color="C2")
        ax.set_yticks(y)
        ax.set_yticklabels(KL_WAYS, fontsize=8)
        ax.invert_yaxis()
        ax.set_title(f"‖E[gradient] − true gradient‖ (‖∇KL rev.‖ = {d['norm_reverse']:.3f})", fontsize=9)
        ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.1), ncol=1, frameon=False)
        ax = fig.add_subplot(1, 3, 3)
        for i, k in enumerate(KL_WAYS):
            ax.plot(sweep, d["sweep"][k], ("-", "--", "-.", ":", "-")[i], label=k, lw=1.5 if i != 3 else 2.5)
        ax.axvline(v["ref_distance"], color="grey", ls=":")
        ax.set_xlabel("how far π_ref is from π_θ")
        ax.set_title("error vs the reverse KL's gradient", fontsize=9)
        ax.legend(fontsize=6)
        fig.tight_layout()
        d["summary"] = " · ".join(f"{k}: {d['error_reverse'][k]:.1e} / {d['error_forward'][k]:.1e}" for k in KL_WAYS) \
            + " (error vs reverse / forward)"
        return fig, d

    return View(controls, draw, "KL in the loss: what each way's expected gradient follows")
