#!/usr/bin/python3
"""Synthesize small traces of every vintage from ONE hand-designed timeline.

Usage: /usr/bin/python3 make.py [OUTDIR]   (default: the directory of this script)

The timeline (µs, per iteration, iteration i starts at i*1000):
  stream 7  : Memcpy HtoD [50,80]  compute K1 [100,300]  K2 [320,500]  K3 [700,800]
  stream 20 : AllReduce   [250,650] on rank 0, [300,650] on rank 1 (rank 1 starts late)
  launches  : K1 [90,95]  K2 [96,99]  K3 [650,660]  AllReduce [240,245]  Memcpy [40,45]
Hand-computed per iteration and rank 0 (see analysis tests):
  span 750, busy 680, idle 70, compute 480, non-compute 200, comm 400,
  comm∩compute 230 (57.5 %), stream 7 idle: host wait 220, kernel wait 20.
Every Kineto vintage written here must summarize identically.
"""
import gzip
import json
import os
import sys

OUT = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__))
ITERS = 2
BASE_NS = 1700000000000000000  # baseTimeNanoseconds (2023-11-14)
ABS0_US = 1700000000000000  # absolute epoch µs of the same instant
REL0_US = 4458676522690.655  # relative traces start here (as real Kineto traces do) ...
BASE_NS = BASE_NS - 4458676522690655  # ... with a base that puts them at the same instant

GRADS = [("fc2.bias", [10]), ("fc2.weight", [10, 256]), ("fc1.bias", [256]), ("fc1.weight", [256, 1024])]


def timeline(rank):
    """Events as dicts with µs floats relative to the start, vintage-neutral."""
    ev = []
    corr = 0
    for it in range(ITERS):
        o = it * 1000.0
        ev.append(dict(kind="step", name="ProfilerStep#%d" % it, ts=o, dur=900))
        ev.append(dict(kind="anno", name="## forward ##", ts=o + 5, dur=195))
        # backward: AccumulateGrad per gradient, ready at 210, 230, 260, 400
        for j, (g, shape) in enumerate(GRADS):
            t = o + [200, 220, 250, 380][j]
            ev.append(dict(kind="cpu", name="autograd::engine::evaluate_function: torch::autograd::AccumulateGrad",
                           ts=t, dur=[10, 10, 10, 20][j], dims=[shape], ext=100 + j))
        # one bucket allreduce of all gradients
        nel = sum(eval("*".join(map(str, s))) for _, s in GRADS)
        ev.append(dict(kind="cpu", name="record_param_comms", ts=o + 238, dur=9, coll="allreduce", nel=nel, ext=200 + it))
        launches = [("mem", "Memcpy HtoD (Pageable -> Device)", 40, 5, 50, 30, 7),
                    ("k", "void at::native::vectorized_elementwise_kernel<4>(...)", 90, 5, 100, 200, 7),
                    ("k", "volta_sgemm_128x64_nn", 96, 3, 320, 180, 7),
                    ("k", "void at::native::reduce_kernel<512, 1>(...)", 650, 10, 700, 100, 7),
                    ("nccl", "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevComm*, unsigned long, ncclWork*)", 240, 5,
                     250 if rank == 0 else 300, 400 if rank == 0 else 350, 20)]
        for kind, name, rts, rdur, kts, kdur, stream in launches:
            corr += 1
            ev.append(dict(kind="runtime", api=kind, ts=o + rts, dur=rdur, corr=corr))
            ev.append(dict(kind="gpu", sub=kind, name=name, ts=o + kts, dur=kdur, corr=corr, stream=stream, nel=nel,
                           seq=it, ext=200 + it if kind == "nccl" else 300 + corr))
    # memory: +4 MiB at 10, +1 MiB at 20, -4 MiB at 850 (first iteration only)
    ev.append(dict(kind="mem", ts=10, bytes=4 << 20, total=4 << 20, addr=0x7f0000000000))
    ev.append(dict(kind="mem", ts=20, bytes=1 << 20, total=5 << 20, addr=0x7f0000400000))
    ev.append(dict(kind="mem", ts=850, bytes=-(4 << 20), total=1 << 20, addr=0x7f0000000000))
    return ev


