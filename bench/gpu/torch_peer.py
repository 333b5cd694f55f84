#!/usr/bin/env python3
"""bench/gpu/torch_peer.py — PyTorch's versions of lib/gpu's codecs, timed on the same GPU.

    torch_peer.py SIZES ITERS RATIO [ALGOS]

SIZES: comma-separated element counts; ITERS timed iterations after 5 warm-ups; RATIO the
sparsifiers' density. Prints one JSON line per (algo, size, op), like lib/gpu's TestGPUBench:
op "encode_device" = the torch ops on a CUDA tensor including the copy of the encoded tensors
to the host (the wire needs them), "kernels" = the same without that copy, "memcpy" = y.copy_(x).
The quantizers are written in torch the obvious way (packbits by a weighted sum of 8 bools, QSGD
and TernGrad with torch.rand); top-k is torch.topk on |x| (MSTopK has no torch counterpart, so
the paper's comparison — MSTopK against the exact top-k — is mstopk vs torch topk).

Zen (algo "zen", op "zen_hash"; ZEN_SIZES, default 28000,1048576,16777216, "none" skips): the
way a torch user partitions m unique row indices among N = 4 servers by a hash — upload the
indices, a multiplicative hash reduced to a part (h·N >> 32), a stable argsort by part and a
bincount — with the order and counts copied back to the host, as lib/gpu's ZenHash returns its
parts. It is the same work without Algorithm 1's hash memory (a sort, not a CAS table).
"""
import json
import os
import sys
import time

try:
    import torch
except ImportError:
    print("torch_peer.py: PyTorch is not installed here; no torch baseline", file=sys.stderr)
    sys.exit(3)


def packbits(b):
    """MSB-first packing of a bool vector (numpy packbits bitorder='big'), padding zero."""
    n = b.numel()
    pad = (-n) % 8
    if pad:
        b = torch.cat([b, torch.zeros(pad, dtype=torch.bool, device=b.device)])
    w = torch.tensor([128, 64, 32, 16, 8, 4, 2, 1], dtype=torch.uint8, device=b.device)
    return (b.view(-1, 8).to(torch.uint8) * w).sum(dim=1, dtype=torch.uint8)


def ops(ratio):
    def topk(x):
        k = max(1, int(ratio * x.numel() + 0.999999999))
        _, idx = torch.topk(x.abs(), k, sorted=False)
        idx, _ = torch.sort(idx)  # canonical ascending order, as trainwire's frames
        return [x[idx], idx.to(torch.int32)]

    def signsgd(x):
        return [packbits(~torch.signbit(x))]

    def efsignsgd(x):
        return [packbits(~torch.signbit(x)), x.abs().mean(dtype=torch.float64).float()]

    def onebit(x):
        neg = torch.signbit(x)
        nn = neg.sum()
        sn = torch.where(neg, x, torch.zeros_like(x)).sum(dtype=torch.float64)
        sp = x.sum(dtype=torch.float64) - sn
        return [packbits(neg), torch.stack([(sn / nn.clamp(min=1)), sp / (x.numel() - nn).clamp(min=1)]).float()]

    def terngrad(x):
        a = x.abs()
        s = a.max()
        sel = torch.rand_like(x) < a / s
        return [packbits(sel & (x > 0)), packbits(sel & (x < 0)), s]

    def qsgd(x, levels=64):
        norm = x.norm()
        q = levels * x.abs() / norm
        l = q.floor()
        code = (l + (torch.rand_like(x) < q - l).float()) * torch.sign(x)
        return [norm, code.to(torch.int8)]

    return {
        "topk": topk,
        "mstopk": topk,
        "signsgd": signsgd,
        "efsignsgd": efsignsgd,
        "onebit": onebit,
        "terngrad": terngrad,
        "qsgd": qsgd,
        "fp16": lambda x: [x.half()],
        "bf16": lambda x: [x.bfloat16()],
    }


def timeit(f, iters):
    sync = torch.cuda.synchronize if torch.cuda.is_available() else (lambda: None)
    for _ in range(5):
        f()
    sync()
    ts = []
    for _ in range(iters):
        t = time.perf_counter()
        f()
        sync()
        ts.append(time.perf_counter() - t)
    return ts


def main():
    sizes = [int(s) for s in sys.argv[1].split(",")]
    iters = int(sys.argv[2])
    ratio = float(sys.argv[3])
    table = ops(ratio)
    algos = sys.argv[4].split(",") if len(sys.argv) > 4 and sys.argv[4] else list(table)
    # TORCH_DEVICE=cpu runs the same ops on the CPU (a dry run of this script without a GPU)
    dev = torch.device(os.environ.get("TORCH_DEVICE", "cuda"))
    name = torch.cuda.get_device_name(dev) if dev.type == "cuda" else "cpu"
    torch.manual_seed(1)
    for n in sizes:
        x = torch.randn(n, device=dev)
        y = torch.empty_like(x)

        def emit(algo, op, ts, bytes_out):
            mean = sum(ts) / len(ts)
            print(json.dumps({"impl": "torch", "device": name, "torch": torch.__version__, "algo": algo, "op": op,
                              "elements": n, "bytes_in": 4 * n, "bytes_out": bytes_out, "iters": len(ts),
                              "ms_mean": mean * 1e3, "ms_min": min(ts) * 1e3, "GBps_in": 4 * n / mean / 1e9}), flush=True)

        emit("memcpy", "memcpy", timeit(lambda: y.copy_(x), iters), 4 * n)
        for algo in algos:
            f = table[algo]
            outs = f(x)
            nbytes = sum(o.numel() * o.element_size() for o in outs)
            emit(algo, "kernels", timeit(lambda: f(x), iters), nbytes)
            emit(algo, "encode_device", timeit(lambda: [o.cpu() for o in f(x)], iters), nbytes)

    zen_sizes = os.environ.get("ZEN_SIZES", "28000,1048576,16777216")
    if zen_sizes not in ("", "none"):
        g = torch.Generator().manual_seed(7)
        for m in [int(v) for v in zen_sizes.split(",")]:
            # m distinct rows below 4m, as TestGPUBench's uniqueRows, on the host (int64: torch has no uint32)
            rows = torch.randperm(4 * m, generator=g)[:m]

            def zen_hash():
                idx = rows.to(dev)
                h = (idx * 2654435761) & 0xFFFFFFFF
                part = (h * 4) >> 32
                order = torch.argsort(part, stable=True)
                counts = torch.bincount(part, minlength=4)
                return order.cpu(), counts.cpu()

            ts = timeit(zen_hash, iters)
            mean = sum(ts) / len(ts)
            print(json.dumps({"impl": "torch", "device": name, "torch": torch.__version__, "algo": "zen", "op": "zen_hash",
                              "elements": m, "bytes_in": 4 * m, "bytes_out": 4 * m, "iters": len(ts),
                              "ms_mean": mean * 1e3, "ms_min": min(ts) * 1e3, "GBps_in": 4 * m / mean / 1e9}), flush=True)


if __name__ == "__main__":
    main()
