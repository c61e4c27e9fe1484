"""The cases of the distillation exercises (28, 29): the teacher's per-token reward on the student's sampled tokens,
and the generalized JSD between the two whole next-token distributions."""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor

from .cases import JUNK, Case, Mismatch, fmt, lengths_mask, padded, pick, randn, shapes, t

NAN, INF, GAP = float("nan"), float("inf"), 1e4


def _keeps_dtype(inputs: dict) -> Callable[[Callable, Callable], None]:
    """A check: the learner's result has the core's dtype (the grader's usual comparison casts it), and its values."""
    def check(fn, core) -> None:
        want = core(**{k: v.clone() if isinstance(v, Tensor) else v for k, v in inputs.items()})
        got = fn(**{k: v.clone() if isinstance(v, Tensor) else v for k, v in inputs.items()})
        if not isinstance(got, Tensor):
            raise Mismatch(f"result should be a tensor, got {type(got).__name__} {got!r}")
        if got.dtype != want.dtype:
            raise Mismatch(f"result has dtype {got.dtype}, the core's {want.dtype}: keep the inputs' dtype "
                           "(no .float(), no fresh torch.zeros of the default dtype)")
        if got.shape != want.shape or not torch.allclose(got.detach(), want, rtol=1e-5, atol=1e-5, equal_nan=True):
            raise Mismatch(f"wrong values\n  expected  {fmt(want)}\n  got       {fmt(got.detach())}")
    return check


def distillation_rewards() -> list[Case]:
    mask = lengths_mask([3, 2], 3)
    cases = [
        Case("the sheet's example: two completions, the second's padding holding junk and nan",
             dict(logp=t([[-0.5, -2.0, -1.0], [-0.1, -3.0, JUNK]]), teacher_logp=t([[-0.7, -0.5, -1.0],
                                                                                   [-2.3, -3.0, NAN]]), mask=mask)),
        Case("the student and the teacher agree on every token: every reward 0",
             dict(logp=t([[-0.3, -1.2, -4.0], [-2.0, -0.01, -0.5]]), teacher_logp=t([[-0.3, -1.2, -4.0],
                                                                                    [-2.0, -0.01, -0.5]]),
                  mask=torch.ones(2, 3))),
        Case("the sign: the teacher surer than the student: r_t > 0; less sure: r_t < 0",
             dict(logp=t([[-3.0, -0.1]]), teacher_logp=t([[-0.1, -3.0]]), mask=torch.ones(1, 2))),
        Case("padding holds −inf in both (a pad token never scored): 0 there, not nan (nan · 0 is nan)",
             dict(logp=t([[-1.0, -INF, -INF], [-0.2, -0.4, -INF]]), teacher_logp=t([[-2.0, -INF, -INF],
                                                                                   [-0.2, -1.4, -INF]]),
                  mask=lengths_mask([1, 2], 3))),
        Case("an empty row: every reward 0",
             dict(logp=t([[JUNK, JUNK], [-1.0, -2.0]]), teacher_logp=t([[NAN, NAN], [-0.5, -2.5]]),
                  mask=lengths_mask([0, 2], 2))),
        Case("[B, T] = [2, 5], B ≠ T: the rewards in the log-probs' own positions",
             dict(logp=-torch.arange(1.0, 11.0).view(2, 5) / 4, teacher_logp=-torch.arange(10.0, 0.0, -1.0).view(2, 5)
                  / 3, mask=lengths_mask([5, 3], 5))),
        Case("one completion as a [T] row, its mask [T]",
             dict(logp=t([-0.5, -1.5, JUNK]), teacher_logp=t([-1.0, -0.5, JUNK]), mask=t([1.0, 1.0, 0.0]))),
        Case("a bool mask", dict(logp=t([[-0.5, -1.5, JUNK]]), teacher_logp=t([[-1.0, -0.5, NAN]]),
                                 mask=torch.tensor([[True, True, False]]))),
    ]
    wide = dict(logp=torch.tensor([[-0.25, -1.0, JUNK]], dtype=torch.float64),
                teacher_logp=torch.tensor([[-0.5, -0.125, NAN]], dtype=torch.float64), mask=t([[1.0, 1.0, 0.0]]))
    cases.append(Case("float64 log-probs, a float32 mask: float64 rewards", wide, check=_keeps_dtype(wide)))
    g = torch.Generator().manual_seed(28)
    for B, T, mask in shapes(g, 6):
        fill = pick(g, (JUNK, NAN, -INF))
        inputs = dict(logp=padded(-3 * torch.rand(B, T, generator=g), mask, fill),
                      teacher_logp=padded(-3 * torch.rand(B, T, generator=g), mask, fill), mask=mask)
        cases.append(Case(f"random {B}×{T}, padding holding {fill}", inputs))
    return cases


