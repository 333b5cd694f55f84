#!/usr/bin/env python3
"""Merge bench/compressor's timings: torch_ref.py JSON lines and `compressor bench | compressor
dump` JSON lines (stdin, both kinds mixed) into one table of ratios.

speedup  = torch seconds / ours seconds (> 1: ours is faster)
%memcpy  = ours GB/s over the memcpy GB/s of the same run (numpy's np.copyto and Go's copy, the
           larger of the two: the conservative denominator)
dec_GB/s = dense f32 bytes per second of our decoder (best iteration, or mean with STAT=mean)

Times are the best iteration (encode_ns_min, s_min) where the rows carry it, for ours, torch and
both memcpys alike: on a machine shared with other jobs the mean mostly measures the neighbours.
STAT=mean selects the means instead.
"""
import os
import json
import sys

TORCH_OP = {"topk": "topk", "signsgd": "signsgd", "onebit": "onebit", "fp16": "fp16", "qsgd": "qsgd",
            "efsignsgd": None, "mstopk": None, "bf16": None, "terngrad": None, "natural": None,
            "randomk": None}
TARGET = {"topk": ("speedup", 5.0), "signsgd": ("%memcpy", 50.0), "onebit": ("%memcpy", 50.0),
          "fp16": ("%memcpy", 50.0), "qsgd": ("%memcpy", 50.0)}

torch_rows, ours = {}, {}
for line in sys.stdin:
    line = line.strip()
    if not line:
        continue
    r = json.loads(line)
    if r.get("impl") == "torch":
        torch_rows[r["op"]] = r
    elif r.get("t") == "stats":
        v, lab = r["values"], r["labels"]
        ours[lab["algo"]] = v

STAT = os.environ.get("STAT", "min")


def ours_s(v):
    key = "encode_ns_min" if STAT == "min" and "encode_ns_min" in v else "encode_ns_mean"
    return v[key] * 1e-9


def ours_dec_s(v):
    key = "decode_ns_min" if STAT == "min" and "decode_ns_min" in v else "decode_ns_mean"
    return v[key] * 1e-9


def torch_s(r):
    return r["s_min"] if STAT == "min" and "s_min" in r else r["s_mean"]


print(f"times: {'best iteration' if STAT == 'min' else 'mean'}")
mem_go = ours["memcpy"]["bytes_in"] / ours_s(ours["memcpy"]) / 1e9
mem_np = torch_rows["memcpy_numpy"]["bytes"] / torch_s(torch_rows["memcpy_numpy"]) / 1e9
mem = max(mem_go, mem_np)
print(f"memcpy: Go copy {mem_go:.2f} GB/s, numpy copyto {mem_np:.2f} GB/s"
      + (f", torch copy_ {torch_rows['memcpy_torch']['bytes'] / torch_s(torch_rows['memcpy_torch']) / 1e9:.2f} GB/s"
         if "memcpy_torch" in torch_rows else ""))
if "packbits" in torch_rows:
    pb = torch_rows["packbits"]
    print(f"np.packbits(x >= 0): {pb['bytes'] / torch_s(pb) / 1e9:.2f} GB/s")
print(f"{'algo':>10} {'ours_ms':>9} {'ours_GB/s':>10} {'%memcpy':>8} {'torch_ms':>9} {'torch_GB/s':>10} "
      f"{'speedup':>8} {'ratio':>8} {'dec_GB/s':>8}  target")
for algo, v in ours.items():
    if algo == "memcpy":
        continue
    s = ours_s(v)
    gbs = v["bytes_in"] / s / 1e9
    pct = 100 * gbs / mem
    t = torch_rows.get(TORCH_OP.get(algo) or "", None)
    ts = torch_s(t) if t else float("nan")
    tgbs = t["bytes"] / ts / 1e9 if t else float("nan")
    sp = ts / s if t else float("nan")
    tgt = ""
    if algo in TARGET:
        kind, want = TARGET[algo]
        got = sp if kind == "speedup" else pct
        tgt = f"{kind} ≥ {want:g}: {'met' if got >= want else 'MISSED'}"
    dec = v["bytes_in"] / ours_dec_s(v) / 1e9
    print(f"{algo:>10} {s * 1e3:9.2f} {gbs:10.2f} {pct:8.1f} {ts * 1e3:9.2f} {tgbs:10.2f} {sp:8.2f} "
          f"{v['ratio']:8.5f} {dec:8.2f}  {tgt}")
