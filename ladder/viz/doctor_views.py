"""Notebook 8's widgets, on real runs of the failure gallery (``ladder.doctor.gallery``, cached in
``gallery.default_cache()``): every curve and every verdict is read from a run's ``metrics.jsonl`` by the doctor.

    make_runs       every run the notebook reads, made (or found in the cache) two at a time
    entry_runs      a gallery entry's three runs: the rung's healthy preset, the broken run and the fixed one
    verdict         the doctor's findings on a run directory, and its text report
    gallery_view    a dropdown of the entries: the metric(s) the entry's signature reads, healthy / broken / fixed
    budget_sweep    the healthy tiny grpo run at each token budget (--max-new-tokens): the late medians the
                    truncation signature reads, and the doctor's problems
    budget_view     a slider over the budgets: both shares against the doctor's thresholds (``Thresholds``)
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import ipywidgets as widgets
from matplotlib.figure import Figure

from ladder.doctor import diagnose, read_run
from ladder.doctor.gallery import GALLERY
from ladder.doctor.report import text_report
from ladder.doctor.signatures import Finding, T, late, med
from ladder.run_cache import run_gallery_entry, run_healthy
from ladder.viz._widget import View

BUDGETS = (12, 20, 24, 26, 28)  # --max-new-tokens; 28 is the tiny preset's own, its sums take 24–27 tokens
COLOURS = {"healthy": "0.55", "broken": "tab:red", "fixed": "tab:green"}
_CONTROL = {"continuous_update": False, "style": {"description_width": "initial"}}


def verdict(run_dir: Path) -> tuple[list[Finding], str]:
    """(the doctor's findings, problems first; its text report) on one run directory."""
    run = read_run(run_dir)
    findings = diagnose(run)
    return findings, text_report(run, findings)


def problems(findings: list[Finding]) -> list[str]:
    return [f.name for f in findings if f.severity == "problem"]


def entry_runs(name: str) -> dict[str, Path]:
    """{"healthy", "broken", "fixed"} → run directory of gallery entry ``name`` (each made once, then cached)."""
    return {"healthy": run_healthy(GALLERY[name].rung), "broken": run_gallery_entry(name),
            "fixed": run_gallery_entry(name, fixed=True)}


def make_runs(workers: int = 2) -> int:
    """Make every run this notebook reads that the cache lacks — each entry's three runs and the token-budget
    sweep — ``workers`` at a time (each run is one process on one thread; a run another process is making is
    waited for, not made twice). Returns how many runs there are."""
    jobs = [lambda name=name: entry_runs(name) for name in GALLERY]
    jobs += [lambda budget=budget: run_healthy("grpo", extra=("--max-new-tokens", str(budget))) for budget in BUDGETS]
    with ThreadPoolExecutor(max_workers=workers) as pool:
        made = [future.result() for future in [pool.submit(job) for job in jobs]]
    return len({str(p) for runs in made for p in (runs.values() if isinstance(runs, dict) else [runs])})


# The series each signature reads first: what an entry's figure shows when its broken run, on this machine, does not
# show the signature (a run that ends at other weights on another CPU).
READS = {"clip_zero": "clip_frac", "truncation": "completions/clipped_ratio", "no_signal": "frac_reward_zero_std",
         "format_hacking": "rewards/format/mean", "kl_blowup": "kl_ref", "nothing_moving": "reward",
         "sampler_mismatch": "sampler/corrected_frac", "nonfinite": "skipped_steps",
         "critic_not_learning": "explained_variance", "entropy_collapse": "entropy", "clip_too_high": "clip_frac"}


def entry_metric(name: str, findings: list[Finding]) -> str:
    """The metric the entry's signature reads: its finding's on the broken run, else the one it reads first."""
    signature = GALLERY[name].signature
    return next((f.metric for f in findings if f.name == signature), READS[signature])


# The signatures that compare more than one series: every (metric, threshold) they read, each drawn in its own panel.
PANELS = {"truncation": (("completions/clipped_ratio", "truncated_share"), ("frac_reward_zero_std", "zero_std_share"))}


def _plot_metric(ax, name: str, metric: str, runs: dict[str, Path], found: dict[str, list[Finding]],
                 threshold: str | None) -> dict:
    """One metric of entry ``name`` on healthy / broken / fixed runs, the broken run's evidence circled, and the
    doctor's threshold ``Thresholds.<threshold>`` dashed when given. Returns the curves drawn."""
    data = {}
    widths = {"healthy": 5, "broken": 1.5, "fixed": 1.5}  # the healthy run a wide band: the fixed one is often it
    for kind, path in runs.items():
        s = read_run(path).get(metric)
        data[kind] = {"steps": s.steps if s else [], "values": s.values if s else [], "problems": problems(found[kind])}
        same = " (= the healthy run)" if kind == "fixed" and path == runs["healthy"] else ""
        if s is not None:
            ax.plot(s.steps, s.values, color=COLOURS[kind], lw=widths[kind], alpha=0.45 if kind == "healthy" else 1,
                    marker="" if kind == "healthy" else ".",
                    label=f"{kind}{same}: {', '.join(problems(found[kind])) or 'no problem'}")
    evidence = next((f for f in found["broken"] if f.name == GALLERY[name].signature), None)
    if evidence is not None and evidence.metric == metric:
        ax.scatter(evidence.steps, evidence.values, s=60, facecolors="none", edgecolors="k", zorder=3,
                   label="the evidence the doctor read")
    if threshold is not None:
        ax.axhline(getattr(T, threshold), color="k", ls="--", lw=0.8, label=f"{threshold} {getattr(T, threshold)}")
    ax.set_xlabel("update")
    ax.set_ylabel(metric)
    ax.set_title(f"{name}: {metric}", fontsize=9)
    ax.legend(fontsize=7, loc="best")
    return data


def _draw_entry(values: dict) -> tuple[Figure, dict]:
    name = values["entry"]
    runs = entry_runs(name)
    found = {kind: verdict(path)[0] for kind, path in runs.items()}
    metric = entry_metric(name, found["broken"])
    panels = PANELS.get(GALLERY[name].signature, ((metric, None),))
    fig = Figure(figsize=(7.5 if len(panels) == 1 else 10.5, 3.0))
    data = {"entry": name, "metric": metric}
    for i, (shown, threshold) in enumerate(panels):
        curves = _plot_metric(fig.add_subplot(1, len(panels), i + 1), name, shown, runs, found, threshold)
        if shown == metric:
            data.update(curves)
        else:
            data[shown] = curves
    fig.tight_layout()
    data["summary"] = (f"broken → {', '.join(problems(found['broken'])) or 'no problem'}; fixed → "
                       f"{', '.join(problems(found['fixed'])) or 'no problem'}")
    return fig, data


def gallery_view(entry: str = "truncation") -> View:
    """A dropdown over ``GALLERY``: the broken run's, the fixed run's and the healthy preset's curve of the metric the
    entry's signature reads (each of them, with its threshold, where it reads several: ``PANELS``), the evidence
    window circled; the doctor's problems on each in the legend."""
    dropdown = widgets.Dropdown(options=list(GALLERY), value=entry, description="entry", **_CONTROL)
    return View({"entry": dropdown}, _draw_entry, title="The failure gallery: healthy, broken, fixed")


def budget_sweep(budgets: tuple[int, ...] = BUDGETS) -> dict[int, dict]:
    """For each token budget, the healthy tiny grpo run with ``--max-new-tokens`` set to it: the late medians of
    the cut-off share and the zero-spread share (what ``signatures.truncation`` compares with ``Thresholds``),
    the series themselves, and the doctor's problems."""
    sweep = {}
    for budget in budgets:
        path = run_healthy("grpo", extra=("--max-new-tokens", str(budget)))
        run = read_run(path)
        cut, alike = run.get("completions/clipped_ratio"), run.get("frac_reward_zero_std")
        sweep[budget] = {"cut": med(late(cut)), "alike": med(late(alike)), "cut_series": cut,
                         "alike_series": alike, "problems": problems(diagnose(run)), "path": path}
    return sweep


def _draw_budget(values: dict, sweep: dict[int, dict]) -> tuple[Figure, dict]:
    budget = values["max_new_tokens"]
    point = sweep[budget]
    fig = Figure(figsize=(9.5, 3.0))
    left, right = fig.add_subplot(1, 2, 1), fig.add_subplot(1, 2, 2)
    left.plot(point["cut_series"].steps, point["cut_series"].values, color="tab:orange", marker=".",
              label="cut off (completions/clipped_ratio)")
    left.plot(point["alike_series"].steps, point["alike_series"].values, color="tab:purple", marker=".",
              label="zero-spread groups (frac_reward_zero_std)")
    left.set_title(f"--max-new-tokens {budget}: update by update", fontsize=9)
    left.set_xlabel("update")
    left.set_ylim(-0.05, 1.05)
    budgets = list(sweep)
    right.plot(budgets, [sweep[b]["cut"] for b in budgets], color="tab:orange", marker="o", label="cut off")
    right.plot(budgets, [sweep[b]["alike"] for b in budgets], color="tab:purple", marker="o", label="zero spread")
    right.axvline(budget, color="0.6", lw=0.8)
    right.set_title("median over the run's last half, by budget", fontsize=9)
    right.set_xlabel("--max-new-tokens")
    right.set_ylim(-0.05, 1.05)
    for ax in (left, right):
        ax.axhline(T.truncated_share, color="tab:orange", ls="--", lw=0.8, label=f"truncated_share {T.truncated_share}")
        ax.axhline(T.zero_std_share, color="tab:purple", ls="--", lw=0.8, label=f"zero_std_share {T.zero_std_share}")
    left.legend(fontsize=7, loc="best")
    fig.tight_layout()
    summary = (f"budget {budget}: cut off {point['cut']:.2f}, zero spread {point['alike']:.2f} → the doctor: "
               f"{', '.join(point['problems']) or 'no problem'}")
    return fig, {"max_new_tokens": budget, "cut": point["cut"], "alike": point["alike"],
                 "problems": point["problems"], "summary": summary}


def budget_view(sweep: dict[int, dict], budget: int = BUDGETS[2]) -> View:
    """A slider over the budgets of ``sweep``: the two shares the truncation signature reads, against its two
    thresholds (dashed, from ``Thresholds``), update by update and as late medians by budget."""
    slider = widgets.SelectionSlider(options=list(sweep), value=budget, description="max_new_tokens", **_CONTROL)
    return View({"max_new_tokens": slider}, lambda values: _draw_budget(values, sweep),
                title="The token budget against the groups that teach nothing")
