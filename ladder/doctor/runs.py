"""A run directory read into named series (step → value) under ladder's metric names, and the run's config facts.

Two sources:

    ladder   DIR/config.json + DIR/metrics.jsonl (one record per update); DIR/completions.jsonl if present
    TRL      DIR/trainer_state.json's ``log_history`` (one record per logging step), or the newest
             DIR/checkpoint-*/trainer_state.json; TRL's names become ladder's through ``TRL_NAMES``

TRL's ``training_args.bin`` is a pickle and is never read: the config facts of a TRL run come from
``training_args.json`` (or a ``config.json`` that holds GRPOConfig fields, not a model's), from ``trl_config``
(``--trl-config FILE``), and from the log itself (the learning rate); what none of them gives is assumed to be
TRL 1.16's default and listed in ``Run.unknown``.
"""

from __future__ import annotations

import json
import math
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from ladder.runlog import UsageError

# TRL 1.16 GRPOTrainer's metric → ladder's name (grpo_trainer.py, ``self._metrics[mode][...]`` and Trainer's
# own loss / grad_norm / learning_rate). ``rewards/<name>/mean`` and ``/std`` are the same in both.
TRL_NAMES = {
    "reward": "reward",
    "reward_std": "reward_std",
    "frac_reward_zero_std": "frac_reward_zero_std",
    "completions/clipped_ratio": "completions/clipped_ratio",
    "completions/mean_length": "completions/mean_length",
    "completions/max_length": "completions/max_length",
    "clip_ratio/region_mean": "clip_frac",
    "clip_ratio/low_mean": "clip_frac_low",
    "clip_ratio/high_mean": "clip_frac_high",
    "cispo_clip_ratio": "clip_frac",
    "kl": "kl_ref",
    "entropy": "entropy",
    "loss": "loss",
    "policy_loss": "loss_pg",
    "grad_norm": "grad_norm",
    "learning_rate": "lr",
    "sampling/sampling_logp_difference/mean": "sampler/logp_diff_mean",
    "sampling/sampling_logp_difference/max": "sampler/logp_diff_max",
    "sampling/importance_sampling_ratio/min": "sampler/is_ratio_min",
    "sampling/importance_sampling_ratio/mean": "sampler/is_ratio_mean",
    "sampling/importance_sampling_ratio/max": "sampler/is_ratio_max",
}
PER_FUNCTION = re.compile(r"^rewards/[^/]+/(mean|std)$")

# The ladder rungs whose records use other names for the same quantities.
LADDER_RENAMES = {
    "ppo-sentiment": {"reward_mean": "reward", "response_length": "completions/mean_length",
                      "kl_ref": "kl_ref_seq", "kl_ref_token_k3": "kl_ref"},
    "cartpole": {"episode_return": "return"},
    "reinforce": {"episode_return": "return"},
}

# GRPOConfig field → the fact it gives, with TRL 1.16's default where the run does not say.
TRL_FACTS = {
    "num_iterations": ("mu", 1),
    "steps_per_generation": ("minibatches", None),  # None: TRL uses gradient_accumulation_steps
    "gradient_accumulation_steps": ("accumulation", 1),
    "loss_type": ("loss_type", "dapo"),
    "learning_rate": ("lr", 1e-6),
    "max_completion_length": ("max_new_tokens", 512),
    "beta": ("kl_coef", 0.0),
}


@dataclass
class Series:
    """One metric over the run: ``steps[i]`` → ``values[i]``, finite values only, in step order."""

    steps: list[int]
    values: list[float]

    def __len__(self) -> int:
        return len(self.values)


@dataclass
class Facts:
    """The config a signature needs: μ passes × M minibatches per batch, the loss aggregation, lr, LoRA, …"""

    algorithm: str
    mu: int | None = None
    minibatches: int | None = None
    loss_type: str | None = None
    lr: float | None = None
    lora: bool | None = None
    max_new_tokens: int | None = None
    kl_coef: float | None = None
    sampler_correction: str | None = None
    value_coef: float | None = None
    unweighted: frozenset[str] = frozenset()  # reward functions logged with weight 0: not in the objective
    assumed: set[str] = field(default_factory=set)  # facts not read from the run: a default taken

    def shown(self, fact: str) -> str:
        value = getattr(self, fact)
        return f"{value} (assumed)" if fact in self.assumed else str(value)

    @property
    def updates_per_batch(self) -> int | None:
        """μ·M: optimiser steps on one batch. 1 means π_old = π_θ at every step (ratio ≡ 1)."""
        if self.mu is None or self.minibatches is None:
            return None
        return self.mu * self.minibatches


@dataclass
class Run:
    path: Path
    source: str  # "ladder" or "trl"
    rung: str
    series: dict[str, Series]
    facts: Facts
    completions: list[dict] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # e.g. a torn last line left out
    unknown: list[str] = field(default_factory=list)  # config facts assumed, not read

    def get(self, name: str) -> Series | None:
        found = self.series.get(name)
        return found if found is not None and len(found) else None


