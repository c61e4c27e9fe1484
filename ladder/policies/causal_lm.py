"""A causal language model as a policy: an action is a token, a trajectory is a completion.

Layout of one batch row (prompt left-padded to P, completion right-padded to T):

    input_ids      [pad pad p1 p2 p3 | c1 c2 c3 EOS pad]      [B, P + T]
    actions        [c1 c2 c3 EOS pad]                          [B, T]
    mask           [1  1  1  1   0  ]                          [B, T]

A multi-turn row also holds the environment's tokens (a tool's reply r1 r2) among the completion's:
the model attends to them, but they are not its actions (``Batch.attention_mask`` ≠ ``mask``):

    actions        [c1 c2 r1 r2 c3 EOS pad]
    mask           [1  1  0  0  1  1   0  ]                    the loss: log π, KL, entropy, advantage
    attention_mask [1  1  1  1  1  1   0  ]                    what the model reads

The hidden state at position P − 1 + t predicts completion token t, so

    log π(c_t | prompt, c_<t) = log_softmax(lm_head(h_{P-1+t}) / τ)[c_t]          (core.token_logp)

with τ the sampling temperature, applied exactly as ``generate`` applies it. The lm_head and the
softmax run over chunks of positions and are recomputed in the backward pass, so the full
``[B, T, V]`` float32 logits never sit in memory at once (V = 151,936 for Qwen2.5).

Rows that share a prompt (GRPO's G completions of one question) share its forward pass: the
prompt's key/value cache is computed once per distinct prompt and indexed out to its rows, then
only the completions run through the model. The result is the same function of θ (the gradient
reaches the prompt's activations once, summed over its rows); the work on the prompt drops G-fold
in sampling, in the π_ref and π_old forwards, and in the training forward and backward. With
activation checkpointing the prompts' keys and values are one checkpointed computation, which the
checkpointed layers of the completions read and never write, so their recomputation is exact.
"""

from __future__ import annotations

from contextlib import contextmanager, nullcontext

import torch
from torch import Tensor, nn
from torch.utils.checkpoint import checkpoint
from transformers import LogitsProcessorList

from ladder.core import Batch, soft_update, token_logp
from ladder.patches import cache_of, cache_survives_checkpointing, read_only_cache, with_cache
from ladder.policies import SAMPLER_LOOPS, quant
from ladder.policies.decode import Sampling, decode, position_ids_for, shared_prompts
from ladder.policies.low_precision import RecordLogp, lower_precision

REFERENCE_ADAPTER = "ref"


def _token_logp_entropy(hidden: Tensor, lm_head: nn.Module, tokens: Tensor, mask: Tensor, temperature: float,
                        entropy_grad: bool = False) -> tuple[Tensor, Tensor]:
    """log π (``core.token_logp``) and entropy H = log Z − Σ_v softmax(z)_v z_v of the n scored tokens, from
    the hidden states ``[B, n + 1, H]`` of the positions before them and the tokens there ``[B, n + 1]``
    → each ``[B, n]`` (float32). Without ``entropy_grad`` H is a statistic with no graph: its backward
    would keep the [B, n, V] probabilities alive until H itself is freed."""
    logits = lm_head(hidden).float()
    logp = token_logp(logits, tokens, mask, temperature)
    with torch.set_grad_enabled(entropy_grad and torch.is_grad_enabled()):
        scaled = logits[:, :-1] / temperature
        entropy = torch.logsumexp(scaled, dim=-1) - (torch.softmax(scaled, dim=-1) * scaled).sum(-1)
    return logp, entropy


def chunked_logp_entropy(hidden: Tensor, lm_head: nn.Module, tokens: Tensor, mask: Tensor, temperature: float = 1.0,
                         chunk_size: int = 64, entropy_grad: bool = False) -> tuple[Tensor, Tensor]:
    """``_token_logp_entropy`` over chunks of ``chunk_size`` scored positions (each chunk also reads the
    position after it, whose token it scores), checkpointed when grad is on.

        hidden [B, T + 1, H] and tokens [B, T + 1]: the last prompt position, then the T completion positions
        mask   [B, T]
    """
    logps, entropies = [], []
    for start in range(0, mask.shape[1], chunk_size):
        stop = start + chunk_size
        h, x, m = hidden[:, start:stop + 1], tokens[:, start:stop + 1], mask[:, start:stop]
        if torch.is_grad_enabled() and h.requires_grad:
            lp, ent = checkpoint(_token_logp_entropy, h, lm_head, x, m, temperature, entropy_grad,
                                 use_reentrant=False)
        else:
            lp, ent = _token_logp_entropy(h, lm_head, x, m, temperature, entropy_grad)
        logps.append(lp)
        entropies.append(ent)
    return torch.cat(logps, dim=1), torch.cat(entropies, dim=1)


