"""Where ladder meets a library's moving or private API: one module, each place with why.

A new release of transformers, peft, bitsandbytes or torch changes exactly these lines. The
package's requirements cap each library at its next major version. What a release says about its
own future (a FutureWarning, a DeprecationWarning) is kept from a learner's runs and notebooks
(``quiet_the_stack``); ``LADDER_SHOW_WARNINGS=1`` shows it again, and the release check in the
README (``tests/test_no_deprecations.py`` with it set) lists what a new release deprecates.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import os
import re
import sys
import warnings
from contextlib import contextmanager
from pathlib import Path

import torch
from torch import Tensor, nn

TRANSFORMERS_TESTED = "5.25"  # the newest transformers these patches were checked against


@functools.cache
def cache_arg() -> str:
    """The name under which this transformers passes and returns a key/value cache.

    transformers 5.24 renamed ``past_key_values`` to ``cache`` (the old name warns until 5.40 in a
    model's forward and 6.0 in ``generate``); earlier 5.x releases know only ``past_key_values``.
    """
    from transformers.modeling_outputs import BaseModelOutputWithPast

    fields = {f.name for f in dataclasses.fields(BaseModelOutputWithPast)}
    return "cache" if "cache" in fields else "past_key_values"


def with_cache(cache) -> dict:
    """``{name: cache}`` to pass to a model's forward or to ``generate``, under this version's name."""
    return {cache_arg(): cache}


def cache_of(output):
    """The key/value cache a forward with ``use_cache=True`` returned."""
    return getattr(output, cache_arg())



# --- transformers: a prompt cache shared by the completions (ladder.policies.causal_lm) ---------

def read_only_cache(keys_values: tuple[Tensor, ...], rows: Tensor):
    """A cache holding the prompts' keys and values for each row (``rows``: the row's prompt) that the
    forward reads and never writes: layer ℓ attends to [prompt keys ‖ the completion's own keys].

    Private API: each cache layer's ``update`` is replaced, so the forward of the completions (run again
    by activation checkpointing in the backward) never appends to the shared prompt cache."""
    from transformers import DynamicCache

    cache = DynamicCache()
    for layer_idx in range(len(keys_values) // 2):
        cache.update(keys_values[2 * layer_idx][rows], keys_values[2 * layer_idx + 1][rows], layer_idx)
    for layer in cache.layers:
        def read(key_states, value_states, *args, layer=layer, **kwargs):
            return torch.cat([layer.keys, key_states], dim=-2), torch.cat([layer.values, value_states], dim=-2)
        layer.update = read
    return cache


@contextmanager
def cache_survives_checkpointing(decoder: nn.Module):
    """Checkpointed layers drop a cache unless they declare that they only read it (ours do).

    Private API: transformers' ``GradientCheckpointingLayer`` checks ``_can_checkpoint_with_cache``; and
    GPT-2's model hands its blocks no cache at all while its own ``gradient_checkpointing`` is on in
    training mode, so that flag is off inside (its blocks checkpoint on their own flags)."""
    layers = [m for m in decoder.modules() if hasattr(type(m), "_can_checkpoint_with_cache")]
    model_flag = getattr(decoder, "gradient_checkpointing", None)
    for layer in layers:
        layer._can_checkpoint_with_cache = True
    if model_flag:
        decoder.gradient_checkpointing = False
    try:
        yield
    finally:
        for layer in layers:
            del layer._can_checkpoint_with_cache
        if model_flag:
            decoder.gradient_checkpointing = model_flag


# --- peft ------------------------------------------------------------------------------------------

@contextmanager
def peft_wraps_quietly():
    """peft 0.21 reads ``model.is_gradient_checkpointing``, which transformers 5 renamed to
    ``is_activation_checkpointing``: every ``get_peft_model`` and ``PeftModel.from_pretrained`` would
    print a FutureWarning about peft's own code. Wrap and load adapters inside this."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*is_gradient_checkpointing.*", category=FutureWarning)
        yield


# --- bitsandbytes ----------------------------------------------------------------------------------

