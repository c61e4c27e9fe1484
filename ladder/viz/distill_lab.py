"""Notebook 10's numbers: a distill run held in memory and its three KLs, the teacher's reward on every token, the
generalized JSD fitted on a toy, and the two gradient identities enumerated (the figures are in ``distill_views``).

Three policies, three KLs (section 0). The tiny ``distill`` preset built by the rung's own ``distill.build`` and run
update by update through the training loop held in memory (``loop.in_memory``, ``loop.one_update``); its rollout
(``Step.rollout``) is wrapped only to keep each batch's tokens. On batch k (π_old sampled it, k − 1 updates done):

    KL(π_θ ‖ π_old)      after update k, Σ_t ρ_t·k3_t with ρ_t = π_θ/π_old (π_old's samples weighed for π_θ's)
    KL(π_θ ‖ π_ref)      π_θ = π_old on its own tokens: Σ_t k1_t and Σ_t k3_t; π_ref the student before update 1
                         (the LoRA adapter disabled)
    KL(π_θ ‖ π_teacher)  the rung's own ``distill/reverse_kl``: Σ_t (log π_θ − log π_teacher), k1

each summed over a completion's tokens (nats per completion), then averaged over the batch (``core.kl_estimate``).

The teacher's reward on every token (section 1). One group of the student before training (π_ref) on a sum that
carries, sampled by the rung's sampler and scored by the rung's teacher (``distill.scored_by``):

    r_t = −(log π_θ − log π_teacher)(y_t)             core.distillation_rewards
    Â_t = Σ_{t' ≥ t} γ^(t'−t)·r_t'   at γ = 1, γ = 0   core.discounted_returns
    GRPO's Â_i                                        the group's correctness, group-relative (one per completion)

Forward, reverse and between (section 2). A teacher p over ``VOCAB`` tokens with two modes; the student family
q_{c,w} = softmax(−(v − c)²/2w²), one bump of centre c and width w. For each β, JSD_β(p, q_{c,w}) on a fine grid of
(c, w) (``core.generalized_jsd``), then steepest descent on that grid from each start: from the grid point nearest the
start, to the best of its eight neighbours, until none is better — a local minimum in the basin of the start.

The policy gradient is the reverse-KL gradient (section 3). A language of ``V`` tokens and ``T`` positions, each
position's logits a table indexed by the prefix: every completion enumerated, the expectations exact:

    −∇ KL(π_θ ‖ π_teacher)                       over whole sequences, by autograd
    Σ_y π_θ(y) Σ_t ∇log π_θ(y_t | y_<t)·G_t       G_t from the k1 rewards at γ (held fixed): the policy gradient
    −Σ_t E_{y_<t ~ π_θ}[∇ KL_t]                   GKD's β = 1 at the student's prefixes (their weights held fixed)
"""

from __future__ import annotations

import functools
import itertools
import math
from dataclasses import dataclass, field

import torch

from ladder import core
from ladder.policies.causal_lm import lm_batch
from ladder.rungs import distill
from ladder.rungs.grpo.step import sample_completions
from ladder.runtime import loop
from ladder.viz.lm_lab import quiet_run


# ------------------------------------------------------------------------------ section 0: three KLs
def tiny_distill(seed: int = 0, **overrides):
    """A run of the distill rung's tiny preset held in memory and begun, built by ``distill.build`` on the CPU, its
    evaluations left out (a lab's run): (session, recipe)."""
    cfg = distill.Config(**{**distill.PRESETS["tiny"], "seed": seed, "device": "cpu", **overrides}, progress=False)
    distill.validate(cfg)
    torch.manual_seed(seed)
    return loop.in_memory(cfg, distill.NAME, distill.build, evaluations=False)


def per_completion(per_token: torch.Tensor, mask: torch.Tensor) -> float:
    """Σ_t x_t over each completion's tokens, then the mean over completions: nats per completion."""
    return float((per_token * mask).sum(1).mean())


class KeptBatches:
    """The rung's rollout, unchanged; each batch's tokens kept, with log π_old (the policy that sampled them: π_θ
    while the rollout runs) and log π_ref of every token."""

    def __init__(self, rollout):
        self.rollout, self.kept = rollout, None

    def __call__(self, step):
        rollout, rounds, generated = self.rollout(step)
        inputs = lm_batch(rollout.prompt_ids, rollout.prompt_mask, rollout.completion, rollout.mask,
                          step.tokenizer.pad_token_id)
        self.kept = (inputs, step.policy.old_logp_and_values(inputs)[0].float(), step.policy.ref_logp(inputs).float())
        return rollout, rounds, generated


