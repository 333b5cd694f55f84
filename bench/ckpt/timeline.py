#!/usr/bin/python3
"""Lays the checkpoint traffic (the agents' --timeline files) against the trainers' allreduce windows
(bench/ckpt/interfere.py's JSON lines) and prints, per mode, how much checkpoint traffic was on the
links while an allreduce ran.

  bench/ckpt/timeline.py [-v] RESULTS.jsonl LOGDIR [LINK_BYTES_PER_S]   (-v: every chunk of 3 iterations)

A chunk is on the wire while its write() runs, minus the gate's pauses, when it was written through a
small socket buffer (interleaving); else for about size/LINK before it arrived (LINK: the link's
rate; every byte crosses the shaped egress of the sender and the shaped ingress of the receiver). For each allreduce
window [w0, w1] of each rank: the checkpoint bytes (any host) on the wire during it, and for each chunk
sent: the lag between its planned start (Algorithm 6.2's span start + f of the chunks before it) and
its write, and between its write and its arrival.
"""
import glob
import json
import os
import statistics
import sys


def main():
    args = [a for a in sys.argv[1:] if a != "-v"]
    verbose = "-v" in sys.argv[1:]
    res, logdir = args[0], args[1]
    link = float(args[2]) if len(args) > 2 else 25e6
    rows = [json.loads(l) for l in open(res) if l.strip()]
    modes = []
    for r in rows:
        if r["mode"] not in modes:
            modes.append(r["mode"])
    for mode in modes:
        files = sorted(glob.glob(os.path.join(logdir, "ckpt-timeline-%s-*.jsonl" % mode)))
        if not files:
            continue
        ev = []
        for f in files:
            for l in open(f):
                if l.strip():
                    try:
                        ev.append(json.loads(l))
                    except ValueError:
                        pass
        recv = [e for e in ev if e["ev"] == "recv"]
        send = [e for e in ev if e["ev"] == "send"]
        wins = []
        for r in rows:
            if r["mode"] == mode:
                for it, w0, w1 in r.get("windows", []):
                    wins.append((r["rank"], it, w0, w1))
        if not wins:
            continue
        # Checkpoint bytes on the wire (any link) during each allreduce window. A chunk is on the
        # wire while its write() runs (the interleaved path writes through a socket buffer of a few
        # ms at B, so write() follows the link), minus the pauses the gate made; a chunk written at
        # once into a big socket buffer (no interleaving) is on the wire for about size/LINK before
        # it arrived.
        pauses = {}
        for e in ev:
            if e["ev"] == "pause":
                pauses.setdefault((e["rank"], e["to"], e["iter"]), []).append((e["t0"], e["t1"]))
        occ = []  # (bytes, [(start, end), ...])
        for e in send:
            if e["t1"] - e["t0"] > 0.5 * e["size"] / link * 1e9:
                segs = [(e["t0"], e["t1"])]
                for p0, p1 in pauses.get((e["rank"], e["to"], e["iter"]), []):
                    nxt = []
                    for a, b in segs:
                        if p1 <= a or p0 >= b:
                            nxt.append((a, b))
                            continue
                        if a < p0:
                            nxt.append((a, p0))
                        if p1 < b:
                            nxt.append((p1, b))
                    segs = nxt
            else:
                arr = [x["t1"] for x in recv if x["rank"] == e["to"] and x["from"] == e["rank"] and x["off"] == e["off"] and x["t1"] >= e["t0"]]
                t1 = min(arr) if arr else e["t1"] + e["size"] / link * 1e9
                segs = [(t1 - e["size"] / link * 1e9, t1)]
            occ.append((e["size"], segs))
        over = []
        for rank, it, w0, w1 in wins:
            b = 0.0
            for size, segs in occ:
                dur = sum(y - x for x, y in segs)
                if dur <= 0:
                    continue
                o = sum(max(0, min(y, w1) - max(x, w0)) for x, y in segs)
                b += size * o / dur
            over.append(b)
        ar = statistics.mean((w1 - w0) / 1e6 for _, _, w0, w1 in wins)
        print("%-10s allreduce %.1f ms mean; checkpoint bytes on the links during an allreduce: mean %.2f MB, max %.2f MB (%d windows)" % (
            mode, ar, statistics.mean(over) / 1e6, max(over) / 1e6, len(over)))
        # The pipelining bubble: how long after chunk k of a span arrived the sender started chunk
        # k+1 of the same span (p = 1: it waits for chunk k's credit — the receiver's check and the
        # round trip; p > 1: negative, chunk k+1 was on its way already).
        arrived = {(e["from"], e["rank"], e["iter"], e["off"]): e["t1"] for e in recv}
        by = {}
        for e in sorted(send, key=lambda e: e["t0"]):
            by.setdefault((e["rank"], e["to"], e["iter"]), []).append(e)
        gaps = []
        for l in by.values():
            for x, y in zip(l, l[1:]):
                t = arrived.get((x["rank"], x["to"], x["iter"], x["off"]))
                if t and x.get("span", -1) == y.get("span", -1) and x.get("span", -1) >= 0:
                    gaps.append((y["t0"] - t) / 1e6)
        if gaps:
            gaps.sort()
            print("           next chunk of a span written after the previous one arrived: median %+.1f ms, p90 %+.1f ms (%d pairs)" % (
                statistics.median(gaps), gaps[9 * len(gaps) // 10], len(gaps)))
        waits = sorted((e["t1"] - e["t0"]) / 1e6 for e in ev if e["ev"] == "begin")
        if waits:
            print("           a save waited for the previous iteration's commit: mean %.1f ms, median %.1f ms, max %.1f ms (%d saves)" % (
                statistics.mean(waits), statistics.median(waits), waits[-1], len(waits)))
        lag = [(e["t0"] - e["at"]) / 1e6 for e in send if e.get("at", -1) > 0]
        wr = [(e["t1"] - e["t0"]) / 1e6 for e in send]
        if lag:
            print("           chunk write vs planned start: mean %+.1f ms, max %+.1f ms; write() took mean %.1f ms, max %.1f ms" % (
                statistics.mean(lag), max(lag), statistics.mean(wr), max(wr)))
        if not verbose:
            continue
        # Per iteration on rank 0's host: the window, and each chunk's planned start / write / arrival.
        r0 = [w for w in wins if w[0] == 0]
        ticks = sorted(e["t"] for e in ev if e["ev"] == "tick" and e["rank"] == 0)
        for rank, it, w0, w1 in r0[:3]:
            t = max([x for x in ticks if x <= w0] or [w0])
            print("   iter %d (rank 0, ms from its tick): allreduce %.0f-%.0f" % (it, (w0 - t) / 1e6, (w1 - t) / 1e6))
            for e in sorted(send, key=lambda e: e["t0"]):
                if t <= e["t0"] < t + 1.5e9 and e["rank"] in (0, 1):
                    arr = [x["t1"] for x in recv if x["rank"] == e["to"] and x["off"] == e["off"] and x["from"] == e["rank"] and x["t1"] >= e["t0"]]
                    print("      rank %d->%d off %8d size %7d: planned %6s write %6.0f-%6.0f arrived %6s" % (
                        e["rank"], e["to"], e["off"], e["size"],
                        "%.0f" % ((e["at"] - t) / 1e6) if e.get("at", -1) > 0 else "-",
                        (e["t0"] - t) / 1e6, (e["t1"] - t) / 1e6, "%.0f" % ((min(arr) - t) / 1e6) if arr else "?"))


if __name__ == "__main__":
    main()
