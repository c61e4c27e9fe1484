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
import stat
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
    """The run in ``path`` (a ladder run directory or a TRL output directory); bad input is a UsageError.

    Any value in a log is accepted. A number is read; a non-finite reading (NaN, ±Infinity, or null: ladder
    writes a NaN as null) is left out of the series (a TRL record's non-finite loss or grad_norm is counted in
    ``nonfinite_steps``); a record whose step is not a whole number ≥ 0, and a value that is not a number (a
    string, a boolean, a list, an object, a number beyond a float), are left out and said in ``Run.notes``, one
    line per kind. A config fact of the wrong kind (``"learning_rate": "1e-6"``) is bad input, naming the file and
    the key: the whole verdict rests on it."""
    directory = Path(path)
    kind = _kind(directory)
    if kind is None:
        raise UsageError(f"{directory}: no such directory")
    if kind != "dir":
        raise UsageError(f"{directory} is not a directory; give a run's output directory")
    ladder_config = _kind(directory / "config.json") is not None and _is_ladder_config(directory)
    if _kind(directory / "metrics.jsonl") is not None or ladder_config:
        return _read_ladder(directory)
    state = _trainer_state(directory)
    if state is not None:
        return _read_trl(directory, state, trl_config)
    raise UsageError(f"{directory} is not a run: no metrics.jsonl (ladder) and no trainer_state.json (TRL) there")


def _kind(path: Path) -> str | None:
    """"dir", "file" (a regular one), "other" (a FIFO, a device, …) or None where nothing is; a path that cannot be
    looked at (a name too long, a directory without permission, a loop of links) is bad input."""
    try:
        mode = path.stat().st_mode
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError as e:
        raise UsageError(f"{path}: cannot look at it ({e.strerror or type(e).__name__})") from None
    return "dir" if stat.S_ISDIR(mode) else "file" if stat.S_ISREG(mode) else "other"


def _text(path: Path, errors: str = "strict") -> str:
    """The text of the regular file ``path``: a directory, a FIFO or a device there is bad input, as is a file
    that cannot be read."""
    if _kind(path) != "file":
        raise UsageError(f"{path} is not a file")
    try:
        return path.read_text(errors=errors)
    except OSError as e:
        raise UsageError(f"{path}: cannot read it ({e.strerror or type(e).__name__})") from None


def _is_ladder_config(directory: Path) -> bool:
    config = _json_file(directory / "config.json")
    return isinstance(config, dict) and "rung" in config


class TooLarge:
    """A JSON number beyond a float's range (a 400-digit integer, ``1e400``), kept as the text it was written as."""

    def __init__(self, text: str):
        self.text = text

    def __str__(self) -> str:
        return self.text if len(self.text) <= 20 else f"a {len(self.text)}-digit number"


def _json_int(text: str) -> int | TooLarge:
    if len(text) > 400:  # beyond any float, and past the digits Python parses into an int
        return TooLarge(text)
    try:
        float(int(text))
    except OverflowError:
        return TooLarge(text)
    return int(text)


def _json_float(text: str) -> float | TooLarge:
    value = float(text)
    return value if math.isfinite(value) else TooLarge(text)  # JSON's Infinity and NaN are constants, not here


def parse_json(text: str):
    """JSON, its numbers beyond a float's range as ``TooLarge``; anything else (nesting too deep for the parser
    included) is a ValueError."""
    try:
        return json.loads(text, parse_int=_json_int, parse_float=_json_float)
    except RecursionError:
        raise ValueError("nested too deeply") from None


def _json_file(path: Path):
    try:
        return parse_json(_text(path))
    except ValueError:
        raise UsageError(f"{path} is not valid JSON; is the file complete?") from None


def shown(value) -> str:
    """A logged value as the notes and messages show it: as JSON writes it, cut at 40 characters."""
    if isinstance(value, TooLarge):
        return f"{value}, beyond a float"
    if isinstance(value, (dict, list)):
        return "an object" if isinstance(value, dict) else "a list"
    text = json.dumps(value)
    return text if len(text) <= 40 else text[:39] + "…"


