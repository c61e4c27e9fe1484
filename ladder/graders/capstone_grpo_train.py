"""Capstone II's properties of the loop: how ``train`` wires the contract's functions, and whether it learns.

The wiring properties (``WIRING``) read one watched run, train(steps = 2, seed = 0) with a spy on each function of
the contract (``capstone_grpo_spy``): a few seconds, once per learner's module; ``train_is_seeded`` adds a second run
of one step. ``train_learns`` trains for 16 steps and scores held-out sums; when it falls short it names the
wiring properties that fail.
"""

from __future__ import annotations

import math
from collections import Counter

import torch
from torch import Tensor

from ladder.runtime.limits import TimedOut

from .capstone_grpo_spy import SEED, SPIED, WATCHED_STEPS, Run, Step, rerun, spied_run
from .capstone_grpo_task import Broken, fmt, greedy_accuracy, load_model, reference_logp, tiny_task

RUN = f"train(steps = {WATCHED_STEPS}, seed = {SEED})"
ADVANTAGE_TOL = 1e-4          # Â against core.group_relative of the same rewards: float32 rounding is far below
SEEDED_RTOL = 1e-4            # ‖Δθ − Δθ'‖ / ‖Δθ‖ of two runs alike: 0 here; an unseeded draw moves it to about 1
KL_ATOL, KL_RTOL = 1e-6, 1e-3   # history's kl against the grader's k3 of its tokens: 1e-8 apart here, k1 2% away
TRAIN_STEPS, THRESHOLD = 16, 0.9   # the training check: train(..., steps=16, seed=0), greedy accuracy after


def _contract_problem(run: Run, needs: tuple[str, ...] = SPIED) -> str | None:
    """What keeps the spies from seeing the loop: a function of ``needs`` never called through the module, a
    number of updates other than one per step, a step with no rows sampled (None: nothing)."""
    missing = [name for name in needs if not run.calls[name]]
    if missing:
        return (f"{RUN} never called {', '.join(missing)} by its module-level name; train calls each function "
                f"of the contract by that name (no copy kept elsewhere, no version inlined): the grader watches them")
    if len(run.steps) - 1 != WATCHED_STEPS:
        return f"{RUN} called update {len(run.steps) - 1} times; expected once per step, {WATCHED_STEPS}"
    for k, step in enumerate(run.steps[:-1], 1):
        if not step.prompts or ("reward" in needs and len(step.rewards) != len(step.prompts)):
            return (f"{RUN}, step {k}: sample drew {len(step.prompts)} rows and reward scored {len(step.rewards)} "
                    f"before the step's update; expected the same rows, at least one")
    return None


def _steps(sol, needs: tuple[str, ...] = ("sample", "reward", "update")) -> list[Step]:
    """The watched run's steps, each with its rows, rewards and update (``Broken`` naming what is missing)."""
    run = spied_run(sol)
    problem = _contract_problem(run, needs)
    if problem:
        raise Broken(problem)
    return run.steps[:-1]


def _copies(k: int, step: Step) -> int:
    """G: how many rows each prompt of the step has (the gcd of the counts, so a prompt drawn twice is 2G)."""
    G = math.gcd(*Counter(step.prompts).values())
    if G < 2:
        raise Broken(f"{RUN}, step {k}: some of its {len(step.prompts)} rows hold a prompt once; GRPO samples G ≥ 2 "
                     f"completions of each prompt")
    return G


def train_calls_the_contract(sol) -> None:
    """train calls sample, completion_logp, reward, group_advantages, grpo_loss and update by their module-level
    names, and update once per step."""
    problem = _contract_problem(spied_run(sol))
    if problem:
        raise Broken(problem)


def _mixed_groups(k: int, prompts: list, G: int) -> str:
    """Why rows i·G … i·G + G − 1 are not one prompt: tiled copies named as such, else the rows as prompt numbers."""
    number = {p: i + 1 for i, p in enumerate(dict.fromkeys(prompts))}
    B = len(prompts) // G
    if all(prompts[i] == prompts[i % B] for i in range(len(prompts))):
        return (f"{RUN}, step {k}: the G = {G} copies of each prompt are tiled across the batch [p1…p{B}, p1…p{B}, …], "
                f"so a group of {G} adjacent rows mixes prompts; put them adjacent [p1 × {G}, p2 × {G}, …]")
    shown = " ".join(str(number[p]) for p in prompts[:2 * G])
    return (f"{RUN}, step {k}: rows 0–{2 * G - 1} hold prompts {shown}; expected each prompt's G = {G} copies "
            f"adjacent (rows i·G … i·G + G − 1 one prompt)")


def train_groups_adjacent(sol) -> None:
    """Each step's rows come as adjacent groups: rows i·G … i·G + G − 1 are one prompt (G ≥ 2), and the group_size
    given to group_advantages is that G."""
    for k, step in enumerate(_steps(sol, ("sample", "update")), 1):
        G = _copies(k, step)
        if any(len(set(step.prompts[i:i + G])) > 1 for i in range(0, len(step.prompts), G)):
            raise Broken(_mixed_groups(k, step.prompts, G))
        wrong = [size for size in step.group_sizes if size != G]
        if wrong:
            raise Broken(f"{RUN}, step {k}: group_advantages got group_size = {wrong[0]}, but each prompt has G = "
                         f"{G} adjacent rows of the {len(step.prompts)}")


