"""Notebook 6, TRL parity: the same tiny model and tensors through TRL's ``GRPOTrainer._compute_loss`` and
``core.compute_loss``.

    trl_parity          both losses and the largest gradient difference (lazy ``import trl``; ``ParityBench`` builds
                        the trainer offline once per process)

and the view ``parity_view`` (a ``View``: ``.controls``, ``.data``, ``.figure``).
"""

from __future__ import annotations

import contextlib
import functools
import io
import tempfile
import warnings
from pathlib import Path

import ipywidgets as widgets
import numpy as np
import torch
from matplotlib.figure import Figure

from ladder import core
from ladder.hub import quiet_progress
from ladder.rungs.grpo import LOSS_TYPES, loss_normaliser
from ladder.rungs.grpo.loss_types import objective_from_trl
from ladder.viz._widget import View
from ladder.viz.cartpole_lab import one_thread

PARITY_LOSS_TYPES = LOSS_TYPES  # the GRPO rung's --loss-type → its objective and aggregation, checked against TRL's


def trl_available() -> bool:
    """Whether trl ≥ 1.16 (the version whose ``GRPOTrainer._compute_loss`` this mirrors) is installed."""
    try:
        import trl
    except ImportError:
        return False
    major, minor = (int(x) for x in trl.__version__.split(".")[:2])
    return (major, minor) >= (1, 16)


