"""Reference answers of the notebooks' "Your turn" cells and answer keys, kept out of the cells' source.

A "Your turn" cell asks the learner to compute something, and the cell after it checks the result; a self-check
question is asked in one cell and checked in a later one. The checking cell is on screen while the learner works,
so the reference computation (or the rule that picks a key) must not be written in it. These small functions
compute it here instead. The ``check_*`` ones print nothing of the answer while the learner has not answered
(``...``); once they have, ``viz.check_computed`` marks the answer and prints it with the code that computes it.
"""

from __future__ import annotations

import numpy as np
import torch

from ladder.viz import vector_envs as ve
from ladder.viz.self_check import check_computed

BOOTSTRAP_RULE = "np.where(terminated, 0, np.where(truncated, critic(final_obs), critic(obs)))"
MASK_RULE = "torch.cat([prompt_mask, torch.ones(len(prompt_mask), 2, dtype=prompt_mask.dtype)], 1)"
POSITIONS_RULE = "(mask.cumsum(1) - 1).clamp(min=0), read where the mask is 1"


def _not_answered(name: str) -> None:
    print(f"{name}: not answered yet: replace the ... in the cell before and run both again")


def check_bootstrap(yours, obs: np.ndarray, terminated: np.ndarray, truncated: np.ndarray, final_obs: np.ndarray,
                    critic=ve.critic) -> bool | None:
    """Notebook 2, "Your turn" V(s_{t+1}): check the learner's bootstrap values of one SAME_STEP step against
    ``vector_envs.bootstrap_values``; the values and the rule are printed only once the learner has answered."""
    if yours is ... or yours is None:
        _not_answered("V_next_yours")
        return None
    return check_computed(yours, ve.bootstrap_values(obs, terminated, truncated, final_obs, critic), how=BOOTSTRAP_RULE)


def autoreset_key(rewards: np.ndarray, flags: np.ndarray, obs_pushed_left: np.ndarray,
                  obs_pushed_right: np.ndarray) -> str:
    """Notebook 2's ``reset_q``, keyed from what NEXT_STEP returned on the steps right after an env ended (their
    ``rewards`` and ``flags``, and one such step's observation under either action): "b" if a flag is still set,
    "c" if the step is a bare reset (the same observation whichever action, reward 0, no flag), "a" otherwise."""
    if np.any(flags):
        return "b"
    if np.allclose(obs_pushed_left, obs_pushed_right) and np.all(np.asarray(rewards) == 0):
        return "c"
    return "a"


def clip_sides(advantages: np.ndarray, ratios: np.ndarray, eps: float, eps_was: float) -> tuple[str, str]:
    """Notebook 2's ``p_eps``: on which side ("Â > 0", "Â < 0" or "as many on each") most of the samples lie whose
    gradient a clip at ε_low = ε_high = ``eps`` removes, and a line that says why, with the counts at ``eps_was``
    (the clip the learner has seen) and, where the majority changes side between the two, what moved it."""
    pos, neg = advantages > 0, advantages < 0

    def counts(e: float) -> dict[str, int]:
        return {"Â > 0": int((pos & (ratios > 1 + e)).sum()), "Â < 0": int((neg & (ratios < 1 - e)).sum())}

    def most(n: dict[str, int]) -> str:
        return "as many on each" if n["Â > 0"] == n["Â < 0"] else max(n, key=n.get)

    now, was = counts(eps), counts(eps_was)
    near = {k: now[k] - was[k] for k in now}     # removed at eps, not yet at eps_was
    why = (f"of {advantages.size} samples, {now['Â > 0']} with Â > 0 above {1 + eps:g} and {now['Â < 0']} with Â < 0 "
           f"below {1 - eps:g} ({(now['Â > 0'] + now['Â < 0']) / advantages.size:.1%} in all); at ε = {eps_was:g}, "
           f"{was['Â > 0']} and {was['Â < 0']}.")
    if most(now) != most(was):
        why += (f" The sides swap: ε = {eps:g} adds {near['Â > 0']} ratios between {1 + eps:g} and {1 + eps_was:g} "
                f"(Â > 0) and {near['Â < 0']} between {1 - eps_was:g} and {1 - eps:g} (Â < 0), and that gap of "
                f"{abs(near['Â > 0'] - near['Â < 0'])} outweighs the {abs(was['Â > 0'] - was['Â < 0'])} by which the "
                f"other side led at ε = {eps_was:g}")
        if near["Â > 0"] > max(was["Â > 0"], near["Â < 0"]):
            why += (f": the passes pushed the Â > 0 ratios up until the clip at {1 + eps_was:g} stopped their "
                    "gradient, so they piled up just under it")
        why += "."
    return most(now), why


def check_decode_step(mask_2, positions_from, prompt_mask: torch.Tensor) -> None:
    """Notebook 5, "Your turn" decode step 2: check the learner's attention mask ``mask_2`` (prompt_mask with two
    columns of ones appended) and their function ``positions_from(mask)`` (position ids built from a left-padded
    mask), compared only where the mask is 1, on step 2's mask and on a second mask with other pads (so that
    numbers typed in for this one batch do not pass). Answers and code are printed only once the learner has
    answered."""
    from ladder.policies.causal_lm import position_ids_for

    truth_mask = torch.cat([prompt_mask, torch.ones(len(prompt_mask), 2, dtype=prompt_mask.dtype)], 1)
    if mask_2 is ... or mask_2 is None:
        _not_answered("mask_2")
    else:
        check_computed(mask_2, truth_mask, how=MASK_RULE)
    other = torch.tensor([[0, 0, 0, 1, 1], [1, 1, 1, 1, 1], [0, 1, 1, 1, 1]], dtype=prompt_mask.dtype)
    for which, mask in (("step 2's mask", truth_mask), ("another mask", other)):
        yours = positions_from(mask.clone())
        if yours is ... or yours is None:
            _not_answered("positions_from")
            return
        yours, real = torch.as_tensor(yours), mask.bool()
        print(f"positions_from({which}), where the mask is 1:")
        check_computed(yours[real] if yours.shape == real.shape else yours, position_ids_for(mask)[real],
                       how=POSITIONS_RULE)
    print("each row's real prompt tokens:", prompt_mask.sum(1).tolist(),
          "→ the token fed at step 2 sits at position", position_ids_for(truth_mask)[:, -1].tolist())
