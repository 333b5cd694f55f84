#!/usr/bin/python3
"""One table of issue 26's figures from the results bench/limits/run.sh leaves in OUT_DIR.

    table.py [--rate 1gbit] [--world 4] OUT_DIR

Every row: the figure, what it was measured against (its limit or the peer in the same run), the
ratio, the target and whether this run met it. A part whose results are missing prints one row
saying so. Reads:
  tcp.txt                          bench/cluster.sh check (one flow, then a ring of flows at once)
  allreduce-cluster-RATE.jsonl     bench/allreduce/run.sh (ours = hashsync check, gloo)
  hashsync/cluster-RATE.jsonl      bench/hashsync/run.sh (zen, the other schemes, torch peers)
  ckpt-restore.jsonl               bench/ckpt/restore.sh (peer-memory restore, torch.load remote)
  ckpt.jsonl                       bench/ckpt/run.sh (local restore, torch.load, page cache)
  straggle/het-*-r*.json           bench/straggle/run.sh part 3 (two speed classes)
"""

import argparse
import glob
import importlib.util
import json
import os
import re
import statistics
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
CEILING = 1448 / 1514  # TCP goodput over a 1500-byte MTU Ethernet frame (headers, preamble, gap)
MIB = 1 << 20
TIE = 0.05  # auto's choice: a scheme whose median is within 5 % of the fastest's counts as the fastest


def load_module(name, rel):
    spec = importlib.util.spec_from_file_location(name, os.path.join(HERE, "..", rel))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


allreduce_table = load_module("allreduce_table", "allreduce/table.py")
hashsync_table = load_module("hashsync_table", "hashsync/table.py")


def jsonl(path):
    with open(path) as f:
        return [json.loads(l) for l in f if l.strip().startswith("{")]


class Table:
    """The rows printed, and the count of targets met and missed."""

    def __init__(self):
        self.rows = []
        self.met = self.missed = 0

    def row(self, item, figure, measured, against, ratio, target, ok):
        if ok is not None:
            self.met += ok
            self.missed += not ok
        verdict = "–" if ok is None else ("met" if ok else "**not met**")
        self.rows.append((item, figure, measured, against, ratio, target, verdict))

    def missing(self, item, what):
        self.rows.append((item, what, "not measured", "", "", "", "–"))

    def print(self):
        print("| item | figure | measured | against | ratio | target | this run |")
        print("|---|---|---|---|---|---|---|")
        for r in self.rows:
            print("| " + " | ".join(r) + " |")
        print()
        print("targets met in this run: %d of %d" % (self.met, self.met + self.missed))


def tcp(t, d, B):
    """The TCP goodput of the ring of flows measured by cluster.sh check, as a share of the link."""
    try:
        text = open(os.path.join(d, "tcp.txt")).read()
    except OSError:
        t.missing("2", "TCP goodput ceiling")
        return None
    ring = text.split("check: ring", 1)[-1]
    rates = [json.loads(m)["gbit_s"] * 1e9 / 8 for m in re.findall(r"\{.*\}", ring)]
    if not rates:
        t.missing("2", "TCP goodput ceiling")
        return None
    share = statistics.mean(rates) / B
    t.row("2", "TCP goodput, %d flows at once (mean)" % len(rates), "%.1f %%" % (100 * share),
          "link; in theory %.1f %%" % (100 * CEILING), "%.3f" % (share / CEILING), "ceiling", None)
    return share


def ring(t, d, rate, B, world):
    """Ours' ring allreduce against the link, the ceiling and gloo, size by size."""
    path = os.path.join(d, "allreduce-cluster-%s.jsonl" % rate)
    if not os.path.exists(path):
        t.missing("2", "ring allreduce")
        return
    rows = {}
    for j in jsonl(path):
        if j.get("op") == "allreduce":
            rows.setdefault(j["bytes"], {})["gloo" if j.get("impl") == "gloo" else "ours"] = j
    for n in sorted(rows):
        o, g = rows[n].get("ours"), rows[n].get("gloo")
        size = allreduce_table.fmt_size(n)
        if not o:
            t.missing("2", "ring allreduce %s" % size)
            continue
        bound = 2 * (world - 1) / world * n / B
        link = bound / o["time_s_mean"]
        if n >= 16 * MIB:
            t.row("2", "ring %s: share of the link" % size, "%.1f %%" % (100 * link),
                  "ceiling %.1f %%" % (100 * CEILING), "%.3f of ceiling" % (link / CEILING), "≥ 0.99",
                  link / CEILING >= 0.99)
        else:
            t.row("2", "ring %s: share of the link" % size, "%.1f %%" % (100 * link),
                  "ceiling %.1f %%" % (100 * CEILING), "%.3f of ceiling" % (link / CEILING), "(reported)", None)
        if g:
            r = g["time_s_mean"] / o["time_s_mean"]
            t.row("2", "ring %s vs gloo" % size, "%.1f ms" % (1e3 * o["time_s_mean"]),
                  "gloo %.1f ms" % (1e3 * g["time_s_mean"]), "%.2fx" % r, "> 1.00x", r > 1)