class ParityBench:
    """TRL's ``GRPOTrainer`` built offline on a tiny Qwen2, ladder's ``CausalLMPolicy`` on the very same model, and
    the inputs ``_generate_and_score_completions`` would hand to ``_compute_loss`` (as tests/test_trl_parity_grpo.py).

    Two prompts (one left-padded) × G = 2 completions of lengths 6, 4, 5, 3 (one ending at EOS), advantages of
    both signs, π_old = π_θ shifted per row and per token (ratios on both sides of the clip), π_ref another
    perturbation; padding carries junk in both, as it may in TRL. One process, no gradient accumulation.
    """

    TEMPERATURE, MAX_COMPLETION_LENGTH, EPSILON, G = 0.7, 8, 0.2, 2

    def __init__(self):
        import random

        import transformers
        from datasets import Dataset
        from transformers import AutoModelForCausalLM, AutoTokenizer
        from trl import GRPOConfig, GRPOTrainer

        from ladder.policies.causal_lm import CausalLMPolicy, lm_batch
        from ladder.tasks import arithmetic, tiny_lm

        self._lm_batch = lm_batch
        self.dir = Path(tempfile.mkdtemp(prefix="ladder-trl-parity-"))
        corpus = ["What is 2 + 3? 5", "Tom has 4 apples and buys 3 more. 7", "How many are left? 6"] * 5
        tokenizer = arithmetic.chat_tokenizer(corpus, vocab_size=300)
        with tiny_lm.isolated_build(seed=0):
            model = tiny_lm.build_model("qwen2", tokenizer, hidden=32, layers=2, heads=2, max_positions=64)
            with torch.no_grad():  # weights wide enough that the distributions are far from uniform
                for p in model.parameters():
                    if p.dim() > 1:
                        p.normal_(0.0, 0.3)
        model.save_pretrained(self.dir / "model")
        tokenizer.save_pretrained(self.dir / "model")
        tokenizer = AutoTokenizer.from_pretrained(self.dir / "model")
        tokenizer.padding_side = "left"
        with warnings.catch_warnings():  # transformers 5 renames gradient_checkpointing; TRL 1.16 still passes it
            warnings.simplefilter("ignore", FutureWarning)
            args = GRPOConfig(output_dir=str(self.dir / "out"), report_to=[], use_cpu=True, bf16=False,
                              per_device_train_batch_size=2 * self.G, num_generations=self.G,
                              max_completion_length=self.MAX_COMPLETION_LENGTH, temperature=self.TEMPERATURE,
                              beta=0.04, epsilon=self.EPSILON, gradient_checkpointing=False, disable_dropout=True,
                              logging_steps=10**9, save_strategy="no", dataloader_num_workers=0)
        py, np_state, verbosity = random.getstate(), np.random.get_state(), transformers.logging.get_verbosity()
        transformers.logging.set_verbosity_error()
        try:
            with torch.random.fork_rng(devices=[]), contextlib.redirect_stdout(io.StringIO()):
                self.trainer = GRPOTrainer(model=AutoModelForCausalLM.from_pretrained(self.dir / "model"),
                                           reward_funcs=lambda completions, **_: [0.0] * len(completions), args=args,
                                           train_dataset=Dataset.from_list([{"prompt": "What is 2 + 3?"}] * 4),
                                           processing_class=tokenizer)
        finally:  # Trainer.__init__ seeds every generator: leave the caller's as they were
            random.setstate(py)
            np.random.set_state(np_state)
            transformers.logging.set_verbosity(verbosity)
        self.trainer.current_gradient_accumulation_steps = 1  # set by Trainer's training loop; _compute_loss reads it
        self.trainer.model.train()
        self.policy = CausalLMPolicy(self.trainer.model, temperature=self.TEMPERATURE)
        self.inputs = self._inputs(tokenizer)

    def _inputs(self, tokenizer) -> dict:
        G = self.G
        enc = tokenizer(["What is 2 + 3?", "Tom has 4 apples and buys 3 more. How many?"], return_tensors="pt",
                        padding=True)
        prompt_ids, prompt_mask = (enc[k].repeat_interleave(G, dim=0) for k in ("input_ids", "attention_mask"))
        gen = torch.Generator().manual_seed(1)
        B, T = len(prompt_ids), 6
        completion_ids = torch.randint(5, len(tokenizer), (B, T), generator=gen)
        completion_mask = (torch.arange(T)[None] < torch.tensor([6, 4, 5, 3])[:, None]).long()
        completion_ids[1, 3] = tokenizer.eos_token_id
        completion_ids = completion_ids.masked_fill(completion_mask == 0, tokenizer.pad_token_id)
        with torch.no_grad():
            batch = self._lm_batch(prompt_ids, prompt_mask, completion_ids, completion_mask, tokenizer.pad_token_id)
            logp = self.policy.evaluate(batch)[0].float()
        noise = 0.3 * torch.randn(B, T, generator=gen) * completion_mask
        noise = noise - noise.sum(1, keepdim=True) / completion_mask.sum(1, keepdim=True)
        old = logp - torch.tensor([0.22, 0.5, -0.1, -0.35])[:, None] - noise
        ref = logp + 0.5 * torch.randn(B, T, generator=gen)
        return {"prompt_ids": prompt_ids, "prompt_mask": prompt_mask, "completion_ids": completion_ids,
                "completion_mask": completion_mask, "advantages": torch.tensor([0.8, -1.1, 0.6, -0.9]),
                "old_per_token_logps": torch.where(completion_mask.bool(), old, -3.0),
                "ref_per_token_logps": torch.where(completion_mask.bool(), ref, -7.0),
                "num_items_in_batch": completion_mask.sum()}

    def configure(self, loss_type: str, level: str, correction: bool, eps_high: float, delta: float | None,
                  beta: float) -> core.UpdateConfig:
        """Set TRL's options on the trainer as ``GRPOTrainer.__init__`` copies them from its args; return the
        ``core.UpdateConfig`` they map to."""
        t = self.trainer
        t.args.loss_type = t.loss_type = loss_type
        t.args.importance_sampling_level = t.importance_sampling_level = level
        t.args.use_bias_correction_kl = correction
        t.args.epsilon = t.epsilon_low = self.EPSILON
        t.args.epsilon_high = t.epsilon_high = eps_high
        t.args.delta = delta
        t.args.beta = t.beta = beta
        objective = objective_from_trl(loss_type, {"epsilon_high": eps_high, "delta": delta})
        return core.UpdateConfig(objective=objective, aggregation=PARITY_LOSS_TYPES[loss_type].aggregation,
                                 ratio_level=level, clip_eps_low=self.EPSILON, clip_eps_high=eps_high, kl_coef=beta,
                                 kl_estimator="k3", kl_correction=correction, normalize_advantages=False)

    def _grads(self) -> dict:
        return {n: p.grad.detach().clone() for n, p in self.trainer.model.named_parameters() if p.grad is not None}

    def compare(self, loss_type: str = "grpo", level: str = "token", correction: bool = True,
                eps_high: float | None = None, delta: float | None = None, beta: float = 0.04) -> dict:
        """Both losses and gradients on the same tensors; the largest differences."""
        eps_high = self.EPSILON if eps_high is None else eps_high
        cfg = self.configure(loss_type, level, correction, eps_high, delta, beta)
        model, inputs = self.trainer.model, self.inputs
        with one_thread():
            model.zero_grad(set_to_none=True)
            trl_loss = self.trainer._compute_loss(model, inputs)
            trl_loss.backward()
            trl_grads = self._grads()
            mask = inputs["completion_mask"]
            batch = self._lm_batch(inputs["prompt_ids"], inputs["prompt_mask"], inputs["completion_ids"], mask,
                                   model.config.pad_token_id, advantages=inputs["advantages"][:, None] * mask,
                                   old_logp=inputs["old_per_token_logps"], ref_logp=inputs["ref_per_token_logps"])
            # TRL's active tokens for one micro-batch: num_items_in_batch / processes · accumulation / spg
            active = (inputs["num_items_in_batch"].clamp(min=1.0).item() / self.trainer.accelerator.num_processes
                      * self.trainer.current_gradient_accumulation_steps / self.trainer.args.steps_per_generation)
            num_tokens = loss_normaliser(loss_type, len(mask), self.trainer.max_completion_length, active)
            model.zero_grad(set_to_none=True)
            ladder_loss, _, _ = core.compute_loss(self.policy, batch, cfg, num_tokens)
            ladder_loss.backward()
            ladder_grads = self._grads()
            model.zero_grad(set_to_none=True)
        names = sorted(trl_grads)
        t = torch.cat([trl_grads[n].reshape(-1) for n in names]).double()
        ladder = torch.cat([ladder_grads[n].reshape(-1) for n in names]).double()
        return {"loss_type": loss_type, "level": level, "correction": correction, "beta": beta,
                "trl_loss": trl_loss.item(), "ladder_loss": ladder_loss.item(),
                "loss_diff": abs(trl_loss.item() - ladder_loss.item()),
                "max_grad_diff": (t - ladder).abs().max().item(), "max_grad": t.abs().max().item(),
                "num_params": len(names), "num_entries": t.numel(), "trl_grad": t.numpy(),
                "ladder_grad": ladder.numpy(),
                "config": cfg, "same_by_design": not (level == "sequence" and correction and beta > 0)}



