r"""Capstone II — your own GRPO, one file: a sampler, a reward, the loss and the loop, on the tiny instruct model.

Goes after exercises 7–11 and 16 and notebooks 3–5. Nothing here is pseudo-code: this is the contract your
functions must meet (what goes in and out, the equations, the pitfalls and why), and the order in which
you write and call them is yours to design. Grade it: ``pytest exercises/test_capstone2.py``.

THE TASK. A 3-layer Qwen2 instruct model (float32, no dropout, a vocabulary of 316 tokens, one token per
digit) was fine-tuned on worked sums written by a tutor who often forgets to carry the one:

    prompt      <|im_start|>system\nSolve it. End with #### and the number.<|im_end|>\n
                <|im_start|>user\nWhat is 37 + 45?<|im_end|>\n<|im_start|>assistant\n
    completion  7 + 5 = 12\n3 + 4 + 1 = 8\n#### 82<|im_end|>          (<|im_end|> is the EOS)

Its greedy answers are right on about 0.6 of held-out sums (it forgets the carry); sampling at τ = 1 still
carries now and then. A reward that checks the answer tells those samples apart, and GRPO teaches the model
to carry. To try things out (in a notebook or a REPL, not in this file):

    from ladder.graders.capstone_grpo import tiny_task, greedy_accuracy
    task = tiny_task()        # .model (AutoModelForCausalLM), .tokenizer (pads on the left),
                              # .train and .held_out: problems {"question", "answer": "82", "prompt": chat text}
    greedy_accuracy(task.model, task.tokenizer, task.held_out)        # about 0.6

This file may import torch, transformers and your own earlier exercises (``from ex10_group_relative import
group_relative``, ``from ex16_token_logp import token_logp``), nothing else of ladder's.

THE FUNCTIONS THE GRADER CALLS. B rows; a prompt batch is left-padded to P columns, completions are
right-padded to T columns; ids are int64, masks are 1 on real tokens and 0 on padding, log-probs float32.

    sample(model, prompt_ids [B, P], prompt_mask [B, P], max_new_tokens, temperature τ, eos_token_id, generator)
        → (ids [B, T] int64, mask [B, T] float, logp [B, T] float32),  1 ≤ T ≤ max_new_tokens
        A decode loop you write over the model's forward (never ``model.generate``): the prompt in one
        forward, then ONE new token per forward, reusing the key/value cache. Token t of row b is drawn
        from softmax(z_t / τ) with ``torch.multinomial(..., generator=generator)`` (z: the last position's
        logits), and logp[b, t] = log softmax(z_t / τ)[token] is recorded as it is drawn. A row ends at its
        first EOS, which is a real token (mask 1); after it the mask and logp are 0 and the ids are any id of
        the vocabulary (e.g. the EOS or pad id): completion_logp is given them and must be able to embed them.

    completion_logp(model, prompt_ids [B, P], prompt_mask [B, P], completion_ids [B, T], completion_mask [B, T], τ)
        → [B, T] float32, with the model's graph when called with gradients on
        log π_θ(c_t | prompt, c_<t) at τ from ONE forward of prompt + completion; 0 where completion_mask is 0.
        More left padding of the prompts, or more masked columns on the right, changes nothing else.

    reward(completions: list[str], answers: list[str]) → [N] float
        r_i = 1 if the integer right after the LAST '####' in completion i equals int(answer i), else 0 (no
        '####': 0). Any whitespace may stand between '####' and the number, or none; the number may carry a
        minus or a plus sign; it is read as int() reads it. So with answer "82": "####82", "####   82",
        "#### 082" and "#### +82" score 1 (int("+82") is 82), "#### 8" and "#### 820" score 0; with answer "-7":
        "#### -7" scores 1, "#### 7" scores 0.

    group_advantages(rewards [N], group_size G) → [N]
        The G completions of a prompt are adjacent. Â_i = (r_i − mean of its group) / (std of its group + 1e-4),
        std the sample std (n − 1) — exercise 10 with scale "group". A group of equal rewards gets Â = 0.

    grpo_loss(model, rollout: dict, clip_eps ε, beta β, temperature τ) → scalar tensor with a graph
        rollout holds prompt_ids, prompt_mask [N, P]; completion_ids, completion_mask [N, T]; advantages [N];
        old_logp, ref_logp [N, T] (no graph; the grader puts −1e4 where the mask is 0). With log π_θ from
        completion_logp, the ratio ρ_t = π_θ(c_t) / π_old(c_t) and the log-ratio ℓ_t = log π_ref(c_t) − log π_θ(c_t):

            L_t = −min(ρ_t Â_i, clip(ρ_t, 1 − ε, 1 + ε) Â_i) + β (e^{ℓ_t} − 1 − ℓ_t)
            L   = (1/N) Σ_i (1/|o_i|) Σ_{t real} L_t              |o_i|: completion i's real tokens

        The β term is k3, DeepSeekMath's estimate of KL(π_θ ‖ π_ref) per token (≥ 0), plain: not weighted
        by π_θ/π_old. L must equal ``ladder.core.compute_loss`` set up for exactly this loss (plain k3, no
        importance correction — not the grpo rung's default, which weights k3 by π_θ/π_old — this β and ε,
        GRPO's mean) to 1e-5, and its gradient the core's to 1e-4 relative.

    update(model, optimizer, rollout: dict, mu μ, clip_eps, beta, temperature, max_grad_norm) → list of μ floats
        rollout as above without old_logp. Records log π_old of the completions (the weights as they are
        now, no graph), then takes exactly μ optimiser steps, each on the gradient of grpo_loss alone
        (nothing left over from the step before), its total norm clipped to max_grad_norm.
        Returns the μ losses as Python floats (loss.item(), not tensors). (No minibatches: each pass is the
        whole rollout.)

    train(model, tokenizer, problems: list[dict], steps: int, seed: int, ...your hyperparameters, with defaults)
        → (the trained model, history: a list with one dict per step)
        Each step's dict holds at least "reward" (its mean reward) and "kl": the mean over the step's real
        completion tokens of k3 between the log π it sampled with and π_ref's log-probs of the same tokens
        (0 at the first step, when π_θ = π_ref; it grows as π_θ moves — what β holds back).
        Fixes every random choice from ``seed``: two runs with one seed give the same weights, whatever state
        the global generators (torch's, Python's ``random``) are in. Makes π_ref, a frozen copy of the model,
        before the first step; then, ``steps`` times: picks new prompts; samples G completions of each, the G
        copies of a prompt in ADJACENT rows ([p1 × G, p2 × G, …], not [p1…pB, p1…pB, …]); scores them;
        computes Â = group_advantages(rewards, G) and log π_ref; calls update once, on all the step's rows.
        It CALLS THE FUNCTIONS ABOVE BY THEIR MODULE-LEVEL NAMES: sample(...), completion_logp(...),
        reward(...), group_advantages(...), grpo_loss(...) and update(...), from train or from helpers of
        your own in this file; not copies kept under other names, not methods of a class, not versions
        written inline. The grader puts a spy in place of each (the module's attribute) for a short run and
        checks the loop's wiring from the calls it sees; how train is laid out is yours.
        The grader then calls ``train(task.model, task.tokenizer, task.train, steps=16, seed=0)`` and
        measures greedy accuracy on 128 held-out sums with its own decoding: it must be at least 0.9.
        Settings that get there in about half a minute on one CPU thread: 8 prompts × G = 8 completions per
        step, μ = 2, AdamW at lr 1e-4 on all the weights, β = 0.04, ε = 0.2, τ = 1, 28 new tokens at most.

PITFALLS, AND WHY.
- Left padding and the attention mask. Prompts of different lengths are padded on the LEFT so that every
  row's next token is in the same (last) column; the attention mask (0 on the pads) keeps the pads out of
  every real token's attention, on every forward, and in the decode loop it grows by a column of ones each
  step. Positions: this model's rotary embeddings depend only on the difference of two positions, so
  numbering by column (the default) or from each row's first real token gives the same attention, up to
  rounding; a model with absolute position embeddings (GPT-2) is right only with the latter. Passing
  position_ids = cumsum(mask) − 1 (clamped at 0) is right for both. Either way, each new token's position
  is the previous one + 1, and the full forward of completion_logp must number positions as the sampler did.
- The cache. ``model(..., use_cache=True)`` returns the keys and values of every position as ``out.cache``
  (``out.past_key_values`` before transformers 5.24); the next forward takes the new token alone, with
  ``cache=`` that object (``past_key_values=`` before 5.24). By hand, the prompt and then each step:

      out = model(input_ids=prompt_ids, attention_mask=mask, position_ids=positions, use_cache=True)
      out = model(input_ids=token[:, None], attention_mask=mask, position_ids=positions, cache=out.cache,
                  use_cache=True)         # mask grown by a column of ones, positions the last + 1

  Without it each step reruns the whole sequence: quadratic in T, and the grader checks that each step
  feeds one token.
- The one-position shift. The logits at column j predict the token at column j + 1. Completion token t sits
  at column P + t, so it is scored by the logits at column P − 1 + t. Off by one, the numbers still look like
  log-probs; only a comparison with the sampler's record shows it (exercise 16).
- Temperature in both places. The sampler draws from softmax(z/τ) and records log π at τ; the loss must
  score the same tokens at the same τ. Otherwise π_old (at τ) and π_θ (at 1) are two distributions and the
  ratio is not 1 even before the first step.
- Nothing after EOS counts. The EOS is a real action (the model must learn to stop); everything after it is
  padding: mask 0, log-prob 0, no reward text (decode only the real tokens). Select with ``torch.where``
  rather than multiplying by the mask: where old_logp holds −1e4, exp(logp − old_logp) is inf, and inf · 0
  is NaN — in the loss and in its backward pass.
- π_old once, before the first step. The ratio ρ_t compares π_θ with the policy that sampled. Recorded again
  at every pass, ρ_t is always 1: the clip never acts and μ passes become μ plain policy-gradient steps.
  (The sampler's record is the same numbers to rounding; recomputing it by one forward is as good.)
- No graph where there should be none: old_logp, ref_logp and Â are constants of the loss (record them
  under ``torch.no_grad()`` or ``.detach()``); only log π_θ carries the gradient.
- The KL's direction. k3 as written above estimates KL(π_θ ‖ π_ref) from tokens π_θ sampled; swapping
  log π_θ and log π_ref in ℓ_t gives another (and, with e^x, a much larger) number. ``torch.expm1(x) − x`` is k3
  without the rounding of e^x − 1 near 0.
- GRPO's mean. Average each completion's tokens first, then the completions: each completion weighs the
  same, however long. One mean over all tokens is another loss (long completions weigh more).
- π_ref is a frozen copy made before any step (``copy.deepcopy``, ``requires_grad_(False)``). A reference
  that is the live model gives KL 0 forever.

A SUGGESTED STRUCTURE. Write and grade the functions in the order above: the sampler first (check it
against completion_logp on its own output — they must agree), then reward and advantages, then the loss
and the update, then the loop. Keep the loop a handful of lines that call the others: a function that
turns a list of problems into one rollout (each prompt repeated G times in adjacent rows, tokenized,
sampled, decoded, scored, Â and log π_ref attached) is a natural unit. Tokenize the prompts with the
tokenizer as it comes (``tokenizer(prompts, padding=True, return_tensors="pt")``: it pads on the left).
Print the mean reward and the KL of each step: the reward is noisy from one step to the next (each step
draws other sums) and climbs over the steps; the KL starts at 0.

HOW IT IS GRADED (``pytest exercises/test_capstone2.py``; each property a test, each failure one or two
lines naming the property and the input it broke on): the sampler is a cached loop (the prompt, then one
token per forward); its recorded log-probs equal the model's own full forward on the sampled tokens (to
1e-4, float32 rounding); it stops each row at its EOS; three more pad columns on the left change nothing
(same tokens, same log-probs, same generator seed); τ = 0.01 draws the greedy completion and τ = 1 draws
different ones; completion_logp equals the model's forward to 1e-5, whatever the padding; reward on
handcrafted strings (the last '####', whitespace, a sign, leading zeros); group_advantages equals
``ladder.core.group_relative`` to 1e-6 (a population std, or the batch's, is named as such); grpo_loss and its
gradient equal ``ladder.core.compute_loss``'s on the same batch and weights (a loss with the KL's direction
swapped, with k3 weighted by ρ_t, or with another mean is named as such); update takes exactly μ steps and
returns μ Python floats, and after μ = 3 steps with Adam (max_grad_norm 1, then 100) the weights are
``ladder.core.update``'s to a relative 5e-4 (short of it, the first step whose gradient is not the core's is
named, and why: π_old recorded again, no zero_grad, a clip norm that ignores max_grad_norm).
The loop's wiring, seen by the spies during train(steps = 2, seed = 0) (one run of a few seconds, shared):
train_calls_the_contract — each of the six functions is called by its module-level name, update once per
step; train_groups_adjacent — rows i·G … i·G + G − 1 hold one prompt (G ≥ 2), and group_advantages is given
that G; train_advantages_per_group — the advantages reaching update equal ``ladder.core.group_relative`` of
what reward returned, group by group, to 1e-4; train_draws_new_prompts — step 2 samples other prompts than
step 1; train_is_seeded — a second run with the same seed, the global generators seeded otherwise, picks the
same prompts, draws the same completions and ends its first step with the same weights (relative 1e-4);
train_keeps_a_frozen_reference — history's "kl" is about 0 at the first step and above 0 at the second, and at
each step it is the mean k3 over the step's real tokens of the sampled log π against the model before the
first step (the grader's own forward), to a relative 1e-3 (k1 is named as such).
Last, train_learns: train(steps = 16, seed = 0) reaches held-out accuracy 0.9 (the one slow test, about half
a minute); short of it, its message names the wiring properties that fail. Each other property takes one to
four seconds; the whole grading of a correct sheet took about a minute on a busy 2-core machine (longer
when a property fails and the grader works out why).
"""

