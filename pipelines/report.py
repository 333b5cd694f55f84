#!/usr/bin/python3
"""Compares training runs from their metrics files and draws them.

usage: report.py [--png OUT.png] [--json OUT.json] [--baseline NAME] [--wire NAME=BYTESFILE ...]
                 NAME=METRICS.jsonl ...

Each METRICS file is what examples/*.py --metrics writes: one JSON line per step (step, loss,
seconds, samples) and a summary line. Prints one table row per run (steps, samples/s and its
ratio to the baseline run, mean step time, final loss and its relative difference from the
baseline's, and with --wire the megabytes the hosts sent on their links, as pipelines/train.sh
counts them in the emulated cluster) on stdout, writes the same as JSON with --json, and with --png draws the loss curves
and the samples/s bars side by side. Exit codes: 0 ok, 1 a file is missing or holds no steps,
2 bad usage.
"""

import argparse
import json
import os
import sys


def load(path):
    """(steps, summary) of one metrics file; steps is a list of dicts in step order. A run that
    was restarted replays the steps since its checkpoint: the last record of a step counts, and
    the summary's "restored" lists what each attempt resumed from."""
    steps, summary, restored = {}, None, []
    with open(path) as f:
        for n, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                rec = json.loads(line)
            except ValueError as e:
                raise SystemExit("report: %s line %d: not JSON: %s" % (path, n, e))
            if rec.get("summary"):
                summary = rec
            elif rec.get("event"):
                restored.append(rec)
            else:
                steps[rec["step"]] = rec
    if not steps:
        raise SystemExit("report: %s: no steps recorded" % path)
    summary = dict(summary or {}, restored=restored)
    return [steps[k] for k in sorted(steps)], summary


def row(name, steps, summary, base):
    step_ms = 1000 * sum(s["seconds"] for s in steps[1:]) / max(1, len(steps) - 1)
    r = {"run": name, "steps": len(steps), "final_loss": steps[-1]["loss"],
         "samples_per_s": summary.get("samples_per_s"), "step_ms": step_ms,
         "restored": summary.get("restored") or []}
    if base is not None:
        b_loss, b_rate = base["final_loss"], base["samples_per_s"]
        r["loss_vs_baseline"] = (r["final_loss"] - b_loss) / abs(b_loss) if b_loss else None
        r["speedup"] = r["samples_per_s"] / b_rate if b_rate and r["samples_per_s"] else None
    return r


def table(rows):
    head = ["run", "steps", "samples/s", "× baseline", "step ms", "final loss", "loss vs baseline",
            "MB on the wire"]

    def fmt(v, spec):
        return "-" if v is None else format(v, spec)
    lines = [head] + [[r["run"], str(r["steps"]), fmt(r["samples_per_s"], ".1f"),
                       fmt(r.get("speedup"), ".2f"), fmt(r["step_ms"], ".1f"),
                       fmt(r["final_loss"], ".5f"), fmt(r.get("loss_vs_baseline"), "+.2e"),
                       fmt(r["wire_bytes"] / 1e6 if r.get("wire_bytes") is not None else None, ".1f")]
                      for r in rows]
    widths = [max(len(x[i]) for x in lines) for i in range(len(head))]
    out = "\n".join("  ".join(c.ljust(w) for c, w in zip(x, widths)).rstrip() for x in lines)
    for r in rows:
        for e in r["restored"]:
            out += "\n%s: attempt %d resumed from committed iteration %d (%s), restore %.3f s" % (
                r["run"], e.get("attempt", 0), e.get("restored", -1), e.get("source"), e.get("restore_s", 0))
    return out


def draw(png, runs, rows):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4), gridspec_kw={"width_ratios": [3, 2]})
    for name, (steps, _) in runs.items():
        ax1.plot([s["step"] for s in steps], [s["loss"] for s in steps], label=name, lw=1.4)
    ax1.set_xlabel("step")
    ax1.set_ylabel("loss (mean over ranks)")
    ax1.set_title("loss")
    ax1.legend()
    ax1.grid(alpha=0.3)
    names = [r["run"] for r in rows]
    rates = [r["samples_per_s"] or 0 for r in rows]
    bars = ax2.bar(names, rates, color=["#1f77b4", "#e6550d", "#2ca02c", "#9467bd"][: len(names)])
    for b, r in zip(bars, rows):
        label = "%.0f" % (r["samples_per_s"] or 0)
        if r.get("speedup"):
            label += " (%.2f×)" % r["speedup"]
        ax2.annotate(label, (b.get_x() + b.get_width() / 2, b.get_height()), ha="center",
                     va="bottom", fontsize=9)
    ax2.set_ylabel("samples/s (all ranks)")
    ax2.set_title("throughput")
    ax2.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    fig.savefig(png, dpi=110)
    plt.close(fig)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("runs", nargs="+", metavar="NAME=METRICS.jsonl")
    p.add_argument("--baseline", help="the run the others are compared with (default: the first)")
    p.add_argument("--png", help="draw loss curves and throughput here")
    p.add_argument("--json", help="write the table's rows here as JSON")
    p.add_argument("--wire", action="append", default=[], metavar="NAME=BYTESFILE",
                   help="a file holding the bytes run NAME sent on the wire (repeatable)")
    args = p.parse_intermixed_args(argv)   # --wire may follow some runs
    runs = {}
    for spec in args.runs:
        name, sep, path = spec.partition("=")
        if not sep or not name or not path:
            p.error("a run is NAME=METRICS.jsonl, got %r" % spec)
        try:
            runs[name] = load(path)
        except OSError as e:
            raise SystemExit("report: %s" % e)
    base_name = args.baseline or next(iter(runs))
    if base_name not in runs:
        p.error("--baseline %s is not one of the runs (%s)" % (base_name, ", ".join(runs)))
    base = row(base_name, *runs[base_name], None)
    rows = [row(n, *runs[n], base if n != base_name else None) for n in runs]
    for spec in args.wire:
        name, _, path = spec.partition("=")
        for r in rows:
            if r["run"] == name and os.path.exists(path):
                with open(path) as f:
                    r["wire_bytes"] = int(f.read().strip())
    print(table(rows))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
    if args.png:
        draw(args.png, runs, rows)
        print("report: wrote %s" % args.png, file=sys.stderr)


if __name__ == "__main__":
    main()
