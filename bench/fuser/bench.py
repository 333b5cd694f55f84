#!/usr/bin/python3
"""Benchmark: fuser plan against the spec's Python reference (reference.py)
on the same synthetic ResNet-like profiles, in the same run. Prints, per N,
the wall time of each (best of --repeat), the ratio reference/ours and
whether both found the same iteration time.

Usage: bench/fuser/bench.py [--fuser bin/fuser] [--sizes 40,161,207,314]
"""
import argparse, json, os, random, subprocess, sys, tempfile, time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import reference  # noqa: E402

# Cost profile (ns, bytes): DGC-like compression with a 0.4 ms launch,
# allgather of 1 % of the bytes over 10 Gbit/s among 8 ranks.
COMM_ALPHA_US, COMM_GBPS = 50.0, 1 / (0.8 * 0.01 * 8)
COMP_ALPHA_US, COMP_GBPS = 400.0, 250.0


def model(n, seed):
    rng = random.Random(seed)
    grads = []
    for i in range(n):
        size = 16384 * rng.randint(1, 600) if i % 3 == 0 else 1 << (8 + rng.randint(0, 3))
        grads.append({"name": f"layer{i}", "bytes": size, "compute_ns": int(20e3 + size * 0.05)})
    return {"name": f"resnet-like-{n}", "forward_ns": 40_000_000, "grads": grads}


def run_ours(fuser, path, algo):
    cmd = [fuser, "plan", "--model", path, "--algo", algo, "--format", "json", "--log-level", "warn",
           "--comm-alpha-us", str(COMM_ALPHA_US), "--comm-gbps", str(COMM_GBPS),
           "--comp-alpha-us", str(COMP_ALPHA_US), "--comp-gbps", str(COMP_GBPS), "--budget", "600s"]
    t0 = time.perf_counter()
    out = subprocess.run(cmd, check=True, capture_output=True, timeout=900).stdout
    return time.perf_counter() - t0, json.loads(out)


def run_ref(m, algo):
    p = reference.Prob([g["bytes"] for g in m["grads"]], [g["compute_ns"] for g in m["grads"]], m["forward_ns"],
                       COMM_ALPHA_US * 1e3, 1 / COMM_GBPS, COMP_ALPHA_US * 1e3, 1 / COMP_GBPS)
    t0 = time.perf_counter()
    t, groups = reference.pareto(p) if algo == "pareto" else reference.Alg51(p).run()
    return time.perf_counter() - t0, t, groups


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--fuser", default=os.path.join(os.path.dirname(__file__), "..", "..", "bin", "fuser"))
    ap.add_argument("--sizes", default="40,161,207,314")
    ap.add_argument("--alg51-sizes", default="20,30,40")
    ap.add_argument("--repeat", type=int, default=3)
    a = ap.parse_args()
    print(f"{'algo':>6} {'N':>4} {'ours_s':>9} {'ref_s':>9} {'ref/ours':>9} {'iter_ms':>10} {'groups':>6} same")
    ok = True
    jobs = [("pareto", int(n)) for n in a.sizes.split(",")] + [("alg51", int(n)) for n in a.alg51_sizes.split(",")]
    with tempfile.TemporaryDirectory() as d:
        for algo, n in jobs:
            m = model(n, n)
            path = os.path.join(d, f"m{n}.json")
            with open(path, "w") as f:
                json.dump(m, f)
            ours = min((run_ours(a.fuser, path, algo) for _ in range(a.repeat)), key=lambda r: r[0])
            ref = min((run_ref(m, algo) for _ in range(max(1, a.repeat if n <= 207 else 1))), key=lambda r: r[0])
            ours_ms = ours[1]["iter_ms"]
            same = abs(ours_ms * 1e6 - ref[1]) <= 1e-9 * ref[1]
            ok &= same
            print(f"{algo:>6} {n:>4} {ours[0]:>9.4f} {ref[0]:>9.4f} {ref[0] / ours[0]:>9.1f} {ours_ms:>10.3f} "
                  f"{len(ours[1]['groups']):>6} {same}", flush=True)
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