def _whitened_over_the_batch(rewards: Tensor, got: Tensor) -> bool:
    """Whether ``got`` is c · (r − mean of all r), c > 0: the batch's centring, whatever the scale."""
    centred = rewards - rewards.mean()
    if centred.abs().max() == 0:
        return False
    c = (got @ centred) / (centred @ centred)
    return bool(c > 0) and (got - c * centred).abs().max().item() <= 1e-3 * max(1.0, got.abs().max().item())


def train_advantages_per_group(sol) -> None:
    """The advantages reaching update (rollout["advantages"]) equal ``core.group_relative`` of the rewards that
    reward returned, per group of G adjacent rows, to 1e-4."""
    from ladder.core import group_relative

    for k, step in enumerate(_steps(sol), 1):
        G, rewards, got = _copies(k, step), torch.tensor(step.rewards), step.advantages
        if got is None or got.shape != rewards.shape:
            shape = "none" if got is None else list(got.shape)
            raise Broken(f"{RUN}, step {k}: update's rollout[\"advantages\"] has shape {shape}; expected "
                         f"[{len(rewards)}], one per row that reward scored")
        want = group_relative(rewards, G)
        if torch.allclose(got, want, rtol=ADVANTAGE_TOL, atol=ADVANTAGE_TOL):
            continue
        if _whitened_over_the_batch(rewards, got):
            raise Broken(f"{RUN}, step {k}: the advantages are the rewards centred and scaled over the whole batch of "
                         f"{len(rewards)}, not within each group of G = {G} (group_advantages(rewards, {G}))")
        g = int(((got - want).abs() > ADVANTAGE_TOL).nonzero()[0, 0]) // G
        rows = slice(g * G, g * G + G)
        raise Broken(f"{RUN}, step {k}, rows {g * G}–{g * G + G - 1} (one prompt): rewards {fmt(rewards[rows])}, "
                     f"advantages {fmt(got[rows])}; expected group_relative's {fmt(want[rows])}")


def train_draws_new_prompts(sol) -> None:
    """The prompts sampled at step 2 are not those of step 1 (as a multiset)."""
    first, second = _steps(sol, ("sample", "update"))[:2]
    if Counter(first.prompts) == Counter(second.prompts):
        raise Broken(f"{RUN}: steps 1 and 2 sampled the same {len(set(first.prompts))} prompts; draw new ones from "
                     f"problems at each step")


def _relative_gap(got: Tensor, want: Tensor, start: Tensor) -> float:
    """‖Δθ_got − Δθ_want‖ / ‖Δθ_want‖, both moves measured from ``start``."""
    moved = want - start
    return ((got - want).norm() / moved.norm().clamp(min=1e-12)).item()


def train_is_seeded(sol) -> None:
    """Two runs of train with one seed, the global generators seeded apart, agree at step 1: the same prompts,
    the same completions, the same weights after its update (to a relative 1e-4)."""
    run = spied_run(sol)
    first = _steps(sol, ("sample", "update"))[0]
    again = rerun(sol, 1, global_seed=2).steps[0]
    where = f"two runs of train(seed = {SEED}), the global generators (torch's, random's) seeded apart"
    if first.prompts != again.prompts:
        raise Broken(f"{where}: different prompts at step 1; fix the prompt choice from seed (a random.Random(seed) "
                     f"of the loop's own)")
    if first.completions != again.completions:
        raise Broken(f"{where}: the same prompts, different completions at step 1; fix the draws from seed (a "
                     f"torch.Generator seeded from seed, passed to sample)")
    if again.weights is None or _relative_gap(again.weights, first.weights, run.start) > SEEDED_RTOL:
        raise Broken(f"{where}: the same rollout at step 1, other weights after its update; something else in the "
                     f"loop draws from an unseeded generator")


def _history_kl(sol) -> list[float]:
    """history's "kl" of the watched run, one per step (``Broken`` when train returns no such history)."""
    out = spied_run(sol).returned
    history = out[1] if isinstance(out, tuple) and len(out) == 2 else None
    if not isinstance(history, list) or len(history) != WATCHED_STEPS or \
            not all(isinstance(h, dict) and "kl" in h and "reward" in h for h in history):
        raise Broken(f"{RUN} should return (model, history) with one dict per step, each with its \"reward\" and "
                     f"its \"kl\"")
    return [float(h["kl"]) for h in history]


