"""A sampler that is not π_old: the trainer's weights in a lower precision, and the log-probs it sampled with.

``lower_precision(model, dtype)`` makes every linear layer (4-bit ones dequantized) multiply by a copy of
its weight in ``dtype``, once, on entry: generate then draws from π_sampler, the same weights rounded —
as a bf16 inference engine beside an fp32 trainer does. ``RecordLogp`` keeps, while ``generate`` runs,
the sampler's own log-prob of each token it drew, from the logits generate computes anyway (no extra
forward). The token was drawn from q: p = softmax(logits_t / τ) cut to the tokens top-k and top-p keep
(the nucleus N_t) and renormalised. That is what it records, through the very warpers generate applies
(``sampling_warpers``), then a log_softmax:

    log π_sampler(c_t) = log q(c_t) = log p(c_t) − log Σ_{b∈N_t} p(b)        (c_t ∈ N_t)

π_old stays the trainer's full-precision forward of the same tokens, over the whole p; ``core.off_policy``
weighs the two, so under a top-k or top-p cut the weight π_old / π_sampler of a token is the mass its
step kept, Z_t = Σ_{b∈N_t} p(b) ≤ 1 (times the rounding's ratio with ``lower_precision``).
"""

from __future__ import annotations

from contextlib import contextmanager

import torch
from torch import Tensor, nn
from transformers import (
    LogitsProcessor,
    LogitsProcessorList,
    TemperatureLogitsWarper,
    TopKLogitsWarper,
    TopPLogitsWarper,
)

from ladder.runtime.errors import UsageError

SAMPLER_DTYPES = {"same": None, "bfloat16": torch.bfloat16, "float16": torch.float16}


def fast_on_this_cpu(dtype: torch.dtype) -> bool:
    """Whether oneDNN has matrix instructions for ``dtype`` here (AVX512-BF16 / AMX for bf16, AVX512-FP16 /
    AMX-FP16 for fp16); elsewhere torch computes it, but slower than float32."""
    check = {torch.bfloat16: torch.ops.mkldnn._is_mkldnn_bf16_supported,
             torch.float16: torch.ops.mkldnn._is_mkldnn_fp16_supported}[dtype]
    return bool(check())


def bf16_native(device: torch.device) -> bool:
    """Whether ``device`` computes bfloat16 matrix products in hardware: a CUDA GPU that supports it, a CPU with
    AVX512-BF16 or AMX (``fast_on_this_cpu``)."""
    if device.type == "cuda":
        return torch.cuda.is_bf16_supported(including_emulation=False)
    return device.type == "cpu" and fast_on_this_cpu(torch.bfloat16)


def check_sampler_dtype(name: str, device: torch.device) -> torch.dtype | None:
    """The dtype of ``--sampler-dtype NAME``; one line if this device cannot compute a matrix product in it."""
    dtype = SAMPLER_DTYPES[name]
    if dtype is None:
        return None
    if device.type == "cuda" and dtype is torch.bfloat16 and not torch.cuda.is_bf16_supported():
        raise UsageError(f"--sampler-dtype bfloat16: this GPU ({torch.cuda.get_device_name(device)}) has no bfloat16; "
                         f"use --sampler-dtype float16")
    try:
        torch.ones(2, 2, dtype=dtype, device=device) @ torch.ones(2, 2, dtype=dtype, device=device)
    except RuntimeError as e:
        raise UsageError(f"--sampler-dtype {name}: {device} cannot compute in it ({str(e).splitlines()[0]})") from None
    return dtype


