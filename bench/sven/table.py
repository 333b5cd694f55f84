#!/usr/bin/python3
"""bench/sven/table.py RESULTS.jsonl — the table of bench/sven/run.sh: per environment, lateness
and implementation, the medians over runs (the first run is warm-up) of the slowest rank's time
(step: from the ranks' start, so it includes the lateness), of the mean over ranks, of the late
rank's (rank 3) own time, and of the tail: how long the alltoall went on after the late rank
arrived, max(late rank's time, max over the others of their time − the lateness); and the ratio
of each implementation's step and tail to hashsync-async's (above 1: slower than Sven's)."""
import collections
import json
import statistics
import sys

runs = collections.defaultdict(lambda: collections.defaultdict(dict))
for line in open(sys.argv[1]):
    d = json.loads(line)
    if d["run"] == 0:
        continue
    runs[(d["env"], d["late"], d["impl"])][d["run"]][d["rank"]] = d["ns"] / 1e6

rows = {}
for key, by_run in runs.items():
    full = [r for r in by_run.values() if len(r) == 4]
    late_ms = key[1] * 1e3
    tail = [max(r[3], max(v - late_ms for k, v in r.items() if k != 3)) for r in full]
    rows[key] = (statistics.median(max(r.values()) for r in full),
                 statistics.median(statistics.mean(r.values()) for r in full),
                 statistics.median(r[3] for r in full), statistics.median(tail), len(full))

print(f"{'env':<16} {'late s':>6} {'impl':<16} {'step ms':>8} {'mean ms':>8} {'late-rank ms':>12} "
      f"{'tail ms':>8} {'step/async':>10} {'tail/async':>10} {'runs':>5}")
for (env, late, impl), (step, mean, lr, tail, n) in sorted(rows.items()):
    base = rows.get((env, late, "hashsync-async"))
    print(f"{env:<16} {late:>6} {impl:<16} {step:>8.2f} {mean:>8.2f} {lr:>12.2f} "
          f"{tail:>8.2f} {step / base[0]:>10.2f} {tail / base[3]:>10.2f} {n:>5}")
