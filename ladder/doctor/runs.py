"""A run directory read into named series (step → value) under ladder's metric names, and the run's config facts
(a ``Run``: ``ladder.doctor.run_data``).

Two sources:

    ladder   DIR/config.json + DIR/metrics.jsonl (one record per update); DIR/completions.jsonl if present: here
    TRL      DIR/trainer_state.json's ``log_history`` (one record per logging step), or the newest
             DIR/checkpoint-*/trainer_state.json, with the GRPOConfig facts: ``ladder.doctor.trl_logs``

Any value in either is read leniently (``ladder.doctor.log_values``): what cannot be used is left out and noted.
"""

from __future__ import annotations

import os
from pathlib import Path

from ladder.doctor.log_values import config_fact, file_text, json_file, parse_json, path_kind
from ladder.doctor.run_data import Facts, Run, Series, series_of, stepped  # noqa: F401 - Series also read from here
from ladder.doctor.trl_logs import TRL_FACTS, TRL_NAMES, read_trl, trainer_state  # noqa: F401 - also read from here
from ladder.runtime.errors import UsageError

# The ladder rungs whose records use other names for the same quantities.
LADDER_RENAMES = {
    "ppo-sentiment": {"reward_mean": "reward", "response_length": "completions/mean_length",
                      "kl_ref": "kl_ref_seq", "kl_ref_token_k3": "kl_ref"},
    "dpo": {"response_length": "completions/mean_length"},  # of the completions sampled at each evaluation
    "cartpole": {"episode_return": "return"},
    "reinforce": {"episode_return": "return"},
}


def read_run(path: str | os.PathLike, trl_config: str | os.PathLike | None = None) -> Run:
    """The run in ``path`` (a ladder run directory or a TRL output directory); bad input is a UsageError.

    Any value in a log is accepted. A number is read; a non-finite reading (NaN, ±Infinity, or null: ladder
    writes a NaN as null) is left out of the series (a TRL record's non-finite loss or grad_norm is counted in
    ``nonfinite_steps``); a record whose step is not a whole number ≥ 0, and a value that is not a number (a
    string, a boolean, a list, an object, a number beyond a float), are left out and said in ``Run.notes``, one
    line per kind. A config fact of the wrong kind (``"learning_rate": "1e-6"``) is bad input, naming the file and
    the key: the whole verdict rests on it."""
    directory = Path(path)
    kind = path_kind(directory)
    if kind is None:
        raise UsageError(f"{directory}: no such directory")
    if kind != "dir":
        raise UsageError(f"{directory} is not a directory; give a run's output directory")
    ladder_config = path_kind(directory / "config.json") is not None and _is_ladder_config(directory)
    if path_kind(directory / "metrics.jsonl") is not None or ladder_config:
        return _read_ladder(directory)
    state = trainer_state(directory)
    if state is not None:
        return read_trl(directory, state, trl_config)
    raise UsageError(f"{directory} is not a run: no metrics.jsonl (ladder) and no trainer_state.json (TRL) there")


def _is_ladder_config(directory: Path) -> bool:
    config = json_file(directory / "config.json")
    return isinstance(config, dict) and "rung" in config


# --- a ladder run ---------------------------------------------------------------------------------------------

def _read_jsonl(path: Path, notes: list[str]) -> list[tuple[str, dict]]:
    """The whole JSON lines of ``path``, each with its place (``line 4``): a torn last line (what an interrupted
    write leaves) is left out and noted; a broken line elsewhere, or one that is not a JSON object, is bad input."""
    lines = [(n, line) for n, line in enumerate(file_text(path, errors="replace").splitlines(), 1) if line.strip()]
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
    if path_kind(path) is None:
        raise UsageError(f"{directory}: metrics.jsonl without config.json; is it a ladder run directory?")
    config = json_file(path)
    if not isinstance(config, dict) or config_fact(config, "rung", "name", str(path)) is None:
        raise UsageError(f"{path} names no rung; is it a ladder run directory?")
    if config["rung"] == "eval":
        raise UsageError(f"{directory} is an eval run: it trains nothing and logs no updates to diagnose")
    return config


def _read_ladder(directory: Path) -> Run:
    config, where = _ladder_config(directory), str(directory / "config.json")
    if path_kind(directory / "metrics.jsonl") is None:
        raise UsageError(f"{directory}: no metrics.jsonl yet (the run logged no update)")
    notes: list[str] = []
    records = _read_jsonl(directory / "metrics.jsonl", notes)
    if not records:
        raise UsageError(f"{directory}/metrics.jsonl holds no update yet")
    rung = config["rung"]
    logged = stepped(directory / "metrics.jsonl", records)
    series = series_of(logged, LADDER_RENAMES.get(rung, {}), keep=lambda key: True)
    notes += logged.notes()
    completions = [record for _, record in _read_jsonl(directory / "completions.jsonl", notes)] \
        if path_kind(directory / "completions.jsonl") is not None else []

    def given(key: str, kind: str, default=None):
        return config_fact(config, key, kind, where, default)

    facts = Facts(algorithm=rung, mu=given("mu", "count", 1), minibatches=given("num_minibatches", "count", 1),
                  loss_type=given("loss_type", "name"), lr=given("lr", "rate"),
                  lora=bool(config.get("lora") or config.get("qlora")) if "lora" in config else None,
                  max_new_tokens=given("max_new_tokens", "count"),
                  kl_coef=given("beta" if rung == "dpo" else "kl_coef", "number"),  # β, as each rung names it
                  sampler_correction=given("sampler_correction", "name"), value_coef=given("value_coef", "number"),
                  unweighted=_unweighted(config, where))
    if rung == "reinforce":
        facts.mu, facts.minibatches = None, None  # no ratio, no clipping
    return Run(directory, "ladder", rung, series, facts, completions, notes, config=config)


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
