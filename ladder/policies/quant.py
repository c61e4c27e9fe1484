"""Loading a causal LM for RL: full precision, LoRA, or QLoRA (4-bit nf4 base + LoRA adapters).

QLoRA (Dettmers et al. 2023): the frozen base weights are stored as 4-bit NormalFloat with double
quantisation (the quantisation constants are quantised too); only the LoRA adapters train, in
higher precision. π_ref is then free: the same base with the adapter disabled.
"""

from __future__ import annotations

import copy
import ctypes
import json
import logging
from contextlib import contextmanager
from pathlib import Path

import torch

from ladder.hub import quiet_progress
from ladder.patches import keep_4bit_training_layout, peft_wraps_quietly
from ladder.runtime.errors import UsageError

# bitsandbytes logs a hint about an optional faster CPU kernel package at import; training is correct without it.
logging.getLogger("bitsandbytes").setLevel(logging.ERROR)


def offline_hint(model_id: str, error: Exception, flag: str = "--model") -> UsageError:
    return UsageError(f"{flag} {model_id}: cannot load the model ({type(error).__name__}); offline or a wrong id? "
                      f"try --preset tiny, or pass a local directory")


def check_device(device: str) -> torch.device:
    """A torch device that exists here, or a one-line error."""
    try:
        dev = torch.device(device)
    except RuntimeError:
        raise UsageError(f"--device {device!r} is not a torch device (try cpu or cuda)") from None
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise UsageError(f"--device {device} asked for CUDA, but no CUDA GPU is available here; use --device cpu")
    return dev


def load_tokenizer(model_id: str, flag: str = "--model"):
    """The model's tokenizer, padding on the left (prompts end where the completion starts). One without a
    pad token (GPT-2 and friends) pads with EOS: padding is masked out everywhere."""
    from transformers import AutoTokenizer

    try:
        with quiet_progress():
            tokenizer = AutoTokenizer.from_pretrained(model_id)
    except Exception as e:  # noqa: BLE001 - OSError offline, ValueError for odd ids, HF errors: one message
        raise offline_hint(model_id, e, flag) from None
    if tokenizer.pad_token is None:
        if tokenizer.eos_token is None:
            raise UsageError(f"{flag} {model_id}: the tokenizer has neither a pad nor an EOS token; cannot pad "
                             f"prompts")
        tokenizer.pad_token = tokenizer.eos_token
    tokenizer.padding_side = "left"
    return tokenizer


def load_config(model_id: str, flag: str = "--model"):
    from transformers import AutoConfig

    try:
        return AutoConfig.from_pretrained(model_id)
    except Exception as e:  # noqa: BLE001
        raise offline_hint(model_id, e, flag) from None


def parameter_count(config) -> int:
    """The weights a model of this config has (tied ones once), counted on the meta device: nothing is
    allocated, nothing loaded."""
    from transformers import AutoModelForCausalLM

    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(config)
    return sum(p.numel() for p in model.parameters())


def lora_config(r: int, alpha: int, dropout: float = 0.0, fan_in_fan_out: bool = False, task_type: str = "CAUSAL_LM"):
    """LoRA on every linear layer; ``fan_in_fan_out`` for GPT-2's Conv1D layers (weights stored transposed);
    ``task_type`` "SEQ_CLS" for a reward model (its scalar head then trains whole, beside the adapters)."""
    from peft import LoraConfig

    return LoraConfig(r=r, lora_alpha=alpha, lora_dropout=dropout, target_modules="all-linear",
                      task_type=task_type, bias="none", fan_in_fan_out=fan_in_fan_out)


