"""Memory readings shared by the GRPO benchmarks: GPU memory on CUDA, resident memory (RSS) on the CPU; and
a timer of one method's calls (TRL's sampling phase)."""

from __future__ import annotations

import os
import resource
import time


def memory_now_mb(device: str = "cpu") -> float:
    """Memory held now: torch's allocated GPU memory on CUDA, the process's RSS on the CPU."""
    if device.startswith("cuda"):
        import torch

        torch.cuda.synchronize()
        return torch.cuda.memory_allocated() / 2**20
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def peak_rss_mb() -> float:
    """The process's peak RSS so far (Linux reports KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def memory_peak_mb(device: str = "cpu") -> tuple[float, float]:
    """(peak allocated, peak reserved) on CUDA; (peak RSS, peak RSS) on the CPU."""
    if device.startswith("cuda"):
        import torch

        torch.cuda.synchronize()
        return torch.cuda.max_memory_allocated() / 2**20, torch.cuda.max_memory_reserved() / 2**20
    return peak_rss_mb(), peak_rss_mb()


def mark_loaded(device: str = "cpu") -> float:
    """Memory held now, right after the model is loaded; on the CPU the peak RSS is also reset here
    (``/proc/self/clear_refs``), so that ``training_peak_mb`` reads the peak of training alone."""
    now = memory_now_mb(device)
    if not device.startswith("cuda"):
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
    return now


def training_peak_mb() -> float:
    """The CPU process's peak RSS since ``mark_loaded`` (VmHWM)."""
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmHWM:")) / 1024


def time_calls(obj, name: str, cuda: bool) -> list[float]:
    """Wrap ``obj.name`` so that every call appends its seconds to the list returned."""
    import torch

    seconds, method = [], getattr(obj, name)

    def timed(*a, **kw):
        if cuda:
            torch.cuda.synchronize()
        t = time.perf_counter()
        out = method(*a, **kw)
        if cuda:
            torch.cuda.synchronize()
        seconds.append(time.perf_counter() - t)
        return out

    setattr(obj, name, timed)
    return seconds