def kineto(rank, vintage):
    """vintage: 2024 (relative float µs + base first), 2023 (base after events),
    2022 (absolute int µs, Kernel/Runtime/async_gpu), rocm (hip names)."""
    old = vintage == "2022"
    rocm = vintage == "rocm"

    def ts(t):
        if old:
            return int(ABS0_US + t)
        # float µs with a ns fraction, relative to baseTimeNanoseconds
        return round(REL0_US + t, 3)

    out = []
    for e in timeline(rank):
        k = e["kind"]
        if k in ("step", "anno"):
            out.append({"ph": "X", "cat": "user_annotation", "name": e["name"], "pid": 100, "tid": 100,
                        "ts": ts(e["ts"]), "dur": e["dur"], "args": {"External id": 1}})
        elif k == "cpu":
            a = {"External id" if not old else "external id": e["ext"], "Sequence number": 1}
            if "dims" in e:
                a["Input Dims"] = [e["dims"][0], []]
                a["Input type"] = ["float", ""]
            if "coll" in e:
                a.update({"Collective name": e["coll"], "In msg nelems": e["nel"], "Out msg nelems": e["nel"],
                          "Group size": 2, "dtype": "Float", "Process Group Name": "0"})
            out.append({"ph": "X", "cat": "cpu_op" if not old else "Operator", "name": e["name"], "pid": 100,
                        "tid": 100, "ts": ts(e["ts"]), "dur": e["dur"], "args": a})
        elif k == "runtime":
            name = {"k": "cudaLaunchKernel", "nccl": "cudaLaunchKernelExC", "mem": "cudaMemcpyAsync"}[e["api"]]
            if rocm:
                name = {"k": "hipLaunchKernel", "nccl": "hipExtLaunchKernel", "mem": "hipMemcpyAsync"}[e["api"]]
            out.append({"ph": "X", "cat": "cuda_runtime" if not old else "Runtime", "name": name, "pid": 100,
                        "tid": 100, "ts": ts(e["ts"]), "dur": e["dur"],
                        "args": {"cbid": 211, "correlation": e["corr"]}})
            out.append({"ph": "s", "id": e["corr"], "pid": 100, "tid": 100, "ts": ts(e["ts"]),
                        "cat": "ac2g" if not old else "async_gpu", "name": "ac2g"})
        elif k == "gpu":
            cat = {"k": "kernel", "nccl": "kernel", "mem": "gpu_memcpy"}[e["sub"]]
            if old:
                cat = {"k": "Kernel", "nccl": "Kernel", "mem": "Memcpy"}[e["sub"]]
            name = e["name"]
            if old and e["sub"] == "nccl":
                name = "ncclKernel_AllReduce_RING_LL_Sum_float(ncclWorkElem)"
            a = {"device": 0, "stream": e["stream"], "correlation": e["corr"],
                 "External id" if not old else "external id": e["ext"]}
            if e["sub"] == "mem":
                a["bytes"] = 1 << 20
            if e["sub"] == "nccl" and not old:
                a.update({"Collective name": "allreduce", "In msg nelems": e["nel"], "Out msg nelems": e["nel"],
                          "Group size": 2, "dtype": "Float", "Process Group Name": "0", "Seq": e["seq"]})
            out.append({"ph": "X", "cat": cat, "name": name, "pid": 0, "tid": e["stream"], "ts": ts(e["ts"]),
                        "dur": e["dur"], "args": a})
            out.append({"ph": "f", "id": e["corr"], "pid": 0, "tid": e["stream"], "ts": ts(e["ts"]),
                        "cat": "ac2g" if not old else "async_gpu", "name": "ac2g", "bp": "e"})
        elif k == "mem" and vintage == "2024":
            out.append({"ph": "i", "cat": "cpu_instant_event", "s": "t", "name": "[memory]", "pid": 100, "tid": 100,
                        "ts": ts(e["ts"]), "args": {"Device Type": 1, "Device Id": 0, "Addr": e["addr"],
                                                     "Bytes": e["bytes"], "Total Allocated": e["total"],
                                                     "Total Reserved": 8 << 20}})
    out.append({"name": "process_name", "ph": "M", "pid": 0, "tid": 0, "args": {"name": "GPU 0"}})
    out.append({"name": "thread_name", "ph": "M", "pid": 0, "tid": 7, "args": {"name": "stream 7 "}})
    out.append({"name": "Iteration Start: PyTorch Profiler", "ph": "i", "s": "g", "pid": "Traces", "tid": "Trace PyTorch Profiler",
                "ts": ts(0)})
    out.append({"ph": "X", "cat": "Trace", "name": "PyTorch Profiler (0)", "pid": "Spans", "tid": "PyTorch Profiler",
                "ts": ts(0), "dur": 2000})
    dist = {"backend": "nccl", "rank": rank, "world_size": 2, "pg_count": 1,
            "pg_config": [{"pg_name": "0", "pg_desc": "default_pg", "backend_config": "cuda:nccl", "pg_size": 2,
                           "ranks": [0, 1]}], "nccl_version": "2.18.1" if not old else "2.14.3"}
    doc = {"schemaVersion": 1, "deviceProperties": [{"id": 0, "name": "NVIDIA A100-SXM4-40GB", "totalGlobalMem": 42314694656}],
           "distributedInfo": dist}
    if vintage in ("2024", "rocm"):
        doc["baseTimeNanoseconds"] = BASE_NS
        doc["displayTimeUnit"] = "ms"
    doc["traceEvents"] = out
    if vintage == "2023":
        doc["traceName"] = "rank%d.pt.trace.json" % rank
        doc["baseTimeNanoseconds"] = BASE_NS
        del doc["distributedInfo"]
        doc["distributedInfo"] = dist  # after the events, as older Kineto wrote
    doc.setdefault("traceName", "rank%d.pt.trace.json" % rank)
    return doc