def read_run(path: str | os.PathLike, trl_config: str | os.PathLike | None = None) -> Run:
    """The run in ``path`` (a ladder run directory or a TRL output directory); bad input is a UsageError."""
    directory = Path(path)
    if not directory.exists():
        raise UsageError(f"{directory}: no such directory")
    if not directory.is_dir():
        raise UsageError(f"{directory} is not a directory; give a run's output directory")
    ladder_config = (directory / "config.json").exists() and _is_ladder_config(directory)
    if (directory / "metrics.jsonl").exists() or ladder_config:
        return _read_ladder(directory)
    state = _trainer_state(directory)
    if state is not None:
        return _read_trl(directory, state, trl_config)
    raise UsageError(f"{directory} is not a run: no metrics.jsonl (ladder) and no trainer_state.json (TRL) there")


def _is_ladder_config(directory: Path) -> bool:
    config = _json_file(directory / "config.json")
    return isinstance(config, dict) and "rung" in config


def _json_file(path: Path):
    try:
        return json.loads(path.read_text())
    except OSError as e:
        raise UsageError(f"{path}: cannot read it ({e.strerror or type(e).__name__})") from None
    except ValueError:
        raise UsageError(f"{path} is not valid JSON; is the file complete?") from None


def _finite(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _series_of(records: list[dict], renames: dict[str, str], keep) -> dict[str, Series]:
    """Each record's numeric fields, renamed; the step is the record's ``step`` (its index + 1 without one)."""
    series: dict[str, Series] = {}
    for i, record in enumerate(records):
        step = record.get("step", i + 1)
        for key, value in record.items():
            name = renames.get(key, key if keep(key) else None)
            if name is None or key == "step" or not _finite(value):
                continue
            series.setdefault(name, Series([], []))
            series[name].steps.append(int(step))
            series[name].values.append(float(value))
    return series


# --- ladder -------------------------------------------------------------------------------------------------

def _read_jsonl(path: Path, notes: list[str]) -> list[dict]:
    """The whole JSON lines of ``path``: a torn last line (what an interrupted write leaves) is left out and
    noted; a broken line elsewhere is bad input."""
    try:
        lines = [line for line in path.read_text(errors="replace").splitlines() if line.strip()]
    except OSError as e:
        raise UsageError(f"{path}: cannot read it ({e.strerror or type(e).__name__})") from None
    records = []
    for i, line in enumerate(lines):
        try:
            record = json.loads(line)
        except ValueError:
            if i == len(lines) - 1:
                notes.append(f"{path.name}: the last line is torn (an interrupted write); read the {i} whole lines")
                break
            raise UsageError(f"{path}: line {i + 1} is not JSON; the log is damaged") from None
        if not isinstance(record, dict):
            raise UsageError(f"{path}: line {i + 1} is not a JSON object; is this a ladder metrics file?")
        records.append(record)
    return records


def _read_ladder(directory: Path) -> Run:
    if not (directory / "config.json").exists():
        raise UsageError(f"{directory}: metrics.jsonl without config.json; is it a ladder run directory?")
    config = _json_file(directory / "config.json")
    if not isinstance(config, dict) or "rung" not in config:
        raise UsageError(f"{directory}/config.json names no rung; is it a ladder run directory?")
    if config["rung"] == "eval":
        raise UsageError(f"{directory} is an eval run: it trains nothing and logs no updates to diagnose")
    if not (directory / "metrics.jsonl").exists():
        raise UsageError(f"{directory}: no metrics.jsonl yet (the run logged no update)")
    notes: list[str] = []
    records = _read_jsonl(directory / "metrics.jsonl", notes)
    if not records:
        raise UsageError(f"{directory}/metrics.jsonl holds no update yet")
    rung = config["rung"]
    series = _series_of(records, LADDER_RENAMES.get(rung, {}), keep=lambda key: True)
    completions = _read_jsonl(directory / "completions.jsonl", notes) if (directory / "completions.jsonl").exists() \
        else []
    facts = Facts(algorithm=rung, mu=config.get("mu", 1), minibatches=config.get("num_minibatches", 1),
                  loss_type=config.get("loss_type"), lr=config.get("lr"),
                  lora=bool(config.get("lora") or config.get("qlora")) if "lora" in config else None,
                  max_new_tokens=config.get("max_new_tokens"), kl_coef=config.get("kl_coef"),
                  sampler_correction=config.get("sampler_correction"), value_coef=config.get("value_coef"),
                  unweighted=_unweighted(config))
    if rung == "reinforce":
        facts.mu, facts.minibatches = None, None  # no ratio, no clipping
    return Run(directory, "ladder", rung, series, facts, completions, notes)


def _unweighted(config: dict) -> frozenset[str]:
    """The reward functions of ``--reward-funcs`` whose ``--reward-weights`` entry is 0."""
    from ladder import rewards

    if not config.get("reward_funcs"):
        return frozenset()
    try:
        weights = rewards.weights(config["reward_funcs"], config.get("reward_weights"))
    except UsageError:
        return frozenset()
    return frozenset(name for name, weight in weights.items() if weight == 0)


# --- TRL ----------------------------------------------------------------------------------------------------

def _trainer_state(directory: Path) -> tuple[Path, dict] | None:
    """trainer_state.json in ``directory``, else the one of its newest ``checkpoint-N``."""
    candidates = [directory / "trainer_state.json"]
    checkpoints = [p for p in directory.glob("checkpoint-*") if re.fullmatch(r"checkpoint-\d+", p.name)]
    checkpoints.sort(key=lambda p: int(p.name.split("-")[1]), reverse=True)
    candidates += [p / "trainer_state.json" for p in checkpoints]
    for path in candidates:
        if path.exists():
            state = _json_file(path)
            if not isinstance(state, dict) or not isinstance(state.get("log_history"), list):
                raise UsageError(f"{path} has no log_history list; is it a Trainer's state?")
            return path, state
    return None


def _trl_config(directory: Path, trl_config) -> tuple[dict, str | None]:
    """GRPOConfig fields: ``--trl-config FILE`` first, then training_args.json, then a config.json that holds
    them (a model's config.json does not)."""
    if trl_config is not None:
        path = Path(trl_config)
        if not path.is_file():
            raise UsageError(f"--trl-config {path}: no such file")
        config = _json_file(path)
        if not isinstance(config, dict):
            raise UsageError(f"--trl-config {path}: not a JSON object of GRPOConfig fields")
        return config, str(path)
    for name in ("training_args.json", "config.json"):
        path = directory / name
        if path.is_file():
            config = _json_file(path)
            if isinstance(config, dict) and any(key in config for key in TRL_FACTS):
                return config, str(path)
    return {}, None


def logged_facts(series: dict[str, Series]) -> dict:
    """Facts the log itself shows: the peak learning rate; the token budget, where a completion was cut off
    (a cut-off completion is exactly max_completion_length long)."""
    facts = {}
    if "lr" in series:
        facts["lr"] = max(series["lr"].values)
    cut, longest = series.get("completions/clipped_ratio"), series.get("completions/max_length")
    if cut is not None and longest is not None and max(cut.values) > 0:
        facts["max_new_tokens"] = int(max(longest.values))
    return facts


def _read_trl(directory: Path, found: tuple[Path, dict], trl_config) -> Run:
    state_path, state = found
    records = [r for r in state["log_history"] if isinstance(r, dict) and "train_runtime" not in r]
    records = [r for r in records if not any(key.startswith("eval_") for key in r)]
    if not records:
        raise UsageError(f"{state_path}: log_history holds no training step yet")
    keep = PER_FUNCTION.match
    series = _series_of(records, TRL_NAMES, keep=lambda key: bool(keep(key)))
    series["nonfinite_steps"] = Series([int(r.get("step", i + 1)) for i, r in enumerate(records)],
                                       [0.0 if all(_finite(r.get(k, 0.0)) for k in ("loss", "grad_norm")) else 1.0
                                        for r in records])
    config, source = _trl_config(directory, trl_config)
    notes = [f"read {state_path.relative_to(directory)}" + (f" and {source}" if source else "")]
    values, unknown, assumed = {}, [], set()
    for trl_field, (fact, default) in TRL_FACTS.items():
        if trl_field in config:
            values[fact] = config[trl_field]
        elif fact in logged_facts(series):
            values[fact] = logged_facts(series)[fact]
        else:
            values[fact] = default
            assumed.add(fact)
            unknown.append(f"{trl_field} (assumed TRL's default {default})" if default is not None
                           else f"{trl_field} (assumed TRL's default: gradient_accumulation_steps)")
    minibatches = values["minibatches"] if values["minibatches"] is not None else values["accumulation"]
    if values["minibatches"] is None and "accumulation" in assumed:
        assumed.add("minibatches")
    lora = any(p.name == "adapter_config.json" for p in [directory / "adapter_config.json", state_path.parent /
                                                          "adapter_config.json"] if p.exists())
    facts = Facts(algorithm="trl-grpo", mu=values["mu"], minibatches=minibatches, loss_type=values["loss_type"],
                  lr=values["lr"], lora=lora, max_new_tokens=values["max_new_tokens"], kl_coef=values["kl_coef"],
                  sampler_correction=config.get("vllm_importance_sampling_mode"), assumed=assumed)
    if not lora:
        unknown.append("LoRA (no adapter_config.json: taken as full fine-tuning)")
    return Run(directory, "trl", "grpo", series, facts, [], notes, unknown)
