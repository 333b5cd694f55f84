#!/usr/bin/python3
"""Summarises bench/ckpt's JSON lines: medians over ranks, ratios against torch in the same run."""
import json
import statistics
import sys

rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
by = {}
for r in rows:
    by.setdefault(r["kind"], []).append(r)
MB = 1e6


def med(xs):
    return statistics.median(xs)


ts = by.get("torch_save", [])
cs = by.get("ckpt_save", [])
if ts and cs:
    b = cs[0]["bytes"]
    t = med([x["median"] for x in ts])
    c = med([x["median"] for x in cs])
    commit = med([x["commit_median"] for x in cs])
    print("save stall, %d ranks x %.0f MB (median over ranks of the median of %d saves):" % (len(cs), b / MB, len(cs[0]["stalls"])))
    print("  torch.save + fsync   %8.1f ms" % (t * 1e3))
    print("  ckpt (shared memory) %8.1f ms   -> %.1fx lower" % (c * 1e3, t / c))
    print("  time to global commit after the save (replication to the peer, CRC32C, digests): %.0f ms" % (commit * 1e3))
    tcp = by.get("tcp_stream")
    thr = b / commit
    line = "  replication throughput per rank %.0f MB/s" % (thr / MB)
    if tcp:
        lim = tcp[0]["bytes"] / tcp[0]["s"]
        line += " (all %d ranks at once); one raw loopback TCP stream alone: %.0f MB/s -> %.0f%%" % (len(cs), lim / MB, 100 * thr / lim)
    print(line)
    tcps = by.get("tcp_streams")
    if tcps:
        lim = tcps[0]["bytes"] / tcps[0]["s"]
        print("  %d raw loopback TCP streams at once (Python, sendall/recv_into, no checksums): %.0f MB/s each -> replication at %.0f%% of it" % (
            tcps[0]["streams"], lim / MB, 100 * thr / lim))
for kind, what in (("restore_local", "local memory"), ("restore_peer", "peer memory")):
    rs = by.get(kind, [])
    if rs:
        ck = med([x["ckpt_s"] for x in rs])
        tl = med([x["torch_load_s"] for x in rs])
        ok = all(x["equal"] for x in rs)
        src = ",".join(sorted({x["source"] for x in rs}))
        print("restore from %s (%s, iteration %s, bytes equal: %s): ckpt %.1f ms, torch.load %.1f ms -> %.1fx faster" % (
            what, src, rs[0]["iter"], ok, ck * 1e3, tl * 1e3, tl / ck))
        if "checked_at_rest" in rs[0]:
            print("  by a restarted trainer (a new process, after the one that saved exited): %d of %d agents had checked the shard"
                  " at rest, so the restore did not hash it again" % (sum(1 for x in rs if x["checked_at_rest"] > 0), len(rs)))
        kept = [x["ckpt_kept_s"] for x in rs if "ckpt_kept_s" in x]
        if kept:
            print("  by a trainer that stayed up (its save's mapping of the buffer kept): ckpt %.1f ms -> %.1fx faster" % (
                med(kept) * 1e3, tl / med(kept)))
        fl = by.get("copy_floor") if kind == "restore_local" else None
        if fl:
            f = med([x["s"] for x in fl])
            print("  memory floor (%d processes copying their %.0f MB from a fresh shared-memory mapping into their tensors at once, no agent): %.1f ms"
                  " -> restarted trainer at %.2fx it, torch.load at %.2fx it" % (len(fl), fl[0]["bytes"] / MB, f * 1e3, ck / f, tl / f))
