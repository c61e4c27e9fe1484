"""Planted wrong implementations of the distillation exercises (28, 29): each is the solution with one line changed
the way a learner might get it wrong. ``PLANTED_DISTILL[stem][label]``; every one must fail its grader."""

from __future__ import annotations

from planted_bugs_loop import mutant


def _planted(stem: str, function: str, bugs: dict[str, tuple[str, str]]) -> dict:
    return {label: mutant(stem, function, old, new) for label, (old, new) in bugs.items()}


_MIX = "log_m = torch.logsumexp(torch.stack([log_p + math.log(beta), log_q + math.log1p(-beta)]), dim=0)"

PLANTED_DISTILL = {
    "ex28_distillation_rewards": _planted("ex28_distillation_rewards", "distillation_rewards", {
        "the sign flipped: +(log π_θ − log π_teacher), the student and the teacher swapped": (
            "per_token = teacher_logp - logp", "per_token = logp - teacher_logp"),
        "the mask forgotten: padding keeps its junk": (
            "return torch.where(mask.bool(), per_token, 0.0)", "return per_token"),
        "× mask: nan on padding that holds nan or −inf": (
            "return torch.where(mask.bool(), per_token, 0.0)", "return per_token * mask"),
        "the mask inverted: rewards on the padding": (
            "return torch.where(mask.bool(), per_token, 0.0)", "return torch.where(mask.bool(), 0.0, per_token)"),
        "k3 in place of k1 (exercise 7's other estimator)": (
            "per_token = teacher_logp - logp",
            "per_token = -(torch.expm1(teacher_logp - logp) - (teacher_logp - logp))"),
        "the ratio, not the log-ratio: −π_θ/π_teacher": (
            "per_token = teacher_logp - logp", "per_token = -(logp - teacher_logp).exp()"),
        "the completion's sum on every token, not each token's own": (
            "per_token = teacher_logp - logp",
            "per_token = torch.where(mask.bool(), teacher_logp - logp, 0.0).sum(-1, keepdim=True).expand_as(logp)"),
        "only the real tokens, flattened": (
            "return torch.where(mask.bool(), per_token, 0.0)", "return per_token[mask.bool()]"),
        "float32 whatever the log-probs' dtype": (
            "return torch.where(mask.bool(), per_token, 0.0)",
            "return torch.where(mask.bool(), per_token, 0.0).float()"),
    }),
    "ex29_generalized_jsd": _planted("ex29_generalized_jsd", "generalized_jsd", {
        "the teacher and the student swapped: p = π_θ, q = π_teacher": (
            "log_q = torch.log_softmax(student_logits / temperature, dim=-1)",
            "student_logits, teacher_logits = teacher_logits, student_logits\n"
            "    log_q = torch.log_softmax(student_logits / temperature, dim=-1)"),
        "β = 0 computed as the reverse KL too": ("return kl(log_p, log_q)", "return kl(log_q, log_p)"),
        "β = 1 computed as the forward KL too": ("return kl(log_q, log_p)", "return kl(log_p, log_q)"),
        "the β weights swapped: (1 − β)·KL(p ‖ m) + β·KL(q ‖ m)": (
            "return beta * kl(log_p, log_m) + (1.0 - beta) * kl(log_q, log_m)",
            "return (1.0 - beta) * kl(log_p, log_m) + beta * kl(log_q, log_m)"),
        "the mixture's weights swapped: m = (1 − β)·p + β·q": (
            _MIX, _MIX.replace("log_p + math.log(beta), log_q + math.log1p(-beta)",
                               "log_p + math.log1p(-beta), log_q + math.log(beta)")),
        "log m as the mean of the logs: β·log p + (1 − β)·log q": (
            _MIX, "log_m = beta * log_p + (1.0 - beta) * log_q"),
        "log m as the log of m: −inf where p and q both underflow, then nan": (
            _MIX, "log_m = torch.log(beta * log_p.exp() + (1.0 - beta) * log_q.exp())"),
        "no special case at β = 0: the formula (whose limit there is 0)": (
            "    if beta == 0.0:\n", "    if beta == -1.0:\n"),
        "no special case at β = 1: the formula (whose limit there is 0)": (
            "    if beta == 1.0:\n", "    if beta == -1.0:\n"),
        "the temperature on the student's logits only": (
            "log_p = torch.log_softmax(teacher_logits / temperature, dim=-1)",
            "log_p = torch.log_softmax(teacher_logits, dim=-1)"),
        "the temperature multiplies the logits": (
            "log_q = torch.log_softmax(student_logits / temperature, dim=-1)",
            "log_q = torch.log_softmax(student_logits * temperature, dim=-1)"),
        "log(softmax): −inf where a probability underflows, then nan": (
            "log_p = torch.log_softmax(teacher_logits / temperature, dim=-1)",
            "log_p = torch.softmax(teacher_logits / temperature, dim=-1).log()"),
        "the softmax over the first dimension, not the vocabulary": (
            "log_q = torch.log_softmax(student_logits / temperature, dim=-1)",
            "log_q = torch.log_softmax(student_logits / temperature, dim=0)"),
        "the KL summed over the first dimension, not the vocabulary": (
            "return (log_a.exp() * (log_a - log_b)).sum(dim=-1)", "return (log_a.exp() * (log_a - log_b)).sum(dim=0)"),
        "the KL averaged over the vocabulary, not summed": (
            "return (log_a.exp() * (log_a - log_b)).sum(dim=-1)",
            "return (log_a.exp() * (log_a - log_b)).mean(dim=-1)"),
        "the student's logits detached: no gradient": (
            "log_q = torch.log_softmax(student_logits / temperature, dim=-1)",
            "log_q = torch.log_softmax(student_logits.detach() / temperature, dim=-1)"),
    }),
}
