"""What the examples share: flags, the process group, how gradients are synced, the loop.

Every example runs under torchrun with CPU processes (gloo) and switches its gradient sync by
--sync:

  ddp          torch DDP, gloo's dense allreduce (the baseline)
  fp16         DDP with torch's own fp16_compress_hook
  powersgd     DDP with torch's own PowerSGD hook (rank --powersgd-rank, default 4)
  sparse       torch DDP with sparse embedding gradients (EmbeddingBag(sparse=True)); models
               without an embedding treat it as ddp
  hashsync     DDP with trainwire's hashsync_hook (--scheme, default zen): this rank's
               `hashsync serve` sidecar syncs each bucket
  compressor   DDP with trainwire's compressor_hook: this rank's `compressor serve` compresses
               every gradient with error feedback (--algo, --ratio, --memory, --collective, or
               --plan: a `compressor plan` stream, per parameter name)
  split        DDP with trainwire's split_hook: the embeddings' gradients by hashsync_hook's
               sidecar (--scheme), the other parameters' by compressor_hook's (--algo … or --plan)
  none         no communication at all: every rank trains alone (the compute-only floor that
               the communication share is measured against)

Rank 0 prints one JSON line per step to --metrics (or stdout with "-"): step, loss (the mean over
the ranks), seconds, samples; and a summary line at the end. With --profile DIR, torch.profiler
records steps 2..2+--profile-steps into traces in DIR (rank-<r>.json, with the parameter list
rank-<r>.meta.json beside), which `profiler summary` and `profiler model` read.

With --ckpt-every N the loop checkpoints model and optimizer to this rank's `ckpt agent` every N
steps (trainwire.torch.Checkpointer) and starts from the job's newest committed iteration, so a
job torchrun restarts (--max_restarts) resumes where its checkpoint was; --crash-rank/--crash-at
make one rank of the first attempt die by SIGKILL, to watch that happen.
"""

import argparse
import json
import os
import signal
import sys
import time

import torch
import torch.distributed as dist
from torch.autograd.profiler import record_function
from torch.nn.parallel import DistributedDataParallel as DDP

SYNCS = ("ddp", "fp16", "powersgd", "sparse", "hashsync", "compressor", "split", "none")


def parser(description):
    """The flags every example takes; each example adds its model's own."""
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--sync", choices=SYNCS, default=os.environ.get("TRAINWIRE_SYNC", "ddp"),
                   help="how gradients are synced (env TRAINWIRE_SYNC; default ddp)")
    p.add_argument("--scheme", default="zen", help="hashsync scheme for --sync hashsync")
    p.add_argument("--powersgd-rank", type=int, default=4, help="PowerSGD's rank")
    p.add_argument("--algo", default="topk", help="compressor codec for --sync compressor (topk)")
    p.add_argument("--ratio", type=float, default=0.01, help="sparsifiers' density (0.01)")
    p.add_argument("--memory", default="residual", help="compressor error feedback (residual)")
    p.add_argument("--collective", default="auto", help="compressor collective (auto)")
    p.add_argument("--plan", default=None, help="compressor plan stream for --sync compressor")
    p.add_argument("--steps", type=int, default=50, help="training steps (default 50)")
    p.add_argument("--warmup", type=int, default=3,
                   help="steps left out of the samples/s figure (default 3)")
    p.add_argument("--seed", type=int, default=0, help="model and data seed")
    p.add_argument("--lr", type=float, default=None, help="learning rate (the model's default)")
    p.add_argument("--metrics", default=None,
                   help="rank 0 writes one JSON line per step here ('-': stdout)")
    p.add_argument("--profile", default=None, metavar="DIR",
                   help="write torch.profiler traces of a few steps to DIR")
    p.add_argument("--profile-steps", type=int, default=3, help="steps profiled (default 3)")
    p.add_argument("--bucket-mb", type=float, default=25, help="DDP bucket cap in MB")
    p.add_argument("--threads", type=int, default=1, help="torch threads per rank (default 1)")
    p.add_argument("--ckpt-every", type=int, default=int(os.environ.get("TRAINWIRE_CKPT_EVERY", 0)),
                   help="checkpoint to this rank's ckpt agent ($TRAINWIRE_CKPT_SOCKET) every N steps "
                        "and resume from its committed iteration at start (env TRAINWIRE_CKPT_EVERY)")
    p.add_argument("--crash-rank", type=int, default=-1,
                   help="for demos: this rank kills itself with SIGKILL in the first attempt...")
    p.add_argument("--crash-at", type=int, default=-1, help="...after finishing this step")
    return p