# --- a log's values -------------------------------------------------------------------------------------------

NOT_A_NUMBER = object()  # a string, a boolean, a list, an object, a TooLarge


def _number(value) -> float | None | object:
    """A logged value as a float; None for a non-finite reading (null, NaN, ±Infinity); NOT_A_NUMBER else."""
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return None
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    return NOT_A_NUMBER


def _step(value) -> int | None:
    """A record's step: a whole number from 0 to 2**53 (3.0 is 3); None for anything else."""
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= 2 ** 53:
        return value
    return None


LEFT_OUT = {  # what a log can hold that the doctor leaves out: (one, many), as the notes say it
    "step": ("record whose step is not a whole number ≥ 0", "records whose step is not a whole number ≥ 0"),
    "value": ("value that is not a number", "values that are not numbers"),
    "entry": ("entry that is not a JSON object", "entries that are not JSON objects"),
}


@dataclass
class Logged:
    """A log's records, each with its place in the file (``line 4``) and its step; what was left out, by place."""

    source: str  # the file, as the notes name it
    records: list[tuple[str, int, dict]] = field(default_factory=list)
    left_out: dict[str, list[str]] = field(default_factory=dict)  # a LEFT_OUT key → the places, in order

    def leave_out(self, what: str, place: str) -> None:
        self.left_out.setdefault(what, []).append(place)

    def notes(self) -> list[str]:
        """One line per kind of thing left out: how many, and where the first was."""
        return [f"{self.source}: left out {len(places)} {LEFT_OUT[what][len(places) > 1]} (first: {places[0]})"
                for what, places in self.left_out.items()]


def stepped(path: Path, records: list[tuple[str, dict]]) -> Logged:
    """The records of the log at ``path`` whose step is usable (a record without one: its position + 1), in the
    file's order; none at all is bad input."""
    logged = Logged(path.name)
    for i, (place, record) in enumerate(records):
        step = _step(record.get("step", i + 1))
        if step is None:
            logged.leave_out("step", f"{place}, step {shown(record.get('step'))}")
        else:
            logged.records.append((place, step, record))
    if records and not logged.records:
        raise UsageError(f"{path}: none of its {len(records)} records has a usable step "
                         f"({logged.left_out['step'][0]}); a step is a whole number ≥ 0")
    return logged


def _series_of(logged: Logged, renames: dict[str, str], keep) -> dict[str, Series]:
    """Each record's numbers, renamed, at the record's step; a value that is not a number is left out and
    noted in ``logged``, a non-finite reading is left out."""
    series: dict[str, Series] = {}
    for place, step, record in logged.records:
        for key, value in record.items():
            name = renames.get(key, key if keep(key) else None)
            if name is None or key == "step":
                continue
            number = _number(value)
            if number is NOT_A_NUMBER:
                logged.leave_out("value", f"{place}, {json.dumps(key)}: {shown(value)}")
            elif number is not None:
                series.setdefault(name, Series([], []))
                series[name].steps.append(step)
                series[name].values.append(number)
    return series


# --- a config's facts -----------------------------------------------------------------------------------------

def _real(value) -> bool:
    return isinstance(_number(value), float)


KINDS = {  # kind → (test, what the message asks for)
    "count": (lambda v: isinstance(v, int) and not isinstance(v, bool) and v >= 1, "a whole number ≥ 1"),
    "rate": (lambda v: _real(v) and v >= 0, "a number ≥ 0"),
    "number": (_real, "a number"),
    "name": (lambda v: isinstance(v, str), "a string"),
}


def config_fact(config: dict, key: str, kind: str, where: str, default=None):
    """``config[key]`` if it is of ``kind`` (see KINDS), ``default`` where the key is absent, None where it is
    null; anything else is bad input naming ``where`` (the file) and the key."""
    value = config.get(key, default)
    if value is None:
        return None
    test, wanted = KINDS[kind]
    if not test(value):
        kind_shown = " (a string)" if isinstance(value, str) else ""
        raise UsageError(f"{where}: {json.dumps(key)} is {shown(value)}{kind_shown}; it must be {wanted}")
    return float(value) if kind in ("rate", "number") else value


