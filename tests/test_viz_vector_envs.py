"""Notebook 2's vector-env section: what the recorded runs show is what gymnasium's autoreset modes do."""

import numpy as np
import pytest

from ladder.viz import vector_envs as ve
from ladder.viz import vector_envs_view as vv


@pytest.fixture(scope="module")
def recs():
    return {mode: ve.record(mode) for mode in ve.MODES}


def test_the_run_ends_episodes_both_ways_and_one_step_holds_all_three_kinds(recs):
    same = recs["SAME_STEP"]
    assert (same["terminated"] & ~same["truncated"]).any() and (same["truncated"] & ~same["terminated"]).any()
    t = ve.mixed_step(same)
    assert t is not None
    assert same["obs"].shape == (ve.STEPS, len(ve.RULES), 4)


def test_same_step_returns_the_new_first_obs_and_the_last_one_in_final_obs(recs):
    same, nxt = recs["SAME_STEP"], recs["NEXT_STEP"]
    ended = same["terminated"] | same["truncated"]
    np.testing.assert_array_equal(same["has_final"], ended)
    assert np.isnan(same["final_obs"][~ended]).all()
    assert np.abs(same["obs"][ended]).max() <= 0.05            # CartPole's reset draws from [−0.05, 0.05]
    t, i = np.argwhere(ended)[0]                                 # the first end: both runs agree up to it
    np.testing.assert_array_equal(same["final_obs"][t, i], nxt["obs"][t, i])
    np.testing.assert_array_equal(same["obs"][t, i], nxt["obs"][t + 1, i])


def test_next_step_resets_on_the_following_step_with_no_transition(recs):
    nxt = recs["NEXT_STEP"]
    ended = nxt["terminated"] | nxt["truncated"]
    after = np.zeros_like(ended)
    after[1:] = ended[:-1]
    assert after.any()
    assert (nxt["rewards"][after] == 0).all() and not (nxt["terminated"] | nxt["truncated"])[after].any()
    assert not nxt["has_final"].any()
    np.testing.assert_array_equal(ve.real_transitions(nxt, "NEXT_STEP"), ~after)


def test_next_step_ignores_the_action_of_the_reset_step():
    pushed_left, pushed_right = ve.reset_step_obs(0), ve.reset_step_obs(1)
    np.testing.assert_array_equal(pushed_left, pushed_right)
    assert np.abs(pushed_left).max() <= 0.05                  # a fresh start, not a pushed cart


def test_bootstrap_values_read_zero_final_obs_or_the_returned_obs(recs):
    same = recs["SAME_STEP"]
    t = ve.mixed_step(same)
    obs, term, trunc, final = (same[k][t] for k in ("obs", "terminated", "truncated", "final_obs"))
    v_next = ve.bootstrap_values(obs, term, trunc, final)
    for i in range(len(ve.RULES)):
        expected = 0.0 if term[i] else ve.critic(final[i]) if trunc[i] else ve.critic(obs[i])
        assert v_next[i] == pytest.approx(expected)
    assert ve.critic(np.array([0.0, 0.0, ve.POLE_LIMIT, 0.0])) == pytest.approx(0.0)


def test_the_view_follows_the_slider(recs):
    view = vv.autoreset_view(t=0)
    assert view.data["kinds"]["SAME_STEP"] == ["transition"] * len(ve.RULES)
    t = ve.mixed_step(recs["SAME_STEP"])
    view.controls["t"].value = t
    assert sorted(view.data["kinds"]["SAME_STEP"]) == ["terminated", "transition", "truncated"]
    assert f"t = {t}:" in view.data["summary"]
