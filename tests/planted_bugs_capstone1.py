"""Planted bugs of Capstone I: each is the reference answer with one small edit, the way a learner might get PPO
wrong, and the property of the grader that must catch it. ``PLANTED_CAPSTONE1[label] = (property, module)``;
``CAUSES[label]``: words its message must hold, where the property can name the cause."""

from __future__ import annotations

import tempfile
from pathlib import Path

from ladder.graders import load
from ladder.graders.capstone_ppo import SHEET

SOLUTION = Path(__file__).resolve().parents[1] / "solutions" / SHEET
_HERE = Path(tempfile.mkdtemp(prefix="ladder-planted-capstone1-"))

BUGS = {   # label: (the property that catches it, the text of the reference, what replaces it)
    "actions argmax, not sampled": ("agent", "action = dist.sample()", "action = dist.probs.argmax(-1)"),
    "NEXT_STEP autoreset (gymnasium's default)": (
        "make_envs", ',\n                        vector_kwargs={"autoreset_mode": gym.vector.AutoresetMode.SAME_STEP})',
        ")"),
    "the obs stored is the one step() returned (off by one)": (
        "rollout", '(("obs", obs_t)', '(("obs", torch.as_tensor(obs, dtype=torch.float32))'),
    "the rollout collected with gradients on": ("rollout", "@torch.no_grad()\ndef collect_rollout",
                                                "def collect_rollout"),
    "truncation never bootstrapped (final_values 0)": ("truncation_bootstrap", "if truncated.any():", "if False:"),
    "V(s_final) read from the obs step() returned (the new episode's first)": (
        "truncation_bootstrap", 'np.stack(info["final_obs"][truncated])', "obs[truncated]"),
    "a truncation bootstrapped with 0, as a termination": (
        "gae", "torch.where(truncated, final_values, next_values)", "torch.where(truncated, 0.0, next_values)"),
    "a truncation does not cut the trace": (
        "gae", "not_done = 1.0 - (terminated | truncated).float()", "not_done = 1.0 - terminated.float()"),
    "terminated and truncated at once: bootstrapped": (
        "gae", "torch.where(terminated, 0.0, next_values)", "torch.where(terminated & ~truncated, 0.0, next_values)"),
    "returns without V: R = Â": ("gae", "return advantages, advantages + values", "return advantages, advantages"),
    "V_next = V(s_{t+1}) where truncated (final_values unused)": (
        "gae", "    next_values = torch.where(truncated, final_values, next_values)\n", ""),
    "advantages not whitened": (
        "loss", 'adv = (mb["advantages"] - mb["advantages"].mean()) / (mb["advantages"].std() + 1e-8)',
        'adv = mb["advantages"]'),
    "the ratio inverted (π_old/π_θ)": ("loss", 'log_ratio = logp - mb["logp"]', 'log_ratio = mb["logp"] - logp'),
    "max instead of min in the surrogate": ("loss", "pg_loss = -torch.min(", "pg_loss = -torch.max("),
    "value loss without its ½": ("loss", "v_loss = 0.5 * ((values", "v_loss = ((values"),
    "entropy bonus with the wrong sign": ("loss", "- entropy_coef * entropy.mean()", "+ entropy_coef * entropy.mean()"),
    "one step per pass, not one per minibatch": ("optimiser_steps", "size = n // num_minibatches", "size = n"),
    "minibatches never shuffled": ("minibatches", "order = torch.randperm(n, generator=generator)",
                                   "order = torch.arange(n)"),
    "π_old recomputed at the start of each epoch": (
        "pi_old", "    for _ in range(num_epochs):\n",
        '    for _ in range(num_epochs):\n        with torch.no_grad():\n'
        '            batch["logp"] = agent.get_action_and_value(batch["obs"], batch["actions"])[1]\n'),
    "zero_grad forgotten: gradients pile up": ("pi_old", "            optimizer.zero_grad()\n", ""),
    "a wrong loss, seen by π_old too": ("pi_old", "v_loss = 0.5 * ((values", "v_loss = ((values"),
    "no gradient clipping": ("grad_clip", "            nn.utils.clip_grad_norm_(agent.parameters(), max_grad_norm)\n",
                             ""),
    "evaluation samples instead of taking the argmax": (
        "evaluate", "logits.argmax(-1).numpy()", "torch.distributions.Categorical(logits=logits).sample().numpy()"),
    "every evaluation episode seeded alike": ("evaluate", "seed=[seed + i for i in range(episodes)]",
                                              "seed=[seed] * episodes"),
    # The small clauses: what a function must leave alone, draw from, return.
    "gae zeroes final_values in place where not truncated": (
        "gae_inputs", "    next_values = torch.where(truncated, final_values, next_values)\n",
        "    final_values[~truncated] = 0.0\n    next_values = torch.where(truncated, final_values, next_values)\n"),
    "update ignores its generator (the global RNG shuffles)": (
        "update_generator", "torch.randperm(n, generator=generator)", "torch.randperm(n)"),
    "the shuffle drawn from numpy's global RNG": (
        "update_generator", "torch.randperm(n, generator=generator)", "torch.as_tensor(np.random.permutation(n))"),
    "update returns the loss tensor, graph and all": ("update_stats", 'stats = {"loss": loss.item(),',
                                                      'stats = {"loss": loss,'),
    "advantages whitened with the population std": (
        "loss", 'mb["advantages"].std() + 1e-8', 'mb["advantages"].std(unbiased=False) + 1e-8'),
    "advantages whitened with the population std, in two lines": (
        "loss", 'adv = (mb["advantages"] - mb["advantages"].mean()) / (mb["advantages"].std() + 1e-8)',
        'adv = mb["advantages"]\n    adv = (adv - adv.mean()) / (adv.std(unbiased=False) + 1e-8)'),
    "a hard-coded clip norm": ("pi_old", "clip_grad_norm_(agent.parameters(), max_grad_norm)",
                               "clip_grad_norm_(agent.parameters(), 0.5)"),
    # The wiring of train: what joins the parts.
    "each rollout starts from the first obs (next_obs dropped)": (
        "rollout_chain", "buffer, obs = collect_rollout(", "buffer, _ = collect_rollout("),
    "the envs reset before each rollout": (
        "rollout_chain", "        buffer, obs = collect_rollout(",
        "        obs, _ = envs.reset(seed=seed)\n        buffer, obs = collect_rollout("),
    "the returns used as the advantages": (
        "advantages_wiring", "batch.update(advantages=advantages.flatten()",
        "batch.update(advantages=returns.flatten()"),
    "env steps counted per env": ("env_steps", '"env_steps": (u + 1) * num_envs * num_steps',
                                  '"env_steps": (u + 1) * num_steps'),
    "the budget rounded up past total_steps": (
        "env_steps", "num_updates = total_steps // (num_envs * num_steps)",
        "num_updates = int(np.ceil(total_steps / (num_envs * num_steps)))"),
    "history counts the env steps before the rollout": (
        "env_steps", '"env_steps": (u + 1) * num_envs * num_steps', '"env_steps": u * num_envs * num_steps'),
    "the envs reset unseeded": ("reproducible", "obs, _ = envs.reset(seed=seed)", "obs, _ = envs.reset()"),
    "torch's RNG never seeded": ("reproducible", "    torch.manual_seed(seed)\n", ""),
}
CAUSES = {   # label: what its property's message must say of the cause
    "V(s_final) read from the obs step() returned (the new episode's first)":
        "V of the obs step() returned — the new episode's first; read info['final_obs']",
    "a truncation bootstrapped with 0, as a termination": "is bootstrapped with 0, as a termination",
    "a truncation does not cut the trace": "a truncation does not cut the trace (d_t = terminated only)",
    "terminated and truncated at once: bootstrapped": "terminated wins (V_next = 0)",
    "returns without V: R = Â": "the returns lack V",
    "V_next = V(s_{t+1}) where truncated (final_values unused)": "V_next = V(s_{t+1}) where truncated",
    "advantages not whitened": "Â not whitened over the minibatch",
    "the ratio inverted (π_old/π_θ)": "the ratio inverted, π_old/π_θ",
    "zero_grad forgotten: gradients pile up": "optimizer.zero_grad() before each backward",
    "a wrong loss, seen by π_old too": "fix the loss first (the loss property fails)",
    "advantages whitened with the population std, in two lines": "population std",
    "gae zeroes final_values in place where not truncated": "changed its input final_values in place",
    "update ignores its generator (the global RNG shuffles)": "seeded differently: the minibatches differ",
    "the shuffle drawn from numpy's global RNG": "seeded differently: the minibatches differ",
    "update returns the loss tensor, graph and all": "stats['loss'] is a tensor with a graph",
    "advantages whitened with the population std": "population std",
    "a hard-coded clip norm": "a clip norm that ignores max_grad_norm (hard-coded?)",
    "each rollout starts from the first obs (next_obs dropped)": "a stale obs",
    "the envs reset before each rollout": "reset before each rollout: continue from next_obs",
    "the returns used as the advantages": "got gae's returns R_t = Â_t + V(s_t) as its advantages",
    "env steps counted per env": "counted per env",
    "the budget rounded up past total_steps": "over its budget",
    "history counts the env steps before the rollout": "must be the env steps taken by then",
    "the envs reset unseeded": "the envs' first obs differ",
    "torch's RNG never seeded": "the agent's first weights differ",
}


def _mutant(number: int, old: str, new: str):
    source = SOLUTION.read_text()
    assert source.count(old) == 1, f"{old!r} must occur once in the reference"
    path = _HERE / f"capstone1_planted{number}.py"
    path.write_text(source.replace(old, new))
    return load(path)


PLANTED_CAPSTONE1 = {label: (prop, _mutant(i, old, new)) for i, (label, (prop, old, new)) in enumerate(BUGS.items())}
