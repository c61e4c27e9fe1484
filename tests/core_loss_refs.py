"""Small tensors and slow loop references for the ``ladder.core`` loss and KL tests."""

from __future__ import annotations

import math

import torch

D = torch.float64
E = math.e


def t(x) -> torch.Tensor:
    return torch.tensor(x, dtype=D)


def right_padded_mask(B: int, T: int, g: torch.Generator, min_len: int = 1) -> torch.Tensor:
    lengths = torch.randint(min_len, T + 1, (B,), generator=g)
    return (torch.arange(T)[None, :] < lengths[:, None]).to(D)


def flat(x):
    return [v for row in x for v in row] if isinstance(x[0], list) else list(x)


# --------------------------------------------------------------------------- slow references


def ref_kl(logp, ref, estimator, old=None):
    out = []
    for i, (lp, rp) in enumerate(zip(logp, ref)):
        ell = rp - lp
        if estimator == "k1":
            k = -ell
        elif estimator == "k2":
            k = 0.5 * ell * ell
        else:
            k = (math.exp(ell) - 1.0) - ell
        if old is not None:
            k = math.exp(lp - old[i]) * k
        out.append(k)
    return out


def ref_clipped_surrogate(ratio, adv, el, eh):
    out = []
    for r, a in zip(ratio, adv):
        c = min(max(r, 1.0 - el), 1.0 + eh)
        out.append(-min(r * a, c * a))
    return out


def ref_value_loss(v, v_old, R, clip):
    out = []
    for x, xo, y in zip(v, v_old, R):
        un = (x - y) ** 2
        if clip is None:
            out.append(0.5 * un)
            continue
        cv = xo + min(max(x - xo, -clip), clip)
        out.append(0.5 * max(un, (cv - y) ** 2))
    return out


def ref_aggregate(x, mask, mode, num_tokens=None):
    B, T = len(x), len(x[0])
    total = sum(x[b][i] for b in range(B) for i in range(T) if mask[b][i])
    n = sum(1 for b in range(B) for i in range(T) if mask[b][i])
    if mode == "token_mean":
        return total / n
    if mode == "seq_mean_token_mean":
        per_seq = []
        for b in range(B):
            real = [x[b][i] for i in range(T) if mask[b][i]]
            per_seq.append(sum(real) / len(real))
        return sum(per_seq) / B
    if mode == "seq_mean_token_sum":
        return total / B
    assert mode == "sum_over_constant"
    return total / max(num_tokens, 1.0)


def ref_last_step(mask):
    out = []
    for row in mask:
        real = [i for i, m in enumerate(row) if m]
        out.append([1.0 if real and i == real[-1] else 0.0 for i in range(len(row))])
    return out


def ref_explained_variance(v, R, mask):
    vs = [a for a, m in zip(v, mask) if m]
    rs = [b for b, m in zip(R, mask) if m]
    n = len(rs)

    def pvar(xs):
        mu = sum(xs) / len(xs)
        return sum((q - mu) ** 2 for q in xs) / len(xs)

    return 1.0 - pvar([r - q for r, q in zip(rs, vs)]) / pvar(rs) if n >= 2 else float("nan")
