"""Notebook 9's reading of the seed study and of its own runs: the anatomy of completions, the matched-KL comparison,
what the sentences claim, best-of-n as the β → 0 end of the optimum over samples, DPO's displacement numbers."""

import math

import pytest
import torch

from ladder.tasks import tiny_preferences
from ladder.viz import preference_lab as lab
from ladder.viz import preference_study as seeds


def test_the_anatomy_counts_words_hedges_and_repeats():
    parts = tiny_preferences.anatomy(["good good film", "fine, but slow", "a plain nice one", ""])
    assert parts["words"].tolist() == [3, 3, 4, 0]
    assert parts["hedged"].tolist() == [0, 1, 0, 0]        # "but" as a word, not inside "button"
    assert parts["padded"].tolist() == [1, 0, 0, 0]
    assert tiny_preferences.anatomy(["a button"])["hedged"].item() == 0
    means = tiny_preferences.anatomy_means(["good good film", "fine, but slow"])
    assert means == {"words_mean": 3.0, "hedged_share": 0.5, "padded_share": 0.5}


def _run(method, seed, kl, true, kl_key="kl_ref", variant="native"):
    return {"method": method, "seed": seed, "variant": variant, "kl_key": kl_key,
            "series": {kl_key: kl, "true_reward_mean": true}}


def test_true_at_interpolates_where_the_kl_first_reaches_the_mark():
    assert seeds.true_at([0.0, 2.0, 4.0], [0.0, 1.0, 3.0], 3.0) == pytest.approx(2.0)
    assert seeds.true_at([0.0, 2.0, 4.0, 3.0], [0.0, 1.0, 3.0, -5.0], 3.0) == pytest.approx(2.0)   # the first crossing
    assert seeds.true_at([1.0, 2.0], [0.5, 1.0], 0.5) == 0.5                                       # from the start


def test_matched_kl_compares_gains_at_the_kl_both_reached_and_orders_only_what_holds_on_every_run():
    dpo = [_run("DPO, β = 0.1", s, [None, 1.0, None, 2.0], [None, 0.1, None, 0.3], "sample_kl") for s in (0, 1)]
    for run in dpo:
        run["before"] = {"true_reward_mean": -0.1}                     # DPO's gain: 0.3 − (−0.1) = 0.4
    # PPO's 5-update windows: a KL rising 0 → 9 over 14 updates; r* from 0.2, steeply on seed 0, slowly on seed 1.
    kl = [float(i) * 9 / 13 for i in range(14)]
    ppo = [_run("RM + PPO", s, kl, [0.2 + (3 - 2.9 * s) * i / 13 for i in range(14)]) for s in (0, 1)]
    rows = seeds.matched_kl(dpo + ppo)
    assert len(rows) == 2 and all(r["kl"] == 2.0 for r in rows)      # DPO stopped at 2 nats, PPO went past
    assert all(r["dpo_true"] == pytest.approx(0.3) and r["dpo_gain"] == pytest.approx(0.4) for r in rows)
    kl_ppo, true_ppo = seeds.kl_and_true(ppo[0])
    assert rows[0]["ppo_true"] == pytest.approx(seeds.true_at(kl_ppo, true_ppo, 2.0))
    assert rows[0]["ppo_gain"] == pytest.approx(rows[0]["ppo_true"] - 0.2)   # from its own first batch
    assert seeds.ordering(rows) == "mixed"                             # seed 0 gains more than DPO, seed 1 less
    assert seeds.ordering(rows[:1]) == "PPO higher on every run"
    sentence = seeds.comparison_sentence(rows)
    assert "no ordering is claimed" in sentence and "RM + PPO against DPO, β = 0.1" in sentence


