#!/usr/bin/python3
"""The table of bench/sven/dlrm.sh: per configuration the median samples/s and step time over the
rounds; for the sequential run's stage times (medians per stage), Eq. 6.1 and Eq. 6.2 per step
(docs/sven.md), against the measured step times of seq and pipe.

usage: PYTHONPATH=clients/python dlrm_table.py RESULTS.jsonl"""

import json
import statistics
import sys

from trainwire.pipeline import STAGES, pipelined, sequential

BATCH = 64


def main():
    runs = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
    by = {}
    for r in runs:
        by.setdefault(r["config"], []).append(r)
    step = {}
    print("| config | samples/s | step ms | max staleness | last loss | runs |")
    print("|---|---|---|---|---|---|")
    for c in ("torch", "seq", "pipe"):
        rs = by.get(c, [])
        if not rs:
            continue
        sps = statistics.median(r["samples_per_s"] for r in rs)
        step[c] = 1e3 * BATCH * rs[0]["world"] / sps
        print("| %s | %.0f | %.1f | %d | %.4f | %d |" % (c, sps, step[c], rs[0]["max_staleness"],
                                                         statistics.median(r["last_loss"] for r in rs), len(rs)))
    if "seq" not in by:
        return
    st = {k: statistics.median(r["stage_ms"][k] for r in by["seq"]) for k in STAGES}
    print()
    print("stage ms (seq, rank 0): " + ", ".join("%s %.2f" % (k, v) for k, v in st.items()))
    eq61, eq62 = sequential(st), pipelined(st)
    print()
    print("| | predicted ms | measured ms | measured / predicted |")
    print("|---|---|---|---|")
    print("| sequential, Eq. 6.1 | %.1f | %.1f (seq) | %.2f |" % (eq61, step["seq"], step["seq"] / eq61))
    print("| pipelined, Eq. 6.2 | %.1f | %.1f (pipe) | %.2f |" % (eq62, step["pipe"], step["pipe"] / eq62))
    print("| pipelined, Eq. 6.2 + all2all | %.1f | %.1f (pipe) | %.2f |" % (eq62 + st["all2all"], step["pipe"],
                                                                          step["pipe"] / (eq62 + st["all2all"])))


if __name__ == "__main__":
    main()
