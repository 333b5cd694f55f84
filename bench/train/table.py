#!/usr/bin/python3
"""Tables and a PNG from one bench/train/run.sh output directory.

usage: table.py [--png OUT.png] [--warmup N] DIR

DIR holds SECTION-RATE-RUN.jsonl (examples' --metrics) and, for cluster runs, SECTION-RATE-RUN.bytes
(pipelines/train.sh's WIRE_BYTES). One table per (section, rate): samples/s, its ratio to gloo
DDP (`ddp`) and, for DeepFM, to torch's sparse-gradient DDP (`sparse`); mean step time over the
steps after warm-up; the communication share = step time − the `none` run's step time (the
compute-only floor of the same section and rate, measured in the same invocation) and gloo
DDP's share divided by this run's ("× less comm"); final loss and its relative difference from
gloo DDP's; megabytes every host sent on its link. The PNG has one row per table: samples/s
bars and step time split into the compute floor and the rest.
"""

import argparse
import glob
import os
import re
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "pipelines"))
from report import load  # noqa: E402

ORDER = ["ddp", "sparse", "zen", "powersgd", "topk", "dense", "none"]
LABEL = {"ddp": "gloo DDP", "sparse": "torch sparse DDP", "zen": "hashsync_hook(zen)",
         "powersgd": "torch PowerSGD hook (rank 4)", "topk": "compressor_hook(topk 1%+EF)",
         "dense": "hashsync_hook(dense ring)", "none": "none (compute only)"}
TITLE = {"deepfm": "DeepFM", "lm": "LM (transformer)", "overhead": "Hook overhead (DeepFM)"}


def collect(d, warmup):
    groups = {}
    for path in sorted(glob.glob(os.path.join(d, "*.jsonl"))):
        m = re.match(r"(deepfm|lm|overhead)-(.+)-([a-z0-9]+)\.jsonl$", os.path.basename(path))
        if not m:
            continue
        section, rate, run = m.groups()
        try:
            steps, summary = load(path)
        except SystemExit as e:
            print("table: %s" % e, file=sys.stderr)
            continue
        # a run that died in warm-up has no step time (its warm-up steps are not comparable)
        timed = [s for s in steps if s["step"] >= warmup]
        r = {"run": run, "steps": len(steps), "samples_per_s": summary.get("samples_per_s"),
             "step_ms": 1000 * sum(s["seconds"] for s in timed) / len(timed) if timed else None,
             "final_loss": steps[-1]["loss"], "complete": bool(summary.get("summary"))}
        b = path[:-len(".jsonl")] + ".bytes"
        if os.path.exists(b):
            with open(b) as f:
                r["wire_mb"] = int(f.read().strip()) / 1e6
        groups.setdefault((section, rate), {})[run] = r
    return groups


def derive(runs):
    base, sparse, none = runs.get("ddp"), runs.get("sparse"), runs.get("none")
    for r in runs.values():
        if base and base["samples_per_s"] and r["samples_per_s"]:
            r["x_gloo"] = r["samples_per_s"] / base["samples_per_s"]
            r["loss_vs_gloo"] = (r["final_loss"] - base["final_loss"]) / abs(base["final_loss"])
        if sparse and sparse["samples_per_s"] and r["samples_per_s"]:
            r["x_sparse"] = r["samples_per_s"] / sparse["samples_per_s"]
        if none and r["run"] != "none" and r["step_ms"] is not None and none["step_ms"] is not None:
            r["comm_ms"] = r["step_ms"] - none["step_ms"]
    if base and base.get("comm_ms") is not None:
        for r in runs.values():
            if r.get("comm_ms") is not None and r["comm_ms"] > 0:
                r["comm_less"] = base["comm_ms"] / r["comm_ms"]


def fmt(v, spec):
    return "-" if v is None else format(v, spec)