def init(args):
    """Joins torch.distributed (gloo) and returns (rank, world)."""
    torch.set_num_threads(args.threads)
    if "RANK" not in os.environ:
        sys.exit("run me under torchrun, e.g. torchrun --nproc_per_node 4 %s" % sys.argv[0])
    dist.init_process_group("gloo")
    return dist.get_rank(), dist.get_world_size()


def finish():
    """Ends a rank whose training succeeded: a barrier, so that every rank is done with its
    gloo connections, then the process leaves at once (os._exit(0), standard streams flushed)
    without torch's C++ teardown. Debian's torch 1.13 has two races there at the end of a DDP
    run: a rank can abort at interpreter exit ("terminate called without an active exception",
    SIGABRT: `make demo`'s profiling stage, 2026-11-28), and destroying the process group from the
    garbage collector can deadlock, ~ProcessGroupGloo joining a worker thread that waits for the
    GIL to free a tensor while the joining thread holds it (`make test-demo` hung in its DDP stage,
    2026-11-28; gdb showed both threads). Everything this process writes is flushed by then:
    metrics lines as they are written, sidecars and checkpoints closed by the caller."""
    if dist.is_initialized():
        dist.barrier()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


class Sync:
    """The model wrapped for --sync, and whatever must be closed at the end."""

    def __init__(self, args, net):
        self.args, self.state = args, None
        if args.sync == "none":
            self.model = net
            return
        self.model = DDP(net, bucket_cap_mb=args.bucket_mb)
        if args.sync == "fp16":
            from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
            self.model.register_comm_hook(None, default_hooks.fp16_compress_hook)
        elif args.sync == "powersgd":
            from torch.distributed.algorithms.ddp_comm_hooks import powerSGD_hook as ps
            self.state = ps.PowerSGDState(process_group=None, matrix_approximation_rank=args.powersgd_rank,
                                          start_powerSGD_iter=2, random_seed=args.seed)
            self.model.register_comm_hook(self.state, ps.powerSGD_hook)
            self.state = None   # nothing to close
        elif args.sync == "hashsync":
            from trainwire.torch import hashsync_hook
            self.state, hook = hashsync_hook(scheme=args.scheme)
            self.model.register_comm_hook(self.state, hook)
        elif args.sync == "split":
            from trainwire.torch import split_hook
            self.state, hook = split_hook(self.model, scheme=args.scheme, compressor=dict(
                algo=args.algo, ratio=args.ratio, memory=args.memory, collective=args.collective,
                plan=args.plan))
            self.model.register_comm_hook(self.state, hook)
        elif args.sync == "compressor":
            from trainwire.torch import compressor_hook
            self.state, hook = compressor_hook(self.model, algo=args.algo, ratio=args.ratio,
                                               memory=args.memory, collective=args.collective,
                                               plan=args.plan)
            self.model.register_comm_hook(self.state, hook)

    def close(self):
        if self.state is not None:
            self.state.close()


def attempt():
    """Which attempt of the job this is: 0, then 1, … after torchrun restarted it."""
    return int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0") or 0)


class Metrics:
    """Rank 0's per-step JSON lines and the summary. A restarted attempt appends: its steps
    follow an event line saying what it resumed from."""

    def __init__(self, args, rank, world, name):
        self.args, self.rank, self.world, self.name = args, rank, world, name
        self.out = None
        if rank == 0 and args.metrics:
            self.out = sys.stdout if args.metrics == "-" else open(args.metrics, "a" if attempt() else "w")
        self.timed, self.samples, self.losses = 0.0, 0, []

    def event(self, **kw):
        """One line that is not a step (a restore)."""
        if self.out:
            self.out.write(json.dumps(dict(kw, event=True)) + "\n")
            self.out.flush()

    def step(self, step, loss, seconds, samples):
        """Records one step: loss is this rank's; the mean over ranks is logged."""
        t = torch.tensor([loss], dtype=torch.float64)
        dist.all_reduce(t)
        mean = t.item() / self.world
        self.losses.append(mean)
        if step >= self.args.warmup:
            self.timed += seconds
            self.samples += samples * self.world
        if self.out:
            self.out.write(json.dumps({"step": step, "loss": mean, "seconds": round(seconds, 6),
                                       "samples": samples * self.world}) + "\n")
            self.out.flush()

    def summary(self, extra=None):
        s = {"summary": True, "example": self.name, "sync": self.args.sync, "world": self.world,
             "steps": len(self.losses), "final_loss": self.losses[-1] if self.losses else None,
             "samples_per_s": self.samples / self.timed if self.timed else None}
        s.update(extra or {})
        if self.rank == 0:
            if self.out:
                self.out.write(json.dumps(s) + "\n")
                self.out.flush()
            rate = "%.1f samples/s" % s["samples_per_s"] if s["samples_per_s"] else \
                "no samples/s (all %d steps were warm-up)" % s["steps"]
            print("%s --sync %s: %d steps, loss %.5f, %s" % (
                self.name, self.args.sync, s["steps"], s["final_loss"] or float("nan"), rate),
                file=sys.stderr)
        return s