def generalized_jsd() -> list[Case]:
    grad = ("student_logits",)
    student, teacher = t([2.0, 0.0, -2.0]), t([0.0, 1.0, 0.0])
    g = torch.Generator().manual_seed(29)
    s, q = randn(g, 2, 3, 5, scale=2.0), randn(g, 2, 3, 5, scale=2.0)   # [B, T, V], V ≠ T
    # p and q both ≈ 0 (e^−10000) on token 2: m = 0 there, log m = −inf unless taken by logsumexp
    peaked_s, peaked_t = t([[0.0, -GAP, -GAP, 0.5], [-GAP, 1.0, -GAP, 0.0]]), t([[-GAP, 0.0, -GAP, 0.0],
                                                                                  [0.0, -GAP, -GAP, 2.0]])
    cases = [
        Case("the sheet's example, β = ½", dict(student_logits=student, teacher_logits=teacher, beta=0.5), grad=grad),
        Case("β = 0: the forward KL(p ‖ q), TRL's case (the formula's own limit is 0)",
             dict(student_logits=student, teacher_logits=teacher, beta=0.0), grad=grad),
        Case("β = 1: the reverse KL(q ‖ p), TRL's case (the formula's own limit is 0)",
             dict(student_logits=student, teacher_logits=teacher, beta=1.0), grad=grad),
        Case("β = ¼: m = ¼·p + ¾·q, the teacher's KL weighted ¼",
             dict(student_logits=student, teacher_logits=teacher, beta=0.25), grad=grad),
        Case("β = ½ on [B, T, V] = [2, 3, 5]", dict(student_logits=s, teacher_logits=q, beta=0.5), grad=grad),
        Case("β = ½ with student and teacher swapped: the same values (symmetric)",
             dict(student_logits=q, teacher_logits=s, beta=0.5), grad=grad),
        Case("β = ¼ on [B, T, V] = [2, 3, 5]: the vocabulary is the last dimension",
             dict(student_logits=s, teacher_logits=q, beta=0.25), grad=grad),
        Case("the same distribution (the teacher's logits shifted by 3): 0, β = 0.3",
             dict(student_logits=s, teacher_logits=s + 3.0, beta=0.3), grad=grad),
        Case("τ = 2 divides both logits, β = ½", dict(student_logits=s, teacher_logits=q, beta=0.5, temperature=2.0),
             grad=grad),
        Case("τ = 0.5 at β = 0 (forward KL)", dict(student_logits=s, teacher_logits=q, beta=0.0, temperature=0.5),
             grad=grad),
        Case("τ = 1.5 at β = 1 (reverse KL)", dict(student_logits=s, teacher_logits=q, beta=1.0, temperature=1.5),
             grad=grad),
        Case("peaked logits (gaps of 1e4), β = ½: p = q = 0 on a token, so m = 0 there; finite, not nan",
             dict(student_logits=peaked_s, teacher_logits=peaked_t, beta=0.5), grad=grad),
        Case("peaked logits, β = 0.25", dict(student_logits=peaked_s, teacher_logits=peaked_t, beta=0.25), grad=grad),
        Case("peaked logits, β = 0: the forward KL, large and finite",
             dict(student_logits=peaked_s, teacher_logits=peaked_t, beta=0.0), grad=grad),
        Case("peaked logits, β = 1: the reverse KL, large and finite",
             dict(student_logits=peaked_s, teacher_logits=peaked_t, beta=1.0), grad=grad),
        Case("β = 1.5: a ValueError", dict(student_logits=student, teacher_logits=teacher, beta=1.5),
             raises=ValueError),
        Case("β = −0.1: a ValueError", dict(student_logits=student, teacher_logits=teacher, beta=-0.1),
             raises=ValueError),
    ]
    wide = dict(student_logits=student.double(), teacher_logits=teacher.double(), beta=0.5)
    cases.append(Case("float64 logits: a float64 result", wide, check=_keeps_dtype(wide)))
    for _ in range(6):
        B, T, V = pick(g, (1, 2, 3)), pick(g, (1, 2, 4)), pick(g, (2, 3, 7))
        inputs = dict(student_logits=randn(g, B, T, V, scale=3.0), teacher_logits=randn(g, B, T, V, scale=3.0),
                      beta=pick(g, (0.0, 0.1, 0.5, 0.9, 1.0)), temperature=pick(g, (0.7, 1.0, 1.5)))
        cases.append(Case(f"random [B, T, V] = [{B}, {T}, {V}], β = {inputs['beta']}, τ = {inputs['temperature']}",
                          inputs, grad=grad))
    return cases


DISTILL_CASES = {"ex28_distillation_rewards": distillation_rewards, "ex29_generalized_jsd": generalized_jsd}
