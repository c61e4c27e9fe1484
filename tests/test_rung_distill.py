"""The distill rung: the teacher scores every token the student sampled, and those rewards are the per-token credit.

(a) ``scored_by``: r_t = −(log π_θ − log π_teacher)(y_t) on the completion tokens only, from the two tiny models'
own forwards; (b) ``teacher_credit``: Â_t = Σ_{t' ≥ t} γ^(t'−t)·r_t' plus the completion's rule Â; (c) a short run
through the command: the teacher's and the student's held-out accuracy and the reverse KL logged and drawn among
the doctor's vital signs, the update
grpo's step; (d) what it refuses in one line: the student as its own teacher, a teacher of other
tokens, the student's own weights by their directory.
"""

from __future__ import annotations

import json
from types import SimpleNamespace

import torch
from cli_helpers import run_cli

from ladder.doctor import read_run, vitals
from ladder.doctor.vitals import vitals_of
from ladder.policies import quant
from ladder.policies.causal_lm import CausalLMPolicy, lm_batch
from ladder.rungs import distill
from ladder.rungs.grpo.rollout import Rollout
from ladder.tasks import arithmetic, math_problems, review_models


def _policy(path) -> CausalLMPolicy:
    return CausalLMPolicy(quant.load_causal_lm(str(path), torch.device("cpu")), chunk_size=16)


def _rollout(tokenizer) -> Rollout:
    prompts = [arithmetic.chat_prompt(tokenizer, q, arithmetic.TINY_SYSTEM_PROMPT) for q in ("What is 38 + 45?",
                                                                                                 "What is 12 + 30?")]
    enc = tokenizer(prompts, return_tensors="pt", padding=True)
    texts = ["8 + 5 = 13\n3 + 4 + 1 = 8\n#### 83", "2 + 0 = 2\n#### 42"]
    completion = tokenizer(texts, return_tensors="pt", padding=True, padding_side="right").input_ids
    mask = (completion != tokenizer.pad_token_id).float()
    n = len(texts)
    return Rollout(enc.input_ids, enc.attention_mask, completion, mask, torch.zeros(n), {}, torch.zeros(n, dtype=bool),
                   texts, ["q"] * n)


def test_the_teacher_scores_each_sampled_token_against_the_student():
    tokenizer = quant.load_tokenizer(str(arithmetic.tiny_math_model()))
    student, teacher = _policy(arithmetic.tiny_math_model()), _policy(arithmetic.tiny_math_teacher())
    rollout = _rollout(tokenizer)
    step = SimpleNamespace(policy=student, tokenizer=tokenizer)
    scored = distill.scored_by(teacher, step, rollout)
    batch = lm_batch(rollout.prompt_ids, rollout.prompt_mask, rollout.completion, rollout.mask, tokenizer.pad_token_id)
    expected = (teacher.old_logp_and_values(batch)[0] - student.old_logp_and_values(batch)[0]) * rollout.mask
    torch.testing.assert_close(scored.token_rewards, expected)
    assert (scored.token_rewards[rollout.mask == 0] == 0).all() and (scored.token_rewards != 0).any()
    torch.testing.assert_close(scored.stats["distill/reverse_kl"], -expected.sum(1))


def test_the_credit_sums_the_teachers_rewards_from_each_token_on():
    rewards = torch.tensor([[1.0, -2.0, 0.5, 0.0]])
    rollout = SimpleNamespace(token_rewards=rewards, mask=torch.tensor([[1.0, 1.0, 1.0, 0.0]]))
    advantages = torch.tensor([0.25])
    summed = distill.teacher_credit(rollout, advantages, SimpleNamespace(discount=1.0))
    own = distill.teacher_credit(rollout, advantages, SimpleNamespace(discount=0.0))
    assert summed.tolist() == [[-0.25, -1.25, 0.75, 0.25]]  # Σ_{t'≥t} r_t' + Â (padding: Â alone, masked later)
    assert own.tolist() == [[1.25, -1.75, 0.75, 0.25]]


def test_a_short_run_logs_the_reverse_kl_and_both_accuracies(tmp_path):
    out = tmp_path / "d"
    result = run_cli("distill", "--preset", "tiny", "--steps", "2", "--eval-every", "0", "--eval-size", "10",
                     "--print-samples", "0", "--no-progress", "--out", str(out), cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-2000:]
    records = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    trained = [r for r in records if "distill/reverse_kl" in r]
    assert len(trained) == 2 and all(r["distill/reverse_kl"] == r["distill/reverse_kl"] for r in trained)
    summary = json.loads((out / "summary.json").read_text())
    assert 0 <= summary["teacher_accuracy"] <= 1 and summary["teacher"] == math_problems.TINY_TEACHER
    assert summary["reverse_kl_first5"] == sum(r["distill/reverse_kl"] for r in trained) / 2
    assert any("teacher_accuracy" in r for r in records) and (out / "curves.png").exists()
    drawn = {v.title for v in vitals_of(read_run(out))}  # the doctor's vital signs of a distill run
    assert {vitals.REVERSE_KL.title, vitals.TEACHER_LOGP.title, vitals.TAUGHT_ACCURACY.title} <= drawn


def test_a_student_teaching_itself_and_a_teacher_of_other_tokens_are_one_line(tmp_path):
    """By name (before anything loads), by its directory, and a teacher with another tokenizer: exit 2, no run."""
    same = run_cli("distill", "--preset", "tiny", "--teacher", "@tiny-math", "--out", str(tmp_path / "a"),
                   cwd=tmp_path)
    assert same.returncode == 2 and same.stderr.strip().splitlines()[-1].startswith("ladder: error: --teacher is")
    other = run_cli("distill", "--preset", "tiny", "--teacher", str(review_models.tiny_model_path()),
                    "--steps", "1", "--out", str(tmp_path / "b"), cwd=tmp_path)
    assert other.returncode == 2, other.stderr[-2000:]
    assert "its tokenizer is not the student's" in other.stderr and "Traceback" not in other.stderr
    assert not (tmp_path / "b").exists()
    itself = run_cli("distill", "--preset", "tiny", "--teacher", str(arithmetic.tiny_math_model()), "--steps", "1",
                     "--out", str(tmp_path / "c"), cwd=tmp_path)  # the student's weights by their directory
    assert itself.returncode == 2 and "is the student's own weights" in itself.stderr.strip().splitlines()[-1]
    assert not (tmp_path / "c").exists()
    unknown = run_cli("distill", "--preset", "tiny", "--teacher", "@tiny-teacher", "--steps", "1",
                      "--out", str(tmp_path / "d"), cwd=tmp_path)  # an alias ladder does not ship
    assert unknown.returncode == 2 and "--teacher @tiny-teacher: ladder ships no model" in unknown.stderr
    assert "Traceback" not in unknown.stderr and not (tmp_path / "d").exists()
