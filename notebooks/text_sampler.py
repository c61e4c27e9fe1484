# ruff: noqa: E501  (LaTeX lines in the notebook text are as long as their equations)
"""The text and code of notebook 5's section on the fourth policy, π_sampler (spliced in before its self-check).

Cells starting with ``md:`` are Markdown; everything else is code. ``notebooks/build.py`` writes them.
"""

CELLS: list[str] = [
    r"""md:## The fourth policy: when the sampler is not π_old

Everything so far assumed that $\pi_{\text{old}}$ drew the batch: the trainer's own forward pass, at the start of the
update. Fast trainers do not sample with the trainer. Generation is most of a step's time, so they hand it to an
inference engine such as vLLM — another engine, other kernels, often another precision — and keep $\pi_{\text{old}}$ as the
trainer's forward of the same weights. The two give the same token different log-probs: the batch comes from a
**fourth policy**, $\pi_{\text{sampler}}$. The surrogate means an expectation under $\pi_{\text{old}}$, so

$$\mathbb{E}_{a_t\sim\pi_{\text{old}}}\big[\rho_t(\theta)\,\hat A_t\big] = \mathbb{E}_{a_t\sim\pi_{\text{sampler}}}\big[w_t\,\rho_t(\theta)\,\hat A_t\big],
\qquad w_t = \frac{\pi_{\text{old}}(a_t)}{\pi_{\text{sampler}}(a_t)}, \qquad
\frac{\pi_\theta(a_t)}{\pi_{\text{sampler}}(a_t)} = \rho_t(\theta)\cdot w_t .$$

The weight between the policy being trained and the one that sampled splits in two. $\rho_t(\theta)$ is the ratio of
notebooks 2–4, clipped as ever: the trust region around $\pi_{\text{old}}$. $w_t$ is a constant — $\pi_{\text{old}}$ and
$\pi_{\text{sampler}}$ are both fixed, no gradient flows through it — that corrects for who drew the tokens. Per
token, $w_t$ corrects only the last draw: the prefix $s_t$ before it was written by $\pi_{\text{sampler}}$ too, so the
states themselves come from the wrong distribution. The exact weight of a whole completion is the product
$w_i = \prod_t w_t = \pi_{\text{old}}(y_i)/\pi_{\text{sampler}}(y_i)$. `core.sampler_weights` bounds the weight one
of four ways (`--sampler-correction`), and the result multiplies the policy term of every
token's loss (never the KL to $\pi_{\text{ref}}$; `core.compute_loss`):

| mode | weight of the token's policy term |
|---|---|
| `token_truncate` | $\min(w_t, C_{\max})$ (truncated importance sampling) |
| `token_mask` | $w_t$ if $w_t \le C_{\max}$, else 0: the token leaves the loss |
| `sequence_truncate` | $\min(w_i, C_{\max})$ on every token of completion $i$ |
| `sequence_mask` | $w_i$ if $w_i \le C_{\max}$, else 0: the completion leaves the loss |

(with a lower bound $C_{\min}$ the weight is truncated or masked below it too). ladder's cheaper sampler is the
trainer's weights rounded: `--sampler-dtype bfloat16` samples with every linear layer computing in bfloat16 and
records $\log\pi_{\text{sampler}}$ as it samples; $\pi_{\text{old}}$ stays the float32 forward.

<details><summary>Aside — where the code does it</summary>

The rounding is `policies.low_precision.lower_precision`; $\log\pi_{\text{sampler}}$ comes from the logits the
sampling loop computes anyway (`policies.decode`; under `--sampler-loop generate`, `RecordLogp`). The weights are applied in `core.compute_loss`.
</details>

<details><summary>Aside — in TRL</summary>

TRL samples with vLLM when `use_vllm=True`. `vllm_importance_sampling_mode` picks one of the four modes of the
table above, under the same names; its default is a sequence mode (`sequence_mask`), since the exact weight of a
whole completion is the product of its tokens'. The last aside of this section maps each TRL option to the rung's
flag.
</details>

### Four policies on one batch

The tiny preset (LoRA), loaded by the rung's `load_task` and `load_policy`, after 4 ordinary GRPO updates. Then one
`grpo.grpo_step` with `--sampler-dtype bfloat16 --sampler-correction token_truncate --mu 2` on 4 prompts × 8 completions:

* $\pi_{\text{sampler}}$ — the weights in bfloat16: it draws the batch, its log-probs recorded as it samples;
* $\pi_{\text{old}}$ — the float32 forward of the same weights, on the same tokens;
* $\pi_\theta$ — after the step's two passes of `core.update`, each token's loss weighted by $\min(w_t, 3)$;
* $\pi_{\text{ref}}$ — the same model with the adapter disabled.

It also samples the same prompts, with the same seed, with every sampler of the widget further down (once, then
cached).""",
    """from ladder.viz import sampler_notes

four = viz.four_policies()
for pair, g in viz.sampler_lab.gaps(four).items():
    print(f"|{pair}|: mean {g['mean']:.2e}, max {g['max']:.3f}   ({g['values'].size} tokens)")
print("→", sampler_notes.gaps_note(four))
logged = {k.split("/")[1]: v for k, v in four.record.items() if k.startswith("sampler/")}
print("the step's record, sampler/:", "  ".join(f"{k} {v:.4g}" for k, v in list(logged.items())[:3]))
print("                            ", "  ".join(f"{k} {v:.4g}" for k, v in list(logged.items())[3:]))
display(Markdown(viz.sampler_lab.four_policy_table(four)))""",
    r"""md:The arrow compares the rounding with how far the step's two optimiser passes move a log-prob
($|\log\pi_\theta - \log\pi_{\text{old}}|$), and the rung logs exactly the rounding's numbers (the record printed above;
with a correction, also the weights' range and the share it changed). Where the model is nearly certain of a token,
$\log\pi \approx 0$ whatever the precision; where it is unsure, rounding moves probability between close competitors — the table's title gives the
$\pi_{\text{old}}$ of the token with the largest mismatch on this run. There $w_t$ and $\rho_t(\theta)$ are different numbers for different reasons: $w_t$ is what the
sampler got wrong, $\rho_t(\theta)$ how far the update has moved.

A completion's weight multiplies its tokens': its log is a sum of $T$ terms, whose variances add if they are
independent, so its spread grows like $\sqrt{T}$ while each token's stays put. Its mean drifts too: under the sampler
$\mathbb{E}[\log w_t] = -\mathrm{KL}(\pi_{\text{sampler}}\,\|\,\pi_{\text{old}}) \le 0$, so $\sum_t \log w_t$ sinks like
$-T\cdot\mathrm{KL}$ and a long completion's weight falls below 1 — what $C_{\min}$ bounds:""",
    """spread = viz.sampler_lab.sequence_spread(four.main)
token_w, seq_w = spread["token_w"], spread["seq_w"]
print(f"one token:      std of log w_t {spread['token_std']:.2e}; w_t from {token_w[0]:.4f} to {token_w[1]:.4f}")
print(f"one completion: std of Σ_t log w_t {spread['seq_std']:.2e}; w_i from {seq_w[0]:.4f} to {seq_w[1]:.4f}")
mean_length = four.main.mask.sum(1).float().mean().item()
print(f"√T × one token's std, T = {spread['length']} (the longest completion; their mean length {mean_length:.2f}): "
      f"{spread['sqrt_length_token_std']:.2e}")
display(Image(data=viz.sampler_views.four_policies_figure(four)))""",
    r"""md:On the right, each completion's running sum $\sum_{t<k}\log w_t$ against the $\sqrt{k}$ curve: a nearly
certain token adds almost nothing to it, so the sum moves at the uncertain tokens, where the rounding matters. The tiny task's completions are short; a reasoning completion of thousands of tokens sums a hundred
times more terms, its log-weight spreads some ten times more, and its weight — the exponential of that sum — has a
tail no single token's weight has. That is why, on long completions, a bound $C_{\max}$ reaches the sequence modes
long before the token modes.

This batch's completions are short, so whether it shows that is for the run to say. The first two lines below
compare the largest sequence weight with the largest token weight (where a single uncertain token makes both, they
are about equal): on this batch, then on a hotter sampler's (τ = 1.1). The table then shows what each mode changes on this batch, at
$C_{\max} = 3$ (TRL's default) and at a tight $C_{\max} = 1.001$; the two lines under it say the same in words:""",
    """print(sampler_notes.tail_note(four))
display(Markdown(viz.sampler_lab.modes_markdown(four.main, c_maxes=(3.0, 1.001))))
print(sampler_notes.modes_note(four.main))""",
    r"""md:A bound changes only the weights beyond it. At $C_{\max} = 3$ that takes a token (or a completion) the
sampler under-drew threefold, which rounding at τ = 1 seldom does: where nothing reaches it, the correction reweights
and cuts nothing. A tight bound like 1.001 can reach the few uncertain tokens (the lines above say how many it reached here), and the sequence modes count them in
bigger units, a completion going with its token. Where a bound changes anything, `sequence_mask` takes those
completions out of the loss entirely, where truncation only trims them: the table's mean weights show what each
mode's cut costs on this batch.

### The bias of not correcting, exactly

How much does ignoring $w$ cost, and what does truncating it trade? Notebook 6 §2 computed the KL terms' gradients
exactly on a small categorical; the same here. Six actions (one action is one token), $\pi_{\text{old}} =
\operatorname{softmax}(\theta)$,
$\pi_{\text{sampler}}$ pushed away from it along a fixed direction so that it under-draws the two rewarded actions, and
each action's loss $L(a)$ the clipped surrogate times the sampler's weight (`core.clipped_surrogate`,
`core.sampler_correction`), differentiated by autograd. With every action enumerated:

$$g = \sum_a \pi_{\text{sampler}}(a)\,\nabla L(a), \qquad g^* = \sum_a \pi_{\text{old}}(a)\,\nabla L_{\text{no weight}}(a),$$

$$\text{bias} = \lVert g - g^*\rVert, \qquad \text{variance} = \sum_a \pi_{\text{sampler}}(a)\,\lVert \nabla L(a) - g\rVert^2 ,$$

$g^*$ being the on-policy gradient, what the loss means. A batch averages $N$ draws: its squared error is
$\text{bias}^2 + \text{variance}/N$, and only the second term shrinks with $N$. Write $L_0(a)$ for the unweighted
loss, $L_{\text{no weight}}(a)$ above ($L(a) = \min(w(a), C)\,L_0(a)$ truncated). Truncation has a closed form,
$\pi_{\text{sampler}}(a)\min(w(a), C) = \min\big(\pi_{\text{old}}(a),\, C\,\pi_{\text{sampler}}(a)\big)$, so
$g - g^* = -\sum_a \big(\pi_{\text{old}}(a) - C\,\pi_{\text{sampler}}(a)\big)^+\,\nabla L_0(a)$ — only the actions the
sampler under-draws by more than a factor $C$ — and the bias is its norm; as $\min(w, C)^2 \le C\,w$, the variance is
at most $C\sum_a \pi_{\text{old}}(a)\,\lVert\nabla L_0(a)\rVert^2$.""",
    """exact = viz.exact_sampler_gradients(distance=1.5, samples=64)
print(f"{len(exact['w'])} actions, w = π_old/π_sampler: " + "  ".join(f"{w:.2f}" for w in exact["w"]))
print(f"‖g*‖ = {exact['norm_on_policy']:.4f}; with no correction the bias is {exact['none']['bias']:.4f}, "
      f"{exact['none']['bias'] / exact['norm_on_policy']:.0%} of it")
print(f"Σ_a π_old(a)·‖∇L₀(a)‖² = {exact['second_moment_old']:.4f}, so at C_max = 3 the variance is at most "
      f"{3 * exact['second_moment_old']:.4f}")
tight, none = exact["sweep"]["token_truncate"][0], exact["none"]
masked = viz.exact_sampler_gradients(distance=1.5, samples=64, c_maxes=(3.0,))["sweep"]["token_mask"][0]
worse = lambda a, b: "worse" if a > b else "not worse"
print(f"truncated at C_max = {exact['c_maxes'][0]:g}: bias {tight['bias']:.4f}, error {tight['mse']:.4f} — "
      f"{worse(tight['mse'], none['mse'])} than no correction's {none['bias']:.4f}, {none['mse']:.4f}")
print(f"token_mask at C_max = 3: bias {masked['bias']:.4f}, {worse(masked['bias'], none['bias'])} than no correction's")
display(Markdown(viz.sampler_lab.bias_variance_markdown(exact)))
check = viz.sampler_lab.monte_carlo_check(distance=1.5, c_max=3.0, n=100000, seed=0)
print(f"check, {check['n']} seeded draws truncated at C_max = 3: ‖mean − exact mean‖ {check['mean_error']:.4f}, "
      f"variance {check['variance']:.4f} (exact {check['exact_variance']:.4f})")
display(Image(data=viz.sampler_views.bias_variance_figure(exact)))""",
    r"""md:No batch size removes the uncorrected bias. The full weight removes it and pays in variance: the rare draws of
an under-drawn right answer arrive with a large $w$. Truncation trades one for the other: as $C_{\max}$ falls the bias
grows and the variance shrinks, and for a batch of $N$ draws their sum is least at the grey line — more draws move it
to a larger $C_{\max}$, since only the variance shrinks with $N$. Too tight a bound can be worse than none: near
$C_{\max} = 1$ truncation also cuts the weights that pulled $g$ towards $g^*$. Masking at $C_{\max} = 3$
(`token_mask`) drops the under-drawn right answers altogether. The two lines above the table compare each with no
correction at all, and say whether it came out worse on this small categorical: a mask is for rare outliers (a token the engine got wrong),
not for a sampler that is off everywhere.

The widget below draws the batch's prompts with each sampler: the weights in float32 (`same`), float16 or bfloat16,
at the trainer's temperature $\tau = 1$ or another — a sampler whose temperature (or top-p cut) differs from the
trainer's is a common real mismatch. Everything is computed above, so the controls only re-read numbers.""",
    r"""md:**Predict first.** (1) Which of the two samplers, float16 or bfloat16 (both 16 bits a number), is further from
$\pi_{\text{old}}$, and why? (2) Set the sampler's τ to 1.1, ten percent hotter than the trainer. Is the mismatch larger or
smaller than bfloat16's rounding, and are most token weights $w_t$ above 1 or below? (3) Of the
widget's four settings — float16 and bfloat16 at τ = 1, bfloat16 at τ = 1.1 and at τ = 0.8 — at which does the largest
token weight $w_t$ come nearest to $C_{\max} = 3$, and why there?""",
    """view = viz.sampler_view(sampler="bfloat16", temperature=1.0, c_max=3.0)
view""",
    """settings = (("float16", 1.0), ("bfloat16", 1.0), ("bfloat16", 1.1), ("bfloat16", 0.8))
display(Markdown(viz.sampler_lab.samplers_markdown(four, settings, c_max=3.0)))
mean = {d: viz.sampler_lab.mismatch(four.batches[(d, 1.0)])["sampler/logp_diff_mean"] for d in ("float16", "bfloat16")}
further = "bfloat16" if mean["bfloat16"] > mean["float16"] else "float16"
print(f"bfloat16's mean mismatch / float16's: {mean['bfloat16'] / mean['float16']:.1f} ({further} is further from π_old)")
hot_mean = viz.sampler_lab.mismatch(four.batches[("bfloat16", 1.1)])["sampler/logp_diff_mean"]
print(f"bfloat16 at τ = 1.1, mean mismatch / at τ = 1: {hot_mean / mean['bfloat16']:.1f} "
      f"(the temperature's mismatch is {'larger' if hot_mean > mean['bfloat16'] else 'not larger'} than the rounding's)")
print(sampler_notes.cold_note(four, ("bfloat16", 1.1)))
largest_at = {setting: viz.sampler_lab.sequence_spread(four.batches[setting])["token_w"][1] for setting in settings}
print("largest w_t: " + ", ".join(f"{d} at τ = {t}: {w:.2f}" for (d, t), w in largest_at.items())
      + f" — nearest to 3: {' at τ = '.join(map(str, min(largest_at, key=lambda k: abs(largest_at[k] - 3))))}")
largest = max(viz.sampler_lab.sequence_spread(b)["token_w"][1] for b in four.batches.values())
largest_seq = max(viz.sampler_lab.sequence_spread(b)["seq_w"][1] for b in four.batches.values())
print(f"the largest w_t at any setting of the widget: {largest:.2f}; the largest w_i: {largest_seq:.2f}")
print(sampler_notes.cold_note(four, ("bfloat16", 0.8)))
hot = viz.sampler_lab.kept(four.batches[("bfloat16", 1.1)], 1.01, 1 / 1.01)["sequence_mask"]
print(sampler_notes.c_max_note(four, 3.0))
print(f"τ = 1.1, C_max = 1.01, C_min = 1/C_max: sequence_mask drops {hot['changed']} of {hot['of']} completions")""",
    r"""md:<details><summary>Answer</summary>

(1) The first line above says which, and by how much. bfloat16 keeps 8 significant bits (7 stored, one implied) and
float16 11 (10 + 1): bfloat16's roundings are each 8 times coarser ($2^{11-8}$), so it is expected further. float16 buys its precision with range (nothing above 65504), which is why engines mostly
sample in bfloat16 and live with the larger mismatch. (2) The second line compares them: a ten percent temperature
mismatch moves every token's probability, where rounding moves only the uncertain ones a little. A hotter sampler
flattens the distribution, so the likely tokens — most of a completion — get $w_t$ a little above 1, and the unlikely
tokens it now draws more often get $w_t$ well below 1 (the line `bfloat16 at τ = 1.1: …` prints the share above 1).
So its token weights nearly all lean the same way, and a completion's product of them grows sooner than at τ = 1 (the
two lines above the modes table compared its largest sequence and token weights). (3) The line `largest w_t: …` says which. A large $w_t = \pi_{\text{old}}/\pi_{\text{sampler}}$
is a token the sampler under-drew. Rounding at τ = 1 moves only the uncertain tokens, and a little; a hotter sampler
(τ = 1.1) over-draws the unlikely tokens, whose $w_t$ falls below 1, and under-draws the likely ones only slightly; a
colder sampler (τ = 0.8) over-draws the likely tokens and under-draws every other one, so when it does draw an unlikely
token its weight is large — the setting expected nearest to 3. $C_{\max}$ only bounds from above, so at 3 it changes a
weight only where the sampler under-drew a token, or a whole completion, more than threefold: the line
`at C_max = 3 …` lists every setting where a mode did. Which of the two comes nearer, a token or a completion, is the run's: the τ = 0.8 line above compares them.
A cold sampler gives few tokens $w_t$ above 1 (that line prints how few) — the likely tokens it over-draws, most of
every completion, get $w_t$ a little below 1 —, so a completion's product of them mostly shrinks and a single
under-drawn token keeps its whole weight; only a completion holding several under-drawn tokens multiplies past it.
The small weights a hot sampler produces are reached by $C_{\min}$ — tick *C_min = 1/C_max* and slide $C_{\max}$
down: the sequence modes then take most or all of the completions (the last line prints how many).
</details>

<details><summary>Aside — in TRL, and in the grpo rung</summary>

TRL corrects by default whenever vLLM samples (`vllm_importance_sampling_correction=True`, mode `sequence_mask`,
$C_{\max} = 3$, no $C_{\min}$). The default of the grpo and agent rungs, `--sampler-dtype auto`, does the same
where a bfloat16 sampler pays: where the hardware computes bfloat16 natively (a recent GPU, a CPU with AMX or
AVX512-BF16) and the model has at least 100M weights (Qwen2.5-0.5B has 494M), it samples in bfloat16 with TRL's
correction (`sequence_mask`; `token_mask` under `--loss-type vespo`, which takes per-token weights only), and the
run's first line says so. Elsewhere it samples with the trainer's own weights and corrects nothing unless asked; so
does the tiny model (under 1M weights), so that what the course's runs learn never depends on the processor, and
the tiny preset pins `--sampler-dtype same` (so: no correction) besides. The table the next cell prints maps each
TRL option to its flag.

With `--off-policy-mask δ` (TRL's `off_policy_mask_threshold`, DeepSeek-V3.2) the rung also drops a completion
whose advantage is negative *and* whose mean $\log\pi_{\text{sampler}} - \log\pi_\theta$ over its tokens exceeds δ
(`core.off_policy_keep`; logged as `off_policy/masked_frac`): a bad completion the current policy would no longer
write teaches little and can destabilise. On the tiny preset:

```bash
python -m ladder.run grpo --preset tiny --sampler-dtype bfloat16 --off-policy-mask 0.5
```
(with `--sampler-dtype bfloat16`, `--sampler-correction auto` is `sequence_mask`).
</details>""",
    """display(Markdown(viz.sampler_lab.trl_markdown()))""",
    r"""md:**Exercise:** `ex21_sampler_weights.py` asks for `sampler_weights`: the four modes, $C_{\min}$ and $C_{\max}$.""",
]
