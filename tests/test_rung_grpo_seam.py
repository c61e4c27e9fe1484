"""The grpo rung's construction seam: ``grpo.make_step`` makes the Step by keyword for every caller, and the
Step's ``rollout`` and ``advantages`` are the functions ``grpo_step`` runs."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import torch

from ladder.graders import cases_loop
from ladder.rungs import grpo
from ladder.runtime.distributed import Processes
from ladder.runtime.runlog import seed_everything, without_timings

ROOT = Path(__file__).resolve().parents[1]
TINY = {**grpo.PRESETS["tiny"], "prompts_per_step": 2, "steps": 2, "eval_every": 0, "eval_size": 8,
        "print_samples": 0, "progress": False, "threads": 1}
# The files that make a grpo Step: each through make_step, none by position.
BUILDERS = ["ladder/rungs/grpo/recipe.py", "ladder/graders/cases_loop.py", "ladder/viz/lm_lab.py",
            "ladder/viz/sampler_lab.py"]


def _metrics(out: Path) -> list[dict]:
    return [without_timings(json.loads(line)) for line in (out / "metrics.jsonl").read_text().splitlines()]


def _assert_same_records(got: list[dict], want: list[dict]) -> None:
    assert len(got) == len(want) > 0
    for g, w in zip(got, want):
        assert g.keys() == w.keys()
        for key, value in w.items():
            assert g[key] == (pytest.approx(value, rel=1e-9, abs=1e-12) if isinstance(value, float) else value), key


def test_a_run_built_with_the_default_rollout_and_advantages_passed_explicitly_logs_the_same_metrics(
        tmp_path, monkeypatch):
    grpo.train(grpo.Config(**TINY, out=str(tmp_path / "default")))
    real_build, built = grpo.make_step, []

    def build_explicitly(cfg, **parts):
        built.append(parts)
        given = {"rollout": grpo.sample_groups, "advantages": grpo.group_advantages,
                 "credit": grpo.same_for_every_token}
        return real_build(cfg, **{**parts, **given})

    monkeypatch.setattr(grpo.recipe, "make_step", build_explicitly)
    grpo.train(grpo.Config(**TINY, out=str(tmp_path / "explicit")))
    assert len(built) == 1 and built[0]["rollout"] is grpo.sample_groups  # train made its Step through make_step
    assert "advantages" not in built[0]
    _assert_same_records(_metrics(tmp_path / "explicit"), _metrics(tmp_path / "default"))


def _tiny_step(**given) -> grpo.Step:
    cfg = grpo.Config(**TINY)
    seed_everything(cfg.seed)
    system_prompt, problems, _, model_path, tokenizer = grpo.load_task(cfg)
    policy, optimizer = grpo.load_policy(cfg, model_path, torch.device("cpu"))
    return grpo.make_step(cfg, policy=policy, optimizer=optimizer, tokenizer=tokenizer,
                          stream=grpo.ProblemStream(problems, cfg.seed), system_prompt=system_prompt,
                          procs=Processes(torch.device("cpu")), **given)


def test_grpo_step_samples_with_the_rollout_and_scores_with_the_advantages_make_step_was_given():
    calls = []

    def rollout(step):
        calls.append(("rollout", step))
        return grpo.sample_groups(step)

    def advantages(rewards, cfg):
        calls.append(("advantages", rewards))
        return torch.full_like(rewards, 0.5)

    step = _tiny_step(rollout=rollout, advantages=advantages)
    record, sampled, returned = grpo.grpo_step(step)
    assert [name for name, _ in calls] == ["rollout", "advantages"] and calls[0][1] is step
    assert torch.equal(calls[1][1], sampled.rewards)                # the rewards the rollout scored
    assert torch.equal(returned, torch.full((len(sampled),), 0.5))  # the injected Â_i, not the group's
    assert record["sampling/completions"] == len(sampled) == TINY["prompts_per_step"] * TINY["group_size"]


def test_make_step_fills_in_the_rungs_own_parts():
    step = _tiny_step()
    assert step.rollout is grpo.sample_groups and step.advantages is grpo.group_advantages
    assert step.trainer is step.policy                              # one process: the policy itself
    assert step.update_cfg == grpo.update_config(step.cfg)
    assert step.reward_weights == grpo.reward_weights(step.cfg)
    assert sorted(step.reward_funcs) == sorted(step.reward_weights)


def test_exercise_20s_harness_makes_its_step_through_make_step(monkeypatch):
    real_build, built = grpo.make_step, []
    monkeypatch.setattr(grpo, "make_step", lambda cfg, **parts: built.append(cfg) or real_build(cfg, **parts))
    cases_loop.run_grpo_step(grpo.grpo_step)
    assert len(built) == 1


@pytest.mark.parametrize("path", BUILDERS)
def test_every_grpo_step_is_made_by_make_step_and_the_learning_rate_is_the_loops(path):
    source = (ROOT / path).read_text(encoding="utf-8")
    assert not re.search(r"(?<![\w.])(grpo\.)?Step\(", source.replace("return Step(cfg=cfg,", "")), path
    assert "warmup_steps) if" not in source and "param_groups" not in source.replace('param_groups[0]["lr"]', "")
    assert ("make_step(cfg, policy=policy" if path == "ladder/rungs/grpo/recipe.py" else "grpo.make_step(") in source
    if path.startswith("ladder/viz/"):               # the labs' warm-up updates are the rung's, through the loop
        assert "warm_up(" in source and "grpo_step(warm" not in source


def test_a_labs_warm_up_is_the_recipes_updates_through_the_loop(monkeypatch):
    """``lm_lab.warm_up``: ``loop.one_update`` once per update, on the Step it was given, at the rung's learning-rate
    schedule; no evaluation, nothing written or printed."""
    from ladder.runtime import loop
    from ladder.tasks import math_eval
    from ladder.viz import lm_lab

    step, updates, stepped = _tiny_step(), [], []
    real_one_update, real_grpo_step = loop.one_update, grpo.recipe.grpo_step
    monkeypatch.setattr(loop, "one_update", lambda session, recipe: updates.append(session.step) or
                        real_one_update(session, recipe))
    monkeypatch.setattr(grpo.recipe, "grpo_step", lambda s: stepped.append(s) or real_grpo_step(s))
    monkeypatch.setattr(math_eval, "accuracy", lambda *a, **k: pytest.fail("a warm-up evaluates nothing"))
    lm_lab.warm_up(step, 2)
    assert updates == [0, 1] and stepped == [step, step]
    optimisation = step.cfg.optimisation
    assert step.optimizer.param_groups[0]["lr"] == loop.LearningRate(optimisation.lr, optimisation.warmup_steps)(1)
