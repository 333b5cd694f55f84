#!/usr/bin/env python3
"""Table of `go test -bench Table` lines: per codec, encode and decode GB/s and % of memcpy, and
issue 18's targets on AVX2 hosts: every quantizer and sign codec encodes at ≥ 70 % of memcpy, every
decoder at ≥ 50 %. Each line holds the best iteration of one repetition, the codec's and the copy's;
across repetitions STAT=best (default) takes the best of each (the codec's and the copy's
separately, as bench/compressor/run.sh: on a shared machine the best iteration is the one least
disturbed by the neighbours), STAT=median the median of the lines' ratios.

  codecs_table.py < lines                  the table of one build
  codecs_table.py BEFORE AFTER             a markdown table of two builds' lines (files), before → after
"""
import os
import re
import statistics
import sys

STAT = os.environ.get("STAT", "best")

QUANT = {"signsgd", "efsignsgd", "signum", "onebit", "fp16", "bf16", "qsgd", "terngrad", "natural"}


def read(lines):
    rows = {}
    for line in lines:
        m = re.match(r"BenchmarkTable/(\w+)/(enc|dec)-\d+\s", line)
        if not m:
            continue
        vals = dict((k, float(v)) for v, k in re.findall(r"([\d.]+) (%memcpy|GB/s|memcpy-GB/s)", line))
        rows.setdefault(m.group(1), {}).setdefault(m.group(2), []).append(vals)
    return rows


def med(rs, k):
    """The statistic of field k over the lines rs (%memcpy: of the GB/s fields when STAT=best)."""
    if not rs:
        return float("nan")
    if STAT == "median":
        return statistics.median(r[k] for r in rs)
    if k == "%memcpy":
        return 100 * max(r["GB/s"] for r in rs) / max(r["memcpy-GB/s"] for r in rs)
    return max(r[k] for r in rs)


def target(algo, ep, dp):
    miss = []
    if algo in QUANT and not ep >= 70:
        miss.append("enc < 70")
    if not dp >= 50:
        miss.append("dec < 50")
    return ("MISSED: " + ", ".join(miss)) if miss else ("met" if algo in QUANT else "dec met")


def table(rows):
    print(f"{'algo':>10} {'enc_GB/s':>9} {'enc_%mem':>9} {'dec_GB/s':>9} {'dec_%mem':>9} {'memcpy':>7}  target")
    for algo in sorted(rows):
        e, d = rows[algo].get("enc", []), rows[algo].get("dec", [])
        ep, dp = med(e, "%memcpy"), med(d, "%memcpy")
        print(f"{algo:>10} {med(e, 'GB/s'):9.2f} {ep:9.1f} {med(d, 'GB/s'):9.2f} {dp:9.1f} "
              f"{med(e + d, 'memcpy-GB/s'):7.2f}  {target(algo, ep, dp)}")


def compare(before, after):
    print("| codec | encode, % of memcpy | decode, % of memcpy | target (after) |")
    print("|---|---|---|---|")
    for algo in sorted(set(before) | set(after)):
        b, a = before.get(algo, {}), after.get(algo, {})
        cell = []
        for k in ("enc", "dec"):
            x, y = med(b.get(k, []), "%memcpy"), med(a.get(k, []), "%memcpy")
            cell.append(f"{x:.0f} → **{y:.0f}**" if b else f"(new) **{y:.0f}**")
        ep, dp = med(a.get("enc", []), "%memcpy"), med(a.get("dec", []), "%memcpy")
        print(f"| {algo} | {cell[0]} | {cell[1]} | {target(algo, ep, dp)} |")


if len(sys.argv) == 3:
    with open(sys.argv[1]) as f1, open(sys.argv[2]) as f2:
        compare(read(f1), read(f2))
else:
    table(read(sys.stdin))
