#!/usr/bin/env python3
"""Turns cbatch traces (--trace files) into one SVG picture: budget use ((useful + padding) / token
budget, useful part solid) and batch occupancy (sequences per step) over the steps of the run, one line
per trace, so that modes can be compared side by side. Standard library only.

usage: tools/plot_trace.py OUT.svg TRACE.jsonl [TRACE.jsonl ...]
"""
import json
import sys

COLORS = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e"]
W, H, PAD = 900, 260, 50


def load(path):
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def polyline(points, color, dash=""):
    pts = " ".join(f"{x:.1f},{y:.1f}" for x, y in points)
    extra = f' stroke-dasharray="{dash}"' if dash else ""
    return f'<polyline fill="none" stroke="{color}" stroke-width="1.2"{extra} points="{pts}"/>'


def panel(traces, top, title, value, y_max):
    max_steps = max(len(steps) for _, steps in traces) or 1
    out = [f'<text x="{PAD}" y="{top - 8}" font-size="13">{title}</text>',
           f'<rect x="{PAD}" y="{top}" width="{W - 2 * PAD}" height="{H - 2 * PAD}" fill="none" stroke="#999"/>',
           f'<text x="{PAD - 6}" y="{top + 4}" font-size="10" text-anchor="end">{y_max:g}</text>',
           f'<text x="{PAD - 6}" y="{top + H - 2 * PAD}" font-size="10" text-anchor="end">0</text>']
    for i, (name, steps) in enumerate(traces):
        color = COLORS[i % len(COLORS)]
        for key, dash in value:
            pts = [(PAD + (W - 2 * PAD) * j / max_steps, top + (H - 2 * PAD) * (1 - min(key(s), y_max) / y_max))
                   for j, s in enumerate(steps)]
            out.append(polyline(pts, color, dash))
    return out


def main(argv):
    if len(argv) < 3:
        print(__doc__, file=sys.stderr)
        return 1
    traces = []
    for path in argv[2:]:
        steps = load(path)
        name = steps[0]["mode"] if steps else path
        traces.append((f"{name} ({path})", steps))
    useful = lambda s: (s["prefill_tokens"] + s["decode_tokens"]) / s["token_budget"]
    computed = lambda s: (s["prefill_tokens"] + s["decode_tokens"] + s["padding_tokens"]) / s["token_budget"]
    max_seqs = max((s["num_seqs"] for _, steps in traces for s in steps), default=1)
    body = panel(traces, PAD, "budget use per step (solid: useful tokens, dashed: including padding)",
                 [(useful, ""), (computed, "4 3")], 1.0)
    body += panel(traces, H + PAD, "sequences in the batch per step", [(lambda s: s["num_seqs"], "")], max_seqs)
    for i, (name, steps) in enumerate(traces):
        body.append(f'<text x="{PAD}" y="{2 * H + 20 + 16 * i}" font-size="12" fill="{COLORS[i % len(COLORS)]}">'
                    f'{name}: {len(steps)} steps</text>')
    height = 2 * H + 30 + 16 * len(traces)
    svg = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{height}" font-family="sans-serif">',
           '<rect width="100%" height="100%" fill="white"/>'] + body + ["</svg>"]
    with open(argv[1], "w", encoding="utf-8") as f:
        f.write("\n".join(svg) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