def disable_dropout(model: nn.Module) -> None:
    """RL needs log π_θ at evaluation to match log π_old at sampling: no dropout anywhere."""
    for module in model.modules():
        if isinstance(module, nn.Dropout):
            module.p = 0.0
    config = getattr(model, "config", None)
    for key, value in (vars(config).items() if config is not None else []):
        if ("dropout" in key or "pdrop" in key) and isinstance(value, float):
            setattr(config, key, 0.0)


def is_peft(model: nn.Module) -> bool:
    return hasattr(model, "disable_adapter") and hasattr(model, "peft_config")


class CausalLMPolicy(nn.Module):
    """π_θ = a Hugging Face causal LM (optionally with peft adapters), plus an optional value head.

    π_ref is ``ref_model`` (a frozen copy) or, for a peft model, the same weights with the adapter
    disabled — no second copy. ``make_reference_refreshable`` gives a peft model a second, frozen
    adapter as π_ref's instead (still one base), which ``refresh_reference`` can move towards π_θ.
    """

    def __init__(self, model: nn.Module, value_head: bool = False, temperature: float = 1.0,
                 chunk_size: int = 64, ref_model: nn.Module | None = None, share_prompts: bool = True,
                 dequantize_once: bool = False, entropy_grad: bool = False,
                 sampler_dtype: torch.dtype | None = None, sampler_loop: str = "ladder"):
        super().__init__()
        if sampler_loop not in SAMPLER_LOOPS:
            raise ValueError(f"sampler_loop {sampler_loop!r}: one of {', '.join(SAMPLER_LOOPS)}")
        self.sampler_loop = sampler_loop  # "ladder": policies.decode; "generate": transformers' generate
        self.sampler_dtype = sampler_dtype  # sample from the weights rounded to this dtype (policies.low_precision)
        self.entropy_grad = entropy_grad  # H with its graph, for an entropy bonus (c_H > 0); else a statistic
        self.share_prompts = share_prompts
        self.dequantize_once = dequantize_once  # sample with the 4-bit base dequantized once (quant.dequantized_once)
        disable_dropout(model)
        model.train()  # dropout is off; train mode keeps activation checkpointing active
        self.model = model
        self.temperature = temperature
        self.chunk_size = chunk_size
        self.ref_model = ref_model
        if ref_model is not None:
            ref_model.requires_grad_(False).eval()
        self.value_head = None
        if value_head:
            hidden_size = model.get_output_embeddings().in_features
            self.value_head = nn.Linear(hidden_size, 1)
            nn.init.zeros_(self.value_head.weight)
            nn.init.zeros_(self.value_head.bias)
            self.value_head.to(next(model.parameters()).device)

    def _hidden(self, model: nn.Module, input_ids: Tensor, attention_mask: Tensor, T: int) -> Tensor:
        """Hidden states ``[B, T + 1, H]`` from the last prompt position on: position P − 1 + t predicts
        completion token t (the last one, the final completion token's, predicts nothing scored)."""
        P = input_ids.shape[1] - T
        decoder = model.get_decoder()
        positions = position_ids_for(attention_mask)
        shared = shared_prompts(input_ids[:, :P - 1], attention_mask[:, :P - 1]) if self.share_prompts else None
        if shared is None:
            out = decoder(input_ids=input_ids, attention_mask=attention_mask, position_ids=positions, use_cache=False)
            return out[0][:, P - 1:]
        first, rows = shared
        prompt = (input_ids[first, :P - 1], attention_mask[first, :P - 1], positions[first, :P - 1])
        if torch.is_grad_enabled() and _checkpointing(model):
            # Checkpointed layers are recomputed in the backward pass, so the prompts' keys and values are
            # kept as one checkpointed computation and the completions only read them (never append).
            keys_values = checkpoint(_prompt_keys_values, model, *prompt, use_reentrant=False)
        else:
            keys_values = _prompt_keys_values(model, *prompt)
        cache = read_only_cache(keys_values, rows)
        with cache_survives_checkpointing(decoder):
            out = decoder(input_ids=input_ids[:, P - 1:], attention_mask=attention_mask,
                          position_ids=positions[:, P - 1:], use_cache=False, **with_cache(cache))
        return out[0]

    def _forward(self, model: nn.Module, batch: Batch, want_values: bool):
        input_ids, attention_mask = batch.inputs["input_ids"], model_attention_mask(batch)
        hidden = self._hidden(model, input_ids, attention_mask, batch.actions.shape[1])
        tokens = torch.cat([input_ids[:, -batch.actions.shape[1] - 1:-batch.actions.shape[1]], batch.actions], dim=1)
        logp, entropy = chunked_logp_entropy(hidden, model.get_output_embeddings(), tokens, batch.mask,
                                             self.temperature, self.chunk_size, self.entropy_grad)
        values = None
        if want_values and self.value_head is not None:
            values = self.value_head(hidden[:, :-1].to(self.value_head.weight.dtype)).squeeze(-1).float()
        return logp, entropy, values

    def evaluate(self, batch: Batch) -> tuple[Tensor, Tensor, Tensor | None]:
        """log π_θ, entropy and V for the completion tokens of the batch, each ``[B, T]``."""
        return self._forward(self.model, batch, want_values=True)

    def forward(self, batch: Batch) -> tuple[Tensor, Tensor, Tensor | None]:
        """``evaluate`` (the call DistributedDataParallel wraps)."""
        return self.evaluate(batch)

    def _has_reference_adapter(self) -> bool:
        return is_peft(self.model) and REFERENCE_ADAPTER in self.model.peft_config

    @contextmanager
    def reference_context(self):
        """Inside it, ``self.model`` is π_ref when the reference lives in the same model (the disabled
        adapter, or the frozen reference adapter)."""
        if self.ref_model is not None or not is_peft(self.model):
            yield
        elif self._has_reference_adapter():
            active = self.model.active_adapter
            self.model.set_adapter(REFERENCE_ADAPTER, inference_mode=True)
            try:
                yield
            finally:
                self.model.set_adapter(active)
                self.model.set_requires_grad(REFERENCE_ADAPTER, requires_grad=False)
        else:
            with self.model.disable_adapter():
                yield

    @torch.no_grad()
    def ref_logp(self, batch: Batch) -> Tensor:
        """log π_ref of the completion tokens ``[B, T]``."""
        if self.ref_model is not None:
            return self._forward(self.ref_model, batch, want_values=False)[0]
        if not is_peft(self.model):
            raise ValueError("no reference: pass ref_model, or wrap the model with a peft adapter")
        with self.reference_context():
            return self._forward(self.model, batch, want_values=False)[0]

    def make_reference_refreshable(self) -> None:
        """Give π_ref parameters of its own that ``refresh_reference`` can move.

        A peft model gets a second adapter, frozen, as π_ref's: LoRA starts it at B = 0, so π_ref is
        still exactly the base model; the base itself is shared, never copied. A full model needs
        ``ref_model`` (its frozen copy), which is refreshable as it is.
        """
        if self.ref_model is None and not self._has_reference_adapter():
            if not is_peft(self.model):
                raise ValueError("a refreshable reference needs ref_model or a peft adapter")
            active = self.model.active_adapter
            self.model.add_adapter(REFERENCE_ADAPTER, self.model.peft_config[active])
            self.model.set_adapter(active)
            self.model.set_requires_grad(REFERENCE_ADAPTER, requires_grad=False)

    def _reference_pairs(self) -> list[tuple[str, Tensor, Tensor]]:
        """(name, π_ref's tensor, π_θ's tensor) for every parameter the refresh mixes."""
        if self.ref_model is not None:
            theta = dict(self.model.named_parameters())
            return [(n, p, theta[n]) for n, p in self.ref_model.named_parameters()]
        active = self.model.active_adapter
        params = dict(self.model.named_parameters())
        return [(n, p, params[n.replace(f".{REFERENCE_ADAPTER}.", f".{active}.")]) for n, p in params.items()
                if f".{REFERENCE_ADAPTER}." in n]

    def refresh_reference(self, alpha: float) -> None:
        """π_ref ← α·π_θ + (1 − α)·π_ref (``core.soft_update``); α = 1 copies π_θ."""
        pairs = self._reference_pairs()
        if not pairs:
            raise ValueError("no refreshable reference: call make_reference_refreshable first")
        soft_update([ref for _, ref, _ in pairs], [theta for _, _, theta in pairs], alpha)

    def reference_state(self) -> dict[str, Tensor]:
        """π_ref's own parameters (for a checkpoint)."""
        return {n: ref.detach().clone() for n, ref, _ in self._reference_pairs()}

    def load_reference_state(self, state: dict[str, Tensor]) -> None:
        with torch.no_grad():
            for n, ref, _ in self._reference_pairs():
                ref.copy_(state[n])

    @torch.no_grad()
    def old_logp_and_values(self, batch: Batch) -> tuple[Tensor, Tensor | None]:
        """log π_old and V_old at sampling time (π_old is π_θ now)."""
        logp, _, values = self._forward(self.model, batch, want_values=True)
        return logp, values

    @torch.no_grad()
    def sampling_weights(self):
        """A context in which the model samples with π_sampler's weights: rounded to ``sampler_dtype``
        (``lower_precision``), the 4-bit base dequantized once (``dequantize_once``), or as they are."""
        if self.sampler_dtype is not None:
            return lower_precision(self.model, self.sampler_dtype)
        return quant.dequantized_once(self.model) if self.dequantize_once else nullcontext()

    def generate(self, prompt_ids: Tensor, prompt_mask: Tensor, max_new_tokens: int, pad_token_id: int,
                 eos_token_id: int | None, do_sample: bool = True, top_k: int = 0, top_p: float = 1.0,
                 min_new_tokens: int = 0, record_logp: bool = False) -> tuple[Tensor, ...]:
        """Sample completions for left-padded prompts; return (completion ids, completion mask), ``[B, T]``,
        and with ``record_logp`` the sampler's own log-probs of the tokens, ``[B, T]``: those of the
        distribution they were drawn from, top-k and top-p cut and renormalised; 0 after the first EOS.

        Tokens after the first EOS are padding (mask 0); the EOS itself is a real action. With
        ``sampler_dtype`` the tokens are drawn from the weights rounded to it (``lower_precision``). The loop
        is ladder's own (``policies.decode``), or transformers' ``generate`` with ``sampler_loop="generate"``.
        """
        sampling = Sampling(self.temperature, top_k, top_p, min_new_tokens, do_sample)
        with _eval_mode(self.model), self.sampling_weights():
            if self.sampler_loop == "generate":
                completion, logp = self._hf_generate(prompt_ids, prompt_mask, max_new_tokens, pad_token_id,
                                                     eos_token_id, sampling, record_logp)
            else:
                completion, logp = decode(self.model, prompt_ids, prompt_mask, max_new_tokens, pad_token_id,
                                          eos_token_id, sampling, self.share_prompts)
        mask = completion_mask(completion, eos_token_id)
        if not record_logp:
            return completion, mask
        return completion, mask, logp.masked_fill(mask == 0, 0.0)

    def _hf_generate(self, prompt_ids: Tensor, prompt_mask: Tensor, max_new_tokens: int, pad_token_id: int,
                     eos_token_id: int | None, sampling: Sampling, record_logp: bool) -> tuple[Tensor, Tensor | None]:
        """(completion, log q or None) from transformers' ``generate`` (``RecordLogp`` records log q)."""
        kwargs = dict(max_new_tokens=max_new_tokens, min_new_tokens=sampling.min_new_tokens,
                      pad_token_id=pad_token_id, eos_token_id=eos_token_id)
        if sampling.do_sample:
            kwargs.update(do_sample=True, temperature=self.temperature, top_k=sampling.top_k, top_p=sampling.top_p)
        else:
            kwargs.update(do_sample=False, temperature=None, top_k=None, top_p=None)
        recorder = RecordLogp(self.temperature, sampling.top_k, sampling.top_p) if record_logp else None
        if recorder is not None:
            kwargs["logits_processor"] = LogitsProcessorList([recorder])
        shared = shared_prompts(prompt_ids[:, :-1], prompt_mask[:, :-1]) if self.share_prompts else None
        if shared is not None:  # encode each distinct prompt once; generate continues from its cache
            first, rows = shared
            cache = cache_of(self.model.get_decoder()(
                input_ids=prompt_ids[first, :-1], attention_mask=prompt_mask[first, :-1],
                position_ids=position_ids_for(prompt_mask[first, :-1]), use_cache=True))
            cache.batch_select_indices(rows)
            kwargs.update(with_cache(cache))
        out = self.model.generate(input_ids=prompt_ids, attention_mask=prompt_mask, **kwargs)
        completion = out[:, prompt_ids.shape[1]:]
        return completion, None if recorder is None else recorder.finish(completion)