def zen(t, d, rate, B):
    """Zen against its lower bound and torch (4 ranks), and auto's choice at every world size."""
    path = os.path.join(d, "hashsync", "cluster-%s.jsonl" % rate)
    if not os.path.exists(path):
        t.missing("1", "hashsync zen")
        return
    h = hashsync_table
    ours, peers = h.load(path)
    for form in ("sparse", "dense"):
        key = (4, "zen", "cmp-" + form)
        if key not in ours:
            t.missing("1", "zen, %s result" % form)
            continue
        z = h.med_ours(ours, key)
        if form == "sparse":
            b = h.bound(ours, key, B)
            t.row("1", "zen step, sparse result, n=4", "%.1f ms" % (z * 1e3), "lower bound %.1f ms" % (b * 1e3),
                  "%.2fx bound" % (z / b), "≤ 1.30x", z / b <= 1.3)
            for impl, want in (("torch-sparse", 2.0), ("torch-agsparse", 1.5)):
                m = h.med_peer(peers, impl, form)
                if m == m:
                    t.row("1", "zen vs %s, sparse result" % impl, "%.1f ms" % (z * 1e3), "%.1f ms" % (m * 1e3),
                          "%.2fx" % (m / z), "≥ %.1fx" % want, m / z >= want)
        else:
            m = h.med_peer(peers, "torch-dense", form)
            if m == m:
                t.row("1", "zen vs gloo dense, dense result", "%.1f ms" % (z * 1e3), "%.1f ms" % (m * 1e3),
                      "%.2fx" % (m / z), "≥ 10x", m / z >= 10)
    worlds = sorted({k[0] for k in ours if not k[2].startswith("cmp-")})
    for n in worlds:
        zk = (n, "zen", "sparse")
        meds = {k[1]: h.med_ours(ours, k) for k in ours if k[0] == n and k[2] == "sparse" and k[1] != "auto"}
        meds = {s: m for s, m in meds.items() if m == m}
        if zk in ours:
            z, b = meds.get("zen", float("nan")), h.bound(ours, zk, B)
            t.row("1", "zen step, n=%d" % n, "%.1f ms" % (z * 1e3), "lower bound %.1f ms" % (b * 1e3),
                  "%.2fx bound" % (z / b), "(reported)", None)
        ak = (n, "auto", "sparse")
        if ak not in ours or not meds:
            continue
        chose = sorted({r.get("choice") for s in ours[ak].values() for r in s.values()} - {"", "profile", "trial", None})
        best = min(meds, key=meds.get)
        post = h.med_ours(ours, ak, chosen=True)
        if not chose or post != post:
            t.row("1", "auto's choice, n=%d" % n, "no choice within the steps run", "fastest: %s %.1f ms" % (
                best, meds[best] * 1e3), "", "picks the fastest", False)
            continue
        # A scheme within TIE of the fastest median is as fast within this run's noise (run to run,
        # one scheme's median moves by more): picking it is picking the fastest.
        mine = meds.get(chose[0], float("nan")) if len(chose) == 1 else float("nan")
        tie = chose != [best] and mine <= (1 + TIE) * meds[best]
        t.row("1", "auto's choice, n=%d" % n, "%s, %.1f ms after choosing" % (",".join(chose) or "?", post * 1e3),
              "fastest: %s %.1f ms%s" % (best, meds[best] * 1e3,
                                         "; %s %.1f ms, a tie" % (chose[0], mine * 1e3) if tie else ""),
              "%.2fx" % (post / meds[best]), "picks the fastest (±%d %%)" % round(100 * TIE), chose == [best] or tie)