@dataclass
class ThreeKLs:
    """Per update k = 1, 2, …: the three KLs of batch k (nats per completion) and the rung's record."""

    trust: list = field(default_factory=list)      # KL(π_θ‖π_old) after update k, ρ-weighted k3
    anchor_k1: list = field(default_factory=list)  # KL(π_θ‖π_ref), π_θ = π_old sampling batch k, k1
    anchor_k3: list = field(default_factory=list)  # … k3
    target: list = field(default_factory=list)     # KL(π_θ‖π_teacher): the rung's distill/reverse_kl, k1
    records: list = field(default_factory=list)    # the rung's metrics.jsonl lines
    recipe: object = None                          # the run (its π_ref: the student before update 1)


def three_kls(updates: int = 10, seed: int = 0) -> ThreeKLs:
    """``updates`` of the tiny distill preset; after each, KL(π_θ‖π_old), KL(π_θ‖π_ref) and KL(π_θ‖π_teacher) of
    its batch (the module's docstring)."""
    with quiet_run():
        torch.manual_seed(seed)
        session, recipe = tiny_distill(seed)
        kept = KeptBatches(recipe.step.rollout)
        recipe.step.rollout = kept
        out = ThreeKLs(recipe=recipe)
        for _ in range(updates):
            loop.one_update(session, recipe)
            inputs, old_logp, ref_logp = kept.kept
            logp = recipe.step.policy.old_logp_and_values(inputs)[0].float()  # π_θ after the update
            mask = inputs.mask
            out.trust.append(per_completion(core.kl_estimate(logp, old_logp, "k3", old_logp=old_logp), mask))
            out.anchor_k1.append(per_completion(core.kl_estimate(old_logp, ref_logp, "k1"), mask))
            out.anchor_k3.append(per_completion(core.kl_estimate(old_logp, ref_logp, "k3"), mask))
            out.records.append(session.records()[-1])
            out.target.append(out.records[-1]["distill/reverse_kl"])
        recipe.step.rollout = kept.rollout
    return out


def first_and_last(values: list, n: int = 5) -> tuple[float, float]:
    """The mean of the first n and of the last n values: a noisy curve's start and end."""
    return sum(values[:n]) / len(values[:n]), sum(values[-n:]) / len(values[-n:])


# ---------------------------------------------------------------- section 1: the teacher's reward on every token
@dataclass
class Scored:
    """One completion of a group: its tokens, the teacher's reward on each and the credit each γ gives."""

    question: str
    pieces: list          # the completion's tokens, decoded one by one
    text: str
    correct: bool
    rewards: torch.Tensor     # r_t [T]
    returns_1: torch.Tensor   # Â_t at γ = 1 [T]
    returns_0: torch.Tensor   # Â_t at γ = 0 [T] (= r_t)
    grpo_advantage: float     # Â_i of GRPO: the group's correctness, group-relative
    carry: int | None         # the position of the carry digit ("a + b + c =": c), if the completion has one


def first_line(pieces: list) -> int:
    """How many tokens come before the first line break (the units' line "a + b = s")."""
    return next((t for t, piece in enumerate(pieces) if "\n" in piece), len(pieces))


def carry_position(pieces: list) -> int | None:
    """The token of the carried digit in the second line "a + b + c = s": the last digit before its "="."""
    line, last_digit = 0, None
    for t, piece in enumerate(pieces):
        if "\n" in piece:
            line += 1
        elif line == 1 and piece.strip().isdigit():
            last_digit = t
        elif line == 1 and "=" in piece:
            return last_digit
    return None


def score_group(recipe, problem: dict, seed: int) -> list[Scored]:
    """G completions of ``problem`` by the student before training (π_ref: the adapter disabled), sampled by the
    rung's sampler, scored by its teacher; each with r_t, Â_t at γ = 1 and 0, and GRPO's Â_i."""
    step, policy = recipe.step, recipe.step.policy
    with quiet_run(), torch.no_grad(), policy.reference_context():
        torch.manual_seed(seed)
        rollout = distill.scored_by(recipe.teacher, step, sample_completions(step, [problem]))
    correct = rollout.per_function["correctness"].float()
    grpo_advantages = step.advantages(correct, step.cfg)
    mask = rollout.mask.float()
    rewards = rollout.token_rewards * mask
    returns = {gamma: core.discounted_returns(rewards, mask, gamma) for gamma in (1.0, 0.0)}
    scored = []
    for i in range(len(rollout)):
        T = int(mask[i].sum())
        pieces = [step.tokenizer.decode([int(c)]) for c in rollout.completion[i, :T]]
        scored.append(Scored(problem["question"], pieces, rollout.texts[i], bool(correct[i]), rewards[i, :T],
                             returns[1.0][i, :T], returns[0.0][i, :T], float(grpo_advantages[i]),
                             carry_position(pieces)))
    return scored