class ReferenceWeights:
    """π_ref's own parameters as a checkpoint part: a refreshed reference moves during the run."""

    def __init__(self, policy: CausalLMPolicy):
        self.policy = policy

    def state_dict(self) -> dict[str, Tensor]:
        return self.policy.reference_state()

    def load_state_dict(self, state: dict[str, Tensor]) -> None:
        self.policy.load_reference_state(state)


def _prompt_keys_values(model: nn.Module, input_ids: Tensor, attention_mask: Tensor, positions: Tensor
                        ) -> tuple[Tensor, ...]:
    """Every layer's keys and values for the distinct prompts: (k_0, v_0, k_1, v_1, …)."""
    with _eval_mode(model):  # no dropout anywhere (disable_dropout): eval mode changes only checkpointing
        cache = cache_of(model.get_decoder()(input_ids=input_ids, attention_mask=attention_mask,
                                             position_ids=positions, use_cache=True))
    return tuple(t for layer in cache.layers for t in (layer.keys, layer.values))


def _checkpointing(model: nn.Module) -> bool:
    return model.training and any(getattr(m, "gradient_checkpointing", False) for m in model.modules())


class _eval_mode:
    """``model.eval()`` inside, the previous mode restored after."""

    def __init__(self, model: nn.Module):
        self.model = model

    def __enter__(self):
        self.was_training = self.model.training
        self.model.eval()

    def __exit__(self, *exc):
        self.model.train(self.was_training)


