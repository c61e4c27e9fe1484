"""Planted wrong versions of capstone II's reference (``solutions/capstone2_grpo.py``): each is the reference with
one small edit, the way a learner might get it wrong, and each must be caught by the property it names — a fast
one (the training check is never needed to catch them). ``PLANTED_CAPSTONE2[label] = (property, old, new)``;
``NAMED_CAUSE[label]``, where given, is what the failure's message must say: the cause, not only the numbers."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from ladder.graders import load

SOLUTIONS = Path(__file__).resolve().parents[1] / "solutions"
REFERENCE = SOLUTIONS / "capstone2_grpo.py"

PLANTED_CAPSTONE2 = {
    # the sampler
    "the attention mask left out of the prompt's forward: the pads are attended": (
        "sampler_left_padding", "out = model(input_ids=prompt_ids, attention_mask=attention, position_ids=positions,",
        "out = model(input_ids=prompt_ids, position_ids=positions,"),
    "the position of each new token not advanced": (
        "sampler_records_logp", "positions = positions[:, -1:] + 1", "positions = positions[:, -1:]"),
    "the cache not passed back: each step sees its new token alone": (
        "sampler_records_logp", "cache=out.cache, use_cache=True)", "use_cache=True)"),
    "the log-prob recorded at τ = 1": (
        "sampler_records_logp", "torch.log_softmax(out.logits[:, -1].float() / temperature, dim=-1)",
        "torch.log_softmax(out.logits[:, -1].float(), dim=-1)"),
    "drawn at τ = 1 whatever τ": (
        "sampler_temperature", "torch.multinomial(logp_all.exp(), 1,",
        "torch.multinomial(torch.softmax(out.logits[:, -1].float(), dim=-1), 1,"),
    "the argmax, not a draw": (
        "sampler_temperature", "torch.multinomial(logp_all.exp(), 1, generator=generator).squeeze(-1)",
        "logp_all.argmax(-1)"),
    "the draw ignores the generator it is given": (
        "sampler_temperature", "torch.multinomial(logp_all.exp(), 1, generator=generator)",
        "torch.multinomial(logp_all.exp(), 1)"),
    "the attention mask left out of the prompt's forward, seen at τ = 0.01": (
        "sampler_temperature", "out = model(input_ids=prompt_ids, attention_mask=attention, position_ids=positions,",
        "out = model(input_ids=prompt_ids, position_ids=positions,"),
    "the EOS masked out with the padding after it": (
        "sampler_stops_at_eos", "masks.append((~finished).float())",
        "masks.append((~finished & (token != eos_token_id)).float())"),
    "a row goes on after its EOS": (
        "sampler_stops_at_eos", "finished = finished | (token == eos_token_id)", "finished = finished"),
    # log-probs of given completions
    "shifted one position too far back": (
        "completion_logp_matches_forward", "token_logp(logits[:, P - 1:], ids[:, P - 1:],",
        "token_logp(logits[:, P - 2:-1], ids[:, P - 1:],"),
    "scored at τ = 1": (
        "completion_logp_matches_forward", "completion_mask, temperature)    # [B, T]",
        "completion_mask, 1.0)    # [B, T]"),
    "the full forward without its attention mask: the pads are attended": (
        "completion_logp_padding", "logits = model(input_ids=ids, attention_mask=attention, position_ids=",
        "logits = model(input_ids=ids, position_ids="),
    # reward and advantages
    "the first '####', not the last": ("reward_on_strings", "int(finals[-1]) == int(answer)",
                                      "int(finals[0]) == int(answer)"),
    "no minus sign: '#### -7' scores 0 against '-7'": ("reward_on_strings", r'r"####\s*([-+]?\d+)"',
                                                       r'r"####\s*(\d+)"'),
    "no plus sign: '#### +82' scores 0, though int('+82') is 82": ("reward_on_strings", "[-+]?", "-?"),
    "exactly one space after '####'": ("reward_on_strings", r'r"####\s*([-+]?\d+)"', r'r"#### ([-+]?\d+)"'),
    "the answer compared as text: '082' is not '82'": ("reward_on_strings", "int(finals[-1]) == int(answer)",
                                                      "finals[-1] == answer"),
    "a prefix of the answer counts": ("reward_on_strings", "int(finals[-1]) == int(answer)",
                                     "answer.startswith(finals[-1])"),
    "the population std (÷ n), not the sample std": (
        "group_advantages", "return group_relative(rewards, group_size)",
        "grouped = rewards.view(-1, group_size); return ((grouped - grouped.mean(1, keepdim=True)) / "
        "(grouped.std(1, unbiased=False, keepdim=True) + 1e-4)).reshape(-1)"),
    "the batch's std, not the group's": ("group_advantages", "return group_relative(rewards, group_size)",
                                         "return group_relative(rewards, group_size, scale=\"batch\")"),
    # the loss
    "one mean over all tokens (long completions weigh more)": (
        "loss_and_gradient", "return per_completion.mean()", "return per_token.sum() / mask.sum()"),
    "the KL's direction swapped": ("loss_and_gradient", 'torch.where(mask, rollout["ref_logp"] - logp, 0.0)',
                                   'torch.where(mask, logp - rollout["ref_logp"], 0.0)'),
    "the KL importance-weighted (ρ·k3)": ("loss_and_gradient", "-surrogate + beta * k3",
                                         "-surrogate + beta * ratio * k3"),
    "no clip": ("loss_and_gradient", "ratio.clamp(1 - clip_eps, 1 + clip_eps) * advantages",
                "ratio * advantages"),
    "each completion's mean over all T columns, padding included": (
        "loss_and_gradient", "per_completion = per_token.sum(1) / mask.sum(1).clamp(min=1)",
        "per_completion = per_token.mean(1)"),
    # the update
    "π_old recorded again at every pass": (
        "update_pi_old_before_first_step", "loss = grpo_loss(model, rollout, clip_eps, beta, temperature)",
        'loss = grpo_loss(model, {**rollout, "old_logp": completion_logp(model, rollout["prompt_ids"], '
        'rollout["prompt_mask"], rollout["completion_ids"], rollout["completion_mask"], temperature).detach()}, '
        'clip_eps, beta, temperature)'),
    "gradients never zeroed: they pile up over the passes": (
        "update_pi_old_before_first_step", "        optimizer.zero_grad()\n", ""),
    "no gradient clipping": ("update_pi_old_before_first_step",
                             "        torch.nn.utils.clip_grad_norm_(model.parameters(), max_grad_norm)\n", ""),
    "a clip norm of its own: max_grad_norm ignored": (
        "update_pi_old_before_first_step", "clip_grad_norm_(model.parameters(), max_grad_norm)",
        "clip_grad_norm_(model.parameters(), 1.0)"),
    "one pass short": ("update_mu_steps", "for _ in range(mu):", "for _ in range(max(mu - 1, 1)):"),
    "the losses returned as tensors": ("update_mu_steps", "losses.append(loss.item())", "losses.append(loss.detach())"),
    # the loop
    "π_ref the live model, not a frozen copy: the KL is 0 forever": (
        "train_keeps_a_frozen_reference", "ref_model = copy.deepcopy(model).requires_grad_(False)",
        "ref_model = model"),
    "completion_logp shifted one position too far back: the first step's KL far from 0": (
        "train_keeps_a_frozen_reference", "token_logp(logits[:, P - 1:], ids[:, P - 1:],",
        "token_logp(logits[:, P - 2:-1], ids[:, P - 1:],"),
    "history's kl with k1, not k3": (
        "train_keeps_a_frozen_reference", 'rollout["kl"] = (k3.sum() / mask.sum()).item()',
        'rollout["kl"] = (-log_ref_ratio.sum() / mask.sum()).item()'),
    "the reward written inline, not the module's reward": (
        "train_calls_the_contract", "rewards = reward(texts, answers)",
        'rewards = torch.tensor([float(t.endswith(f"#### {a}")) for t, a in zip(texts, answers)])'),
    "a prompt's G copies tiled across the batch, not adjacent": (
        "train_groups_adjacent", "rows = [p for p in problems for _ in range(group_size)]",
        "rows = problems * group_size"),
    "group_advantages given the whole batch as one group": (
        "train_groups_adjacent", "advantages=group_advantages(rewards, group_size)",
        "advantages=group_advantages(rewards, len(rewards))"),
    "advantages whitened over the whole batch, not per group": (
        "train_advantages_per_group", "advantages=group_advantages(rewards, group_size)",
        "advantages=(rewards - rewards.mean()) / (rewards.std() + 1e-4)"),
    "the same prompts every step": (
        "train_draws_new_prompts", "rng.sample(problems, prompts_per_step)", "problems[:prompts_per_step]"),
    "the prompt choice unseeded": ("train_is_seeded", "random.Random(seed)", "random.Random()"),
    "the sampler not given the generator: it draws from torch's global one": (
        "train_is_seeded", "tokenizer.eos_token_id, generator)", "tokenizer.eos_token_id)"),
}

NAMED_CAUSE = {
    "the attention mask left out of the prompt's forward, seen at τ = 0.01": "sampler_left_padding fails too",
    "drawn at τ = 1 whatever τ": "divide the logits by τ before sampling",
    "scored at τ = 1": "that is log π at τ = 1",
    "no plus sign: '#### +82' scores 0, though int('+82') is 82": "'#### +82'",
    "the population std (÷ n), not the sample std": "population std (÷ n)",
    "the batch's std, not the group's": "the whole batch's std",
    "one mean over all tokens (long completions weigh more)": "one token mean over all the batch's tokens",
    "the KL importance-weighted (ρ·k3)": "k3 weighted by ρ_t",
    "each completion's mean over all T columns, padding included": "padding included",
    "π_old recorded again at every pass": "recorded again before each step",
    "gradients never zeroed: they pile up over the passes": "the core's plus the previous step's",
    "no gradient clipping": "the gradient norm clipped to max_grad_norm",
    "a clip norm of its own: max_grad_norm ignored": "a clip norm that ignores max_grad_norm",
    "completion_logp shifted one position too far back: the first step's KL far from 0":
        "completion_logp disagrees with the sampler",
    "history's kl with k1, not k3": "that is k1",
    "π_ref the live model, not a frozen copy: the KL is 0 forever": "not the live model",
    "the KL's direction swapped": "the KL's direction swapped",
    "the losses returned as tensors": "Python floats",
    "the reward written inline, not the module's reward": "never called reward by its module-level name",
    "a prompt's G copies tiled across the batch, not adjacent": "tiled across the batch",
    "group_advantages given the whole batch as one group": "group_advantages got group_size = 64",
    "advantages whitened over the whole batch, not per group": "over the whole batch of 64",
    "the same prompts every step": "the same 8 prompts",
    "the prompt choice unseeded": "different prompts at step 1",
    "the sampler not given the generator: it draws from torch's global one": "different completions at step 1",
}

_HERE = Path(tempfile.mkdtemp(prefix="ladder-planted-capstone2-"))   # beside the exercises it imports
for _path in SOLUTIONS.glob("ex*.py"):
    shutil.copy(_path, _HERE)


def mutant(label: str):
    """The reference with the edit of ``label``, loaded as a module."""
    _, old, new = PLANTED_CAPSTONE2[label]
    source = REFERENCE.read_text()
    assert source.count(old) == 1, f"{label}: {old!r} is not once in the reference"
    path = _HERE / f"capstone2_planted{list(PLANTED_CAPSTONE2).index(label)}.py"
    path.write_text(source.replace(old, new))
    return load(path)