def _sampled_kl(step: Step) -> tuple[float, float]:
    """(k3, k1): the means over the step's real completion tokens of e^ℓ − 1 − ℓ and of −ℓ, ℓ = log π_ref − the
    sampled log π, π_ref the model before the first step (the grader's own forward, at the sampler's τ)."""
    total, k3, k1 = 0.0, 0.0, 0.0
    for prompt_ids, prompt_mask, temperature, ids, mask, logp in step.samples:
        ref = reference_logp(load_model(), prompt_ids, prompt_mask, ids, mask.float(), temperature)
        ell = torch.where(mask.bool(), ref - logp.float(), 0.0)
        total, k3, k1 = total + mask.sum().item(), k3 + (torch.expm1(ell) - ell).sum().item(), k1 - ell.sum().item()
    return k3 / max(total, 1.0), k1 / max(total, 1.0)


def _first_step_not_zero(sol, kl: list[float]) -> str:
    """Why history's kl is not about 0 at the first step: completion_logp, when its property fails; else π_ref."""
    from .capstone_grpo_checks import completion_logp_matches_forward

    shown = [f"{k:.2g}" for k in kl]
    try:
        completion_logp_matches_forward(sol)
    except Exception:  # noqa: BLE001 - Broken, or the learner's code raising: either way it fails
        return (f"{RUN}: history's kl {shown}, not about 0 at the first step (π_θ = π_ref): completion_logp "
                f"disagrees with the sampler (see completion_logp_matches_forward)")
    return (f"{RUN}: history's kl {shown}; expected about 0 at the first step (π_θ = π_ref: a copy made before the "
            f"first step, scored at the sampler's τ?)")


def train_keeps_a_frozen_reference(sol) -> None:
    """π_ref is a frozen copy made before the first step, and history's kl is the step's mean k3 to it over the
    sampled tokens (to KL_ATOL + KL_RTOL): about 0 at the first step, above 0 after."""
    kl = _history_kl(sol)
    if abs(kl[0]) >= 1e-4:
        raise Broken(_first_step_not_zero(sol, kl))
    for k, step in enumerate(_steps(sol, ("sample", "update")), 1):
        k3, k1 = _sampled_kl(step)
        if abs(kl[k - 1] - k3) <= KL_ATOL + KL_RTOL * abs(k3):
            continue
        if k > 1 and abs(kl[k - 1]) < 1e-5:
            raise Broken(f"{RUN}: history's kl {[f'{x:.2g}' for x in kl]}, and {k3:.2g} at step {k} from the model "
                         f"before the first step; π_ref a frozen copy, not the live model?")
        named = ("; that is k1 = −ℓ, the contract wants k3 = e^ℓ − 1 − ℓ"
                 if abs(kl[k - 1] - k1) <= KL_ATOL + KL_RTOL * abs(k1) else "")
        raise Broken(f"{RUN}, step {k}: history's kl {kl[k - 1]:.6g}; the mean k3 over its real tokens of the "
                     f"sampled log π against π_ref (ℓ = log π_ref − log π) is {k3:.6g}{named}")
    if max(kl[1:]) <= 1e-5:
        raise Broken(f"{RUN}: history's kl {[f'{x:.2g}' for x in kl]}; expected > 0 once π_θ moves (lr 0? no update?)")


WIRING = ("train_calls_the_contract", "train_groups_adjacent", "train_advantages_per_group", "train_draws_new_prompts",
          "train_is_seeded", "train_keeps_a_frozen_reference")


def _failing_wiring(sol) -> list[str]:
    """The wiring properties that do not hold (the watched run is seconds; a limit running out is not caught)."""
    failing = []
    for name in WIRING:
        try:
            globals()[name](sol)
        except TimedOut:
            raise
        except Exception:  # noqa: BLE001 - Broken, or the learner's code raising: either way it fails
            failing.append(name)
    return failing


def train_learns(sol) -> None:
    """After train(steps = 16, seed = 0) the greedy held-out accuracy is at least 0.9 (about 0.6 before); short of
    it, the message names the wiring properties that fail, or says they all hold."""
    task = tiny_task()
    out = sol.train(task.model, task.tokenizer, task.train, steps=TRAIN_STEPS, seed=SEED)
    if not (isinstance(out, tuple) and len(out) == 2 and isinstance(out[0], torch.nn.Module)):
        raise Broken(f"train should return (model, history), got {type(out).__name__}")
    model, history = out
    if not isinstance(history, list) or len(history) != TRAIN_STEPS:
        raise Broken(f"train(steps = {TRAIN_STEPS}) should return a history of {TRAIN_STEPS} entries, got "
                     f"{len(history) if isinstance(history, list) else type(history).__name__}")
    after = greedy_accuracy(model.eval(), task.tokenizer, task.held_out)
    if after >= THRESHOLD:
        return
    before = greedy_accuracy(load_model(), task.tokenizer, task.held_out)
    failing = _failing_wiring(sol)
    advice = (f"the loop's wiring fails {', '.join(failing)}: fix {'that' if len(failing) == 1 else 'those'} first"
              if failing else f"the loop's wiring holds ({', '.join(WIRING)}): look at the hyperparameters (learning "
              f"rate, prompts per step, G, μ, β, τ)")
    raise Broken(f"steps = {TRAIN_STEPS}, seed = {SEED}: greedy accuracy on {len(task.held_out)} held-out sums "
                 f"{before:.3f} → {after:.3f}, expected ≥ {THRESHOLD}\n{advice}")