def table(section, rate, runs):
    cols = ["run", "samples/s", "× gloo"] + (["× sparse"] if section == "deepfm" else []) + \
        ["step ms", "comm ms", "gloo comm ÷ this", "final loss", "loss vs gloo", "MB on wire"]
    lines = [cols]
    for name in sorted(runs, key=lambda n: ORDER.index(n) if n in ORDER else 99):
        r = runs[name]
        line = [LABEL.get(name, name) + ("" if r["complete"] else " (incomplete)"),
                fmt(r["samples_per_s"], ".0f"), fmt(r.get("x_gloo"), ".2f")]
        if section == "deepfm":
            line.append(fmt(r.get("x_sparse"), ".2f"))
        line += [fmt(r["step_ms"], ".0f"), fmt(r.get("comm_ms"), ".0f"),
                 fmt(r.get("comm_less"), ".1f"), fmt(r["final_loss"], ".4f"),
                 fmt(r.get("loss_vs_gloo"), "+.2%"), fmt(r.get("wire_mb"), ".1f")]
        lines.append(line)
    widths = [max(len(x[i]) for x in lines) for i in range(len(cols))]
    steps = max(r["steps"] for r in runs.values())
    head = "%s, %s, 4 ranks, %d steps" % (TITLE.get(section, section), rate, steps)
    return head + "\n" + "\n".join("  ".join(c.ljust(w) for c, w in zip(x, widths)).rstrip()
                                   for x in lines)


def draw(png, groups):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(len(groups), 2, figsize=(12, 3.2 * len(groups)), squeeze=False)
    for (ax1, ax2), ((section, rate), runs) in zip(axes, groups.items()):
        names = sorted(runs, key=lambda n: ORDER.index(n) if n in ORDER else 99)
        labels = [LABEL.get(n, n).replace(" (", "\n(") for n in names]
        rates = [runs[n]["samples_per_s"] or 0 for n in names]
        bars = ax1.bar(labels, rates, color="#1f77b4")
        for b, n in zip(bars, names):
            x = runs[n].get("x_gloo")
            ax1.annotate("%.0f%s" % (b.get_height(), " (%.2f×)" % x if x else ""),
                         (b.get_x() + b.get_width() / 2, b.get_height()), ha="center",
                         va="bottom", fontsize=8)
        ax1.set_ylabel("samples/s")
        ax1.set_title("%s, %s: throughput" % (TITLE.get(section, section), rate), fontsize=10)
        # without a `none` run (the loopback overhead section) the whole step is one bar
        floor = (runs["none"]["step_ms"] if "none" in runs else None) or float("inf")
        comp = [min(floor, runs[n]["step_ms"] or 0) for n in names]
        rest = [max(0.0, (runs[n]["step_ms"] or 0) - floor) for n in names]
        has_floor = floor != float("inf")
        ax2.bar(labels, comp, color="#9ecae1",
                label="compute floor (none)" if has_floor else "whole step (no floor run)")
        if has_floor:
            ax2.bar(labels, rest, bottom=comp, color="#e6550d", label="step − floor (communication)")
        ax2.set_ylabel("ms per step")
        ax2.set_title("step time breakdown", fontsize=10)
        ax2.legend(fontsize=8)
        for ax in (ax1, ax2):
            ax.tick_params(axis="x", labelsize=7)
            ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    fig.savefig(png, dpi=100)
    plt.close(fig)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("dir")
    p.add_argument("--png")
    p.add_argument("--warmup", type=int, default=3, help="steps left out of the step time (3, "
                   "as the examples' samples/s)")
    a = p.parse_args()
    groups = collect(a.dir, a.warmup)
    if not groups:
        sys.exit("table: no metrics in %s" % a.dir)
    order = {"deepfm": 0, "lm": 1, "overhead": 2}
    groups = dict(sorted(groups.items(), key=lambda kv: (order.get(kv[0][0], 9), kv[0][1])))
    for (section, rate), runs in groups.items():
        derive(runs)
        print(table(section, rate, runs) + "\n")
    if a.png:
        draw(a.png, groups)
        print("table: wrote %s" % a.png, file=sys.stderr)


if __name__ == "__main__":
    main()
