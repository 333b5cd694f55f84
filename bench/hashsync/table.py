#!/usr/bin/python3
"""Tables of bench/hashsync/run.sh from its JSON lines (one file per environment).

    table.py --env ENV [--hashsync BIN] RESULTS.jsonl

Ours: a step's time is the slowest rank's time_s.total + time_s.output (synchronization, then
the result in the asked form); torch: the slowest rank's time of each form. The first step is a
warm-up and is dropped; the table shows the median over the remaining steps. ratio = the
peer's median / zen's median for the same result form (> 1: zen is faster). The closed form is
`hashsync model` at the measured density and densification (zen's stats) and, for sparse-ps and
omnireduce, the measured skew: it is the busiest rank's volume for those two (compare with max),
the per-rank volume for the others (compare with mean); omnireduce's assumes uniformly spread
rows within blocks, so it overestimates clustered (Zipf) data.

The lower bound (cluster environments only) is the time the link needs for the result alone:
every rank must receive the sum of every row of the union 𝕌 (zen's out_rows, mean over ranks and
steps), 4·width bytes a row, at the link's rate parsed from --env (cluster-1gbit: 125 MB/s), with
no indices and no CPU time; "× bound" is a median step over it.
"""

import argparse
import collections
import json
import re
import statistics
import subprocess
import sys


WIDTH = 16  # deepfm's embedding width in run.sh


def link_bytes_per_s(env):
    """The link rate of a cluster environment (cluster-1gbit → 1.25e8 B/s), None on loopback."""
    m = re.fullmatch(r"cluster-(\d+(?:\.\d+)?)([kmg])bit", env)
    if not m:
        return None
    return float(m.group(1)) * {"k": 1e3, "m": 1e6, "g": 1e9}[m.group(2)] / 8


def load(path):
    """Reads run.sh's JSON lines: ours[(n, scheme, form)][step][rank] = the rank's record (form
    "cmp-sparse"/"cmp-dense" for the 4-rank comparison with torch), peers[(impl, form)][step] =
    the slowest rank's time in seconds."""
    ours = collections.defaultdict(lambda: collections.defaultdict(dict))
    peers = collections.defaultdict(dict)
    for line in open(path):
        d = json.loads(line)
        if d["impl"].startswith("hashsync-") or "values" in d:
            key = (d["world"], d["impl"].replace("hashsync-", ""), d["form"] if d.get("set") != "cmp" else "cmp-" + d["form"])
            ours[key][d["step"]][d["rank"]] = d
        else:
            peers[(d["impl"], d["form"])][d["step"]] = d["time_s"]
    return ours, peers


def med_ours(ours, key, chosen=False):
    """median over steps (the first is warm-up) of the slowest rank's time; chosen: only the
    steps after auto's choice (no rank profiling or timing its trial candidate)."""
    ts = []
    for step, ranks in ours[key].items():
        if step == 0:
            continue
        if chosen and any(r.get("scheme") == "profile" or r.get("choice") in ("profile", "trial") for r in ranks.values()):
            continue
        ts.append(max(r["values"].get("time_s.total", 0) + r["values"].get("time_s.output", 0) for r in ranks.values()))
    return statistics.median(ts) if ts else float("nan")


def med_peer(peers, impl, form):
    """median over steps (the first is warm-up) of a torch peer's time, nan if it did not run."""
    ts = [t for s, t in peers[(impl, form)].items() if s >= 1]
    return statistics.median(ts) if ts else float("nan")


def recv(ours, key):
    """mean and max over ranks and steps of the payload bytes received."""
    b = []
    for step, ranks in ours[key].items():
        for r in ranks.values():
            b.append(sum(v for k, v in r["values"].items() if k.startswith("recv_bytes.") and k.count(".") == 1 and k != "recv_bytes.meta"))
    return (statistics.mean(b), max(b)) if b else (float("nan"), float("nan"))


def bound(ours, key, link):
    """the lower bound of key's steps in seconds (nan without a link rate or zen's stats)."""
    rows = [r["values"]["out_rows"] for s in ours[key].values() for r in s.values() if "out_rows" in r["values"]]
    if not link or not rows:
        return float("nan")
    return statistics.mean(rows) * 4 * WIDTH / link