def test_the_sweep_sentence_says_only_what_every_run_shows():
    def dpo(beta, kl, chosen, tokens):
        return {"method": f"DPO, β = {beta}", "seed": 0, "variant": "native", "kl_key": "sample_kl",
                "before": {"response_length": 10.0},
                "series": {"sample_kl": [None, kl], "true_reward_mean": [None, 0.3], "response_length": [None, tokens],
                           "rewards/chosen": [0.0, chosen]}}
    study = [dpo(0.03, 6.0, -0.2, 14.0), dpo(0.1, 4.0, 0.1, 9.0), dpo(0.3, 2.0, -0.5, 15.0)]
    sweep = seeds.dpo_sweep(study)
    assert list(sweep) == ["DPO, β = 0.03", "DPO, β = 0.1", "DPO, β = 0.3"]
    assert sweep["DPO, β = 0.1"]["chosen_reward"] == [pytest.approx(0.05)]   # the mean of its (last ≤ 5) updates
    sentence = seeds.sweep_sentence(sweep)
    assert "below zero (their likelihood below π_ref's) at β = 0.03, β = 0.3;" in sentence
    assert "longer than π_ref's at β = 0.03, β = 0.3;" in sentence
    assert "a smaller β ended further from π_ref" in sentence
    study[0]["series"]["sample_kl"][1] = 3.0                           # β = 0.03 now nearer than β = 0.1
    assert "not the same on every run" in seeds.sweep_sentence(seeds.dpo_sweep(study))


def test_best_of_n_is_the_optimums_beta_to_zero_end():
    g = torch.Generator().manual_seed(0)
    samples = {"proxy": torch.randn(40, generator=g), "truth": torch.randn(40, generator=g),
               "prompt": torch.arange(40) % 5}
    best, sharp = lab.best_of_n(samples), lab.optimum(samples, 1e-4)
    assert best["kl"] == pytest.approx(math.log(8)) and best["n"] == "8–8"
    assert sharp["kl"] == pytest.approx(best["kl"], abs=1e-4)
    assert sharp["proxy"] == pytest.approx(best["proxy"], abs=1e-4)
    assert sharp["truth"] == pytest.approx(best["truth"], abs=1e-4)


def test_displacement_reads_the_first_and_last_updates():
    records = [{"rewards/chosen": -0.1 * i, "rewards/margins": 0.2 * i} for i in range(10)]
    moved = lab.displacement(records, width=5)
    assert moved["rewards/chosen"] == pytest.approx((-0.2, -0.7))
    assert moved["rewards/margins"] == pytest.approx((0.4, 1.4))
    assert "logps/chosen" not in moved


def test_the_summary_counts_each_finding_over_the_runs():
    def ppo(method, hedged, padded, peak, trough):
        n = 12
        series = {"true_reward_mean": [0.1] * n, "kl_ref": [float(i) for i in range(n)],
                  "response_length": [10.0] * n, "words_mean": [6.0] * n,
                  "hedged_share": [0.2] + [hedged] * (n - 1), "padded_share": [0.2] + [padded] * (n - 1)}
        return {"method": method, "seed": 0, "variant": "native", "kl_key": "kl_ref", "series": series,
                "true_peak": peak, "true_trough": trough}

    def dpo(chosen_end, tokens_end):
        return {"method": "DPO, β = 0.1", "seed": 0, "variant": "native", "kl_key": "sample_kl",
                "before": {"response_length": 10.0},
                "series": {"rewards/chosen": [0.0, chosen_end], "response_length": [None, tokens_end],
                           "sample_kl": [None, 2.0], "true_reward_mean": [None, 0.3]}}

    study = [ppo("RM + PPO, β = 0.005", 0.9, 0.3, 0.4, -0.2), ppo("RM + PPO, β = 0.005", 0.3, 0.3, 0.4, -0.1),
             ppo("RM + PPO, β = 0.005", 0.9, 0.9, 0.4, 0.35), ppo("RM + PPO, β = 0.05", 0.05, 0.2, 0.7, 0.7),
             ppo("RM + PPO, β = 0.05", 0.15, 0.2, 0.7, 0.7), dpo(-0.3, 15.0), dpo(0.1, 9.0)]
    sentence = seeds.summary_sentence(study)
    assert "fall by 0.2 or more on 2 of 3 runs, and on 1 of those 2" in sentence
    assert "hedged less than half as often as π_ref's on 1 of 2" in sentence
    assert "less likely than under π_ref on 1 of its 2 runs and with longer completions on 1." in sentence
