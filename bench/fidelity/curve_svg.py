"""The EAGLE-3 training curve as a dependency-free SVG (no plotting library on the bench venv):
train loss per step (thin, left axis) and the held-out offline acceptance length at each eval
(dots, right axis), from a run's curve.jsonl (of a step that a resumed run logged twice, the last
record).

  python bench/fidelity/curve_svg.py RUN/curve.jsonl OUT.svg

Error policy: a curve with no step rows raises; malformed lines raise (the file is ours).
"""
from __future__ import annotations

import json
import pathlib
import sys

W, H, PAD = 720, 360, 56


def polyline(points, color, width=1.0):
    pts = " ".join(f"{x:.1f},{y:.1f}" for x, y in points)
    return f'<polyline fill="none" stroke="{color}" stroke-width="{width}" points="{pts}"/>'


def render(curve: pathlib.Path) -> str:
    rows = [json.loads(x) for x in open(curve)]
    # A resumed run replays the steps after its last checkpoint: the last record of a step is the
    # one the run went on from.
    by_step = {r["step"]: r for r in rows if "step" in r}
    steps = [by_step[s] for s in sorted(by_step)]
    if not steps:
        raise SystemExit(f"{curve}: no step rows")
    losses = [(r["step"], r["loss"]) for r in steps if "loss" in r]
    evals = [(r["step"], r["eval"]["offline_accept_len"]) for r in steps if "eval" in r]
    smax = max(r["step"] for r in steps) or 1
    lmax = max((v for _, v in losses), default=1.0) * 1.05
    amax = max(4.0, max(v for _, v in evals) if evals else 1.0)

    def x(s):
        return PAD + (W - 2 * PAD) * s / smax

    def yl(v):
        return H - PAD - (H - 2 * PAD) * v / lmax

    def ya(v):
        return H - PAD - (H - 2 * PAD) * (v - 1.0) / (amax - 1.0)

    # smooth the per-step loss (a row is a random pack: the raw curve is noisy)
    smooth, acc = [], None
    for s, v in losses:
        acc = v if acc is None else 0.9 * acc + 0.1 * v
        smooth.append((x(s), yl(acc)))
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" '
           f'font-family="sans-serif" font-size="12">',
           f'<rect width="{W}" height="{H}" fill="white"/>',
           f'<text x="{W / 2}" y="20" text-anchor="middle">EAGLE-3 head for SmolLM2-135M-Instruct: '
           f'training curve ({curve.parent.name})</text>',
           polyline([(PAD, PAD), (PAD, H - PAD), (W - PAD, H - PAD), (W - PAD, PAD)], "#444"),
           f'<text x="{W / 2}" y="{H - 16}" text-anchor="middle">step (one packed row of at most '
           f'2048 tokens)</text>',
           f'<text x="14" y="{H / 2}" transform="rotate(-90 14 {H / 2})" text-anchor="middle" '
           f'fill="#1f77b4">train loss (KL, 3 TTT steps, EMA 0.9)</text>',
           f'<text x="{W - 12}" y="{H / 2}" transform="rotate(90 {W - 12} {H / 2})" '
           f'text-anchor="middle" fill="#d62728">held-out offline acceptance length</text>']
    for i in range(5):
        v = lmax * i / 4
        out.append(f'<text x="{PAD - 6}" y="{yl(v) + 4:.1f}" text-anchor="end" fill="#1f77b4">{v:.1f}</text>')
        a = 1.0 + (amax - 1.0) * i / 4
        out.append(f'<text x="{W - PAD + 6}" y="{ya(a) + 4:.1f}" fill="#d62728">{a:.2f}</text>')
        out.append(f'<text x="{x(smax * i / 4):.1f}" y="{H - PAD + 16}" text-anchor="middle">'
                   f'{round(smax * i / 4)}</text>')
    out.append(polyline(smooth, "#1f77b4"))
    out.append(polyline([(x(s), ya(v)) for s, v in evals], "#d62728", 1.5))
    out += [f'<circle cx="{x(s):.1f}" cy="{ya(v):.1f}" r="3" fill="#d62728"/>' for s, v in evals]
    out.append(f'<line x1="{PAD}" x2="{W - PAD}" y1="{ya(2.0):.1f}" y2="{ya(2.0):.1f}" '
               f'stroke="#999" stroke-dasharray="4 4"/>')
    out.append("</svg>")
    return "\n".join(out) + "\n"


def main() -> None:
    if len(sys.argv) != 3:
        raise SystemExit("usage: curve_svg.py CURVE.jsonl OUT.svg")
    pathlib.Path(sys.argv[2]).write_text(render(pathlib.Path(sys.argv[1])))


if __name__ == "__main__":
    main()
