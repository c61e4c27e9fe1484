"""Notebook 9's runs and numbers: a reward model on the tiny preference pairs, PPO against it at two β, DPO on the same
pairs, and the KL-regularised optimum over samples of π_ref — every number computed here, on the tiny task.

    pairs_sample(n)                  the first n training pairs with their lengths and true rewards
    pair_counts()                    how often the labeller's choice is the longer completion, and the truth's order
    reward_model_run(out)            ``reward-model --preset tiny``: its summary and records
    ppo_runs(out)                    ``ppo-sentiment --preset tiny`` against that r_φ at each β: records per β
    dpo_run(out)                     ``dpo --preset tiny``: its summary and records
    scored_samples(reward_model)     the held-out completions (samples of π_ref) with r_φ, r* and their prompt
    optimum(samples, β)              π*(y|x) ∝ π̂_ref(y|x)·exp(r_φ(x, y)/β), π̂_ref uniform over each prompt's n
                                     samples: E[r_φ], E[r*], the KL (≤ log n) and the implicit reward
                                     β·log π*/π̂_ref = r_φ − β·log Z(x)
    pair_anatomy()                   the pairs' chosen and rejected completions: tokens, words, hedges, repeats
    anatomy_at(records)              a PPO run's completions (the same): π_ref's, and at r*'s peak, trough and end
    best_of_n(samples)               the highest-r_φ sample of each prompt: π*_β's β → 0 end
    displacement(records)            DPO's implicit rewards, margin and log-probs: first and last 5 updates
"""

from __future__ import annotations

import json
import math
import shutil
from collections import defaultdict
from pathlib import Path

import torch

from ladder import run_cache
from ladder.tasks import review_models, sentiment_rewards, tiny_preferences
from ladder.tasks.tiny_lm import cache_dir
from ladder.viz.lm_lab import quiet_run

PPO_FLAGS = ("--no-adaptive-kl", "--max-new-tokens", "32", "--steps", "60", "--lr", "2e-4", "--print-samples", "0",
             "--num-eval-prompts", "6")  # the preset's 64 completions per update, in 2 minibatches


def _made(rung: str, *flags: str) -> Path:
    """The directory of ``python -m ladder.run RUNG --preset tiny …``, made once per machine and code version
    (``run_cache``, under ``$LADDER_CACHE/runs``: the tests and a second run of the notebook read the same runs)."""
    return run_cache.cached_run(rung, ["--preset", "tiny", "--no-progress", *flags], cache_dir() / "runs")


def _run(rung: str, out: Path, *flags: str) -> tuple[dict, list[dict]]:
    """``_made``'s run copied to OUT: (summary.json, metrics.jsonl records)."""
    shutil.copytree(_made(rung, *flags), out)
    records = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    return json.loads((out / "summary.json").read_text()), records


ANATOMY = ("response_length", "words_mean", "hedged_share", "padded_share")


