#!/usr/bin/python3
"""Renders allreduce results (JSON lines of bin/hashsync check and gloo_allreduce.py) as a table.

    table.py [--env NAME] [--world W] [--rate 1gbit] results.jsonl...

Lines with "impl": "gloo" are gloo's, the others ours (hashsync check). Per size: the mean time
of each, ratio = gloo time / ours time (> 1: ours is faster), algbw and busbw (GB/s, 1e9 B/s) of
each, and with --rate the fraction of the link bound reached: the ring allreduce needs at least
2(n-1)/n * M / B seconds on links of B bytes/s, so link% = that bound / measured mean time
(= busbw / B).
"""

import argparse
import json
import re
import sys

_RATE = {"bit": 1 / 8, "kbit": 1e3 / 8, "mbit": 1e6 / 8, "gbit": 1e9 / 8, "tbit": 1e12 / 8,
         "bps": 1, "kbps": 1e3, "mbps": 1e6, "gbps": 1e9}


def rate_bytes(s):
    m = re.fullmatch(r"(\d+(?:\.\d+)?)([a-z]+)", s.lower())
    if not m or m.group(2) not in _RATE:
        raise SystemExit("table.py: bad rate %r" % s)
    return float(m.group(1)) * _RATE[m.group(2)]


def fmt_size(n):
    for unit, k in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= k and n % k == 0:
            return "%d%s" % (n // k, unit)
    return "%dB" % n


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--env", default="")
    p.add_argument("--world", type=int, default=0)
    p.add_argument("--rate", default=None)
    p.add_argument("files", nargs="+")
    a = p.parse_args()
    rows = {}
    for fn in a.files:
        with open(fn) as f:
            for line in f:
                line = line.strip()
                if not line.startswith("{"):
                    continue
                j = json.loads(line)
                if j.get("op") != "allreduce":
                    continue
                impl = "gloo" if j.get("impl") == "gloo" else "ours"
                rows.setdefault(j["bytes"], {})[impl] = j
    B = rate_bytes(a.rate) if a.rate else None
    head = ["size", "ours_s", "gloo_s", "gloo/ours", "ours_algbw", "ours_busbw", "gloo_algbw",
            "gloo_busbw"]
    if B:
        head += ["ours_link%", "gloo_link%"]
    head += ["ours_transport", "correct"]
    out = []
    world = a.world
    for n in sorted(rows):
        r = rows[n]
        o, g = r.get("ours"), r.get("gloo")
        world = world or (o or g)["world"]

        def cell(x, key, f="%.4f"):
            return f % x[key] if x else "-"
        line = [fmt_size(n), cell(o, "time_s_mean", "%.5f"), cell(g, "time_s_mean", "%.5f"),
                "%.2f" % (g["time_s_mean"] / o["time_s_mean"]) if o and g else "-",
                cell(o, "algbw_GBps", "%.3f"), cell(o, "busbw_GBps", "%.3f"),
                cell(g, "algbw_GBps", "%.3f"), cell(g, "busbw_GBps", "%.3f")]
        if B:
            bound = 2 * (world - 1) / world * n / B
            line += ["%.1f" % (100 * bound / o["time_s_mean"]) if o else "-",
                     "%.1f" % (100 * bound / g["time_s_mean"]) if g else "-"]
        line.append(o.get("transport", "?") if o else "-")
        line.append("/".join("%s=%s" % (k, str(x["correct"]).lower())
                             for k, x in (("ours", o), ("gloo", g)) if x))
        out.append(line)
    title = "allreduce %s, world %s: mean seconds per op; ratio gloo/ours > 1 means ours is " \
            "faster; bandwidths in GB/s" % (a.env, world)
    if B:
        title += "; link%% = 2(n-1)/n*M/B over time, B = %s = %.0f MB/s" % (a.rate, B / 1e6)
    print(title)
    widths = [max(len(str(x)) for x in col) for col in zip(head, *out)]
    for line in [head] + out:
        print("  ".join(str(x).rjust(w) for x, w in zip(line, widths)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
