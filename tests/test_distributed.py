"""Data parallel under accelerate: two CPU processes share the prompts and train identical weights."""

import json
import os
import shutil
import signal
import subprocess
import sys
import time

import held_run
import pytest
import torch

from ladder.runtime.distributed import Processes


def test_single_process_is_a_no_op():
    procs = Processes(torch.device("cpu"))
    assert (procs.world, procs.rank, procs.is_main) == (1, 0, True)
    assert procs.shard([1, 2, 3, 4]) == [1, 2, 3, 4]
    x = torch.arange(3.0)
    assert procs.gather(x) is x and procs.mean({"a": 1.0}) == {"a": 1.0}


def test_statistics_reduce_as_the_one_table_says(monkeypatch):
    """``core.stats.REDUCTIONS`` alone decides how a statistic combines, over minibatches (``core.update``)
    and over processes (``Processes.mean``): a new ``*_max`` statistic is averaged, whatever its name,
    until the table names it; then both take its maximum."""
    from core_update_helpers import LinearPolicy, make_batch

    from ladder.core import UpdateConfig, stats, update

    update_module = sys.modules["ladder.core.update"]
    real = update_module.compute_loss
    calls = []

    def with_new_statistic(policy, mb, cfg, num_tokens=None):  # 1.0 on the first minibatch, 3.0 on the second
        loss, step, tensors = real(policy, mb, cfg, num_tokens)
        calls.append(mb)
        return loss, {**step, "entropy_max": 1.0 if len(calls) % 2 else 3.0}, tensors

    monkeypatch.setattr(update_module, "compute_loss", with_new_statistic)
    procs = Processes(torch.device("cpu"))
    procs.world = 2                                     # a second process holding three times this one's values
    monkeypatch.setattr(procs, "gather", lambda x: torch.cat([x, 3.0 * x]))
    policy = LinearPolicy(seed=1)

    def reduced():
        record = update(policy, make_batch(policy, B=8), torch.optim.SGD(policy.parameters(), lr=0.0),
                        UpdateConfig(num_minibatches=2))[0]
        return record["entropy_max"], procs.mean({"entropy_max": 1.0, "ratio_min": 0.5, "a": 1.0})

    assert reduced() == (2.0, {"entropy_max": 2.0, "ratio_min": 0.5, "a": 2.0})   # no rule from the suffix
    monkeypatch.setitem(stats.REDUCTIONS, "entropy_max", max)
    assert reduced() == (3.0, {"entropy_max": 3.0, "ratio_min": 0.5, "a": 2.0})
    assert stats.reduce_stats([{"entropy_max": 1.0, "b": 1.0}, {"entropy_max": 4.0}]) == {"entropy_max": 4.0,
                                                                                         "b": 1.0}


def _worker(rank: int, port: int, results) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), WORLD_SIZE="2", RANK=str(rank),
                      LOCAL_RANK=str(rank))
    procs = Processes(torch.device("cpu"))
    x = torch.tensor([float(rank), 10.0 + rank])
    results[rank] = (procs.shard(list(range(6))), procs.gather(x).tolist(),
                     procs.mean({"a": float(rank), "ratio_min": float(rank), "ratio_max": float(rank), "s": "x"}),
                     procs.gather_object(f"r{rank}"))
    procs.close()  # both leave together: a process that exits holding its gloo connections can abort its peer
    results[rank] += (torch.distributed.is_initialized(),)


def test_two_processes_share_gather_and_reduce():
    import socket

    import torch.multiprocessing as mp

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    results = mp.Manager().dict()
    mp.spawn(_worker, args=(port, results), nprocs=2)
    assert results[0][0] == [0, 1, 2] and results[1][0] == [3, 4, 5]
    for rank in (0, 1):
        shard, gathered, mean, objects, still_joined = results[rank]
        assert not still_joined
        assert gathered == [0.0, 10.0, 1.0, 11.0]
        assert mean == {"a": 0.5, "ratio_min": 0.0, "ratio_max": 1.0, "s": "x"}
        assert objects == ["r0", "r1"]


def _accelerate() -> str | None:
    here = os.path.join(os.path.dirname(sys.executable), "accelerate")
    return here if os.path.exists(here) else shutil.which("accelerate")


LAUNCH_LIMIT_S = 300  # the run takes about 15 s alone; far past it, it waits on a peer that will never answer


def _launch_two(cwd, args: list[str]) -> subprocess.CompletedProcess:
    """``accelerate launch`` of ``python -m ladder.run *args`` on two CPU processes, on a port of its own (two of
    these at once must not meet on accelerate's default one), its signals as a shell leaves them. Past
    ``LAUNCH_LIMIT_S`` every process of the launch prints where each of its threads waits (faulthandler, on
    SIGABRT) and is killed; the test fails with what they printed."""
    env = dict(os.environ, CUDA_VISIBLE_DEVICES="", OMP_NUM_THREADS="1", PYTHONFAULTHANDLER="1")
    command = [_accelerate(), "launch", "--multi_gpu", "--num_processes", "2", "--num_machines", "1",
               "--main_process_port", "0", "--mixed_precision", "no", "--dynamo_backend", "no", "-m", "ladder.run",
               *args]
    launch = subprocess.Popen(command, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              start_new_session=True, preexec_fn=held_run.as_a_shell_starts_it)
    try:
        stdout, stderr = launch.communicate(timeout=LAUNCH_LIMIT_S)
    except subprocess.TimeoutExpired:
        os.killpg(launch.pid, signal.SIGABRT)  # every Python process of the session prints its threads' stacks
        time.sleep(5)
        os.killpg(launch.pid, signal.SIGKILL)
        stdout, stderr = launch.communicate()
        pytest.fail(f"the launch did not end within {LAUNCH_LIMIT_S} s; where its processes were:\n{stderr[-12000:]}")
    return subprocess.CompletedProcess(command, launch.returncode, stdout, stderr)


@pytest.mark.skipif(_accelerate() is None, reason="accelerate CLI not installed")
# One update each, as small as the rung allows: different prompts in each process, so weights that still
# agree after it were updated with gradients averaged over the two.
@pytest.mark.parametrize("rung_args, saved", [
    (["grpo", "--preset", "tiny", "--steps", "1", "--eval-size", "4", "--prompts-per-step", "2"],
     "adapter/adapter_model.safetensors"),
    (["ppo-sentiment", "--preset", "tiny", "--steps", "1", "--batch-size", "8", "--max-new-tokens", "8"],
     "policy/value_head.pt"),
])
def test_two_processes_train_the_same_weights(tmp_path, rung_args, saved):
    """``accelerate launch`` with two CPU processes (torchrun + gloo): one writer, identical weights."""
    out = tmp_path / "run"
    result = _launch_two(tmp_path, [*rung_args, "--out", str(out), "--no-progress"])
    assert result.returncode == 0, result.stderr[-3000:]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["processes"] == 2
    first, second = summary["weights_digest_per_process"]
    assert first == second  # gradients averaged in backward: every process took the same steps
    [record] = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]  # one writer
    assert record["grad_norm"] > 0  # the update moved the weights: equal ones are no accident
    assert result.stdout.count('"processes": 2') == 1  # one report
    assert (out / saved).exists()