def load_causal_lm(model_id: str, device: torch.device, *, qlora: bool = False, lora: bool = False,
                   lora_r: int = 16, lora_alpha: int = 32, gradient_checkpointing: bool = False,
                   dtype: torch.dtype | None = None, new_adapter: bool = True, flag: str = "--model"):
    """``from_pretrained`` of a hub id or a local directory, prepared for training.

    qlora: nf4 + double quantisation (bitsandbytes), LoRA on every linear layer (peft).
    lora:  full-precision base, LoRA on every linear layer.
    Neither: every weight trains (π_ref must then be a separate frozen copy).
    ``new_adapter=False`` leaves the adapters off (to load a saved one with ``PeftModel``).
    """
    from transformers import AutoModelForCausalLM, BitsAndBytesConfig
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()  # the run has its own progress bar
    if dtype is None:
        dtype = torch.bfloat16 if device.type == "cuda" and torch.cuda.is_bf16_supported() else torch.float32
    kwargs = {"dtype": dtype}
    if qlora:
        kwargs["quantization_config"] = BitsAndBytesConfig(
            load_in_4bit=True, bnb_4bit_quant_type="nf4", bnb_4bit_use_double_quant=True,
            bnb_4bit_compute_dtype=dtype)
        kwargs["device_map"] = {"": device.index if device.type == "cuda" and device.index is not None
                                else device.type}
    try:
        with quiet_progress():
            model = AutoModelForCausalLM.from_pretrained(model_id, **kwargs)
    except Exception as e:  # noqa: BLE001
        raise offline_hint(model_id, e, flag) from None
    if model.generation_config.pad_token_id is None:  # as load_tokenizer pads: with EOS
        model.generation_config.pad_token_id = model.generation_config.eos_token_id
    if not qlora:
        model.to(device)
    if qlora:
        # The base is frozen and stays in the compute dtype (embeddings and norms included: upcasting them
        # to float32 would double the embedding's memory and the activations'); peft keeps the adapters in
        # float32. Non-reentrant checkpointing needs no input-gradient hooks.
        model.requires_grad_(False)
        keep_4bit_training_layout(model)
    if gradient_checkpointing:
        # Non-reentrant: gradients reach adapters inside checkpointed blocks without input hooks.
        model.activation_checkpointing_enable(activation_checkpointing_kwargs={"use_reentrant": False})
    if (qlora or lora) and new_adapter:
        from peft import get_peft_model

        conv1d = any(type(m).__name__ == "Conv1D" for m in model.modules())  # GPT-2 without 4-bit layers
        with peft_wraps_quietly():
            model = get_peft_model(model, lora_config(lora_r, lora_alpha, fan_in_fan_out=conv1d))
    return model


def check_adapter(adapter_dir: str, model: torch.nn.Module, model_id: str) -> None:
    """A LoRA adapter that fits ``model``, or a one-line error: every ``lora_A`` / ``lora_B`` weight saved in
    ``adapter_dir`` must sit on a layer of ``model`` with the same input / output size (an adapter trained
    on another base model fits nowhere, or not in size). The error names the base it was trained on."""
    from safetensors import safe_open

    config_path, weights = Path(adapter_dir) / "adapter_config.json", Path(adapter_dir) / "adapter_model.safetensors"
    if not weights.exists():  # an older adapter_model.bin: peft loads it as it is
        return
    try:
        base = json.loads(config_path.read_text()).get("base_model_name_or_path")
        with safe_open(weights, "pt") as f:
            shapes = {name: tuple(f.get_slice(name).get_shape()) for name in f.keys()}
    except Exception as e:  # noqa: BLE001 - unreadable, torn, not JSON or not safetensors: the same line
        raise UsageError(f"--adapter {adapter_dir}: not a readable LoRA adapter ({type(e).__name__}); pass the "
                         f"OUT/adapter directory of a grpo run") from None
    for name, shape in shapes.items():
        problem = _misfit(model, name, shape)
        if problem:
            trained_on = f"it was trained on {base!r}, " if base else ""
            raise UsageError(f"--adapter {adapter_dir} does not fit --model {model_id} ({problem}); {trained_on}"
                             f"evaluate it with the model it was trained on")