def pair_anatomy(split: str = "train") -> dict[str, dict[str, float]]:
    """The chosen and the rejected completions of the pairs: their mean tokens (the tiny review GPT-2's) and words,
    the longest of each, and the shares that hedge with a "but" or repeat a word — what the labeller's choices
    carry besides sentiment."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(review_models.tiny_model_path())
    pairs, out = tiny_preferences.pairs(split), {}
    for side in ("chosen", "rejected"):
        completions = [p[side] for p in pairs]
        tokens = [len(tokenizer(c)["input_ids"]) for c in completions]
        out[side] = {"response_length": sum(tokens) / len(tokens), "max_tokens": max(tokens),
                     "max_words": max(map(tiny_preferences.words, completions)),
                     **tiny_preferences.anatomy_means(completions)}
    return out


def pairs_sample(n: int = 4) -> list[dict]:
    return [{**p, "words_chosen": tiny_preferences.words(p["chosen"]),
             "words_rejected": tiny_preferences.words(p["rejected"])} for p in tiny_preferences.pairs("train")[:n]]


def pair_counts() -> dict:
    """Over the training pairs: the share whose chosen completion is the longer (of those with a longer one), and the
    share the truth orders as the labeller did (of those the truth does not tie)."""
    pairs = tiny_preferences.pairs("train")
    longer = [tiny_preferences.words(p["chosen"]) > tiny_preferences.words(p["rejected"]) for p in pairs
              if tiny_preferences.words(p["chosen"]) != tiny_preferences.words(p["rejected"])]
    truth = [p["score_chosen"] > p["score_rejected"] for p in pairs if p["score_chosen"] != p["score_rejected"]]
    return {"pairs": len(pairs), "chosen_longer": sum(longer) / len(longer), "truth_agrees": sum(truth) / len(truth)}


def _reward_model_flags(steps: int, seed: int) -> tuple[str, ...]:
    return "--steps", str(steps), "--eval-every", "20", "--seed", str(seed)


def reward_model_run(out: Path, steps: int = 120, seed: int = 0) -> tuple[dict, list[dict]]:
    return _run("reward-model", out, *_reward_model_flags(steps, seed))


def ppo_runs(out: Path, betas=(0.005, 0.05), seed: int = 0) -> dict[float, list[dict]]:
    """PPO against ``reward_model_run``'s r_φ (fixed β, the truth logged beside it), one run per β; each run's
    directory is OUT/ppo-β. The reward model is named by its kept run's path, so that the PPO runs are kept too."""
    reward_model = _made("reward-model", *_reward_model_flags(120, seed)) / "reward_model"
    return {beta: _run("ppo-sentiment", out / f"ppo-{beta}", "--reward-model", str(reward_model), "--true-reward",
                       "tiny-preferences", "--kl-coef", str(beta), "--seed", str(seed), *PPO_FLAGS)[1]
            for beta in betas}


def dpo_run(out: Path, beta: float = 0.1, steps: int = 120, seed: int = 0) -> tuple[dict, list[dict]]:
    """``dpo --preset tiny``, evaluated every 40 updates (the preset's every 20 costs the notebook twice the time)."""
    return _run("dpo", out, "--beta", str(beta), "--steps", str(steps), "--eval-every", "40", "--seed", str(seed))


def scored_samples(reward_model: Path) -> dict:
    """The 1,000 completions of the held-out pairs — samples of π_ref, the tiny review GPT-2 — with r_φ, r* and the
    index of their prompt."""
    pairs = tiny_preferences.pairs("test")
    prompts = [p["prompt"] for p in pairs for _ in (0, 1)]
    completions = [c for p in pairs for c in (p["chosen"], p["rejected"])]
    with quiet_run():
        proxy = sentiment_rewards.load_reward(str(reward_model))([p + c for p, c in zip(prompts, completions)])
    truth = tiny_preferences.TrueReward()(prompts, completions)
    index = {prompt: i for i, prompt in enumerate(dict.fromkeys(prompts))}
    return {"proxy": proxy, "truth": truth, "prompt": torch.tensor([index[p] for p in prompts]),
            "completions": completions}


def optimum(samples: dict, beta: float) -> dict:
    """π*_β over each prompt's samples: w_i = exp(r_φ,i/β) / Σ_j exp(r_φ,j/β) (π_ref uniform over its own samples);
    per prompt KL(π*‖π_ref) = Σ w log(n·w); the means over prompts of E[r_φ], E[r*] and the KL; the implicit reward
    β·log(π*/π_ref) = β·log(n·w) = r_φ − β·log Z(x), Z(x) = mean_j exp(r_φ,j/β)."""
    groups = defaultdict(list)
    for i, p in enumerate(samples["prompt"].tolist()):
        groups[p].append(i)
    implicit = torch.empty_like(samples["proxy"])
    kl, proxy, truth, log_n = [], [], [], []
    for rows in groups.values():
        rows = torch.tensor(rows)
        log_w = torch.log_softmax(samples["proxy"][rows] / beta, 0)
        w = log_w.exp()
        implicit[rows] = beta * (log_w + math.log(len(rows)))
        kl.append(torch.special.xlogy(w, len(rows) * w).sum().item())
        proxy.append((w * samples["proxy"][rows]).sum().item())
        truth.append((w * samples["truth"][rows]).sum().item())
        log_n.append(math.log(len(rows)))
    mean = lambda xs: sum(xs) / len(xs)  # noqa: E731
    return {"beta": beta, "kl": mean(kl), "proxy": mean(proxy), "truth": mean(truth), "implicit": implicit,
            "log_n": mean(log_n)}


