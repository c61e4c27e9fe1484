# ruff: noqa: E501  (LaTeX lines in the notebook text are as long as their equations)
"""The text and code of notebook 8: when a run goes wrong — the run doctor and its failure gallery.

Cells starting with ``md:`` are Markdown; everything else is code. ``notebooks/build.py`` writes them.
Every run is a gallery run (``ladder.doctor.gallery``), made once and cached in ``$LADDER_CACHE/gallery``, where
``tests/test_doctor_gallery.py`` finds the same runs.
"""

from text_toy import SELF_CHECK, SETUP

NOTEBOOKS: dict[str, list[str]] = {}

NOTEBOOKS["8_run_doctor"] = [
    r"""md:# 8 · When a run goes wrong

After this notebook (about 30 minutes, on a CPU; its runs take a few minutes the first time, then come from a cache)
you will be able to:

* ask the doctor whether a run is healthy, and read its answer: what it saw, what it means, what to change;
* tell the two harmless surprises (the loss ≈ 0, the clip fraction 0 at $\mu \cdot M = 1$) from real problems;
* recognise the failures of the gallery by the curve the doctor reads, and see the flags that fix them;
* say where the token budget starves GRPO of its signal, and read a TRL run with the same doctor.

The question asked most about a GRPO or PPO run is not how to write the loss but **is my run healthy?** Every run of
ladder writes `metrics.jsonl`, one record per update, and the doctor reads it (TRL's `trainer_state.json` too):

    python -m ladder.doctor RUN_DIR [--plot] [--json]       # also: python -m ladder.run doctor RUN_DIR

Exit code 0: healthy (harmless notes at most); 1: problems found; 2: not a run (one line). Each **signature** is a
small function of the logged series — the median over a window of the run, never one point — against a threshold
kept, with its reason, in `ladder.doctor.signatures.Thresholds`.""",
    SETUP,
    r"""md:Every run this notebook reads is a seeded tiny run of `ladder.doctor.gallery`, made once and kept in a cache keyed by
its configuration and by a hash of ladder's own code (so a run made by other code is never read). The first time,
the next cell makes them, two at a time; afterwards it finds them.""",
    """import json
import shlex
import statistics

from ladder import run as ladder_run
from ladder import run_cache
from ladder.doctor import diagnose, gallery, read_run, runs
from ladder.doctor.signatures import SIGNATURES, T, WORDING, late, thirds
from ladder.tasks import math_problems
from ladder.viz import doctor_views

def command(flags) -> str:   # flags as a shell command, the gallery's data directory (the products file) written out
    data = str(gallery.default_cache() / "data")
    return shlex.join(flag.replace(gallery.DATA, data) for flag in flags)


runs_made = doctor_views.make_runs()    # the first time: every run, two at a time (minutes); then from the cache
print(f"the {runs_made} runs this notebook reads are in {gallery.default_cache()}")""",
    r"""md:## 1 · Reading a run: the clean bill and two harmless notes

The tiny GRPO preset, shortened to a few updates (`gallery.PRESETS["grpo"]`), is the healthy run every GRPO failure
below is a flag or two away from. The doctor on it:""",
    """p_grad = viz.Predict("A new case: the first optimiser step of a GRPO run, where π_θ = π_old (μ = 1, M = 1) and "
                     "also π_θ = π_ref (nothing trained yet). The loss is the policy term −agg(ρ_t Â_t) plus the KL "
                     "term β·agg(ρ_t k3_t), Â group-centred. Which of the two has a zero gradient at that step?",
                     choices=("the policy term", "the KL term", "both", "neither"))
p_grad.answer = None      # your prediction, before you run on""",
    """healthy = run_cache.run_healthy("grpo")          # from the cache
findings, report = doctor_views.verdict(healthy)
print("python -m ladder.run grpo", " ".join(gallery.healthy_flags("grpo")))
print()
print(report)
found, notes = doctor_views.problems(findings), [f.name for f in findings if f.severity != "problem"]
print(f"\\nverdict: {'problems: ' + ', '.join(found) if found else 'healthy'}; harmless notes: {', '.join(notes) or 'none'}")""",
    r"""md:Here is what the two harmless notes, `loss_zero` and `clip_zero`, say (the verdict above lists those the doctor
found on this run). The preset takes one optimiser step per batch ($\mu = 1$ pass,
$M = 1$ minibatch), so at that step $\pi_\theta = \pi_{\text{old}}$ and every ratio is 1 to float32 rounding
($\pi_{\text{old}}$'s log-probs come from a forward pass of their own), so well inside $[1 - \varepsilon, 1 + \varepsilon]$:

$$\rho_t = \frac{\pi_\theta(a_t)}{\pi_{\text{old}}(a_t)} \approx 1 \;\Rightarrow\; \operatorname{clip}(\rho_t, 1-\varepsilon, 1+\varepsilon) = \rho_t
\quad\text{(nothing clipped)}, \qquad L = -\operatorname{agg}\big(\rho_t\hat A_t\big) + \beta\,\overline{k_3} \approx -\overline{\hat A} \approx 0,$$

because the group-relative $\hat A_i = (R_i - \bar R)/\operatorname{std}(R)$ sums to zero over each group (and $k_3 \approx 0$
next to $\pi_{\text{ref}}$; at $\pi_\theta = \pi_{\text{ref}}$ its gradient is 0 too, as the check above computed). The *value* is ≈ 0, the *gradient* is not: $\nabla_\theta L = -\operatorname{agg}\big(\hat A_t\,\nabla_\theta \log\pi_\theta(a_t)\big)$
weights each token's $\nabla\log\pi$ by its own $\hat A_t$. The doctor calls the loss ≈ 0 harmless only while the gradient norm is alive.""",
    """run = read_run(healthy)
loss, grad, clip = run.get("loss"), run.get("grad_norm"), run.get("clip_frac")
print(f"μ·M = {run.facts.updates_per_batch} optimiser step(s) per batch")
print(f"median |loss|     {statistics.median(abs(v) for v in loss.values):.3g}   (the doctor's 'loss ≈ 0': below T.loss_zero = {T.loss_zero})")
print(f"median grad_norm  {statistics.median(grad.values):.3g}   (alive: above T.grad_alive = {T.grad_alive})")
print(f"clip fraction at each update: {clip.values}")
logp = torch.tensor([-0.3, -1.2, -0.7, -2.0], requires_grad=True)        # π_θ = π_old = π_ref on four tokens
fixed, adv = logp.detach(), torch.tensor([1.0, -1.0, 0.5, -0.5])           # Â: group-centred, summing to 0
terms = {"the policy term": core.clipped_surrogate((logp - fixed).exp(), adv, 0.2).mean(),
         "the KL term": core.kl_estimate(logp, fixed, "k3", old_logp=fixed).mean()}
norms = {name: torch.autograd.grad(term, logp)[0].norm().item() for name, term in terms.items()}
zero = [name for name, n in norms.items() if n < 1e-12]
p_grad.check({0: "neither", 2: "both"}.get(len(zero), zero[0] if zero else "neither"),
             why=", ".join(f"‖∇ {name}‖ = {n:.3g}" for name, n in norms.items()) + ": ∇(ρ k3) = k3 ∇ρ + ρ (1 − e^ℓ) "
                 "∇log π_θ, and k3 = 0, ℓ = 0 at π_θ = π_ref; the policy term weighs each ∇log π_θ by its own Â")""",
    """p_count = viz.Predict(f"Before section 2: the gallery has {len(gallery.GALLERY)} entries, each a run broken by a "
                      "flag or two — " + ", ".join(gallery.GALLERY) + ". How many of the broken runs will make the "
                      "doctor exit with code 1 (a problem, not only harmless notes)?")
p_count.answer = None      # your prediction, before you run on""",
    r"""md:## 2 · The gallery: the failures, broken and fixed

`ladder.doctor.gallery.GALLERY` holds an entry for most failures the doctor names: a seeded tiny run away from its
rung's healthy preset by the *broken* flags, and the flags that fix it, added after them (a later flag wins). Most
entries are a flag or two away; `too_hard` and `format_hacking` are more: they need a data file of products, the
`gsm8k` task and a prompt of their own. For `loss_and_clip_zero`, whose signatures are harmless, the second command
fixes nothing: it is a contrast (with $\mu = 2$ the ratio moves). Each verdict below is the doctor's, on the real run:""",
    """verdicts = {}
for name, failure in gallery.GALLERY.items():
    entry = doctor_views.entry_runs(name)        # the rung's healthy preset, the broken run, the fixed run
    verdicts[name] = {kind: doctor_views.verdict(path)[0] for kind, path in entry.items()}
    broken, fixed = (doctor_views.problems(verdicts[name][kind]) for kind in ("broken", "fixed"))
    print(f"{name} ({failure.rung}{', ' + command(failure.setting) if failure.setting else ''})")
    print(f"   broken: {command(failure.breaks) or '(the preset itself)'}")
    print(f"       → {', '.join(broken) or 'no problem (the signature ' + failure.signature + ' is harmless)'}")
    label = "fixed:  " if broken else "contrast:"          # a harmless signature has nothing to fix
    print(f"   {label} {command(failure.fix)}\\n       → {', '.join(fixed) or 'no problem'}")
harmless = [name for name, v in verdicts.items() if not doctor_views.problems(v["broken"])]
p_count.check(len(verdicts) - len(harmless), why=f"all but {', '.join(harmless)}, whose signature is harmless (section 1)")""",
    r"""md:Not every signature has an entry. The doctor's signatures (`signatures.SIGNATURES`) that no broken run above
shows, and the reading the doctor gives on the one `no_signal` entry (its signature has a too-easy reading too, which
no entry shows):""",
    """shown = {finding.name for v in verdicts.values() for finding in v["broken"]}
missing = [signature.__name__ for signature in SIGNATURES if signature.__name__ not in shown]
print(f"signatures no gallery run shows: {', '.join(missing) or 'none'}")
for name, failure in gallery.GALLERY.items():
    if failure.signature == "no_signal":
        found = [f for f in verdicts[name]["broken"] if f.name == "no_signal"]
        reading = found[0].means if found else "(its broken run does not show no_signal here)"
        print(f"no_signal in the gallery: {name} only — the doctor reads: {reading}")""",
    r"""md:Two entries teach more than their verdict. `clip_too_high` reads the clip fraction of the last pass over each
batch: the share of actions whose ratio had left $[1-\varepsilon, 1+\varepsilon]$ on the side its advantage pushes,
so that the clip removed their gradient (it removes the gradient, it does not hold the ratio: the shared weights and
Adam's momentum still move it). Its broken run narrows the trust region from the preset's $\varepsilon = 0.2$ to 0.1 and
takes a hundred passes at twenty times the rate; the fix keeps $\varepsilon = 0.1$ and restores the preset's $\mu$ and
rate, since it is the size of the steps, not the narrow band, that pushes the ratios out. A high clip fraction is a
warning that the steps leave the trust region — the clip is doing its work, the run is fragile — not by itself a
verdict on the return: CartPole is forgiving, and such a run may solve it all the same. What these runs did:""",
    """solved = {}
for kind in ("broken", "fixed"):
    path = doctor_views.entry_runs("clip_too_high")[kind]
    run, solved[kind] = read_run(path), json.loads((path / "summary.json").read_text())["solved"]
    clip, evals, ratio_max, returns = (run.get(m) for m in ("clip_frac", "eval_return_mean", "ratio_max", "return"))
    fall = max(a - b for a, b in zip(returns.values, returns.values[1:]))
    print(f"{kind:6s} μ = {run.facts.shown('mu')}, lr {run.facts.shown('lr')}: {clip.steps[-1]} updates, "
          f"{'solved' if solved[kind] else 'not solved'} (eval return {evals.values[-1]:.0f} at update {evals.steps[-1]})")
    print(f"{'':6s} clip fraction: median {statistics.median(late(clip)[1]):.2f} over the last half "
          f"(T.clip_high = {T.clip_high}); largest ratio {max(ratio_max.values):.1f}; largest fall of the training "
          f"return from one update to the next {fall:.0f}")
high = "clip_too_high" in doctor_views.problems(verdicts["clip_too_high"]["broken"])
outcome = "solved CartPole all the same" if solved["broken"] else "did not solve CartPole in its budget"
print(f"so here the broken run's clip fraction is {'above' if high else 'not above'} the threshold, and the run {outcome}")""",
    r"""md:`format_hacking` samples products of three-digit numbers, which the tiny model hardly ever solves, at
$\tau = 1.3$: the hotter sampling can cost it the answer format, and with correctness near 0 only the format reward
tells its completions apart, so the format is what the run can learn. The signature asks for exactly that: from the
first third of the run to the last, a reward function rising by at least `T.rise_min` while correctness rises by at
most a quarter as much (the medians of each third, printed below, show what this run did). The doctor's general
advice for it is more weight on correctness (`--reward-weights`); here correctness is (nearly) 0 for every completion, so
no weight can make it tell them apart, and the fix is data the model can learn: `--task arithmetic`, sums. With
`--task arithmetic`, neither `--dataset` nor `--system-prompt` left in the fixed command decides what it sees: the
dataset is ignored (the task brings its own sums), and the prompt it gives is the arithmetic task's own (printed
below), so it changes nothing. What the fixed run really uses (`python -m ladder.run grpo ... --print-config` prints the same), and the
rewards of both runs, update by update:""",
    """rung, flags = gallery.entry_flags("format_hacking", fixed=True)
cfg = ladder_run.make_config(rung, ladder_run.load_rung(rung), [*flags, "--out", "-"])
print(f"task {cfg.problems.task}; dataset {cfg.problems.dataset!r} (ignored by the arithmetic task)")
problems = cfg.problems
prompt, own = math_problems.system_prompt(problems.task, problems.system_prompt), math_problems.system_prompt(problems.task)
print(f"system prompt {prompt!r}: " + ("the arithmetic task's own prompt" if prompt == own else f"not the task's {own!r}"))
for kind in ("broken", "fixed"):
    run = read_run(doctor_views.entry_runs("format_hacking")[kind])
    for reward in ("correctness", "format"):
        s = run.get(f"rewards/{reward}/mean")
        first, middle, last = (statistics.median(third[1]) for third in thirds(s))
        print(f"{kind:6s} {reward:11s} medians of the thirds {first:.2f} → {middle:.2f} → {last:.2f} "
              f"(rise {last - first:+.2f}; T.rise_min = {T.rise_min}): {[round(v, 2) for v in s.values]}")
    hacked = [f.saw for f in diagnose(run) if f.name == "format_hacking"]
    print(f"{kind:6s} the doctor: {'format_hacking, ' + hacked[0] if hacked else 'no rise of the format alone'}")""",
    r"""md:Pick an entry: the curve of the metric its signature reads, on the broken run (red), the fixed run (green) and the
rung's healthy preset (grey), with the window the doctor read circled; the legend and the line above the figure give the doctor's
problems on each run. `python -m ladder.doctor RUN_DIR --plot` draws the same evidence into `RUN_DIR/doctor.png`.""",
    """view = doctor_views.gallery_view("truncation")
view""",
    r"""md:The doctor's whole verdict on the entry picked above, broken and fixed — what it saw (the numbers), what it means,
what to change (ladder's flag and TRL's name), and the notebook section that explains it (for `loss_and_clip_zero`
the "fixed" run is the contrast at $\mu = 2$). Pick another entry and run this cell again:""",
    """name = view.data["entry"]
print(f"{name}: {gallery.GALLERY[name].why}\\n")
for kind in ("broken", "fixed"):
    rung, flags = gallery.entry_flags(name, fixed=kind == "fixed")
    print(f"--- {kind}: python -m ladder.run {rung} {command(flags)}")
    print(doctor_views.verdict(doctor_views.entry_runs(name)[kind])[1], "\\n")""",
    r"""md:## 3 · The token budget: where the signal starves

A completion cut off at `--max-new-tokens` has no answer line, so the correctness reward gives it 0 and the format
reward 0. When every completion of a group is cut off, the group adds no gradient at all (the self-check at the end
asks why). The doctor's `truncation` signature compares two late medians (over the run's
last half) with two thresholds: the share of completions cut off (`completions/clipped_ratio`) against
`Thresholds.truncated_share`, and the share of zero-spread groups (`frac_reward_zero_std`) against
`Thresholds.zero_std_share`. Both must be crossed. The healthy preset, run again at several budgets (each run cached):""",
    """sweep = doctor_views.budget_sweep()
print(f"thresholds: cut off ≥ {T.truncated_share} and zero spread ≥ {T.zero_std_share}")
for budget, point in sweep.items():
    print(f"--max-new-tokens {budget:3d}: cut off {point['cut']:.2f}, zero-spread groups {point['alike']:.2f} "
          f"→ {', '.join(point['problems']) or 'no problem'}")
starved = [b for b, p in sweep.items() if "truncation" in p["problems"]]
clear = [b for b, p in sweep.items() if "truncation" not in p["problems"]]
print(f"truncation diagnosed at {starved}; not at {clear}")
preset = read_run(sweep[max(sweep)]["path"])
print(f"at --max-new-tokens {max(sweep)} the completions are {min(preset.get('completions/min_length').values):.0f} to "
      f"{max(preset.get('completions/max_length').values):.0f} tokens long")
healthy_alike = sweep[max(sweep)]["alike"]
regained = min(b for b, p in sweep.items() if p["alike"] <= healthy_alike + 0.05)
print(f"zero-spread groups back at the preset's level ({healthy_alike:.2f}, within 0.05) first at budget {regained}, "
      f"where the cut-off share is {sweep[regained]['cut']:.2f}")""",
    r"""md:Move the slider. Left: the two shares update by update at one budget; right: their late medians at every budget,
with the doctor's thresholds dashed. Below the shortest completion's length (printed above) every completion is cut
off and nothing is learnt. Between the shortest and the longest some are cut off, and a group
that mixes cut-off completions (reward 0) with finished ones that score above 0 has spread: the zero-spread share can be back at the
preset's level while part of the completions is still cut off (the last line printed above says at which budget, and
how large that part is). The doctor asks for both shares to be high for that reason.""",
    """budget = doctor_views.budget_view(sweep)
budget""",
    r"""md:## 4 · Reading a TRL run

The doctor reads a TRL output directory too: `trainer_state.json`'s `log_history` (or the newest
`checkpoint-N/trainer_state.json`), one record per logging step. TRL's metric names become ladder's through
`ladder.doctor.runs.TRL_NAMES`, so every signature reads the same series from either; `rewards/<name>/mean` and
`/std` are the same in both. A non-finite `loss` or `grad_norm` in a record counts as a non-finite step (TRL applies
such steps; ladder skips them). No TRL run is needed to read the table:""",
    """rows = ["| TRL 1.16 (`log_history`) | ladder (`metrics.jsonl`) |", "|---|---|"]
rows += [f"| `{trl}` | `{ours}` |" for trl, ours in runs.TRL_NAMES.items()]
display(Markdown("\\n".join(rows)))""",
    r"""md:`trainer_state.json` holds the metrics, not the configuration. The facts a signature needs — $\mu$ (`num_iterations`),
the loss type, the learning rate, the token budget — come from `training_args.json`, or from a JSON file of the
`GRPOConfig` fields given as `--trl-config FILE`, or from the log itself (the peak `learning_rate`); what none of them
gives is taken as TRL's default and listed in the report as assumed:""",
    """rows = ["| GRPOConfig field | the doctor's fact | TRL's default, if not given |", "|---|---|---|"]
rows += [f"| `{field}` | `{fact}` | {default if default is not None else '`gradient_accumulation_steps`'} |"
         for field, (fact, default) in runs.TRL_FACTS.items()]
display(Markdown("\\n".join(rows)))""",
    SELF_CHECK,
    """p_budget = viz.Predict("Section 3, a new case: a group of 8 completions, 7 cut off at the budget (reward 0) and one "
                       "finished with reward 1. What Â does the finished one get (group std, as GRPO's)?", decimals=2)
p_budget.answer = None
p_mu2 = viz.Predict("The contrast run of loss_and_clip_zero adds --mu 2. Over the last half of that run, is the median "
                    f"clip fraction 0 (≤ T.clip_zero = {T.clip_zero}), or above it?", choices=("0", "above"))
p_mu2.answer = None
p_trl = viz.Predict("A TRL run at GRPOConfig's default β: will the doctor find a KL to π_ref in its log_history "
                    "(TRL's `kl`, read as ladder's kl_ref)?", choices=("yes", "no"))
p_trl.answer = None
why_alike = viz.Reason("Why does a group whose completions are all cut off add no gradient?",
                       "a cut-off completion has no end-of-text token, so core.last_step_mask marks no last step "
                       "and its tokens' advantages are never filled in: they stay 0",
                       "GRPO masks a cut-off completion's tokens out of the loss by default, as TRL's "
                       "mask_truncated_completions does, so none of its tokens reaches the gradient",
                       "its rewards are all alike (0: no answer line to grade), so every Â_i = (R_i − mean R)/(std + ε) "
                       "is 0, whatever the mask keeps",
                       "a cut-off completion runs the whole budget, so its summed KL penalty is the largest in the "
                       "batch, and its KL term's gradient cancels its policy term's exactly")
why_alike.answer = None
for question in (p_budget, p_mu2, p_trl, why_alike):
    question.ask()
    print()""",
    """one_finished = core.group_relative(torch.tensor([1.0] + [0.0] * 7), 8)
p_budget.check(one_finished[0].item(), why=f"(1 − 1/8)/std: one finished completion gives the whole group spread; the "
                                          f"seven cut off get {one_finished[1].item():+.3f} each")
mu2 = read_run(run_cache.run_gallery_entry("loss_and_clip_zero", fixed=True)).get("clip_frac")
late_clip = statistics.median(mu2.values[len(mu2) // 2:])
p_mu2.check("above" if late_clip > T.clip_zero else "0",
            why=f"median {late_clip:.3g} against T.clip_zero = {T.clip_zero}: the second pass starts from a moved π_θ, "
                f"so the ratios leave 1, but a ratio is clipped only once it leaves [1 − ε, 1 + ε] — most do not")
if viz.trl_loss_parity.trl_available():
    from trl import GRPOConfig
    beta = GRPOConfig.__dataclass_fields__["beta"].default
    p_trl.check("no" if beta == 0 else "yes", why=f"GRPOConfig's default beta is {beta:g}; TRL 1.16 computes and logs "
                f"`kl` (the doctor's {runs.TRL_NAMES['kl']}) only when beta ≠ 0, as ladder's rung computes no KL at β = 0")
why_alike.check("c", why="the mask keeps cut-off tokens unless --mask-truncated; it is the reward that is alike")
viz.tally(p_grad, p_count, p_budget, p_mu2, p_trl, why_alike)""",
]