from __future__ import annotations

import torch
from torch import Tensor


def sample(model, prompt_ids: Tensor, prompt_mask: Tensor, max_new_tokens: int, temperature: float,
           eos_token_id: int, generator: torch.Generator | None = None) -> tuple[Tensor, Tensor, Tensor]:
    """(ids [B, T], mask [B, T], log π at τ of each sampled token [B, T]); a KV-cached decode loop."""
    raise NotImplementedError


def completion_logp(model, prompt_ids: Tensor, prompt_mask: Tensor, completion_ids: Tensor, completion_mask: Tensor,
                    temperature: float) -> Tensor:
    """log π_θ(c_t | prompt, c_<t) at τ, [B, T] float32, 0 where completion_mask is 0."""
    raise NotImplementedError


def reward(completions: list[str], answers: list[str]) -> Tensor:
    """1 if the integer after the last '####' is the answer, else 0; [N]."""
    raise NotImplementedError


def group_advantages(rewards: Tensor, group_size: int) -> Tensor:
    """Â_i = (r_i − mean of its group) / (std of its group + 1e-4); [N]."""
    raise NotImplementedError


def grpo_loss(model, rollout: dict, clip_eps: float, beta: float, temperature: float) -> Tensor:
    """mean over completions of the mean over their tokens of −min(ρ_t Â, clip(ρ_t) Â) + β·k3."""
    raise NotImplementedError


def update(model, optimizer: torch.optim.Optimizer, rollout: dict, mu: int, clip_eps: float, beta: float,
           temperature: float, max_grad_norm: float = 1.0) -> list[float]:
    """π_old recorded, then exactly μ optimiser steps on grpo_loss; the μ losses as Python floats."""
    raise NotImplementedError


def train(model, tokenizer, problems: list[dict], steps: int, seed: int = 0):
    """GRPO for ``steps`` steps from ``seed`` (add your hyperparameters as keyword arguments with defaults),
    calling the functions above by their module-level names; returns (the trained model, history: one dict per
    step)."""
    raise NotImplementedError
