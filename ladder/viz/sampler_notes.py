"""What notebook 5's fourth-policy section says of its own batch, worded from the numbers it computed.

The batch (``sampler_lab.four_policies``) is sampled and trained on the machine that runs the notebook, so its
numbers differ from one CPU to the next in their last bits — and a sampled token, a weight near a bound, with
them. A sentence that compares two of those numbers is therefore printed from them here, never written as
fixed text: whichever way the comparison goes on a run, the sentence says it.
"""

from __future__ import annotations

from ladder.viz import sampler_lab


def gaps_note(four: sampler_lab.FourPolicies) -> str:
    """The rounding's mean |Δ log π| against the step's two passes', as a sentence."""
    gaps = sampler_lab.gaps(four)
    rounding, step = gaps["log π_old − log π_sampler"]["mean"], gaps["log π_θ − log π_old"]["mean"]
    if rounding < step:
        how = f"{step / rounding:.0f} times less" if step >= 2 * rounding else "less"
    else:
        how = "more"
    return (f"on this batch the rounding moves a log-prob {how}, on average, than the step's two optimiser passes "
            f"({rounding:.2e} against {step:.2e})")


def _tail(b: sampler_lab.SampledBatch) -> tuple[float, float, str]:
    spread = sampler_lab.sequence_spread(b)
    seq, token = spread["seq_w"][1], spread["token_w"][1]
    return seq, token, "larger than" if seq > token else "no larger than"


def tail_note(four: sampler_lab.FourPolicies, hot: tuple = ("bfloat16", 1.1)) -> str:
    """The largest sequence weight against the largest token weight, on the step's batch and on a hotter sampler's."""
    lines = []
    for name, b in (("this batch (τ = 1)", four.main), (f"the {hot[0]} sampler at τ = {hot[1]:g}", four.batches[hot])):
        seq, token, relation = _tail(b)
        lines.append(f"{name}: the largest sequence weight w_i = {seq:.4f} is {relation} the largest token weight "
                     f"w_t = {token:.4f}")
    return "\n".join(lines)


def modes_note(b: sampler_lab.SampledBatch, c_maxes=(3.0, 1.001)) -> str:
    """What the token modes and the sequence modes change at each C_max, as one line each."""
    spread = sampler_lab.sequence_spread(b)
    lines = []
    for c in c_maxes:
        kept = sampler_lab.kept(b, c)
        token, seq = kept["token_truncate"], kept["sequence_truncate"]
        if token["changed"] == 0 and seq["changed"] == 0:
            lines.append(f"C_max = {c:g}: no weight reaches it (the largest w_t {spread['token_w'][1]:.4f}, the "
                         f"largest w_i {spread['seq_w'][1]:.4f}): every mode keeps every weight")
        else:
            lines.append(f"C_max = {c:g}: the token modes change {token['changed']} of {token['of']} tokens "
                         f"({token['frac']:.1%}), the sequence modes {seq['changed']} of {seq['of']} completions "
                         f"({seq['frac']:.0%})")
    return "\n".join(lines)


def c_max_note(four: sampler_lab.FourPolicies, c_max: float = 3.0) -> str:
    """At which of the widget's settings any mode changes a weight at ``c_max`` (none, or the list)."""
    changed = []
    for (sampler, tau), b in four.batches.items():
        kept = sampler_lab.kept(b, c_max)
        token, seq = kept["token_truncate"]["changed"], kept["sequence_truncate"]["changed"]
        if token or seq:
            changed.append(f"{sampler} at τ = {tau:g} ({token} tokens, {seq} completions)")
    if not changed:
        return f"at C_max = {c_max:g} no mode changes any weight at any of the widget's {len(four.batches)} settings"
    return f"at C_max = {c_max:g} the modes change weights at: " + "; ".join(changed)


def cold_note(four: sampler_lab.FourPolicies, cold: tuple = ("bfloat16", 0.8)) -> str:
    """On a colder sampler's batch: the share of token weights above 1, and which comes nearer to C_max, the
    largest token weight or the largest completion weight."""
    b = four.batches[cold]
    seq, token, _ = _tail(b)
    above = (b.log_w[b.mask.bool()] > 0).float().mean().item()
    nearer = "a single token's" if token > seq else "a completion's"
    return (f"{cold[0]} at τ = {cold[1]:g}: {above:.1%} of its tokens have w_t above 1; the largest w_t {token:.3f}, "
            f"the largest w_i {seq:.3f}: {nearer} weight comes nearer to C_max")
