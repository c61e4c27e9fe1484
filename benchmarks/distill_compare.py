"""Learning from a teacher, four ways (five arms), per unit of compute: the tiny math student (it forgets to carry)
and its teacher (it always carries), held-out greedy accuracy against the compute each way spent.

    SFT on the teacher's samples   the teacher samples; the student follows its tokens: Â_t = 1 on each of them, which
                                   at μ = 1 is the gradient of the teacher's samples' log-likelihood (off-policy
                                   distillation; the clipped surrogate's ratio is 1)
    on-policy distillation         the student samples; the teacher scores every token: Â_t = Σ_{t'≥t} γ^(t'−t)·r_t',
                                   r_t = −(log π_θ − log π_teacher)(y_t) (the distill rung), at the rung's γ = 0 (each
                                   token's own: GKD's β = 1) and at γ = 1 (the whole completion's reverse KL)
    GRPO (correctness)             the student samples; one rule reward per completion, group-relative Â
    distillation, then GRPO        on-policy distillation for the first half of the updates, GRPO for the rest

Every arm is the distill rung's recipe (``ladder.rungs.distill``) with its preset (8 problems × 4 completions per
update, LoRA r 16, lr 1e-3, μ = 1, 30 updates, no π_ref): only the rollout (who samples) and the credit (which Â)
change, through the same ``grpo_step`` and ``core.update``. Compute is counted, not modelled: a hook on each model's
transformer counts the token positions of every forward pass — sampling (one position per new token, the prompt once),
scoring, and training (counted 3×: a forward and a backward of twice its cost) — and its FLOPs are 2 × that model's
parameters × positions. The held-out evaluations are measurement, not training, and are not counted.

At the end of each run, on 32 held-out problems × 4 samples (the same for every arm of a seed): the student's
teacher-forced NLL per token on the teacher's samples (the off-policy fit) and the reverse KL per token on the student's
own samples, Σ_t (log π_θ − log π_teacher)/tokens (what the teacher thinks of where the student goes), beside the
accuracy.

    python benchmarks/distill_compare.py [--seeds 0 1 2] [--variant native|avx2|no-simd] [--runs DIR] [--reuse]
        [--jobs 2] [--results FILE] [--figure FILE]
    python benchmarks/distill_compare.py --one ARM --seed S --out DIR      (one run, in this process)

About 20 s a run on one core of this machine. The results of several variants go to one JSON file (``--results``,
each variant's runs replaced by its own), the figure of the native runs to ``--figure``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path

import torch

from ladder import core
from ladder.policies.causal_lm import lm_batch
from ladder.rungs import distill, grpo
from ladder.rungs.grpo.step import same_for_every_token, sample_completions, sample_groups
from ladder.tasks import math_problems
from ladder.viz import distill_study
from ladder.viz.distill_study import curve

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

ARMS = {"sft": "SFT on the teacher's samples", "distill": "on-policy distillation (γ = 0)",
        "distill_g1": "on-policy distillation (γ = 1)", "grpo": "GRPO (correctness)",
        "distill_grpo": "distillation (γ = 0), then GRPO"}
OPTIONS = {"distill_g1": {"discount": 1.0}}  # the rest: the distill rung's tiny preset and its default γ = 0
PROBE_PROBLEMS, PROBE_SEED = 32, 1234
KEPT = ("step", "compute/flops", "compute/student_positions", "compute/teacher_positions", "compute/train_positions",
        "distill/reverse_kl", "rewards/correctness/mean", "phase")


# ------------------------------------------------------------------------------------------------ counting compute
class Positions:
    """Token positions through a model's transformer, split into forwards without grad and training forwards."""

    def __init__(self, model: torch.nn.Module):
        body = next(m for m in model.modules() if hasattr(m, "embed_tokens") and hasattr(m, "layers"))
        self.params = sum(p.numel() for p in body.parameters())
        self.forward, self.train, self.counting = 0, 0, True
        body.register_forward_pre_hook(self.count, with_kwargs=True)

    def count(self, module, args, kwargs) -> None:
        if not self.counting:
            return
        ids = kwargs.get("input_ids", args[0] if args else None)
        shape = (ids if ids is not None else kwargs["inputs_embeds"]).shape
        positions = shape[0] * shape[1]
        if torch.is_grad_enabled():
            self.train += positions
        else:
            self.forward += positions

    def flops(self) -> float:
        """2·N per position forward, 6·N per training position (forward + backward)."""
        return 2.0 * self.params * (self.forward + 3 * self.train)


