#!/usr/bin/env python3
"""Median table of `go test -bench Table` lines (stdin): per codec, encode and decode GB/s and
% of memcpy (medians over the repetitions), and issue 18's targets on AVX2 hosts: every quantizer
and sign codec encodes at ≥ 70 % of memcpy, every decoder at ≥ 50 %."""
import re
import statistics
import sys

QUANT = {"signsgd", "efsignsgd", "signum", "onebit", "fp16", "bf16", "qsgd", "terngrad", "natural"}
rows = {}
for line in sys.stdin:
    m = re.match(r"BenchmarkTable/(\w+)/(enc|dec)-\d+\s", line)
    if not m:
        continue
    vals = dict((k, float(v)) for v, k in re.findall(r"([\d.]+) (%memcpy|GB/s|memcpy-GB/s)", line))
    rows.setdefault(m.group(1), {}).setdefault(m.group(2), []).append(vals)


def med(rs, k):
    return statistics.median(r[k] for r in rs) if rs else float("nan")


print(f"{'algo':>10} {'enc_GB/s':>9} {'enc_%mem':>9} {'dec_GB/s':>9} {'dec_%mem':>9} {'memcpy':>7}  target")
for algo in sorted(rows):
    e, d = rows[algo].get("enc", []), rows[algo].get("dec", [])
    ep, dp = med(e, "%memcpy"), med(d, "%memcpy")
    miss = []
    if algo in QUANT and not ep >= 70:
        miss.append("enc < 70")
    if not dp >= 50:
        miss.append("dec < 50")
    tgt = ("MISSED: " + ", ".join(miss)) if miss else ("met" if algo in QUANT else "dec met")
    print(f"{algo:>10} {med(e, 'GB/s'):9.2f} {ep:9.1f} {med(d, 'GB/s'):9.2f} {dp:9.1f} "
          f"{med(e + d, 'memcpy-GB/s'):7.2f}  {tgt}")