def _misfit(model: torch.nn.Module, name: str, shape: tuple) -> str | None:
    """What is wrong with the saved LoRA weight ``name`` of ``shape`` on ``model`` (None: it fits, or it is not
    a lora_A / lora_B weight). lora_A is [r, input size], lora_B [output size, r]."""
    kind = next((k for k in ("lora_A", "lora_B") if name.endswith(f".{k}.weight")), None)
    if kind is None:
        return None
    layer_name = name.removesuffix(f".{kind}.weight").removeprefix("base_model.model.")
    try:
        layer = model.get_submodule(layer_name)
    except AttributeError:
        return f"the model has no layer {layer_name}"
    which, saved = ("input", shape[1]) if kind == "lora_A" else ("output", shape[0])
    # nn.Linear (and bitsandbytes' 4-bit one): in_features, out_features; GPT-2's Conv1D: nx, nf
    names = ("in_features", "nx") if which == "input" else ("out_features", "nf")
    here = next((getattr(layer, n) for n in names if hasattr(layer, n)), saved)
    return f"{layer_name} has {which} size {here}, the adapter's {saved}" if here != saved else None


def make_optimizer(params, lr: float, name: str, device: torch.device):
    """``adamw`` (torch) or ``paged_adamw_8bit`` (bitsandbytes, CUDA only)."""
    params = [p for p in params if p.requires_grad]
    if name == "paged_adamw_8bit":
        if device.type != "cuda":
            raise UsageError("--optim paged_adamw_8bit needs a CUDA GPU; use --optim adamw on the CPU")
        import bitsandbytes as bnb

        return bnb.optim.PagedAdamW8bit(params, lr=lr)
    if name == "adamw":
        return torch.optim.AdamW(params, lr=lr, weight_decay=0.0, fused=device.type in ("cpu", "cuda"))
    raise UsageError(f"--optim must be adamw or paged_adamw_8bit, got {name!r}")


def has_4bit_layers(model: torch.nn.Module) -> bool:
    return any(hasattr(getattr(m, "weight", None), "quant_state") for m in model.modules())


@contextmanager
def dequantized_once(model: torch.nn.Module):
    """Inside, every 4-bit linear layer multiplies by its weight dequantized once, on entry.

    bitsandbytes' CPU path computes ``linear(x, dequantize(W₄), b)`` on every call, so sampling T
    tokens dequantizes the whole base T times. Here W = dequantize(W₄) is made once and reused:
    the same numbers, the same products, the same samples, at the cost of holding the dequantized
    base (4 bytes per weight in float32) while inside. On exit the layers are as they were.
    """
    import bitsandbytes as bnb

    layers = [m for m in model.modules() if isinstance(m, bnb.nn.Linear4bit)]
    for layer in layers:
        state = copy.copy(layer.weight.quant_state)  # dequantize straight to the compute dtype, as each call does
        state.dtype = layer.compute_dtype or state.dtype
        dense = bnb.functional.dequantize_4bit(layer.weight.data, state)

        def forward(x, layer=layer, dense=dense):
            bias = None if layer.bias is None else layer.bias.to(dense.dtype)
            return torch.nn.functional.linear(x.to(dense.dtype), dense, bias).to(x.dtype)

        layer.forward = forward
    try:
        yield
    finally:
        for layer in layers:
            del layer.forward


M_MMAP_THRESHOLD = -3  # glibc's mallopt parameter number (malloc.h)


def release_freed_memory(threshold: int = 128 * 1024) -> bool:
    """glibc: serve every buffer of ``threshold`` bytes or more with its own mmap, so that freeing it
    returns it to the system at once. Returns whether the setting took (False off glibc).

    By default glibc raises this threshold (up to 32 MB) each time a large buffer is freed, after
    which the many MB-sized buffers of a 4-bit forward and backward (dequantized weights, activations)
    come from the heap, and the heap keeps growing while far less is live: a checkpointed
    forward + backward of Qwen2.5-0.5B, G = 8 × 214 tokens, raised RSS by 5.3 GB with about 1.6 GB
    live. Fixing the threshold (which also stops glibc moving it) keeps RSS near what is live, at
    the cost of fresh pages for every large buffer (the update takes longer). Call it before the
    model is loaded: the loading's own buffers fragment the heap too.
    """
    try:
        libc = ctypes.CDLL("libc.so.6")
        return bool(libc.mallopt(M_MMAP_THRESHOLD, threshold))
    except (OSError, AttributeError):
        return False
