#!/usr/bin/env python3
"""The best any scale choice can do in the w4a16 format (group 128, BF16), against RTN.

Per group, every BF16 scale s in [0.6, 1.5] x absmax / 8 is tried with its nearest-level codes
(given s, the nearest level is the best code for each weight, so this sweep is the format's
optimum up to the dtype rounding of q * s), once with positive scales only and once with either
sign (a negative scale puts the level -8 on the positive side). Prints sum of squared error of the
optimum / RTN for Gaussian, Laplace and outlier-column matrices shaped like bench/quality/run.py's
synthetic model (1024 x 1024, 2816 x 1024, 1024 x 2816).

Usage: python3 bench/quality/bound.py      (needs torch; a few minutes of CPU)
"""
import torch


def bf16(x):
    return x.to(torch.bfloat16).float()


def matrices(kind, gen):
    for rows, cols in ((1024, 1024), (2816, 1024), (1024, 2816)):
        if kind == "laplace":
            w = torch.distributions.Laplace(0.0, 0.014).sample((rows, cols))
        else:
            w = torch.randn(rows, cols, generator=gen) * 0.02
            if kind == "outlier":
                w[:, torch.randperm(cols, generator=gen)[: cols // 100]] *= 10
        yield bf16(w).reshape(-1, 128)


def rtn_error(w):
    s = bf16(w.abs().amax(-1, keepdim=True) / 7.5)
    q = torch.clamp(torch.round(bf16(w / s)), -8, 7)
    return ((w - bf16(q * s)) ** 2).sum(-1)


def best_error(w, factors):
    """min over the scales bf16(absmax / 8 * f) of the error with nearest-level codes."""
    out = []
    for g in w.split(256):
        s = bf16(g.abs().amax(-1, keepdim=True) / 8 * factors)[..., None]  # [G, F, 1]
        q = torch.clamp(torch.round(g[:, None, :] / s), -8, 7)
        out.append(((g[:, None, :] - bf16(q * s)) ** 2).sum(-1).amin(-1))
    return torch.cat(out)


def main():
    torch.manual_seed(1)
    gen = torch.Generator().manual_seed(1)
    factors = torch.linspace(0.6, 1.5, 300)  # finer than the BF16 spacing: every BF16 scale
    for kind in ("gaussian", "laplace", "outlier"):
        rtn = positive = signed = 0.0
        for w in matrices(kind, gen):
            e_rtn = rtn_error(w)
            e_pos = torch.minimum(best_error(w, factors), e_rtn)
            e_sig = torch.minimum(e_pos, best_error(-w, factors))
            rtn, positive, signed = rtn + e_rtn.sum(), positive + e_pos.sum(), signed + e_sig.sum()
        print(f"{kind:9s} optimum / RTN: positive scales {positive / rtn:.4f}, "
              f"either sign {signed / rtn:.4f}")


if __name__ == "__main__":
    main()
