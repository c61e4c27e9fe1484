"""Every option of every rung declares its domain, and no value outside it gets past parsing.

The bad values are derived from each option's declared domain (below the minimum, above the
maximum, nan, ±inf, the wrong type, an empty string, a path of the wrong kind, a device this
machine lacks) and run through the real command line with ``--print-config`` (parse and validate,
no training): exit code 2, one line on stderr, no traceback, nothing created.
"""

from __future__ import annotations

import dataclasses
import math

import pytest
import torch

from ladder import domains, options, run
from ladder.core import Batch, UpdateConfig, update
from ladder.rungs import registry
from ladder.specs import spec_fields

RUNGS = registry.rungs()


def _flag(f) -> str:
    """The flag of a config field, or of a spec's param (``ladder.specs.Param``)."""
    return f.dashed if hasattr(f, "dashed") else "--" + f.name.replace("_", "-")


def _number_bad_values(d: domains.Number) -> list[str]:
    bad = ["abc", ""]
    if d.low is not None:
        bad.append(repr(d.low if d.open_low else d.low - 1))
    if d.high is not None:
        bad.append(repr(d.high if d.open_high else d.high + 1))
    if d.kind is int:
        bad.append("1.5")
    bad += ["nan"] + (["inf", "-inf"] if d.finite else [])
    return bad


def bad_values(domain, tmp_path) -> list[str]:
    """Values outside ``domain``, as they would be typed on the command line."""
    if isinstance(domain, domains.Number):
        return _number_bad_values(domain)
    if isinstance(domain, domains.OneOf):
        return ["no-such-choice", ""]
    if isinstance(domain, domains.Text):
        return ["", "   "]
    if isinstance(domain, domains.PathKind):
        a_file = tmp_path / "a-file.txt"
        a_file.write_text("not a directory")
        empty = tmp_path / "empty-dir"
        empty.mkdir(exist_ok=True)
        return {"dir": [str(a_file), str(a_file / "sub"), ""], "run": [str(empty), str(a_file), ""],
                "existing_dir": [str(tmp_path / "missing"), str(a_file), ""]}[domain.kind]
    if isinstance(domain, domains.Device):
        return ["banana", "", "cuda:99"] + ([] if torch.cuda.is_available() else ["cuda"])
    if isinstance(domain, domains.Flag):
        return ["=maybe"]
    raise AssertionError(f"no bad values for {domain!r}")


def cases(every_rung: bool = False):
    """(rung, option, domain) of every option's declaration, through the first rung that has it (a declaration
    shared — RunOptions' fields, grpo's options in the agent and distill rungs — is the same code; ``every_rung``:
    each rung's own list)."""
    seen = []
    for name, rung in RUNGS.items():
        for f in dataclasses.fields(rung.Config):
            domain = options.domain_of(f)
            params = domain.params() if f.metadata.get("spec") else ()
            for item in [*params] if params else [f] if domain is not None else []:
                if every_rung or not any(item is old or (params and item == old) for old in seen):
                    seen.append(item)
                    flag = item.dashed if params else _flag(item)
                    yield pytest.param(name, item, item.domain if params else domain, id=f"{name}{flag}")


@pytest.mark.parametrize("name", list(RUNGS))
def test_every_option_declares_its_domain(name):
    missing = [f.name for f in dataclasses.fields(RUNGS[name].Config) if options.domain_of(f) is None]
    missing += [p.flag for _, spec in spec_fields(RUNGS[name].Config) for p in spec.params() if p.domain is None]
    assert not missing, f"{name}: options without a declared domain: {missing}"


def numbers(name: str):
    """(flag, domain) of every number a rung reads: its fields' and its specs' params'."""
    for case in cases(every_rung=True):
        rung, f, domain = case.values
        if rung == name and isinstance(domain, domains.Number):
            yield _flag(f), domain


@pytest.mark.parametrize("name", list(RUNGS))
def test_every_number_has_a_finite_upper_bound(name):
    """2**63 or 1e300 stops at parsing, not in an overflow, a loop that never ends or an allocation."""
    unbounded = [flag for flag, d in numbers(name) if d.high is None or not math.isfinite(d.high)]
    assert not unbounded, f"{name}: numbers without a finite upper bound: {unbounded}"