def profiler(args, rank, net):
    """A torch.profiler recording a few steps into args.profile (DIR/rank-<r>.json), or None.

    Debian's torch writes the legacy trace format, which carries no tensor sizes: beside each
    trace goes DIR/rank-<r>.meta.json with the parameters in registration order and DDP's
    buckets, which `profiler model` reads by itself."""
    if not args.profile:
        return None
    from torch.profiler import ProfilerActivity, profile, schedule

    os.makedirs(args.profile, exist_ok=True)

    def save(p):
        # gloo's worker thread closes its last all_reduce scope just after backward returns
        time.sleep(0.5)
        p.export_chrome_trace(os.path.join(args.profile, "rank-%d.json" % rank))
        with open(os.path.join(args.profile, "rank-%d.meta.json" % rank), "w") as f:
            json.dump(meta(args, net), f, indent=1)
    return profile(activities=[ProfilerActivity.CPU], record_shapes=True,
                   schedule=schedule(wait=1, warmup=1, active=args.profile_steps, repeat=1),
                   on_trace_ready=save)


def meta(args, net):
    """The parameters (registration order) and DDP's buckets (reduction order, as DDP's
    reducer assigns them: reverse registration order, first bucket 1 MiB)."""
    named = [(n, p) for n, p in net.named_parameters() if p.requires_grad]
    rev = list(reversed(named))
    cap = int(args.bucket_mb * 1024 * 1024)
    idx, _ = dist._compute_bucket_assignment_by_size(
        [p.detach() for _, p in rev], [dist._DEFAULT_FIRST_BUCKET_BYTES, cap], [False] * len(rev))
    return {"rank": dist.get_rank(), "world_size": dist.get_world_size(), "backend": "gloo",
            "params": [{"name": n, "numel": p.numel(), "dtype": "f32"} for n, p in named],
            "bucket_cap_mb": args.bucket_mb,
            "buckets": [{"params": [rev[i][0] for i in b],
                         "bytes": sum(rev[i][1].numel() * 4 for i in b)} for b in idx]}


def checkpointer(args, net, opt, metrics):
    """(Checkpointer, first step): with --ckpt-every, the state restored from this rank's ckpt
    agent (the job's newest committed iteration; 0 on a fresh job)."""
    if args.ckpt_every <= 0:
        return None, 0
    from trainwire.torch import Checkpointer
    ck = Checkpointer(net, opt, every=args.ckpt_every)
    t0 = time.perf_counter()
    start = ck.restore()
    if attempt() or start:
        it, source = ck.restored if ck.restored else (start, None)
        metrics.event(restored=int(it), source=source, attempt=attempt(),
                      restore_s=round(time.perf_counter() - t0, 6))
        print("rank %d: attempt %d resumes from iteration %d (%s) in %.3f s" % (
            dist.get_rank(), attempt(), start, source, time.perf_counter() - t0), file=sys.stderr)
    return ck, start


def crash(args, step):
    """--crash-rank/--crash-at: the first attempt of that rank dies as a killed process would."""
    if dist.get_rank() == args.crash_rank and step == args.crash_at and attempt() == 0:
        print("rank %d: crashing on purpose after step %d (SIGKILL)" % (args.crash_rank, step),
              file=sys.stderr, flush=True)
        os.kill(os.getpid(), signal.SIGKILL)


def train(args, name, net, model, opt, batch, loss_fn, samples):
    """The loop: batch(step) gives this rank's inputs, loss_fn(model, inputs) the loss; net is
    the unwrapped model (its parameters name the profile's gradients and the checkpoint's
    state)."""
    rank, world = dist.get_rank(), dist.get_world_size()
    metrics = Metrics(args, rank, world, name)
    ck, start = checkpointer(args, net, opt, metrics)
    prof = profiler(args, rank, net)
    if prof:
        prof.start()
    try:
        for step in range(start, args.steps):
            inputs = batch(step)
            t0 = time.perf_counter()
            opt.zero_grad(set_to_none=True)
            with record_function("## forward ##"):
                loss = loss_fn(model, inputs)
            with record_function("## backward ##"):
                loss.backward()
            with record_function("Optimizer.step"):
                opt.step()
            dt = time.perf_counter() - t0
            if prof:
                prof.step()
            metrics.step(step, loss.item(), dt, samples)
            if ck:
                ck.step(step + 1)
            crash(args, step)
    finally:
        if prof:
            prof.stop()
    return metrics
