# ruff: noqa: E501  (LaTeX lines in the notebook text are as long as their equations)
"""The text and code of notebook 3: three policies and the KL.

Cells starting with ``md:`` are Markdown; everything else is code. ``notebooks/build.py`` writes them.
"""

from text_toy import SELF_CHECK, SETUP

NOTEBOOKS: dict[str, list[str]] = {}

NOTEBOOKS["3_three_policies_and_kl"] = [
    r"""md:# 3 · Three policies and the KL

After this notebook (about 45 minutes) you will be able to:

* estimate a KL from samples with $k_1$, $k_2$, $k_3$ and say which is biased, and which is noisy;
* say why $\pi_{\text{old}} = \pi_\theta$ at sampling time and what $\mu$ passes do to the ratio and to the clip;
* say which KL estimate from $\pi_{\text{old}}$'s samples still measures $\mathrm{KL}(\pi_\theta\,\|\,\pi_{\text{ref}})$ once $\pi_\theta$ has moved, and why.

## Estimating a KL from samples

With $a \sim \pi_\theta$ and $\ell = \log \pi_{\text{ref}}(a) - \log \pi_\theta(a)$ (Schulman, *Approximating KL*):

$$k_1 = -\ell, \qquad k_2 = \tfrac12 \ell^2, \qquad k_3 = (e^{\ell} - 1) - \ell$$

Each is one sample's guess at $\mathrm{KL}(\pi_\theta\,\|\,\pi_{\text{ref}})$; they differ in bias and in spread. All three
are `core.kl_estimate`. The widget computes their bias and spread against the exact
$\mathrm{KL}(p\,\|\,q) = \sum_a p(a)\log\frac{p(a)}{q(a)}$ on a small categorical ($p = \pi_\theta$, $q = \pi_{\text{ref}}$).""",
    SETUP,
    r"""md:**Predict first.** The widget starts with $q$ at distance 1 from $p$. Slide *how far q is from p* to 2.5:
which of $k_1$, $k_2$, $k_3$ keep their bias near 0, and which of those has the smaller spread?""",
    """view = viz.kl_estimators_view(distance=1.0, num_samples=16)
view""",
    """kl_stats = {d: viz.kl_estimator_stats(d) for d in (0.25, 1.0, 2.5)}
print(f"{len(kl_stats[1.0]['p'])} actions, {kl_stats[1.0]['num_samples']} samples per estimate")
for d, s in kl_stats.items():
    print(f"distance {d}: exact {s['exact']:.3f} | " + " | ".join(
        f"{k} bias {s[k]['bias']:+.3f} ± {s[k]['std'] / s['trials'] ** 0.5:.3f} std {s[k]['std']:.3f}" for k in ("k1", "k2", "k3")))
print(f"(± is the bias's standard error, std/√trials over {kl_stats[1.0]['trials']} trials: a bias within about two of "
      "them is sampling noise)")""",
    r"""md:<details><summary>Answer</summary>

$k_1$ and $k_3$ stay unbiased at every distance (their printed bias is within a couple of its $\pm$, sampling noise),
while $k_2$'s bias grows with the distance, far beyond its $\pm$. Of the two unbiased ones $k_3$ has the smaller spread: compare their `std` in each line above, or the
error bars in the middle panel as you slide. In short: $k_1$ is unbiased but noisy and can be negative; $k_2$ is
biased, and low-variance only near $\pi_\theta \approx \pi_{\text{ref}}$; $k_3$ is unbiased and low-variance near
$\pi_\theta \approx \pi_{\text{ref}}$ — GRPO's choice.
</details>

## Why $\pi_{\text{old}} = \pi_\theta$ at sampling, and what $\mu$ does

The batch is sampled by the current policy, so $\pi_\theta = \pi_{\text{old}}$ until the first optimiser step: on the
first minibatch of the first pass every ratio $\rho_t = \pi_\theta(a_t)/\pi_{\text{old}}(a_t)$ is 1 (with a gradient),
to float32 rounding: $\log\pi_{\text{old}}$ was recorded by a forward pass of its own. Each optimiser step moves
$\pi_\theta$; the samples stay those of $\pi_{\text{old}}$. With $M$ minibatches per pass the second minibatch of the
first pass already sees $\rho_t \neq 1$; here $M = 1$, so each pass is one optimiser step. Of the grpo rung's
`--algo` bundles, `gspo` cuts each pass into $M > 1$ minibatches (its $M$ is printed with the batch below).

## The widget: $\mu$ real passes on one fixed batch

$\pi_{\text{ref}}$ is a freshly initialised CartPole MLP, $\pi_{\text{old}}$ the same network after a few PPO
updates; it samples one fixed batch (its size printed below). A copy of it, $\pi_\theta$, gets $\mu$ passes of
`core.update` (one minibatch per pass: $\mu$ optimiser steps). CartPole has two actions, so every KL here is
also computed **exactly** at the batch's states,
$\mathrm{KL}(\pi_\theta\,\|\,\pi_x)(s) = \sum_a \pi_\theta(a\mid s)\log\frac{\pi_\theta(a\mid s)}{\pi_x(a\mid s)}$ with
$\pi_x$ either $\pi_{\text{old}}$ (how far the passes moved $\pi_\theta$ from the policy that sampled the batch) or
$\pi_{\text{ref}}$ (the KL a penalty would hold down): the bottom-left panel draws both. Next to the exact
$\mathrm{KL}(\pi_\theta\,\|\,\pi_{\text{ref}})$ it draws two estimates of it from the batch that $\pi_{\text{old}}$ sampled:
the plain average of $k_3$ (red), and the average of $\rho\,k_3$, each sample weighted by its ratio
$\rho = \pi_\theta/\pi_{\text{old}}$ (green).""",
    """from ladder.rungs.grpo.options import ALGOS

ref, old, batch = viz.fixed_batch()
print(f"fixed batch: {len(batch)} transitions; --algo gspo: M = {ALGOS['gspo']['num_minibatches']} per pass")""",
    r"""md:**Predict first.** Slide $\mu$ from 1 to 8. What happens to the clip fraction after the last pass, and why? Which
estimate of $\mathrm{KL}(\pi_\theta\,\|\,\pi_{\text{ref}})$ from the $\pi_{\text{old}}$ samples stays near the exact value
as $\mu$ grows — the plain average of $k_3$ (red) or the $\rho$-weighted one (green) — and why that one?""",
    """view = viz.mu_view(mu=4, lr=2e-3, clip_eps=0.2)
view""",
    """runs = {mu: viz.mu_passes(mu) for mu in (1, 2, 4, 8)}
for mu, run in runs.items():
    print(f"after μ={mu} pass(es): ratio std {run['ratios'][-1].std():.3f}  clip {run['clip_frac_after'][-1]:.3f}  "
          f"KL(θ‖ref) exact {run['kl_ref_exact'][-1]:.4f}  biased {run['kl_ref_biased'][-1]:.4f}  "
          f"corrected {run['kl_ref_corrected'][-1]:.4f}")""",
    r"""md:<details><summary>Answer</summary>

Each pass moves $\pi_\theta$ further from $\pi_{\text{old}}$, so the ratios spread further from 1 and more of them
leave $[1-\varepsilon, 1+\varepsilon]$: the clip fraction after the last pass should grow with $\mu$. The plain average of $k_3$ estimates an expectation under the policy that drew the samples, $\pi_{\text{old}}$;
once $\pi_\theta$ has moved, that is not $\mathrm{KL}(\pi_\theta\,\|\,\pi_{\text{ref}})$. Weighting each sample by $\rho$
turns it into an expectation under $\pi_\theta$ (importance sampling):

$$\mathrm{KL}(\pi_\theta\,\|\,\pi_{\text{ref}}) = \mathbb{E}_{a\sim\pi_{\text{old}}}\Big[\frac{\pi_\theta(a)}{\pi_{\text{old}}(a)}\,k_3(a)\Big],$$

so the weighted estimate should track the exact KL while the plain one drifts as $\mu$ grows. The cell below says what
this batch did. Each line above is read **after** its run's passes, i.e. after its $\mu$ optimiser steps: during the
single pass of $\mu = 1$ every ratio was 1, but its one step has moved them (their std is printed) — the ratios the
next pass would see. Try a larger learning rate, or a smaller $\varepsilon$.
</details>""",
    """clips = [run["clip_frac_after"][-1] for run in runs.values()]
grows = all(a <= b for a, b in zip(clips, clips[1:]))
print(f"clip fraction after the last pass, μ = {list(runs)}: {[round(c, 3) for c in clips]} — "
      f"{'growing with μ' if grows else 'not growing at every step of μ'}")
error = {mu: {k: abs(run[f"kl_ref_{k}"][-1] - run["kl_ref_exact"][-1]) for k in ("biased", "corrected")}
         for mu, run in runs.items()}
closer = [mu for mu, e in error.items() if e["corrected"] < e["biased"]]
print(f"the ρ-weighted estimate is the closer to the exact KL at μ = {closer} of {list(runs)}")
for mu, e in error.items():
    print(f"   μ = {mu}: off the exact KL by {e['biased']:.4f} (plain), {e['corrected']:.4f} (ρ-weighted)")""",
    r"""md:<details><summary>Aside — in the code</summary>

`core.kl_estimate(logp, ref_logp, "k3", old_logp)` is the $\rho$-weighted $k_3$; the grpo rung's `--kl-correction on`
(TRL's `use_bias_correction_kl`) puts it in the loss.
</details>

**Exercises:** `ex07_kl_estimators.py` and `ex08_kl_corrected.py`; with `--use-exercises` your corrected
`kl_estimate` runs in place of the core's.""",
    SELF_CHECK,
    """p_k3 = viz.Predict("k3 = k1 + (e^ℓ − 1), with e^ℓ = π_ref(a)/π_θ(a). With a ~ π_θ, what is the expected value of the "
                    "added term e^ℓ − 1, at any distance between π_θ and π_ref?")
p_k3.answer = None
p_lr = viz.Predict("Run the μ = 8 passes again at a 5 times smaller learning rate (4e-4 instead of 2e-3): will the clip "
                   "fraction after the last pass be larger, smaller or the same?", choices=("larger", "smaller", "the same"))
p_lr.answer = None
why_plain = viz.Reason("A new case: the batch was drawn by π_ref itself (replies stored from the reference model), "
                       "not by π_old. Which weight makes the average of k3 over it estimate KL(π_θ‖π_ref)?",
                       "π_ref/π_θ: it turns the reference's samples into samples of π_θ, each weighted by how much "
                       "likelier π_ref made it",
                       "π_θ/π_old, as in the widget's green estimate: the correction always divides by π_old, the "
                       "policy the update started from, whoever drew the samples",
                       "none: k3 is built from ℓ = log π_ref − log π_θ, which already compares the two policies, so "
                       "its plain average estimates the KL from any samples",
                       "π_θ/π_ref: importance sampling divides by the policy that drew the samples, here π_ref, so "
                       "E_π_ref[(π_θ/π_ref)·k3] = E_π_θ[k3]")
why_plain.answer = None
for question in (p_k3, p_lr, why_plain):
    question.ask()
    print()""",
    """p, q = (torch.tensor(kl_stats[2.5][k], dtype=torch.float64) for k in ("p", "q"))   # π_θ, π_ref of section 1
added = (p * (q / p - 1)).sum().item()                              # E_π_θ[e^ℓ − 1], exactly
sampled = {d: s["k3"]["mean"] - s["k1"]["mean"] for d, s in kl_stats.items()}   # its average over section 1's samples
p_k3.check(added, why="E_π_θ[π_ref/π_θ] = Σ_a π_ref(a) = 1, so the term has mean 0 and k3 keeps k1's mean (unbiased); "
                      f"it rises as k1 falls, which cuts k1's spread. Over section 1's samples it averages "
                      + ", ".join(f"{v:+.4f}" for v in sampled.values()) + " at distances " + ", ".join(map(str, sampled)))
ell = torch.linspace(-10, 10, 2001, dtype=torch.float64)          # ℓ = log π_ref − log π_θ on a grid
k3 = core.kl_estimate(torch.zeros_like(ell), ell, "k3")
k3_at_0 = core.kl_estimate(torch.zeros(1, dtype=torch.float64), torch.zeros(1, dtype=torch.float64), "k3").item()
print(f"k3 ≥ 0 at every ℓ of the grid [−10, 10]: {bool((k3 >= 0).all())}, and k3 = {k3_at_0:g} at ℓ = 0 "
      "(e^ℓ ≥ 1 + ℓ, equal only at ℓ = 0)")
slow = viz.mu_passes(8, lr=4e-4)
clip = {"2e-3": runs[8]["clip_frac_after"][-1], "4e-4": slow["clip_frac_after"][-1]}
p_lr.check("larger" if clip["4e-4"] > clip["2e-3"] else "the same" if clip["4e-4"] == clip["2e-3"] else "smaller",
           why=f"clip fraction {clip['2e-3']:.3f} at 2e-3, {clip['4e-4']:.3f} at 4e-4; the ratios' std "
               f"{runs[8]['ratios'][-1].std():.3f} and {slow['ratios'][-1].std():.3f}: the step size sets how far they spread")
k3_q = core.kl_estimate(p.log(), q.log(), "k3")
weighted, plain = (q * (p / q) * k3_q).sum().item(), (q * k3_q).sum().item()
why_plain.check("d", why=f"the sampling policy π_ref goes in the denominator: E_π_ref[(π_θ/π_ref)·k3] = {weighted:.4f} on section 1's "
                         f"categorical at distance 2.5, its exact KL {kl_stats[2.5]['exact']:.4f}; plain E_π_ref[k3] = {plain:.4f}")
viz.tally(p_k3, p_lr, why_plain)""",
]
