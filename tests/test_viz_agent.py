"""Notebook 7's lab and widgets: drive every control and check what each one claims.

One update of the tiny calculator preset, notebook 7's two runs (24 updates each, the default and --train-env-tokens:
made once, by the notebook or here, and kept on disk) and one sampled group of the guessing game.
"""

import matplotlib

matplotlib.use("Agg")

import pytest  # noqa: E402
import torch  # noqa: E402

from ladder import core  # noqa: E402
from ladder.viz import agent_lab, agent_views  # noqa: E402

pytestmark = pytest.mark.notebook_runs  # reads runs a notebook makes (run right after the notebooks)

PNG = b"\x89PNG\r\n\x1a\n"
NOTEBOOK = dict(steps=24)  # notebook 7's call: agent_lab.env_token_runs(steps=24)


def test_one_update_trains_the_models_tokens_only():
    first = agent_lab.calculator_update()
    batch, mask, attention = first["batch"], first["rollout_mask"], first["rollout_attention"]
    env = (attention - mask).bool()
    assert env.any()                                                   # the tool answered somewhere
    assert not batch.mask[env].any() and not batch.advantages[env].any()
    T = mask.shape[1]
    assert torch.equal(batch.inputs["attention_mask"][:, -T:].float(), attention.float())   # read, all of it
    group = first["group"]
    for i in range(len(group.pieces)):                                 # one Â per trajectory
        on = group.mask[i].bool()
        assert len(group.pieces[i]) == int(group.attention_mask[i].sum())
        assert len(set(group.advantages["trajectory"][i][on].tolist())) == 1


def test_grpo_step_hands_core_update_the_batch_grpo_batch_makes(monkeypatch):
    """The lab's batch is the rung's: ``grpo_step`` passes ``grpo_batch``'s batch to ``core.update``, once, on the
    rung's own policy."""
    from ladder.rungs import grpo

    step, _ = agent_lab.agent_step("tiny", prompts_per_step=2, group_size=4)
    made, seen = [], []
    real_batch, real_update = grpo.step.grpo_batch, core.update
    monkeypatch.setattr(grpo.step, "grpo_batch", lambda s: made.append(real_batch(s)) or made[-1])
    monkeypatch.setattr(core, "update", lambda policy, batch, *a, **k: seen.append((policy, batch)) or
                        real_update(policy, batch, *a, **k))
    grpo.grpo_step(step)
    assert len(made) == len(seen) == 1 and seen[0] == (step.trainer, made[0].batch)


def test_trajectory_view_moves_through_the_group():
    view = agent_views.trajectory_view(row=0)
    group = view.data["group"]
    for row in range(len(group.pieces)):
        view.controls["row"].value = row
        assert view.data["row"] == row
        assert view.data["model_tokens"] == int(group.mask[row].sum())
        assert view.data["env_tokens"] == int((group.attention_mask[row] - group.mask[row]).sum())
        assert bytes(view.image.value).startswith(PNG)
        kinds = [s["kind"] for s in agent_lab.segments(group, row)]
        assert kinds[0] == "model" and all(a != b for a, b in zip(kinds, kinds[1:]))
    assert "the environment's" in view.text.value


def test_the_probe_holds_the_tools_reply():
    step, task = agent_lab.agent_step("tiny")
    problems = task.held_out[:6]
    probe = agent_lab.reply_probe(step.tokenizer, problems, task.system_prompt)
    for i, p in enumerate(problems):
        digits = "".join(step.tokenizer.decode([int(t)]) for t in probe.input_ids[i][probe.digits[i]])
        assert digits == p["answer"]
        assert not (probe.digits[i] & ~probe.reply[i]).any() and not (probe.call[i] & probe.reply[i]).any()
    record = agent_lab.probe_record(step.policy, probe)
    assert record["kl_env"] < 1e-6 and record["kl_model"] < 1e-6      # π_θ = π_ref before any update
    assert record["logp_digits"] < 0


@pytest.mark.trained
def test_training_on_the_environments_tokens_teaches_the_reply():
    runs = agent_lab.env_token_runs(**NOTEBOOK)
    default, mistaken = runs["default"]["rows"], runs["--train-env-tokens"]["rows"]
    assert default[0]["logp_digits"] == mistaken[0]["logp_digits"]    # the same seed, the same start
    gain = {name: run["rows"][-1]["logp_digits"] - run["rows"][0]["logp_digits"] for name, run in runs.items()}
    assert gain["--train-env-tokens"] > gain["default"] + 0.2
    assert mistaken[-1]["kl_env"] > default[-1]["kl_env"]
    view = agent_views.env_tokens_view(update=3, runs=runs)
    for metric in agent_views.METRICS:
        view.controls["metric"].value = metric
        assert bytes(view.image.value).startswith(PNG)
    view.controls["update"].value = NOTEBOOK["steps"]
    assert view.data["at"]["default"] is default[-1]


def test_turn_credit_is_group_relative_turns():
    game = agent_lab.guess_group()
    assert game.rewards.std() > 0
    present = torch.arange(game.turn_rewards.shape[1])[None, :] <= game.turn.max(1).values[:, None]
    per_turn = core.group_relative_turns(game.turn_rewards, present, len(game.rewards))
    for i in range(len(game.rewards)):
        on = game.mask[i].bool()
        assert len(set(game.advantages["trajectory"][i][on].tolist())) == 1
        turns = game.turn[i][on]
        assert torch.allclose(game.advantages["turn"][i][on], per_turn[i][turns], atol=1e-6)
        assert [t["index"] for t in agent_lab.turn_table(game, i)] == list(range(int(turns.max()) + 1))
    view = agent_views.credit_view(row=0, credit="trajectory", group=game)
    assert len({round(t["trajectory"], 6) for t in view.data["turns"]}) == 1
    view.controls["credit"].value = "turn"
    view.controls["row"].value = len(game.rewards) - 1
    assert view.data["credit"] == "turn" and view.data["row"] == len(game.rewards) - 1
    assert bytes(view.image.value).startswith(PNG)