def forgot_and_carried(recipe, a: int = 47, b: int = 38, seed: int = 0, tries: int = 8) -> tuple[Scored, Scored]:
    """A completion of "What is a + b?" (a sum that carries) that forgets the carry and one of the same group that
    carries it: the first group, over seeds from ``seed`` on, that has both (GRPO's Â then is not 0)."""
    problem = {"question": f"What is {a} + {b}?", "answer": str(a + b)}
    for k in range(tries):
        group = score_group(recipe, problem, seed + k)
        forgot = [s for s in group if not s.correct and s.carry is not None and s.pieces[s.carry].strip() == "0"]
        carried = [s for s in group if s.correct]
        if forgot and carried:
            return forgot[0], carried[0]
    raise RuntimeError(f"no group of {tries} with a completion that forgets the carry beside one that carries")


# ------------------------------------------------------------- section 2: forward, reverse and between
VOCAB = 30
BETAS = [round(0.05 * k, 2) for k in range(21)]   # 0, 0.05, …, 1
STARTS = {"left start": (4.0, 2.0), "right start": (25.0, 2.0)}   # (centre, width) where each descent begins
CENTRES = torch.linspace(0.0, VOCAB - 1.0, 4 * (VOCAB - 1) + 1, dtype=torch.float64)    # a step of 0.25
WIDTHS = torch.exp(torch.linspace(math.log(0.5), math.log(16.0), 101, dtype=torch.float64))


def two_mode_teacher(left: float = 8.0, right: float = 21.0, width: float = 2.0, left_mass: float = 0.6
                     ) -> torch.Tensor:
    """log p over ``VOCAB`` tokens: two bumps, ``left_mass`` of the mass on the left one."""
    v = torch.arange(VOCAB, dtype=torch.float64)
    p = left_mass * torch.exp(-(v - left) ** 2 / (2 * width**2)) + (1 - left_mass) * torch.exp(
        -(v - right) ** 2 / (2 * width**2))
    return torch.log(p / p.sum())


def bump_logits(centre, width) -> torch.Tensor:
    """The student's logits −(v − c)²/2w² over the vocabulary (broadcast: c, w of any shape → [..., VOCAB])."""
    v = torch.arange(VOCAB, dtype=torch.float64)
    centre, width = torch.as_tensor(centre, dtype=torch.float64), torch.as_tensor(width, dtype=torch.float64)
    return -(v - centre[..., None]) ** 2 / (2 * width[..., None] ** 2)


def jsd_landscape(teacher_logp: torch.Tensor, beta: float) -> torch.Tensor:
    """JSD_β(p, q_{c,w}) at every grid point, [len(CENTRES), len(WIDTHS)]."""
    student = bump_logits(CENTRES[:, None], WIDTHS[None, :])
    return core.generalized_jsd(student, teacher_logp.expand_as(student), beta)


def steepest_descent(landscape: torch.Tensor, start: tuple[int, int]) -> list[tuple[int, int]]:
    """The grid path from ``start`` to a local minimum: each step to the lowest of the eight neighbours, while it
    is lower than where the path stands."""
    path, rows, cols = [start], landscape.shape[0], landscape.shape[1]
    while True:
        i, j = path[-1]
        neighbours = [(i + di, j + dj) for di in (-1, 0, 1) for dj in (-1, 0, 1)
                      if 0 <= i + di < rows and 0 <= j + dj < cols]
        best = min(neighbours, key=lambda ij: float(landscape[ij]))
        if float(landscape[best]) >= float(landscape[i, j]):
            return path
        path.append(best)


def grid_point(centre: float, width: float) -> tuple[int, int]:
    return int((CENTRES - centre).abs().argmin()), int((WIDTHS - width).abs().argmin())