def completion_mask(completion: Tensor, eos_token_id: int | None) -> Tensor:
    """1 up to and including the first EOS, 0 after it."""
    if eos_token_id is None:
        return torch.ones_like(completion, dtype=torch.float32)
    is_eos = (completion == eos_token_id).long()
    after_eos = (is_eos.cumsum(-1) - is_eos) > 0
    return (~after_eos).float()


def _check_actions_attended(mask: Tensor, attention_mask: Tensor) -> None:
    if (mask.bool() & ~attention_mask.bool()).any():
        raise ValueError("every action (mask 1) must be attended to (attention_mask 1)")


def model_attention_mask(batch: Batch) -> Tensor:
    """The model's attention mask ``[B, P + T]``: the prompt's part from ``inputs["attention_mask"]``, the
    completion's from ``batch.attention_mask`` when the batch has one (it then holds context the policy
    reads but did not choose: a tool's reply, attention 1 and mask 0), else as ``inputs`` has it."""
    attention_mask = batch.inputs["attention_mask"]
    if batch.attention_mask is None:
        return attention_mask
    _check_actions_attended(batch.mask, batch.attention_mask)
    T = batch.attention_mask.shape[1]
    return torch.cat([attention_mask[:, :-T], batch.attention_mask.to(attention_mask.dtype)], dim=1)


def lm_batch(prompt_ids: Tensor, prompt_mask: Tensor, completion: Tensor, completion_mask: Tensor,
             pad_token_id: int, completion_attention_mask: Tensor | None = None, **fields) -> Batch:
    """Assemble the ``Batch`` for prompts + completions (positions the model does not read set to the pad token).

        completion_mask            [B, T]  the loss mask: 1 on the policy's own tokens
        completion_attention_mask  [B, T]  1 on every completion token the model reads: its own and the
                                           environment's (a tool's reply: attention 1, mask 0)
                                           (None: completion_mask, a single-turn completion)
    """
    attended = completion_mask if completion_attention_mask is None else completion_attention_mask
    if completion_attention_mask is not None:
        _check_actions_attended(completion_mask, attended)
    completion = torch.where(attended.bool(), completion, torch.full_like(completion, pad_token_id))
    input_ids = torch.cat([prompt_ids, completion], dim=1)
    attention_mask = torch.cat([prompt_mask.long(), attended.long()], dim=1)
    two_masks = None if completion_attention_mask is None else completion_attention_mask.float()
    return Batch(actions=completion, mask=completion_mask.float(), attention_mask=two_masks,
                 inputs={"input_ids": input_ids, "attention_mask": attention_mask}, **fields)
