#!/usr/bin/python3
"""Run each parser as a child process and measure wall time, CPU time and peak RSS
(os.wait4's rusage of that child alone). Used by bench/profiler/run.sh."""
import argparse
import json
import os
import subprocess
import sys
import time

PY = "/usr/bin/python3"
LOAD = "import json, gc, sys\n%s\nwith open(sys.argv[1], 'rb') as f:\n    d = json.load(f)\nprint(len(d['traceEvents']))\n"


def measure(cmd):
    t0 = time.monotonic()
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    out = p.stdout.read()
    err = p.stderr.read()
    _, status, ru = os.wait4(p.pid, 0)
    wall = time.monotonic() - t0
    if status != 0:
        sys.exit("%s failed (%d): %s" % (cmd, status, err.decode()[-2000:]))
    return {"wall_s": wall, "cpu_s": ru.ru_utime + ru.ru_stime, "rss_mb": ru.ru_maxrss / 1024, "out": (out + err).decode()[-400:]}


def best(cmd, n):
    runs = [measure(cmd) for _ in range(n)]
    return min(runs, key=lambda r: r["wall_s"])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--profiler", required=True)
    ap.add_argument("--base", required=True)
    ap.add_argument("--double", required=True)
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--extra", action="store_true")
    ap.add_argument("--baseline", help="another profiler binary (an older build) to time on the base file, same run")
    ap.add_argument("--jsonl")
    a = ap.parse_args()
    size = os.path.getsize(a.base)
    size2 = os.path.getsize(a.double)
    rows = []
    cases = [
        ("profiler ingest --count", a.base, [a.profiler, "ingest", "--count", a.base]),
        ("python json.load gc off", a.base, [PY, "-c", LOAD % "gc.disable()", a.base]),
        ("python json.load gc on", a.base, [PY, "-c", LOAD % "", a.base]),
        ("profiler ingest --count (2x file)", a.double, [a.profiler, "ingest", "--count", a.double]),
    ]
    if a.extra:
        cases.append(("profiler summary", a.base, [a.profiler, "summary", "--no-frames", a.base]))
    if a.baseline:
        cases.append(("baseline ingest --count", a.base, [a.baseline, "ingest", "--count", a.base]))
    for name, path, cmd in cases:
        print("running: %s" % name, file=sys.stderr, flush=True)
        r = best(cmd, a.repeat)
        r.update(name=name, bytes=os.path.getsize(path), mb_s=os.path.getsize(path) / 1e6 / r["wall_s"],
                 cpu_mb_s=os.path.getsize(path) / 1e6 / max(r["cpu_s"], 1e-9))
        rows.append(r)
    ours, off, on, dbl = rows[0], rows[1], rows[2], rows[3]
    print("\ntrace parsing, %.0f MB synthetic Kineto trace (and %.0f MB for the 2x row), same run\n" % (size / 1e6, size2 / 1e6))
    print("%-36s %9s %9s %9s %10s %9s" % ("parser", "wall MB/s", "CPU s", "CPU MB/s", "peak RSS", "RSS/file"))
    for r in rows:
        print("%-36s %9.1f %9.2f %9.1f %8.0f MB %8.3fx" % (r["name"], r["mb_s"], r["cpu_s"], r["cpu_mb_s"], r["rss_mb"], r["rss_mb"] * 2**20 / r["bytes"]))
    print()
    print("speed vs json.load gc off: %.1fx wall, %.1fx CPU (target >= 5x)" % (ours["mb_s"] / off["mb_s"], ours["cpu_mb_s"] / off["cpu_mb_s"]))
    print("speed vs json.load gc on:  %.1fx wall, %.1fx CPU" % (ours["mb_s"] / on["mb_s"], ours["cpu_mb_s"] / on["cpu_mb_s"]))
    print("memory vs json.load gc on: %.0fx less (target >= 20x); gc off: %.0fx less" % (on["rss_mb"] / ours["rss_mb"], off["rss_mb"] / ours["rss_mb"]))
    print("peak RSS when the file doubles: %.1f MB -> %.1f MB (%.2fx)" % (ours["rss_mb"], dbl["rss_mb"], dbl["rss_mb"] / ours["rss_mb"]))
    if a.baseline:
        b = rows[-1]
        print("this build vs the baseline build: %.2fx less CPU, %.2fx wall" % (b["cpu_s"] / ours["cpu_s"], b["wall_s"] / ours["wall_s"]))
    with open("/proc/loadavg") as f:
        print("load average during the run: %s" % f.read().split()[0])
    if a.jsonl:
        with open(a.jsonl, "a") as f:
            for r in rows:
                f.write(json.dumps(dict(r, out=None)) + "\n")


if __name__ == "__main__":
    main()