# ------------------------------------------------------------------------------------------------ the arms
def phase_of(arm: str, k: int, updates: int) -> str:
    """Who samples and which Â at update k: "sft", "distill" or "grpo"."""
    if arm == "distill_grpo":
        return "distill" if k < updates // 2 else "grpo"
    return "distill" if arm == "distill_g1" else arm


def teacher_tokens_credit(rollout, advantages, cfg) -> torch.Tensor:
    """SFT as a policy gradient: Â_t = 1 on every token the teacher sampled."""
    return rollout.mask.float()


def distill_credit(rollout, advantages, cfg) -> torch.Tensor:
    """The teacher's per-token rewards summed from t on (γ = --discount); the rule reward only logged."""
    mask = rollout.mask.to(rollout.token_rewards.device)
    return core.discounted_returns(rollout.token_rewards, mask, cfg.discount)


def phase_step(step, teacher, phase: str):
    """The distill rung's step with the phase's rollout and credit."""

    def teacher_samples(student_step):
        return sample_groups(replace(student_step, policy=teacher))

    rollouts = {"sft": teacher_samples, "distill": distill.with_teacher(teacher), "grpo": sample_groups}
    credits = {"sft": teacher_tokens_credit, "distill": distill_credit, "grpo": same_for_every_token}
    return replace(step, rollout=rollouts[phase], credit=credits[phase])


def arm_recipe(arm: str):
    """The distill rung's recipe class for ``arm``: each update's phase, compute counted, the probe in the summary."""

    class Arm(distill.Distill):
        def update(self) -> dict:
            if not hasattr(self, "positions"):
                self.positions = (Positions(self.step.policy.model), Positions(self.teacher.model))
                self.base_step = self.step
            phase = phase_of(arm, self.run.step, self.cfg.steps)
            self.step = phase_step(self.base_step, self.teacher, phase)
            record = grpo.GRPO.update(self)
            student, teacher = self.positions
            return {**record, "phase": phase, "compute/flops": student.flops() + teacher.flops(),
                    "compute/student_positions": student.forward + student.train,
                    "compute/train_positions": student.train, "compute/teacher_positions": teacher.forward}

        def evaluate(self) -> dict:
            for counter in getattr(self, "positions", ()):
                counter.counting = False
            try:
                return super().evaluate()
            finally:
                for counter in getattr(self, "positions", ()):
                    counter.counting = True

        def summary(self) -> dict:
            for counter in getattr(self, "positions", ()):
                counter.counting = False
            return {**super().summary(), "arm": arm, "probe": probe(self)}

    return Arm


# ------------------------------------------------------------------------------------------------ the probe
def per_token_logps(recipe, rollout) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """log π_θ and log π_teacher of every completion token of ``rollout``, and its mask, ``[n, T]``."""
    step = recipe.base_step
    inputs = lm_batch(rollout.prompt_ids, rollout.prompt_mask, rollout.completion, rollout.mask,
                      step.tokenizer.pad_token_id)
    with torch.no_grad():
        student = step.policy.old_logp_and_values(inputs)[0].float()
        teacher = recipe.teacher.old_logp_and_values(inputs)[0].float()
    return student, teacher, inputs.mask.float()


def probe(recipe) -> dict:
    """On held-out problems: the student's NLL per token on the teacher's samples (the off-policy fit), the reverse KL
    per token on its own samples (the on-policy one), and each side's share correct."""
    problems = recipe.task.held_out[:PROBE_PROBLEMS]
    step, found = recipe.base_step, {}
    for who, sampler in (("teacher", replace(step, policy=recipe.teacher)), ("student", step)):
        torch.manual_seed(PROBE_SEED)
        with torch.no_grad():
            rollout = sample_completions(sampler, problems)
        student, teacher, mask = per_token_logps(recipe, rollout)
        tokens = mask.sum().item()
        found[f"{who}_samples_correct"] = rollout.per_function["correctness"].float().mean().item()
        found[f"{who}_samples_student_nll"] = -(student * mask).sum().item() / tokens
        found[f"{who}_samples_reverse_kl"] = ((student - teacher) * mask).sum().item() / tokens
    return found