# --- ladder -------------------------------------------------------------------------------------------------

def _read_jsonl(path: Path, notes: list[str]) -> list[tuple[str, dict]]:
    """The whole JSON lines of ``path``, each with its place (``line 4``): a torn last line (what an interrupted
    write leaves) is left out and noted; a broken line elsewhere, or one that is not a JSON object, is bad input."""
    lines = [(n, line) for n, line in enumerate(_text(path, errors="replace").splitlines(), 1) if line.strip()]
    records = []
    for i, (n, line) in enumerate(lines):
        try:
            record = parse_json(line)
        except ValueError:
            if i == len(lines) - 1:
                notes.append(f"{path.name}: the last line is torn (an interrupted write); read the {i} whole lines")
                break
            raise UsageError(f"{path}: line {n} is not JSON; the log is damaged") from None
        if not isinstance(record, dict):
            raise UsageError(f"{path}: line {n} is not a JSON object; is this a ladder metrics file?")
        records.append((f"line {n}", record))
    return records


def _ladder_config(directory: Path) -> dict:
    """config.json of a ladder run that trains: a JSON object naming its rung."""
    path = directory / "config.json"
    if _kind(path) is None:
        raise UsageError(f"{directory}: metrics.jsonl without config.json; is it a ladder run directory?")
    config = _json_file(path)
    if not isinstance(config, dict) or config_fact(config, "rung", "name", str(path)) is None:
        raise UsageError(f"{path} names no rung; is it a ladder run directory?")
    if config["rung"] == "eval":
        raise UsageError(f"{directory} is an eval run: it trains nothing and logs no updates to diagnose")
    return config


def _read_ladder(directory: Path) -> Run:
    config, where = _ladder_config(directory), str(directory / "config.json")
    if _kind(directory / "metrics.jsonl") is None:
        raise UsageError(f"{directory}: no metrics.jsonl yet (the run logged no update)")
    notes: list[str] = []
    records = _read_jsonl(directory / "metrics.jsonl", notes)
    if not records:
        raise UsageError(f"{directory}/metrics.jsonl holds no update yet")
    rung = config["rung"]
    logged = stepped(directory / "metrics.jsonl", records)
    series = _series_of(logged, LADDER_RENAMES.get(rung, {}), keep=lambda key: True)
    notes += logged.notes()
    completions = [record for _, record in _read_jsonl(directory / "completions.jsonl", notes)] \
        if _kind(directory / "completions.jsonl") is not None else []

    def given(key: str, kind: str, default=None):
        return config_fact(config, key, kind, where, default)

    facts = Facts(algorithm=rung, mu=given("mu", "count", 1), minibatches=given("num_minibatches", "count", 1),
                  loss_type=given("loss_type", "name"), lr=given("lr", "rate"),
                  lora=bool(config.get("lora") or config.get("qlora")) if "lora" in config else None,
                  max_new_tokens=given("max_new_tokens", "count"), kl_coef=given("kl_coef", "number"),
                  sampler_correction=given("sampler_correction", "name"), value_coef=given("value_coef", "number"),
                  unweighted=_unweighted(config, where))
    if rung == "reinforce":
        facts.mu, facts.minibatches = None, None  # no ratio, no clipping
    return Run(directory, "ladder", rung, series, facts, completions, notes)


def _unweighted(config: dict, where: str) -> frozenset[str]:
    """The reward functions of ``--reward-funcs`` whose ``--reward-weights`` entry is 0."""
    from ladder import rewards

    funcs, weights_text = config_fact(config, "reward_funcs", "name", where), \
        config_fact(config, "reward_weights", "name", where)
    if not funcs:
        return frozenset()
    try:
        weights = rewards.weights(funcs, weights_text)
    except UsageError:
        return frozenset()
    return frozenset(name for name, weight in weights.items() if weight == 0)


# --- TRL ----------------------------------------------------------------------------------------------------

TRL_KINDS = {"num_iterations": "count", "steps_per_generation": "count", "gradient_accumulation_steps": "count",
             "loss_type": "name", "learning_rate": "rate", "max_completion_length": "count", "beta": "number",
             "vllm_importance_sampling_mode": "name"}


