#!/usr/bin/python3
"""One rank of the blocking baseline on PyTorch's gloo backend, for bench/straggle.

Every iteration: sleep the injected compute time (rank 0 is --slow times slower),
compute the seed's toy gradient g = x + N(0, sigma^2), allreduce [g, 1] with
torch.distributed (gloo), apply x -= lr * sum. Exactly what `straggle sync --mode
allreduce --toy quadratic` does, so the two are comparable in the same run.

Rank 0 prints one JSON line: round_ms_mean/p50, rounds, time_to_target_s, final_loss.
"""
import argparse, json, os, random, time

import torch
import torch.distributed as dist


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rank", type=int, required=True)
    ap.add_argument("--world", type=int, required=True)
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--rounds", type=int, default=200)
    ap.add_argument("--dim", type=int, default=20)
    ap.add_argument("--compute-ms", type=float, default=20)
    ap.add_argument("--delay-ms", type=float, default=20, help="additive U(0, delay) per iteration")
    ap.add_argument("--slow", type=float, default=1, help="rank 0's compute slowdown factor")
    ap.add_argument("--sigma", type=float, default=1)
    ap.add_argument("--lr", type=float, default=0.01)
    ap.add_argument("--target-loss", type=float, default=0)
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(a.port)
    dist.init_process_group("gloo", rank=a.rank, world_size=a.world)
    rng = random.Random(a.seed * 1000 + a.rank)
    gen = torch.Generator().manual_seed(a.seed * 1000 + a.rank)
    x = torch.ones(a.dim)
    buf = torch.empty(a.dim + 1)
    dist.barrier()
    start = last = time.perf_counter()
    times, tt, rounds_to = [], -1.0, 0
    loss = float("nan")
    for k in range(1, a.rounds + 1):
        d = a.compute_ms * (a.slow if a.rank == 0 else 1) + rng.uniform(0, a.delay_ms)
        time.sleep(d / 1000)
        buf[: a.dim] = x + torch.randn(a.dim, generator=gen) * a.sigma
        buf[a.dim] = 1
        dist.all_reduce(buf)
        x -= a.lr * buf[: a.dim]
        loss = 0.5 * float((x.double() ** 2).sum())
        now = time.perf_counter()
        times.append((now - last) * 1000)
        last = now
        if tt < 0 and a.target_loss > 0 and loss <= a.target_loss:
            tt, rounds_to = now - start, k
            break
    if a.rank == 0:
        s = sorted(times)
        print(json.dumps({"impl": "gloo", "rounds": len(times), "round_ms_mean": sum(times) / len(times),
                          "round_ms_p50": s[len(s) // 2], "time_to_target_s": tt, "rounds_to_target": rounds_to,
                          "final_loss": loss, "contributors_mean": a.world}), flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