# ------------------------------------------------------------------------------------------------ one run
def run_one(arm: str, seed: int, out: Path) -> dict:
    """One arm, one seed, in this process: the distill rung's loop with the arm's recipe; its summary."""
    cfg = distill.Config(**{**distill.PRESETS["tiny"], "reward_weights": "1", "seed": seed, "eval_every": 5,
                            "print_samples": 0, **OPTIONS.get(arm, {})}, out=str(out), overwrite=True, progress=False)
    recipe = arm_recipe(arm)
    return grpo.train_on(cfg, distill.NAME, lambda cfg, run: distill.build(cfg, run, recipe),
                         load_task_model=lambda cfg: math_problems.resolve_math_model(cfg.model))


def read_run(out: Path, arm: str, seed: int, variant: str) -> dict:
    """A finished run as the study keeps it: its records (the kept fields) and its summary's probe."""
    records = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    summary = json.loads((out / "summary.json").read_text())
    kept = [{k: round(r[k], 6) if isinstance(r[k], float) else r[k] for k in KEPT if k in r} for r in records]
    return {"arm": arm, "label": ARMS[arm], "seed": seed, "variant": variant, "records": kept,
            "evals": summary["evals"], "probe": summary["probe"], "teacher_accuracy": summary["teacher_accuracy"]}


def launch(arm: str, seed: int, out: Path, reuse: bool) -> None:
    """``--one ARM --seed S --out DIR`` in a process of its own (it inherits the kernel variant's environment)."""
    if reuse and (out / "summary.json").exists():
        return
    command = [sys.executable, str(Path(__file__).resolve()), "--one", arm, "--seed", str(seed), "--out", str(out)]
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


# ------------------------------------------------------------------------------------------------ the study
def table(runs: list[dict]) -> str:
    """One line per run: its accuracy at the start and the end, the compute it spent, the probe."""
    lines = [f"{'variant':8} {'seed':>4}  {'arm':30} {'acc 0':>6} {'acc end':>7} {'GFLOPs':>7}  "
             f"{'NLL on teacher samples':>22} {'rev. KL on own samples':>22}"]
    for run in runs:
        flops, accuracy, _ = curve(run)
        lines.append(f"{run['variant']:8} {run['seed']:>4}  {run['label']:30} {accuracy[0]:6.3f} {accuracy[-1]:7.3f} "
                     f"{flops[-1]:7.1f}  {run['probe']['teacher_samples_student_nll']:22.3f} "
                     f"{run['probe']['student_samples_reverse_kl']:22.3f}")
    return "\n".join(lines)


def figure(runs: list[dict], path: Path) -> None:
    """The notebook's figure (``ladder.viz.distill_study.figure``) of the native runs, to ``path``."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    fig = distill_study.figure(runs, ARMS)
    FigureCanvasAgg(fig).print_png(str(path))


def study(args) -> list[dict]:
    """Every (seed, arm) of the variant, two processes at a time; the finished runs read back."""
    from gallery_margins import VARIANTS
    os.environ.update(VARIANTS[args.variant])  # every run is a subprocess: it inherits the kernel variant
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    plan = [(arm, seed, Path(args.runs) / args.variant / f"{arm}-seed{seed}") for seed in args.seeds for arm in ARMS]
    with ThreadPoolExecutor(args.jobs) as pool:
        list(pool.map(lambda job: launch(*job, args.reuse), plan))
    return [read_run(out, arm, seed, args.variant) for arm, seed, out in plan]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--variant", default="native", choices=("native", "avx2", "no-simd"))
    parser.add_argument("--runs", default="/tmp/distill-compare")
    parser.add_argument("--reuse", action="store_true", help="read runs already finished in --runs")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--results", default=str(HERE / "distill_compare_results.json"))
    parser.add_argument("--figure", default=str(HERE / "distill_compare.png"))
    parser.add_argument("--one", choices=tuple(ARMS), help="one run of this arm, in this process")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out")
    args = parser.parse_args()
    if args.one:
        run_one(args.one, args.seed, Path(args.out))
        return
    runs = study(args)
    print(table(runs))
    results = Path(args.results)
    kept = json.loads(results.read_text())["runs"] if results.exists() else []
    kept = [r for r in kept if r["variant"] != args.variant] + runs
    lines = ",\n".join(json.dumps(run, ensure_ascii=False) for run in kept)  # one run per line
    results.write_text(f'{{"arms": {json.dumps(ARMS, ensure_ascii=False)},\n"runs": [\n{lines}\n]}}\n')
    if args.variant == "native":
        figure(runs, Path(args.figure))


if __name__ == "__main__":
    main()