def keep_4bit_training_layout(model: nn.Module) -> None:
    """bitsandbytes repacks 4-bit weights for fast CPU *inference* on the first no-grad forward; the
    repacked layout breaks a later forward with gradients, so keep the training layout (private flag
    ``support_avx512bf16_for_cpu`` of its 4-bit layers)."""
    for module in model.modules():
        if hasattr(module, "support_avx512bf16_for_cpu"):
            module.support_avx512bf16_for_cpu = False


# --- torch -----------------------------------------------------------------------------------------

def ddp_ignores(policy: nn.Module, names: list[str]) -> None:
    """DistributedDataParallel neither syncs nor waits for these parameters and buffers (the frozen base,
    π_ref's adapter): private API, the one DDP offers for it."""
    from torch.nn.parallel import DistributedDataParallel

    DistributedDataParallel._set_params_and_buffers_to_ignore_for_model(policy, names)


def open_progress_bars() -> list:
    """tqdm's open bars (its private ``_instances``), to close them before a one-line error."""
    from tqdm import tqdm

    return list(getattr(tqdm, "_instances", ()))

STACK = ("transformers", "peft", "accelerate", "bitsandbytes", "kernels", "trl", "torch", "datasets",
         "huggingface_hub", "tokenizers", "gymnasium", "matplotlib", "ipywidgets")
ANNOUNCEMENTS = (FutureWarning, DeprecationWarning, PendingDeprecationWarning)


def quiet_the_stack() -> None:
    """Warnings from the libraries ladder stands on never reach a learner's run or notebook: a learner cannot tell a
    library's note about its next release (or about its own internals) from a problem with their run, and a one-line
    error stays one line. Ignored: every FutureWarning, DeprecationWarning and PendingDeprecationWarning (whoever
    the stack level names: the library, or ladder's call into it), every other warning raised in one of ``STACK``,
    and what their loggers say below ERROR (transformers' load reports, bitsandbytes' kernel notes). ladder's own
    words to the learner are printed lines, not warnings. With ``LADDER_SHOW_WARNINGS=1``
    nothing is hidden (what a maintainer runs against a new release)."""
    if os.environ.get("LADDER_SHOW_WARNINGS", "") not in ("", "0"):
        return
    for category in ANNOUNCEMENTS:
        warnings.filterwarnings("ignore", category=category)
    for library in STACK:
        warnings.filterwarnings("ignore", module=rf"{library}(\.|$)")
        logging.getLogger(library).setLevel(logging.ERROR)  # their logged warnings too (bitsandbytes' kernel notes)
    for variable in ("TRANSFORMERS_VERBOSITY", "DATASETS_VERBOSITY", "HF_HUB_VERBOSITY"):
        os.environ.setdefault(variable, "error")  # these set their logger's level again when imported
    if "transformers" in sys.modules:  # imported already: its level was set from the variable then
        sys.modules["transformers"].logging.set_verbosity_error()


DEPRECATION = re.compile(r"(FutureWarning|DeprecationWarning|PendingDeprecationWarning)\b|\bdeprecated\b", re.I)
WATCHED = ("transformers", "peft", "accelerate", "bitsandbytes")


def _package_of(path: str) -> str:
    """The top-level package a source file belongs to: ``ladder`` for this package's own files, the
    folder after ``site-packages/`` for an installed one."""
    if Path(path).resolve().is_relative_to(Path(__file__).resolve().parent):
        return "ladder"
    return path.rpartition("site-packages/")[2].split("/")[0] if "site-packages/" in path else ""


def library_deprecations(output: str) -> list[str]:
    """The lines of a run's or a notebook's output that announce a deprecation in a call that ladder
    makes: a warning raised in (or attributed by its stack level to) transformers, peft, accelerate,
    bitsandbytes or ladder itself, or a deprecation logged by one of those libraries (``[transformers] …
    deprecated …``). torch deprecating its own internals to itself is not ours to fix."""
    found = []
    for line in output.splitlines():
        if not DEPRECATION.search(line):
            continue
        warning = re.match(r"\s*(\S+\.py):\d+: \w+", line)
        logged = re.match(r"\s*\[(\w+)\]", line)
        source = _package_of(warning.group(1)) if warning else logged.group(1) if logged else ""
        if source in WATCHED + ("ladder",):
            found.append(line.strip())
    return found