def fitted(teacher_logp: torch.Tensor, landscape: torch.Tensor, path: list[tuple[int, int]]) -> dict:
    """A fit's centre, width, JSD_β, its q, and the share of q's mass on the left half of the vocabulary."""
    i, j = path[-1]
    q = torch.softmax(bump_logits(CENTRES[i], WIDTHS[j]), -1)
    return {"centre": float(CENTRES[i]), "width": float(WIDTHS[j]), "value": float(landscape[i, j]), "q": q,
            "left_mass": float(q[:VOCAB // 2].sum()), "path": path}


@functools.lru_cache(maxsize=4)
def jsd_fits(betas: tuple = tuple(BETAS)) -> dict:
    """For each β: the landscape JSD_β(p, q_{c,w}), the fit descended from each of ``STARTS``, and the family's best
    (the grid's minimum). Also p itself and its mass on the left half."""
    teacher_logp = two_mode_teacher()
    fits = {}
    for beta in betas:
        landscape = jsd_landscape(teacher_logp, beta)
        best = divmod(int(landscape.argmin()), landscape.shape[1])
        fits[beta] = {"landscape": landscape, "best": fitted(teacher_logp, landscape, [best]),
                      **{name: fitted(teacher_logp, landscape, steepest_descent(landscape, grid_point(*start)))
                         for name, start in STARTS.items()}}
    p = teacher_logp.exp()
    return {"p": p, "p_left_mass": float(p[:VOCAB // 2].sum()), "fits": fits}


# ------------------------------------------------------- section 3: the policy gradient is the reverse-KL gradient
def prefix_tables(seed: int, V: int = 2, T: int = 3, scale: float = 1.5) -> list[torch.Tensor]:
    """A language model small enough to enumerate: position t's logits for each prefix y_<t, ``[V**t, V]``."""
    g = torch.Generator().manual_seed(seed)
    return [scale * torch.randn(V**t, V, generator=g, dtype=torch.float64) for t in range(T)]


def sequences(V: int, T: int) -> torch.Tensor:
    """Every completion y of T tokens, ``[V**T, T]``, in itertools.product order."""
    return torch.tensor(list(itertools.product(range(V), repeat=T)))


def prefix_index(ys: torch.Tensor, t: int, V: int) -> torch.Tensor:
    """The row of position t's table each completion reads: its prefix y_<t as a number in base V."""
    index = torch.zeros(len(ys), dtype=torch.long)
    for s in range(t):
        index = index * V + ys[:, s]
    return index


def token_logps(tables: list[torch.Tensor], ys: torch.Tensor) -> torch.Tensor:
    """log π(y_t | y_<t) of every completion's every token, ``[V**T, T]``."""
    V = tables[0].shape[-1]
    return torch.stack([torch.log_softmax(table, -1)[prefix_index(ys, t, V), ys[:, t]]
                        for t, table in enumerate(tables)], dim=1)


def flat_gradient(objective: torch.Tensor, tables: list[torch.Tensor]) -> torch.Tensor:
    return torch.cat([g.reshape(-1) for g in torch.autograd.grad(objective, tables)])


def policy_gradient(tables, teacher, ys, gamma: float) -> torch.Tensor:
    """Σ_y π_θ(y) Σ_t ∇log π_θ(y_t | y_<t)·G_t, exactly: every completion weighed by its probability, G_t the
    returns of the k1 rewards r_t = −(log π_θ − log π_teacher)(y_t) at γ (numbers, not paths for the gradient)."""
    logp, teacher_logp = token_logps(tables, ys), token_logps(teacher, ys)
    mask = torch.ones_like(logp)
    returns = core.discounted_returns(core.distillation_rewards(logp.detach(), teacher_logp, mask), mask, gamma)
    weights = logp.detach().sum(1).exp()   # π_θ(y)
    return flat_gradient((weights[:, None] * logp * returns).sum(), tables)


def reverse_kl_gradient(tables, teacher, ys) -> torch.Tensor:
    """∇ KL(π_θ ‖ π_teacher) = ∇ Σ_y π_θ(y)·(log π_θ(y) − log π_teacher(y)), over whole sequences."""
    logp = token_logps(tables, ys).sum(1)
    return flat_gradient((logp.exp() * (logp - token_logps(teacher, ys).sum(1))).sum(), tables)


def gkd_gradient(tables, teacher, V: int) -> torch.Tensor:
    """∇ Σ_t Σ_{y_<t} π_θ(y_<t)·JSD_1(π_teacher, π_θ)(y_<t): GKD's β = 1 (the reverse KL of the next-token
    distributions) at every prefix, each weighed by how often the student reaches it (the weights held fixed)."""
    objective = 0.0
    for t, (table, teacher_table) in enumerate(zip(tables, teacher, strict=True)):
        prefixes = sequences(V, t)
        reach = token_logps(tables[:t], prefixes).sum(1).exp().detach() if t else torch.ones(1, dtype=torch.float64)
        objective = objective + (reach * core.generalized_jsd(table, teacher_table, beta=1.0)).sum()
    return flat_gradient(objective, tables)


def enumerated_gradients(student_seed: int = 0, teacher_seed: int = 1, V: int = 2, T: int = 3) -> dict:
    """The four exact gradients over the student's logit tables (flattened, position by position) and the position
    of each component: −∇KL, the policy gradient at γ = 1 and at γ = 0, and −∇ of GKD's β = 1 at the prefixes."""
    tables = [t.requires_grad_(True) for t in prefix_tables(student_seed, V, T)]
    teacher = prefix_tables(teacher_seed, V, T)
    ys = sequences(V, T)
    return {"minus_kl": -reverse_kl_gradient(tables, teacher, ys),
            "pg_1": policy_gradient(tables, teacher, ys, 1.0),
            "pg_0": policy_gradient(tables, teacher, ys, 0.0),
            "minus_gkd": -gkd_gradient(tables, teacher, V),
            "position": torch.cat([torch.full((V ** (t + 1),), t) for t in range(T)]),
            "V": V, "T": T, "sequences": len(ys)}
