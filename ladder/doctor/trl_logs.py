"""A TRL output directory read into a ``Run``: GRPOTrainer's ``log_history`` under ladder's metric names, and the
GRPOConfig facts the signatures need.

    DIR/trainer_state.json        ``log_history``: one record per logging step (its evaluations and closing
                                  summary left out), or the newest DIR/checkpoint-*/trainer_state.json
    --trl-config FILE             the GRPOConfig fields, first; then DIR/training_args.json, then a
                                  DIR/config.json that holds GRPOConfig fields (a model's does not)
    DIR/adapter_config.json       LoRA (also beside the trainer_state.json read)

TRL's names become ladder's through ``TRL_NAMES``. ``training_args.bin`` is a pickle and is never read: what
neither the config nor the log itself gives (the peak learning rate, the token budget where a completion was cut
off) is assumed to be TRL 1.16's default (``TRL_FACTS``) and listed in ``Run.unknown``.
"""

from __future__ import annotations

import re
from pathlib import Path

from ladder.doctor.log_values import as_number, config_fact, json_file, path_kind, shown
from ladder.doctor.run_data import Facts, Logged, Run, Series, series_of, stepped
from ladder.runtime.errors import UsageError

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
# GRPOConfig field → the kind it must be (``config_fact``); null is not given.
TRL_KINDS = {"num_iterations": "count", "steps_per_generation": "count", "gradient_accumulation_steps": "count",
             "loss_type": "name", "learning_rate": "rate", "max_completion_length": "count", "beta": "number",
             "vllm_importance_sampling_mode": "name"}


def trainer_state(directory: Path) -> tuple[Path, dict] | None:
    """trainer_state.json in ``directory``, else the one of its newest ``checkpoint-N``."""
    candidates = [directory / "trainer_state.json"]
    checkpoints = [p for p in directory.glob("checkpoint-*") if re.fullmatch(r"checkpoint-\d+", p.name)]
    checkpoints.sort(key=lambda p: int(p.name.split("-")[1]), reverse=True)
    candidates += [p / "trainer_state.json" for p in checkpoints]
    for path in candidates:
        if path_kind(path) is not None:
            state = json_file(path)
            if not isinstance(state, dict) or not isinstance(state.get("log_history"), list):
                raise UsageError(f"{path} has no log_history list; is it a Trainer's state?")
            return path, state
    return None


def _trl_config(directory: Path, trl_config) -> tuple[dict, str | None]:
    """GRPOConfig fields, and the file they came from: ``--trl-config FILE`` first, then training_args.json, then a
    config.json that holds them (a model's config.json does not)."""
    if trl_config is not None:
        path = Path(trl_config)
        if path_kind(path) != "file":
            raise UsageError(f"--trl-config {path}: {'no such file' if path_kind(path) is None else 'not a file'}")
        config = json_file(path)
        if not isinstance(config, dict):
            raise UsageError(f"--trl-config {path}: not a JSON object of GRPOConfig fields")
        return _checked(config, f"--trl-config {path}"), str(path)
    for name in ("training_args.json", "config.json"):
        path = directory / name
        if path_kind(path) == "file":
            config = json_file(path)
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


def read_trl(directory: Path, found: tuple[Path, dict], trl_config) -> Run:
    """The TRL run in ``directory``: ``found`` is its trainer state (``trainer_state``), ``trl_config`` the file
    ``--trl-config`` gives (or None)."""
    state_path, state = found
    logged = _training_records(state_path, state["log_history"])
    keep = PER_FUNCTION.match
    series = series_of(logged, TRL_NAMES, keep=lambda key: bool(keep(key)))
    series["nonfinite_steps"] = Series([step for _, step, _ in logged.records],
                                       [1.0 if any(k in r and as_number(r[k]) is None for k in ("loss", "grad_norm"))
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
                                                          "adapter_config.json"] if path_kind(p) is not None)
    facts = Facts(algorithm="trl-grpo", mu=values["mu"], minibatches=minibatches, loss_type=values["loss_type"],
                  lr=values["lr"], lora=lora, max_new_tokens=values["max_new_tokens"], kl_coef=values["kl_coef"],
                  sampler_correction=config.get("vllm_importance_sampling_mode"), assumed=assumed)
    if not lora:
        unknown.append("LoRA (no adapter_config.json: taken as full fine-tuning)")
    return Run(directory, "trl", "grpo", series, facts, [], notes, unknown, config=config)