@pytest.mark.parametrize("name", list(RUNGS))
def test_absurd_numbers_are_one_line_exit_2(name, tmp_path, monkeypatch, capsys):
    """±2**63 for every integer, ±1e300 for every float: refused by the domain, in one line naming the flag."""
    monkeypatch.chdir(tmp_path)
    for flag, d in numbers(name):
        for value in ([2**63, -(2**63)] if d.kind is int else [1e300, -1e300]):
            with pytest.raises(SystemExit) as stop:
                run.main([name, flag, str(value), "--print-config"])
            err = capsys.readouterr().err
            assert stop.value.code == 2, (flag, value, err)
            assert len(err.strip().splitlines()) == 1 and err.startswith(f"ladder: error: {flag} must be "), err
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("name, f, domain", list(cases()))
def test_bad_values_are_one_line_exit_2_and_create_nothing(name, f, domain, tmp_path, monkeypatch, capsys):
    workdir = tmp_path / "cwd"
    workdir.mkdir()
    monkeypatch.chdir(workdir)
    for value in bad_values(domain, tmp_path):
        argv = [name, _flag(f) + value] if isinstance(domain, domains.Flag) else [name, _flag(f), value]
        with pytest.raises(SystemExit) as stop:
            run.main([*argv, "--print-config"])
        err = capsys.readouterr().err
        assert stop.value.code == 2, (argv, err)
        assert len(err.strip().splitlines()) == 1 and "Traceback" not in err, (argv, err)
        assert list(workdir.iterdir()) == [], (argv, "created", list(workdir.iterdir()))


