#!/usr/bin/env python3
"""bench/gpu/table.py — merges trainwire's and torch's JSON lines (stdin) into a table.

For each size and algorithm: trainwire's encode_device time (kernels + parts to the host), torch's
time for the same (encode_device) and without the copy (kernels), the speedup over torch
(torch encode_device / ours), and our input bandwidth as a fraction of the device memcpy's
(memcpy moves 8n bytes, a codec reads 4n at least, so 0.5 of memcpy's time is the read floor).
Then Zen's hash partition: lib/gpu's ZenHash against lib/zen on the CPU and torch's argsort
partition, host to host.
"""
import json
import sys
from collections import defaultdict

rows = [json.loads(l) for l in sys.stdin if l.strip().startswith("{")]
by = defaultdict(dict)
device = {}
for r in rows:
    by[(r["elements"], r["algo"])][(r["impl"], r["op"])] = r
    if r["op"] != "zen_hash_cpu":  # that row's device is the host's CPU
        device[r["impl"]] = r.get("device", "?")
print(f"device: {device.get('trainwire', device.get('torch', '?'))}")
zen = {k: v for k, v in by.items() if k[1] == "zen"}
for k in zen:
    del by[k]
print(f"{'elements':>10} {'algo':>10} {'ours ms':>9} {'host ms':>9} {'torch ms':>9} {'torch kern':>10} {'speedup':>8} {'GB/s in':>8} {'of read floor':>13}")
for n in sorted({k[0] for k in by}):
    mem = by[(n, "memcpy")].get(("trainwire", "memcpy")) or by[(n, "memcpy")].get(("torch", "memcpy"))
    floor = mem["ms_mean"] / 2 if mem else None
    if mem:
        print(f"{n:>10} {'memcpy':>10} {mem['ms_mean']:>9.3f} {'':>9} {'':>9} {'':>10} {'':>8} {8 * n / mem['ms_mean'] / 1e6:>8.1f}")
    for (m, algo), d in sorted(by.items()):
        if m != n or algo in ("memcpy", "zen"):
            continue
        ours = d.get(("trainwire", "encode_device"))
        host = d.get(("trainwire", "encode_host"))
        th = d.get(("torch", "encode_device"))
        tk = d.get(("torch", "kernels"))
        f = lambda r: f"{r['ms_mean']:.3f}" if r else "-"
        sp = f"{th['ms_mean'] / ours['ms_mean']:.2f}x" if ours and th else "-"
        gb = f"{ours['GBps_in']:.1f}" if ours else "-"
        fl = f"{floor / ours['ms_mean']:.2f}" if ours and floor else "-"
        print(f"{n:>10} {algo:>10} {f(ours):>9} {f(host):>9} {f(th):>9} {f(tk):>10} {sp:>8} {gb:>8} {fl:>13}")

if zen:
    print()
    print("Zen's hash partition, N = 4 parts of m unique rows, host to host (ms; speedup = other / GPU)")
    print(f"{'rows':>10} {'GPU':>9} {'lib/zen CPU':>12} {'torch argsort':>14} {'vs CPU':>8} {'vs torch':>9}")
    for (m, _), d in sorted(zen.items()):
        g = d.get(("trainwire", "zen_hash"))
        c = d.get(("trainwire", "zen_hash_cpu"))
        th = d.get(("torch", "zen_hash"))
        f = lambda r: f"{r['ms_mean']:.3f}" if r else "-"
        sc = f"{c['ms_mean'] / g['ms_mean']:.2f}x" if g and c else "-"
        st = f"{th['ms_mean'] / g['ms_mean']:.2f}x" if g and th else "-"
        print(f"{m:>10} {f(g):>9} {f(c):>12} {f(th):>14} {sc:>8} {st:>9}")
    cpu = next((r for d in zen.values() for k, r in d.items() if k == ("trainwire", "zen_hash_cpu")), None)
    if cpu:
        print(f"CPU: {cpu['device']}")