def restore(t, d, B):
    """Restore from peers' memory after losing a machine, against the link and torch.load remote."""
    path = os.path.join(d, "ckpt-restore.jsonl")
    if not os.path.exists(path):
        t.missing("3", "restore from peers")
        return
    for i, r in enumerate(jsonl(path), 1):
        share = r["ckpt_link_share"]
        t.row("3", "restore from peers, round %d (%s, equal %s)" % (i, r["source"], r["equal"]),
              "%.2f s, %.1f %% of link" % (r["ckpt_s"], 100 * share), "link rate", "%.3f" % share, "≥ 0.90",
              share >= 0.9)
        ratio = r["torch_load_remote_s"] / r["ckpt_s"]
        t.row("3", "restore from peers vs torch.load from another host, round %d" % i, "%.2f s" % r["ckpt_s"],
              "%.2f s" % r["torch_load_remote_s"], "%.2fx" % ratio, "(reported)", None)


def local(t, d):
    """Local-memory restore against torch.load of the same state from the page cache."""
    path = os.path.join(d, "ckpt.jsonl")
    rs = [r for r in jsonl(path) if r.get("kind") == "restore_local"] if os.path.exists(path) else []
    if not rs:
        t.missing("3", "local restore")
        return
    ck = statistics.median(r["ckpt_s"] for r in rs)
    tl = statistics.median(r["torch_load_s"] for r in rs)
    rest = ""
    if "checked_at_rest" in rs[0]:
        rest = ", %d of %d checked at rest" % (sum(1 for r in rs if r["checked_at_rest"] > 0), len(rs))
    t.row("3", "local restore, restarted trainer (median of %d ranks%s)" % (len(rs), rest), "%.1f ms" % (ck * 1e3), "torch.load %.1f ms" % (tl * 1e3),
          "%.2fx" % (tl / ck), "≥ 5x", tl / ck >= 5)
    kept = [r["ckpt_kept_s"] for r in rs if "ckpt_kept_s" in r]
    if kept:
        kk = statistics.median(kept)
        t.row("3", "local restore, trainer that stayed up (mapping kept)", "%.1f ms" % (kk * 1e3),
              "torch.load %.1f ms" % (tl * 1e3), "%.2fx" % (tl / kk), "(reported)", None)
    fl = [r["s"] for r in jsonl(path) if r.get("kind") == "copy_floor"]
    if fl:
        f = statistics.median(fl)
        t.row("3", "local restore, restarted trainer, against the memory floor (the copy alone, no agent)", "%.1f ms" % (ck * 1e3),
              "%.1f ms" % (f * 1e3), "%.2fx" % (ck / f), "(reported)", None)
        t.row("3", "torch.load against the memory floor: what a restore at the floor would reach", "%.1f ms" % (tl * 1e3),
              "%.1f ms" % (f * 1e3), "%.2fx" % (tl / f), "(reported)", None)


def rnah(t, d, world):
    """RNA-H against RNA and blocking allreduce, two speed classes, mean over seeds."""
    def first(name):
        ts = []
        for r in range(world):
            try:
                with open(os.path.join(d, "straggle", "%s-r%d.json" % (name, r))) as f:
                    v = json.load(f)["time_to_target_s"]
            except (OSError, ValueError, KeyError):
                continue
            if v >= 0:
                ts.append(v)
        return min(ts) if ts else float("nan")
    seeds = sorted({int(m.group(1)) for p in glob.glob(os.path.join(d, "straggle", "het-rna-*-r0.json"))
                    for m in [re.search(r"het-rna-(\d+)-r0", p)] if m})
    if not seeds:
        t.missing("4", "RNA-H")
        return
    tt = {impl: statistics.mean(first("het-%s-%d" % (impl, s)) for s in seeds) for impl in ("rna", "rnah", "ar")}
    r = tt["rna"] / tt["rnah"]
    t.row("4", "time to loss 0.5, ranks 2,3 slow (%d seeds)" % len(seeds), "rna-h %.2f s" % tt["rnah"],
          "RNA %.2f s" % tt["rna"], "%.2fx" % r, "> 1.00x", r > 1)
    t.row("4", "RNA-H vs blocking allreduce", "rna-h %.2f s" % tt["rnah"], "allreduce %.2f s" % tt["ar"],
          "%.2fx" % (tt["ar"] / tt["rnah"]), "(reported)", None)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("dir")
    ap.add_argument("--rate", default="1gbit")
    ap.add_argument("--world", type=int, default=4)
    a = ap.parse_args()
    B = allreduce_table.rate_bytes(a.rate)
    try:
        print(open(os.path.join(a.dir, "header.txt")).read().strip())
    except OSError:
        pass
    print()
    t = Table()
    tcp(t, a.dir, B)
    ring(t, a.dir, a.rate, B, a.world)
    zen(t, a.dir, a.rate, B)
    restore(t, a.dir, B)
    local(t, a.dir)
    rnah(t, a.dir, a.world)
    t.print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