@functools.lru_cache(maxsize=1)
def parity_bench() -> ParityBench:
    """The bench, built once per process (a few seconds, after ``import trl``'s own)."""
    with quiet_progress():
        return ParityBench()


def trl_parity(loss_type: str = "grpo", level: str = "token", correction: bool = True, beta: float = 0.04,
               eps_high: float | None = None, delta: float | None = None) -> dict:
    """TRL's ``GRPOTrainer._compute_loss`` and ``core.compute_loss`` on the same model and tensors (``ParityBench``)."""
    return parity_bench().compare(loss_type, level, correction, eps_high, delta, beta)


def parity_view(loss_type: str = "grpo") -> View:
    """A loss type (and ratio level, KL correction): both losses, and every gradient entry TRL against ladder."""
    controls = {
        "loss_type": widgets.Dropdown(options=list(PARITY_LOSS_TYPES), value=loss_type, description="loss_type"),
        "level": widgets.ToggleButtons(options=["token", "sequence"], value="token",
                                       description="importance_sampling_level", style={"description_width": "initial",
                                                                                       "button_width": "90px"}),
        "correction": widgets.Checkbox(value=True, description="use_bias_correction_kl"),
    }

    def draw(v: dict):
        if v["loss_type"] == "cispo" and v["level"] == "sequence":
            level_note = " (TRL runs CISPO's weight at sequence level; ladder refuses the combination in the rung)"
        else:
            level_note = ""
        r = trl_parity(v["loss_type"], v["level"], v["correction"])
        fig = Figure(figsize=(9, 3.4))
        ax = fig.add_subplot(1, 2, 1)
        ax.scatter(r["trl_grad"], r["ladder_grad"], s=4, alpha=0.5)
        lim = r["max_grad"] * 1.05
        ax.plot([-lim, lim], [-lim, lim], "k:", lw=0.8)
        ax.set_xlabel("∂loss/∂θ in TRL")
        ax.set_ylabel("∂loss/∂θ in ladder")
        ax.set_title(f"{r['num_entries']} gradient entries, {r['num_params']} tensors")
        ax = fig.add_subplot(1, 2, 2)
        diff = np.abs(r["trl_grad"] - r["ladder_grad"])
        ax.hist(np.log10(diff + 1e-12), bins=40)
        ax.set_xlabel("log10 |TRL − ladder| per gradient entry (1e-12 floor)")
        ax.set_title("gradient differences")
        fig.tight_layout()
        r["summary"] = (f"loss TRL {r['trl_loss']:.8f} · ladder {r['ladder_loss']:.8f} (|Δ| {r['loss_diff']:.1e}); "
                        f"largest gradient difference {r['max_grad_diff']:.1e} (largest entry {r['max_grad']:.2f})"
                        + ("" if r["same_by_design"] else " — differs by design: ladder weights each token's KL by its "
                           "own π_θ/π_old, TRL by the sequence ratio") + level_note)
        return fig, r

    return View(controls, draw, "TRL's GRPOTrainer._compute_loss vs ladder.core.compute_loss")