def _trainer_state(directory: Path) -> tuple[Path, dict] | None:
    """trainer_state.json in ``directory``, else the one of its newest ``checkpoint-N``."""
    candidates = [directory / "trainer_state.json"]
    checkpoints = [p for p in directory.glob("checkpoint-*") if re.fullmatch(r"checkpoint-\d+", p.name)]
    checkpoints.sort(key=lambda p: int(p.name.split("-")[1]), reverse=True)
    candidates += [p / "trainer_state.json" for p in checkpoints]
    for path in candidates:
        if _kind(path) is not None:
            state = _json_file(path)
            if not isinstance(state, dict) or not isinstance(state.get("log_history"), list):
                raise UsageError(f"{path} has no log_history list; is it a Trainer's state?")
            return path, state
    return None


def _trl_config(directory: Path, trl_config) -> tuple[dict, str | None]:
    """GRPOConfig fields, and the file they came from: ``--trl-config FILE`` first, then training_args.json, then a
    config.json that holds them (a model's config.json does not)."""
    if trl_config is not None:
        path = Path(trl_config)
        if _kind(path) != "file":
            raise UsageError(f"--trl-config {path}: {'no such file' if _kind(path) is None else 'not a file'}")
        config = _json_file(path)
        if not isinstance(config, dict):
            raise UsageError(f"--trl-config {path}: not a JSON object of GRPOConfig fields")
        return _checked(config, f"--trl-config {path}"), str(path)
    for name in ("training_args.json", "config.json"):
        path = directory / name
        if _kind(path) == "file":
            config = _json_file(path)
            if isinstance(config, dict) and any(key in config for key in TRL_FACTS):
                return _checked(config, str(path)), str(path)
    return {}, None


def _checked(config: dict, where: str) -> dict:
    """``config`` with each field TRL_KINDS names checked to be of its kind (null: not given), numbers as floats."""
    return {**config, **{key: config_fact(config, key, kind, where) for key, kind in TRL_KINDS.items()
                         if key in config}}


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


def _training_records(state_path: Path, history: list) -> Logged:
    """log_history's training records (not its evaluations nor its closing summary), each placed by its index;
    an entry that is not a JSON object is left out and noted."""
    records, odd = [], []
    for i, record in enumerate(history):
        if not isinstance(record, dict):
            odd.append(f"log_history[{i}]: {shown(record)}")
        elif "train_runtime" not in record and not any(key.startswith("eval_") for key in record):
            records.append((f"log_history[{i}]", record))
    if not records:
        raise UsageError(f"{state_path}: log_history holds no training step yet")
    logged = stepped(state_path, records)
    for place in odd:
        logged.leave_out("entry", place)
    return logged


def _read_trl(directory: Path, found: tuple[Path, dict], trl_config) -> Run:
    state_path, state = found
    logged = _training_records(state_path, state["log_history"])
    keep = PER_FUNCTION.match
    series = _series_of(logged, TRL_NAMES, keep=lambda key: bool(keep(key)))
    series["nonfinite_steps"] = Series([step for _, step, _ in logged.records],
                                       [1.0 if any(k in r and _number(r[k]) is None for k in ("loss", "grad_norm"))
                                        else 0.0 for _, _, r in logged.records])
    config, source = _trl_config(directory, trl_config)
    notes = [f"read {state_path.relative_to(directory)}" + (f" and {source}" if source else "")] + logged.notes()
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
                                                          "adapter_config.json"] if _kind(p) is not None)
    facts = Facts(algorithm="trl-grpo", mu=values["mu"], minibatches=minibatches, loss_type=values["loss_type"],
                  lr=values["lr"], lora=lora, max_new_tokens=values["max_new_tokens"], kl_coef=values["kl_coef"],
                  sampler_correction=config.get("vllm_importance_sampling_mode"), assumed=assumed)
    if not lora:
        unknown.append("LoRA (no adapter_config.json: taken as full fine-tuning)")
    return Run(directory, "trl", "grpo", series, facts, [], notes, unknown)