@pytest.mark.parametrize("name", list(RUNGS))
def test_defaults_and_presets_are_inside_their_domains(name, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert run.main([name, "--print-config"]) == 0
    for preset in getattr(RUNGS[name], "PRESETS", {}):
        assert run.main([name, "--preset", preset, "--print-config"]) == 0
    for algo in getattr(RUNGS[name], "ALGOS", {}):
        assert run.main([name, "--algo", algo, "--print-config"]) == 0
    capsys.readouterr()
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("argv, needle", [
    (["grpo", "--preset", "tiny", "--num-minibatches", "0"], "--num-minibatches must be at least 1, got 0"),
    (["cartpole", "--lr", "inf"], "--lr must be a finite number, got inf"),
    (["cartpole", "--out", "README.md"], "--out must be a directory to create or reuse (not a file)"),
])
def test_the_issue_examples(argv, needle, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "README.md").write_text("a file")
    with pytest.raises(SystemExit) as stop:
        run.main(argv)                                   # no --print-config: the real run stops first
    assert stop.value.code == 2 and needle in capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["README.md"]


BIG = "9223372036854775807"  # the largest int64


@pytest.mark.parametrize("argv, needle", [
    (["grpo", "--max-staleness", BIG], f"--max-staleness must be at most 1000, got {BIG}"),
    (["agent", "--max-staleness", "1001"], "--max-staleness must be at most 1000, got 1001"),
    (["grpo", "--group-size", BIG], f"--group-size must be at most 1024, got {BIG}"),
    (["grpo", "--prompts-per-step", BIG], f"--prompts-per-step must be at most 65536, got {BIG}"),
    (["grpo", "--lora-r", BIG], f"--lora-r must be at most 4096, got {BIG}"),
    (["ppo-sentiment", "--threads", BIG], f"--threads must be at most 1024, got {BIG}"),
    (["cartpole", "--seed", str(2**32)], f"--seed must be at most {2**32 - 1}, got {2**32}"),
    (["grpo", "--temperature", "1e-45"], "--temperature must be ≥ 0.01, got 1e-45"),
    (["agent", "--temperature", "1e-45"], "--temperature must be ≥ 0.01, got 1e-45"),
    (["ppo-sentiment", "--temperature", "0.001"], "--temperature must be ≥ 0.01, got 0.001"),
    (["cartpole", "--hidden", BIG], f"--hidden must be at most 65536, got {BIG}"),
    (["cartpole", "--num-steps", BIG], f"--num-steps must be at most 65536, got {BIG}"),
    (["cartpole", "--num-envs", BIG], f"--num-envs must be at most 1024, got {BIG}"),
    (["cartpole", "--threads", BIG], f"--threads must be at most 1024, got {BIG}"),
    (["reinforce", "--hidden", BIG], f"--hidden must be at most 65536, got {BIG}"),
    (["reinforce", "--episodes-per-update", BIG], f"--episodes-per-update must be at most 4096, got {BIG}"),
    (["reinforce", "--threads", BIG], f"--threads must be at most 1024, got {BIG}"),
    (["eval", "--seed", BIG], f"--seed must be at most {2**32 - 1}, got {BIG}"),
    (["ppo-sentiment", "--batch-size", BIG], f"--batch-size must be at most 65536, got {BIG}"),
    (["grpo", "--reward-timeout", "0"], "--reward-timeout must be in (0, 86400], got 0.0"),
    (["agent", "--reward-timeout", "86401"], "--reward-timeout must be in (0, 86400], got 86401.0"),
    (["reinforce", "--eval-episodes", str(2**63)], f"--eval-episodes must be at most 1000000, got {2**63}"),
    (["grpo", "--max-new-tokens", str(2**63)], f"--max-new-tokens must be at most 1000000, got {2**63}"),
    (["grpo", "--lora-alpha", str(2**63)], f"--lora-alpha must be at most 65536, got {2**63}"),
    (["ppo-sentiment", "--lr", "1e300"], "--lr must be ≤ 1, got 1e+300"),
    (["grpo", "--temperature", "1e300"], "--temperature must be ≤ 100, got 1e+300"),
    (["dpo", "--beta", "1e300"], "--beta must be ≤ 1000, got 1e+300"),
    (["grpo", "--loss-type", "vespo", "--vespo-lambda-pos", "1e300"], "--vespo-lambda-pos must be ≤ 1000, got 1e+300"),
    (["cartpole", "--solve-return", "1e300"], "--solve-return must be in [-1e+09, 1e+09], got 1e+300"),
])
def test_values_that_would_overflow_are_refused_by_their_domain(argv, needle, tmp_path, monkeypatch, capsys):
    """Values that overflowed (a deque's length, a tensor's size, numpy's seed, logits/τ in float32) or could
    never be allocated stop at parsing: one line, exit 2, nothing created — the bound is the domain's."""
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as stop:
        run.main(argv)
    err = capsys.readouterr().err
    assert stop.value.code == 2 and needle in err, err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert list(tmp_path.iterdir()) == []


def test_python_api_raises_value_error_naming_the_field():
    grpo = RUNGS["grpo"]
    with pytest.raises(ValueError, match=r"--lr must be positive, got nan"):
        grpo.Config(lr=float("nan"))
    with pytest.raises(ValueError, match=r"--lr must be ≤ 1, got 2"):    # a limit names the bound crossed
        grpo.Config(lr=2)
    with pytest.raises(ValueError, match=r"--group-size must be at least 2"):
        grpo.Config(group_size=1)
    with pytest.raises(ValueError, match=r"--mu must be an integer, got 2.5"):
        grpo.Config(mu=2.5)
    cfg = grpo.Config()
    with pytest.raises(ValueError, match=r"--temperature must be a finite number, got inf"):
        dataclasses.replace(cfg, temperature=math.inf)


class OnePolicy(torch.nn.Module):
    """π(a) = softmax(w) over two actions, whatever the state."""

    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.tensor([0.0, 0.0]))

    def evaluate(self, batch):
        logp = torch.log_softmax(self.w, -1)[batch.actions]
        return logp, None, None


def test_a_step_that_would_leave_a_weight_non_finite_is_undone():
    policy = OnePolicy()
    optimizer = torch.optim.Adam(policy.parameters(), lr=1e-2)
    batch = Batch(actions=torch.tensor([[0, 1]]), mask=torch.ones(1, 2), advantages=torch.tensor([[1.0, -1.0]]))
    cfg = UpdateConfig(objective="reinforce", max_grad_norm=None)
    update(policy, batch, optimizer, cfg)                        # a normal step: Adam has state now
    weights, state = policy.w.detach().clone(), {k: v.clone() for k, v in optimizer.state[policy.w].items()}
    optimizer.param_groups[0]["lr"] = math.inf                   # the next step would send w to ±inf
    stats = update(policy, batch, optimizer, cfg)[0]
    assert stats["skipped_steps"] == 1
    assert torch.equal(policy.w.detach(), weights)
    for key, value in state.items():
        assert torch.equal(optimizer.state[policy.w][key], value), key
    optimizer.param_groups[0]["lr"] = 1e-2
    assert update(policy, batch, optimizer, cfg)[0]["skipped_steps"] == 0
    assert not torch.equal(policy.w.detach(), weights)
