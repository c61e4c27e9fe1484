# ruff: noqa: E501  (LaTeX lines in the notebook text are as long as their equations)
"""The text and code of notebook 6: GRPO's design space, and TRL side by side.

Cells starting with ``md:`` are Markdown; everything else is code. ``notebooks/build.py`` writes them.
"""

from text_toy import SETUP

NOTEBOOKS: dict[str, list[str]] = {}

NOTEBOOKS["6_design_space_and_trl"] = [
    r"""md:# 6 · GRPO's design space, and TRL side by side

GRPO, Dr. GRPO, DAPO, GSPO, CISPO and RLOO are not six programs. Each is a handful of choices, and each
choice is a flag of the `grpo` rung and a short function of `ladder.core` (README: *GRPO's design space*).
One loss covers them all:

$$L(\theta) = \operatorname{agg}\Big(-\min\big(\rho_t\hat A_t,\ \operatorname{clip}(\rho_t, 1-\varepsilon_{\text{low}}, 1+\varepsilon_{\text{high}})\,\hat A_t\big) + \beta\, w_t\, k(a_t)\Big),
\qquad \rho_t = \begin{cases} \pi_\theta(a_t)/\pi_{\text{old}}(a_t) & \text{token level (GRPO)} \\ s_i = \big(\pi_\theta(y_i)/\pi_{\text{old}}(y_i)\big)^{1/|y_i|} & \text{sequence level (GSPO)}\end{cases}$$

with $\hat A$ group-relative or leave-one-out, the KL term $k$ in the loss (weight $w_t = 1$ or $\pi_\theta/\pi_{\text{old}}$) or in the
reward, and $\operatorname{agg}$ one of `core.aggregate`'s three modes (four `--loss-type`s: `dr_grpo` and `dapo` differ only in the constant). TRL implements the same space under other names. This notebook
puts the two side by side: the names (1), the schedule (2), the loss itself on the same tensors (3), then three
things the names hide — what the KL term's *gradient* follows (4), which tokens lose their gradient (5), and how
the methods compare on the tiny task (6).""",
    SETUP,
    r"""md:## 1 · The map: TRL's names → ladder's options → core functions

`ladder.trl_map` keeps the correspondence as data, one row per (TRL name, ladder option): TRL 1.16's
`GRPOConfig` and `RLOOConfig`, and the classic `PPOConfig` of the RLHF articles (TRL ≤ 0.11). A row without a TRL
name is a ladder option TRL has no equivalent for; a row without a ladder option is a TRL setting ladder does
not expose (the note says what ladder does instead). Two rows matter most below: TRL counts **optimiser steps**,
ladder counts **updates** (one rollout of $P\cdot G$ completions, then $\mu \times M$ optimiser steps), so

$$\text{max\_steps} = \text{steps} \cdot \mu \cdot M, \qquad \text{num\_iterations} = \mu, \qquad \text{steps\_per\_generation} = M \quad (\text{gradient\_accumulation\_steps} = 1).$$

**Exercises:** `ex13_leave_one_out.py` is `RLOOConfig`'s advantage and `ex15_soft_update.py` is
`sync_ref_model` / `ref_model_mixup_alpha`. Once they pass, `python -m ladder.run grpo --preset tiny --qlora --algo rloo --use-exercises`
and `python -m ladder.run ppo-sentiment --preset tiny --ref-sync-every 2 --use-exercises` train with them.""",
    """display(Markdown(viz.trl_map_markdown()))""",
    r"""md:## 2 · TRL's schedule vs ours

TRL's `GRPOTrainer` counts **micro-steps** $m$ (one micro-batch each; `gradient_accumulation_steps` of them make one
optimiser step). It generates one batch of `generation_batch_size` completions, cuts it into `steps_per_generation`
slices, and keeps reusing it:

$$\text{generate when } m \bmod (\text{spg}\cdot\text{num\_iterations}) = 0, \qquad \text{micro-batch}_m = \text{buffer}[\,m \bmod \text{spg}\,], \qquad \pi_{\text{old}} = \pi_\theta \text{ at generation time.}$$

When no optimiser step falls between a batch's generation and its last use, $\pi_\theta = \pi_{\text{old}}$ at every use
and TRL skips the old-log-prob forward: exactly when $\text{gas} \bmod (\text{spg}\cdot\text{num\_iterations}) = 0$.
Ladder has no gradient accumulation (a minibatch is one forward and one optimiser step), so TRL's work is

$$\mu = \text{num\_iterations}, \qquad M = \text{spg}/\text{gas}, \qquad P\cdot G = \text{generation\_batch\_size}$$

when `gas` divides `spg`; other cases are in `viz.trl_schedule`'s docstring, and some have no ladder equivalent at all
(an optimiser step that straddles two generation batches, or one that mixes the end of a pass with the start of
the next — ladder's minibatches partition each pass). In the timeline, each box is a micro-step labelled
generation·slice·iteration, the middle row is which policy sampled it → which policy is being trained
(optimiser steps taken so far), and hatching marks $\pi_\theta \neq \pi_{\text{old}}$; the bottom row is the ladder update·pass·minibatch
doing the same optimiser step. (The ladder row is computed from the ladder configuration alone.)""",
    """view = viz.schedule_view(num_iterations=2, steps_per_generation=4, gradient_accumulation_steps=2)
view""",
    """# TRL's own diagram (grpo_trainer.py): 2 GPUs × 3 rows, G = 2, gas = 2, spg = 4 — and four more cases
cases = [dict(gradient_accumulation_steps=2, steps_per_generation=4, per_device_train_batch_size=3, num_processes=2, num_generations=2),
         dict(), dict(num_iterations=2, steps_per_generation=1, gradient_accumulation_steps=2),
         dict(num_iterations=4, steps_per_generation=2), dict(steps_per_generation=3, gradient_accumulation_steps=2)]
for case in cases:
    s = viz.trl_schedule(**case)
    lad = s["ladder"]
    print(f"{case}\\n   TRL: generate every {s['generate_every']} micro-steps, old-logp forward "
          f"{'computed' if s['computes_old_logp'] else 'skipped'}, any π_θ ≠ π_old: {s['off_policy']}\\n   ladder: "
          + (lad["flags"] if lad["exact"] else lad["reason"]))""",
    r"""md:The defaults (`gas = spg = num_iterations = 1`) generate every step and never need $\pi_{\text{old}}$; `num_iterations = 2`
inside one accumulated step also never does (both iterations see the same weights, so they only recompute the same
gradient). `steps_per_generation = 3` with `gas = 2` is the odd one: step 1 mixes the last slice of one generation with
the first of the next, which ladder cannot express. No exercise here: this is bookkeeping, and `core.update` does it.""",
    r"""md:## 3 · Same tensors, same loss

The claim of section 1 is testable: give TRL 1.16's `GRPOTrainer._compute_loss` and `core.compute_loss` the same
tiny model and the same tensors — prompts, completions, $\hat A$, $\log\pi_{\text{old}}$ (shifted so ratios are clipped at
both ends), $\log\pi_{\text{ref}}$ — and compare the loss and the gradient of every weight:

$$\Delta_L = |L_{\text{TRL}} - L_{\text{ladder}}|, \qquad \Delta_\nabla = \max_j \big|\partial_{\theta_j} L_{\text{TRL}} - \partial_{\theta_j} L_{\text{ladder}}\big|.$$

Float32 rounding of two differently chunked log-softmaxes is the only difference: $\Delta_\nabla \approx 10^{-6}$ for
gradient entries of order 1. `tests/test_trl_parity_grpo.py` runs every loss type × ratio level × KL correction × clip
variant; here one at a time (the trainer is built offline on first use, a few seconds). One difference is deliberate:
at the sequence level with `use_bias_correction_kl`, TRL weights each token's KL by the sequence ratio $s_i$, ladder by
the token's own $\pi_\theta/\pi_{\text{old}}$ (the weight that makes *that token's* estimate unbiased) — select `sequence` to see it.

**Exercise:** `ex12_sequence_ratio.py` is `importance_sampling_level="sequence"`; once it passes,
`python -m ladder.run grpo --preset tiny --qlora --algo gspo --use-exercises` trains with it.""",
    """if viz.trl_loss_parity.trl_available():
    view = viz.parity_view("grpo")
    display(view)
else:
    print("pip install 'trl>=1.16' (Python ≥ 3.11) to compare with TRL's GRPOTrainer")""",
    """if viz.trl_loss_parity.trl_available():
    from trl import GRPOConfig
    for loss_type in viz.trl_loss_parity.PARITY_LOSS_TYPES:
        r = viz.trl_parity(loss_type)
        print(f"{loss_type:8s} loss TRL {r['trl_loss']:.7f}  ladder {r['ladder_loss']:.7f}  "
              f"largest gradient difference {r['max_grad_diff']:.1e} (largest entry {r['max_grad']:.2f})")
    print("TRL 1.16's default use_bias_correction_kl:", GRPOConfig.__dataclass_fields__["use_bias_correction_kl"].default)""",
    r"""md:## 4 · KL in the loss: values vs gradients

Notebook 3 asked which estimator has the right *value*. Training uses its *gradient*, and that is another question.
With $a \sim \pi_{\text{old}}$ and $\ell = \log\pi_{\text{ref}}(a) - \log\pi_\theta(a)$, differentiate each term (the sample is fixed):

$$\nabla k_1 = \nabla\log\pi_\theta, \qquad \nabla k_2 = -\ell\,\nabla\log\pi_\theta, \qquad \nabla k_3 = (1 - e^{\ell})\,\nabla\log\pi_\theta .$$

On-policy ($\pi_{\text{old}} = \pi_\theta$), take expectations and compare with the two exact gradients
$\nabla\mathrm{KL}(\pi_\theta\|\pi_{\text{ref}}) = \mathbb{E}_{\pi_\theta}\big[\log\tfrac{\pi_\theta}{\pi_{\text{ref}}}\nabla\log\pi_\theta\big]$ (reverse) and
$\nabla\mathrm{KL}(\pi_{\text{ref}}\|\pi_\theta) = -\mathbb{E}_{\pi_{\text{ref}}}[\nabla\log\pi_\theta] = \mathbb{E}_{\pi_\theta}\big[(1 - \tfrac{\pi_{\text{ref}}}{\pi_\theta})\nabla\log\pi_\theta\big]$ (forward):

* $k_1$ in the loss: $\mathbb{E}[\nabla\log\pi_\theta] = 0$ — zero *expected* gradient, whatever $\pi_{\text{ref}}$ is (one batch's gradient is noise, not 0);
* $k_2$ in the loss: exactly the reverse KL's gradient;
* $k_3$ in the loss — GRPO as written in DeepSeekMath — exactly the **forward** KL's gradient, though its value estimates the reverse KL;
* $\frac{\pi_\theta}{\pi_{\text{old}}}k_3$ (ladder's `--kl-correction on`, TRL's `use_bias_correction_kl`): $\mathbb{E}_{\pi_{\text{old}}}[\frac{\pi_\theta}{\pi_{\text{old}}}k_3] = \sum_a \pi_\theta k_3 = \mathrm{KL}(\pi_\theta\|\pi_{\text{ref}})$ as a function of $\theta$,
  so its gradient is the reverse KL's, on-policy *and* off. The weight's value is 1 until the first optimiser step
  (on the first minibatch of the first pass); its gradient is not 0;
* $k_1$ in the reward (RLOO, `--kl-in reward`): $\hat A \ni -\beta k_1$ on $\pi_{\text{old}}$, a constant, so the gradient is REINFORCE's
  $\mathbb{E}[k_1\nabla\log\pi_\theta]$ — the reverse KL's, on-policy.

`viz.kl_gradients` checks all of it with no sampling: a 5-action categorical, every action enumerated with its
weight $\pi_{\text{old}}(a)$, each term built by `core.kl_estimate` / `core.kl_in_reward`, differentiated by autograd, against autograd on the
exact KLs. Move $\pi_{\text{old}}$ away from $\pi_\theta$ (that is what $\mu > 1$ does): only the weighted $k_3$ stays exact.

**Exercise:** `ex14_kl_in_reward.py`; once it passes, `python -m ladder.run grpo --preset tiny --qlora --algo rloo --use-exercises`
trains with your `kl_in_reward`.""",
    """view = viz.kl_gradient_view(ref_distance=1.0, old_distance=0.0)
view""",
    """for old in (0.0, 0.8):
    g = viz.kl_gradients(ref_distance=1.0, old_distance=old)
    print(f"π_old {'= π_θ (on-policy)' if old == 0 else '≠ π_θ (off-policy)'}:  ‖∇KL rev‖ {g['norm_reverse']:.3f}, "
          f"‖∇KL fwd‖ {g['norm_forward']:.3f}")
    for way in viz.exact_kl_gradients.KL_WAYS:
        print(f"   {way:26s} error vs reverse {g['error_reverse'][way]:.1e}   vs forward {g['error_forward'][way]:.1e}")""",
    r"""md:## 5 · Tokens: who loses the gradient

The clip zeroes a token's gradient where the clipped branch is the smaller one: $\rho > 1+\varepsilon_{\text{high}}$ with
$\hat A > 0$, $\rho < 1-\varepsilon_{\text{low}}$ with $\hat A < 0$. At the token level (GRPO) $\rho_t = \pi_\theta(a_t)/\pi_{\text{old}}(a_t)$ decides per token;
at the sequence level (GSPO)

$$s_i = \exp\Big(\frac{1}{|y_i|}\sum_t \log\frac{\pi_\theta(a_t)}{\pi_{\text{old}}(a_t)}\Big)$$

(`core.sequence_log_ratio`) decides for the whole completion: one token far off is averaged away, or the whole
completion goes. Below, a real batch of the tiny QLoRA preset (4 prompts × 4 completions, sampled by $\pi_{\text{old}}$ = the
preset after 4 GRPO updates; about 15 s, once) after $\mu$ passes of `core.update`. Colour the tokens by
whether they keep their gradient, by $\pi_\theta/\pi_{\text{old}}$, by the sign of $\hat A$, by the exact KL to $\pi_{\text{ref}}$ at that position, or by
the entropy; struck-through tokens lose their gradient at the chosen level (`viz.gradient_mask` asks autograd, through
`core.clipped_surrogate`). The toggle does not retrain: it clips the same $\pi_\theta$ both ways.

GSPO's own $\varepsilon$ is $3\cdot10^{-4}$ / $4\cdot10^{-4}$ (low / high), some 500× smaller than GRPO's 0.2. A sequence ratio
is one number per completion, so clipping it removes the whole completion's gradient — and at that $\varepsilon$ GSPO
still clips a far larger share of the tokens than GRPO does (the GSPO paper reports clipped fractions about two orders
of magnitude above GRPO's). Slide $\varepsilon$ down and watch the bars: at 0.2 the sequence level clips little or nothing,
at 0.05 already more tokens than the token level, and at GSPO's $\varepsilon$ most completions with $\hat A \neq 0$ lose their
gradient whole.

**Exercise:** `ex12_sequence_ratio.py` (see section 3): `python -m ladder.run grpo --preset tiny --qlora --algo gspo --use-exercises`.""",
    """view = viz.token_view(mu=3, eps=0.2, level="token")
view""",
    """for eps in (0.2, 0.05, 3e-3):
    view.controls["eps"].value = eps
    d = view.data
    print(f"ε = {eps:<5}: " + "  |  ".join(f"{level} level: {d['frac_tokens'][level]:4.0%} of the tokens with Â ≠ 0 clipped, "
                                      f"{d['frac_rows'][level]:4.0%} of the completions whole" for level in ("token", "sequence")))
view.controls["eps"].value = 0.2
view.controls["level"].value = "sequence"     # the text above now strikes through at the sequence level""",
    r"""md:## 6 · The league

Finally, the methods against each other on the tiny task, trained by the real rung: `grpo.train` with
`grpo.PRESETS["tiny"]` and each method's `grpo.ALGOS` bundle (the flags `--algo NAME` sets), stopped by the same
**budget of sampled completions** (`max_completions`) rather than of updates — DAPO's dynamic sampling may sample more
per update. The score is greedy accuracy on held-out sums,

$$\text{acc} = \frac{1}{N}\sum_{j=1}^{N} \big[\text{answer}(\text{greedy}(q_j)) = a_j\big],$$

plotted against completions sampled. Here: 3 methods × 192 completions (6 updates of 4 prompts × 8) × 32 held-out
sums, about half a minute — one seed, so small differences are noise. The full table (every `--algo`, π_ref refresh, KL in
the reward, several seeds, 3,840 completions each) is `python benchmarks/variants.py`, with results in
`benchmarks/RESULTS.md`.

**Exercises:** `ex13_leave_one_out.py` and `ex14_kl_in_reward.py` are `rloo`'s two functions
(`python -m ladder.run grpo --preset tiny --qlora --algo rloo --use-exercises`); `ex15_soft_update.py` is the π_ref refresh
(`python -m ladder.run ppo-sentiment --preset tiny --ref-sync-every 2 --use-exercises`).""",
    """view = viz.league_view(methods=("grpo", "dapo", "rloo"), max_completions=192, eval_size=32)
view""",
    """display(Markdown(view.data["table"]))""",
]