def horovod(terminated):
    """A rank-0 Horovod timeline: 2 tensors, 2 cycles, negotiation ticks of 2 ranks
    (rank 1 reports each tensor 100 µs after rank 0)."""
    ev = [{"name": "process_name", "ph": "M", "pid": 0, "args": {"start_time_since_epoch_in_micros": ABS0_US}}]
    tensors = [("DistributedSGD_Allreduce/fc1.weight", "[256, 1024]"), ("DistributedSGD_Allreduce/fc2.weight", "[10, 256]")]
    for i, (name, _) in enumerate(tensors):
        ev.append({"name": "process_name", "ph": "M", "pid": i + 1, "args": {"name": name}})
        ev.append({"name": "process_sort_index", "ph": "M", "pid": i + 1, "args": {"sort_index": i + 1}})
    for cyc in range(2):
        o = 1000 + cyc * 10000
        ev.append({"name": "CYCLE_START", "ph": "i", "ts": o, "s": "g"})
        for i, (name, shape) in enumerate(tensors):
            pid = i + 1
            t = o + i * 500
            ev.append({"name": "NEGOTIATE_ALLREDUCE", "ph": "B", "ts": t, "pid": pid})
            ev.append({"name": "0", "ph": "X", "ts": t + 10, "pid": pid, "dur": 0})
            ev.append({"name": "1", "ph": "X", "ts": t + 110, "pid": pid, "dur": 0})
            ev.append({"ph": "E", "ts": t + 120, "pid": pid})
            ev.append({"name": "ALLREDUCE", "ph": "B", "ts": t + 130, "pid": pid})
            ev.append({"name": "QUEUE", "ph": "B", "ts": t + 130, "pid": pid})
            ev.append({"ph": "E", "ts": t + 140, "pid": pid})
            ev.append({"name": "MEMCPY_IN_FUSION_BUFFER", "ph": "B", "ts": t + 140, "pid": pid})
            ev.append({"ph": "E", "ts": t + 160, "pid": pid})
            ev.append({"name": "NCCL_ALLREDUCE", "ph": "B", "ts": t + 160, "pid": pid})
            ev.append({"ph": "E", "ts": t + 160 + (300 if i == 0 else 40), "pid": pid})
            ev.append({"ph": "E", "ts": t + 480, "pid": pid, "args": {"dtype": "float32", "shape": shape}})
    text = "[\n" + "".join(json.dumps(e) + ",\n" for e in ev)
    if terminated:
        text = text[:-2] + "\n]\n"
    return text


def byteps():
    """BytePS comm.json (object form) for 2 gradients, 2 steps, and Espresso's tensor_ready.json."""
    ev = []
    for step in range(2):
        o = ABS0_US + step * 20000
        for g, (dur, parts) in enumerate([(3000, 2), (800, 1)]):
            name = "Comm.byteps.gradient_%d" % g
            t = o + g * 1000
            ev.append({"ph": "X", "args": {"name": name}, "pid": name, "name": name, "ts": t, "dur": dur, "tid": "total"})
            for p in range(parts):
                tt = t
                for q, qd in [("COORDINATE_REDUCE", 50), ("REDUCE", 200), ("COPYD2H", 100), ("PUSH", 600), ("PULL", 600),
                              ("COPYH2D", 100), ("BROADCAST", 200)]:
                    ev.append({"ph": "X", "args": {"name": name}, "pid": name, "name": name + "." + q, "ts": tt,
                               "dur": qd, "tid": str(26148864 + p)})
                    tt += qd
    ready = {"TensorReadyTraceEvents": [{"name": "gradient_%d" % g, "ts": ABS0_US + s * 20000 + g * 1000 - 50}
                                        for s in range(2) for g in range(2)]}
    return {"traceEvents": ev, "displayTimeUnit": "ms"}, ready


def write(path, text, gz=False):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    if gz:
        with gzip.GzipFile(path, "wb", mtime=0) as f:
            f.write(text.encode())
    else:
        with open(path, "w") as f:
            f.write(text)


def main():
    for v in ["2024", "2023", "2022", "rocm"]:
        for r in range(2):
            text = json.dumps(kineto(r, v), separators=(",", ":") if v == "2022" else (", ", ": "))
            write(os.path.join(OUT, "kineto-%s" % v, "rank%d.pt.trace.json%s" % (r, ".gz" if v == "rocm" else "")),
                  text, gz=v == "rocm")
    write(os.path.join(OUT, "horovod", "timeline.json"), horovod(True))
    write(os.path.join(OUT, "horovod-legacy", "timeline.json"), horovod(False))
    comm, ready = byteps()
    write(os.path.join(OUT, "byteps", "traces", "0", "comm.json"), json.dumps(comm))
    write(os.path.join(OUT, "byteps", "traces", "0", "tensor_ready.json"), json.dumps(ready))


if __name__ == "__main__":
    main()