@contextmanager
def lower_precision(model: nn.Module, dtype: torch.dtype):
    """Inside, every linear layer computes ``linear(x in dtype, W in dtype, b in dtype)`` and hands back x's
    dtype; W is rounded (or a 4-bit W dequantized) to ``dtype`` once, on entry. LoRA's layers are linear
    layers too, so the adapter is rounded alike. On exit the layers are as they were."""
    import bitsandbytes as bnb
    from bitsandbytes.functional import dequantize_4bit

    layers = [m for m in model.modules() if isinstance(m, (nn.Linear, bnb.nn.Linear4bit))]
    for layer in layers:
        if isinstance(layer, bnb.nn.Linear4bit):
            weight = dequantize_4bit(layer.weight.data, layer.weight.quant_state).to(dtype)
        else:
            weight = layer.weight.detach().to(dtype)
        bias = None if layer.bias is None else layer.bias.detach().to(dtype)

        def forward(x: Tensor, weight=weight, bias=bias) -> Tensor:
            return nn.functional.linear(x.to(weight.dtype), weight, bias).to(x.dtype)

        layer.forward = forward
    try:
        yield
    finally:
        for layer in layers:
            del layer.forward


def sampling_warpers(temperature: float, top_k: int | None = 0, top_p: float | None = 1.0) -> LogitsProcessorList:
    """The warpers ``generate(do_sample=True, temperature=τ, top_k=k, top_p=p)`` applies after every other
    logits processor, in its order and with its ``min_tokens_to_keep`` = 1 (one beam): z / τ, then the k
    largest kept, then the smallest set of those whose mass (renormalised) reaches p; a dropped token's
    score is −inf. (A model's own generation config may add min-p or typical-p warpers: not mirrored here.)"""
    warpers = LogitsProcessorList()
    if temperature is not None and temperature != 1.0:
        warpers.append(TemperatureLogitsWarper(temperature))
    if top_k is not None and top_k != 0:
        warpers.append(TopKLogitsWarper(top_k=top_k, min_tokens_to_keep=1))
    if top_p is not None and top_p < 1.0:
        warpers.append(TopPLogitsWarper(top_p=top_p, min_tokens_to_keep=1))
    return warpers


def sampled_logp(input_ids: Tensor, scores: Tensor, warpers: LogitsProcessorList) -> Tensor:
    """``[B, V]`` log q of every token, q the distribution a sampler draws from after ``warpers``:

        log q(a) = log p(a) − log Σ_{b∈N} p(b)   for a in the kept set N,   −inf outside,

    p = softmax(scores / τ); the log_softmax of the warped scores computes exactly that."""
    return torch.log_softmax(warpers(input_ids, scores.float()), dim=-1)


class RecordLogp(LogitsProcessor):
    """Run inside ``generate``, after its other processors and before its warpers: at each step, the
    log-prob of the token drawn at the step before under the distribution it was drawn from,
    log q(a) = log p(a) − log Σ_{b∈N} p(b) (``sampled_logp`` with generate's own ``sampling_warpers``:
    temperature, top-k, top-p); ``finish`` adds the last token's. Holds one step's ``[B, V]`` log-probs
    at a time."""

    def __init__(self, temperature: float, top_k: int | None = 0, top_p: float | None = 1.0):
        self.warpers, self.previous, self.logps = sampling_warpers(temperature, top_k, top_p), None, []

    def _take(self, tokens: Tensor) -> None:
        self.logps.append(self.previous.gather(1, tokens[:, None]).squeeze(1))

    def __call__(self, input_ids: Tensor, scores: Tensor) -> Tensor:
        if self.previous is not None:
            self._take(input_ids[:, -1])
        self.previous = sampled_logp(input_ids, scores, self.warpers)
        return scores

    def finish(self, completion: Tensor) -> Tensor:
        """``[B, T]`` log π_sampler of the completion's tokens (positions after EOS hold junk, −inf where generate's
        pad is outside the kept set: mask them)."""
        if self.previous is not None and len(self.logps) < completion.shape[1]:
            self._take(completion[:, len(self.logps)])
        self.previous = None
        if not self.logps:
            return completion.new_zeros(completion.shape, dtype=torch.float)
        return torch.stack(self.logps, dim=1)