def smoothed(records: list[dict], key: str, width: int = 5) -> list[float]:
    """The mean of each ``width`` consecutive records' ``key`` (a batch of 32 completions is a noisy reading)."""
    values = [r[key] for r in records]
    return [sum(values[i:i + width]) / width for i in range(len(values) - width + 1)]


def anatomy_at(records: list[dict], width: int = 5) -> dict[str, dict[str, float]]:
    """Where the completions' length went: π_ref's own (the first update's batch, sampled before any step), then at
    r*'s peak, trough and end windows (``peak_and_end``'s) — their tokens (``response_length``), words, and the shares
    that hedge with a "but" or repeat a word."""
    at = {name: i for name, i in _windows(records, width).items() if name != "start"}
    out = {"π_ref": {key: records[0][key] for key in ANATOMY}}
    return out | {name: {key: smoothed(records, key, width)[i] for key in ANATOMY} for name, i in at.items()}


def _windows(records: list[dict], width: int) -> dict[str, int]:
    """The indices of the first window, r*'s peak, its lowest window after the peak, and the last."""
    true = smoothed(records, "true_reward_mean", width)
    peak = max(range(len(true)), key=true.__getitem__)
    trough = min(range(peak, len(true)), key=true.__getitem__)
    return {"start": 0, "peak": peak, "trough": trough, "end": len(true) - 1}


def peak_and_end(records: list[dict], width: int = 5) -> dict:
    """The true reward's best ``width``-update mean (its peak), its lowest after the peak (its trough), its last one
    (its end), the KL to π_ref at each, and r_φ's score (likewise) at its start, at r*'s peak and trough and at the
    end."""
    true, kl = smoothed(records, "true_reward_mean", width), smoothed(records, "kl_ref", width)
    proxy = smoothed(records, "score_mean", width)
    at = _windows(records, width)
    peak, trough = at["peak"], at["trough"]
    return {"peak": true[peak], "kl_at_peak": kl[peak], "trough": true[trough], "kl_at_trough": kl[trough],
            "end": true[-1], "kl_end": kl[-1], "proxy_start": proxy[0], "proxy_at_peak": proxy[peak],
            "proxy_at_trough": proxy[trough], "proxy_end": proxy[-1]}


def best_of_n(samples: dict) -> dict:
    """Best-of-n over each prompt's samples: the one r_φ scores highest; the means over prompts of its r_φ and r*,
    of log n, its KL to π̂_ref (uniform over the n samples), and of log n − (n − 1)/n, the bound on its KL to the
    real π_ref (Beirami et al. 2024); n as 'fewest–most' samples per prompt."""
    groups = defaultdict(list)
    for i, p in enumerate(samples["prompt"].tolist()):
        groups[p].append(i)
    best = [max(rows, key=lambda i: samples["proxy"][i].item()) for rows in groups.values()]
    sizes = [len(rows) for rows in groups.values()]
    return {"proxy": samples["proxy"][best].mean().item(), "truth": samples["truth"][best].mean().item(),
            "kl": sum(map(math.log, sizes)) / len(sizes), "n": f"{min(sizes)}–{max(sizes)}",
            "kl_bound": sum(math.log(n) - (n - 1) / n for n in sizes) / len(sizes)}


DISPLACED = ("rewards/chosen", "rewards/rejected", "rewards/margins", "logps/chosen", "logps/rejected")


def displacement(records: list[dict], width: int = 5) -> dict[str, tuple[float, float]]:
    """DPO's implicit rewards, margin and log-probs of the training batches: (mean of the first ``width`` updates,
    mean of the last ``width``)."""
    out = {}
    for key in DISPLACED:
        values = [r[key] for r in records if key in r]
        if values:
            out[key] = (sum(values[:width]) / len(values[:width]), sum(values[-width:]) / len(values[-width:]))
    return out
