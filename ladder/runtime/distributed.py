"""Data parallelism for the LM rungs under ``accelerate launch``; in a single process, a no-op.

    accelerate launch --multi_gpu --num_processes 4 -m ladder.run grpo --qlora --device cuda
    accelerate launch --multi_gpu --num_processes 2 -m ladder.run grpo --preset tiny   # CPU only: gloo

(On a machine without CUDA, ``--multi_gpu`` starts the processes with torchrun and they talk over
gloo; accelerate's ``--cpu`` flag starts a single process unless an MPI hostfile is given.)

Every process holds the same weights. In each update every process samples and scores its own
share of the prompts; the rewards are gathered, so advantages are computed on whole groups (and
on the whole batch for ``--scale-rewards batch``); DistributedDataParallel averages the gradients
during the backward pass, so every process takes the identical optimiser step; statistics are
combined over the processes (the mean, or what ``core.stats.REDUCTIONS`` names); only the main process
writes files and prints.
"""

from __future__ import annotations

import hashlib
import os

import torch
from torch import Tensor, nn

from ladder.core.stats import reduce_stats


def launched_processes() -> int:
    """How many processes ``accelerate launch`` / ``torchrun`` started (1 when run directly)."""
    return int(os.environ.get("WORLD_SIZE", "1"))


def is_main_process() -> bool:
    return int(os.environ.get("RANK", "0")) == 0


def process_device(device: torch.device) -> torch.device:
    """The device of this process: ``cuda:LOCAL_RANK`` when launched on GPUs, else ``device``."""
    if device.type == "cuda" and launched_processes() > 1:
        return torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0")))
    return device


class Processes:
    """This process's place among the data-parallel processes (rank 0 of 1 when not launched).

    Creating it joins the process group. Build or download anything cached before that: once the
    group exists, transformers' ``save_pretrained`` writes files on rank 0 only.
    """

    def __init__(self, device: torch.device):
        self.world, self.rank, self.local_rank = 1, 0, 0
        if launched_processes() > 1:
            from accelerate import PartialState

            state = PartialState(cpu=device.type == "cpu")
            self.world, self.rank, self.local_rank = state.num_processes, state.process_index, state.local_process_index
        self.device = process_device(device)

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    def shard(self, items: list) -> list:
        """This process's contiguous share of ``items`` (``len(items)`` divisible by the process count)."""
        n = len(items) // self.world
        return items[self.rank * n:(self.rank + 1) * n]

    def gather(self, x: Tensor) -> Tensor:
        """Concatenate ``x`` (same shape in every process) over the processes, in rank order."""
        if self.world == 1:
            return x
        y = x.to(self._comm_device).contiguous()  # NCCL moves GPU tensors only; gloo, CPU ones
        parts = [torch.empty_like(y) for _ in range(self.world)]
        torch.distributed.all_gather(parts, y)
        return torch.cat(parts).to(x.device)

    def gather_object(self, obj) -> list:
        """``[obj of rank 0, obj of rank 1, ...]`` in every process."""
        if self.world == 1:
            return [obj]
        out = [None] * self.world
        torch.distributed.all_gather_object(out, obj)
        return out

    def mean(self, record: dict) -> dict:
        """Numeric statistics combined over the processes by ``core.stats.reduce_stats``: the mean, or the
        reduction its table ``REDUCTIONS`` names (``ratio_min``: minimum, ...). Other values stay this process's."""
        if self.world == 1:
            return record
        keys = sorted(k for k, v in record.items() if isinstance(v, (int, float)) and not isinstance(v, bool))
        values = torch.tensor([float(record[k]) for k in keys], dtype=torch.float64)
        stacked = self.gather(values[None]).view(self.world, -1)
        return {**record, **reduce_stats(dict(zip(keys, row)) for row in stacked.tolist())}

    def barrier(self) -> None:
        if self.world > 1:
            torch.distributed.barrier()

    def close(self) -> None:
        """Leave the group together. A process that exits, or tears its gloo connections down, while a peer still
        waits on a message from it can hang or abort that peer; so: a barrier (every collective done), then a wait
        on the launcher's key-value store until every process is past it (no gloo message in flight), then
        ``destroy_process_group`` in each."""
        if self.world > 1 and torch.distributed.is_initialized():
            from torch.distributed.distributed_c10d import _get_default_store

            torch.distributed.barrier()
            store = _get_default_store()
            store.set(f"ladder/closing/{self.rank}", "1")
            store.wait([f"ladder/closing/{rank}" for rank in range(self.world)])
            torch.distributed.destroy_process_group()

    @property
    def _comm_device(self) -> torch.device:
        return self.device if torch.distributed.get_backend() == "nccl" else torch.device("cpu")

    def wrap(self, policy: nn.Module):
        """The policy whose ``evaluate`` runs through DistributedDataParallel (itself when alone)."""
        if self.world == 1:
            return policy
        from torch.nn.parallel import DistributedDataParallel

        from ladder.patches import ddp_ignores

        ddp_ignores(policy, [n for n, p in policy.named_parameters() if not p.requires_grad] +
                    [n for n, _ in policy.named_buffers()])
        ddp = DistributedDataParallel(policy, device_ids=[self.device.index] if self.device.type == "cuda" else None,
                                      broadcast_buffers=False)
        return DataParallelPolicy(policy, ddp)


class DataParallelPolicy:
    """``evaluate`` through DDP (so the backward pass averages gradients); everything else from the policy."""

    def __init__(self, policy: nn.Module, ddp: nn.Module):
        self.policy, self.ddp = policy, ddp

    def evaluate(self, batch):
        return self.ddp(batch)

    def __getattr__(self, name):
        return getattr(self.policy, name)


def weights_digest(module: nn.Module) -> str:
    """A hash of the trainable weights: equal digests mean bit-identical weights."""
    h = hashlib.sha256()
    for name, p in sorted(module.named_parameters()):
        if p.requires_grad:
            h.update(name.encode())
            h.update(p.detach().float().cpu().numpy().tobytes())
    return h.hexdigest()[:16]