def times(t, b):
    return "%.2fx" % (t / b) if b == b and t == t else "–"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("results")
    ap.add_argument("--env", required=True)
    ap.add_argument("--hashsync", default="bin/hashsync")
    a = ap.parse_args()
    ours, peers = load(a.results)
    link = link_bytes_per_s(a.env)

    print("## %s: zen vs torch (gloo), 4 ranks, deepfm 1M x 16 float32, 2.8%% rows per rank" % a.env)
    print("| implementation | result | median step | zen is faster by | × bound |")
    print("|---|---|---|---|---|")
    for form in ("sparse", "dense"):
        z = med_ours(ours, (4, "zen", "cmp-" + form))
        b = bound(ours, (4, "zen", "cmp-" + form), link)
        if b == b:
            print("| lower bound (𝕌 rows × %d B ÷ link) | %s | %.1f ms | | 1.00x |" % (4 * WIDTH, form, b * 1e3))
        print("| hashsync zen | %s | %.1f ms | 1.00x | %s |" % (form, z * 1e3, times(z, b)))
        for impl in ("torch-dense", "torch-agsparse", "torch-sparse"):
            m = med_peer(peers, impl, form)
            if m != m:
                continue
            print("| %s | %s | %.1f ms | %.2fx | %s |" % (impl, form, m * 1e3, m / z, times(m, b)))
    print()
    worlds = sorted({k[0] for k in ours if not k[2].startswith("cmp-")})
    print("## %s: every hashsync scheme (sparse result), deepfm" % a.env)
    print("| n | scheme | median step | vs dense | × bound | recv bytes/rank mean | max | closed form | note |")
    print("|---|---|---|---|---|---|---|---|---|")
    for n in worlds:
        keys = [k for k in ours if k[0] == n and k[2] == "sparse"]
        dense = med_ours(ours, (n, "dense", "sparse")) if (n, "dense", "sparse") in ours else float("nan")
        # measured density and densification from zen's stats
        model = {}
        zk = (n, "zen", "sparse")
        if zk in ours:
            loc, out = [], []
            for step, ranks in ours[zk].items():
                for r in ranks.values():
                    loc.append(r["values"]["local_rows"])
                    out.append(r["values"]["out_rows"])
            d = statistics.mean(loc) / 1e6
            g = statistics.mean(out) / statistics.mean(loc)
            skew = 1.0
            pk = (n, "sparse-ps", "sparse")
            if pk in ours:
                skew = statistics.mean(r["values"]["push_imbalance"] for s in ours[pk].values() for r in s.values())
            try:
                js = subprocess.run([a.hashsync, "model", "--n", str(n), "--rows", "1000000", "--width", "16",
                                     "--density", repr(d), "--gamma", repr(min(g, n)), "--skew", repr(skew), "--format", "json"],
                                    capture_output=True, text=True, check=True).stdout
                for l in js.splitlines():
                    m = json.loads(l)
                    model[m["scheme"]] = m["bytes_per_rank"]
            except (subprocess.CalledProcessError, OSError) as e:
                print("table.py: model: %s" % e, file=sys.stderr)
        order = ["zen", "bp-coo", "agsparse", "sparcml", "sparse-ps", "omnireduce", "hitopk", "dense", "auto"]
        for k in sorted(keys, key=lambda k: order.index(k[1]) if k[1] in order else 99):
            m = med_ours(ours, k)
            note = ""
            if k[1] == "auto":
                ch = {r.get("choice") for s in ours[k].values() for r in s.values()} - {"", "profile", "trial"}
                note = "chose " + ",".join(sorted(ch))
                post = med_ours(ours, k, chosen=True)
                if post == post:  # not nan
                    note += "; %.1f ms after choosing (the median includes its profiling steps)" % (post * 1e3)
            cf = model.get(k[1])
            mean, mx = recv(ours, k)
            vs = "%.2fx" % (dense / m) if m and dense == dense else "–"
            print("| %d | %s | %.1f ms | %s | %s | %.0f | %.0f | %s | %s |" % (n, k[1], m * 1e3, vs, times(m, bound(ours, zk, link)),
                                                                   mean, mx, "%.0f" % cf if cf else "", note))
    print()


if __name__ == "__main__":
    main()
