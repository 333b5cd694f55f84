"""trainwire in a PyTorch training job: this rank's sidecar and DDP communication hooks.

    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP
    from trainwire.torch import hashsync_hook

    dist.init_process_group("gloo")                 # DDP still needs a process group
    model = DDP(net)
    state, hook = hashsync_hook(scheme="zen")       # starts this rank's `hashsync serve`
    model.register_comm_hook(state, hook)
    ...                                             # train; state.close() (or exit) stops it

The hook copies each gradient bucket into a memfd segment shared with the sidecar, sends one
`sync` request naming every parameter's gradient in it (offset, shape) and returns a
torch.futures.Future at once; a reader thread completes it when the sidecar's reply comes, so
DDP keeps overlapping backward with communication. The result is the sum over the ranks divided
by the world size (the average, as DDP's default allreduce gives). A dead or silent sidecar, or a
failed peer, fails the future with a SidecarError naming the tool and the ranks: loss.backward()
raises instead of hanging.

Works with torch 1.13 (GradBucket.buffer()/gradients()) and older/newer spellings
(get_tensor()/get_per_parameter_tensors()).
"""

import os
import threading

import torch  # absolute import: this module is trainwire.torch, this is the real torch

from trainwire.serve import DEFAULT_TIMEOUT, Sidecar, SidecarError

__all__ = ["hashsync_hook", "HashsyncState", "start_sidecar", "attach_sidecar", "SidecarError",
           "torch_env"]

_SEGMENT_MIN = 64 << 20      # the first segment: address space only until pages are touched


def torch_env(env=None):
    """(rank, world, master) of torch.distributed's environment: RANK, WORLD_SIZE and
    MASTER_ADDR:MASTER_PORT+1 (the port above torch's own store, as docs/launch.md says;
    TRAINWIRE_MASTER_PORT sets it exactly). Missing variables give None."""
    env = os.environ if env is None else env

    def num(k):
        v = env.get(k)
        return int(v) if v not in (None, "") else None
    rank, world = num("RANK"), num("WORLD_SIZE")
    port = num("TRAINWIRE_MASTER_PORT")
    if port is None and num("MASTER_PORT") is not None:
        port = num("MASTER_PORT") + 1
    addr = env.get("TRAINWIRE_MASTER_ADDR") or env.get("MASTER_ADDR")
    master = "%s:%d" % (addr, port) if addr and port is not None else None
    return rank, world, master


def start_sidecar(tool="hashsync", args=(), timeout=DEFAULT_TIMEOUT, connect_timeout=DEFAULT_TIMEOUT,
                  explicit=None, **kw):
    """Starts this rank's `TOOL serve ARGS` and waits until it has joined the mesh.

    Under a launcher the tool finds rank, world and master itself (torchrun, mpirun, Slurm,
    Kubeflow: docs/launch.md). explicit=True passes torch.distributed's RANK, WORLD_SIZE and
    MASTER_ADDR:MASTER_PORT+1 as --rank/--world/--master instead (the default when torch's
    variables are set but no launcher's LOCAL_RANK is, e.g. a script that exports them itself)."""
    rank, world, master = torch_env()
    if explicit is None:
        explicit = rank is not None and world is not None and "LOCAL_RANK" not in os.environ
    if explicit and rank is not None and world is not None:
        kw.setdefault("rank", rank)
        kw.setdefault("world", world)
        if master:
            kw.setdefault("master", master)
    return Sidecar.start(tool, args, timeout=timeout, connect_timeout=connect_timeout, **kw)


def attach_sidecar(socket_path, tool="hashsync serve", timeout=DEFAULT_TIMEOUT,
                   connect_timeout=DEFAULT_TIMEOUT):
    """Connects to this rank's sidecar that a launcher script started ({rank}, {local_rank} in
    the path are replaced)."""
    return Sidecar.attach(socket_path, tool, timeout=timeout, connect_timeout=connect_timeout)


def _buffer(bucket):
    return bucket.buffer() if hasattr(bucket, "buffer") else bucket.get_tensor()


def _gradients(bucket):
    if hasattr(bucket, "gradients"):
        return bucket.gradients()
    if hasattr(bucket, "get_per_parameter_tensors"):
        return bucket.get_per_parameter_tensors()
    return [_buffer(bucket)]


class _Region:
    __slots__ = ("seg", "off", "nbytes", "view")

    def __init__(self, seg, off, nbytes):
        self.seg, self.off, self.nbytes = seg, off, nbytes
        self.view = torch.from_numpy(seg.array(off, nbytes // 4))  # float32, shared memory


class _HookState:
    """What every hook's state shares: its sidecar, stopped (or disconnected from) by close()."""

    sidecar, _own = None, False

    def close(self):
        """Stops the sidecar this state started (or disconnects from an attached one)."""
        if self._own:
            self.sidecar.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False


class HashsyncState(_HookState):
    """The hook's state: the sidecar, the step counter, each bucket's range of shared memory.

    Every rank's DDP issues the same buckets in the same order (its reducer launches them in
    index order), so every rank's sidecar sees the same sequence of `sync` requests; `step` is
    the number of completed iterations (it advances after the last bucket)."""

    def __init__(self, sidecar, scheme="dense", average=True, own=True):
        self.sidecar, self.scheme, self.average, self._own = sidecar, scheme, average, own
        self.client = sidecar.client
        self.rank = sidecar.rank
        self.step = 0
        self.requests = 0
        self._regions = {}     # bucket index -> _Region
        self._lock = threading.Lock()

    def _region(self, index, nbytes):
        r = self._regions.get(index)
        if r is not None and r.nbytes == nbytes:
            return r
        with self._lock:   # DDP rebuilt its buckets (after iteration 0), or a first call
            for seg in self.client._segments:
                off = seg.alloc(nbytes)
                if off is not None:
                    break
            else:
                used = sum(s.size for s in self.client._segments)
                seg = self.client.segment(max(_SEGMENT_MIN, 2 * used, nbytes + 4096),
                                          "trainwire-ddp")
                off = seg.alloc(nbytes)
            r = _Region(seg, off, nbytes)
            self._regions[index] = r
            return r

    def tensor_name(self, bucket, i):
        """The name of gradient i of a bucket in the sync request."""
        return "b%d.%d" % (bucket.index(), i)

    def close(self):
        self._regions = {}
        super().close()


def _wait(fut):
    return fut.wait()


def _checked(fut):
    """A future that DDP's reducer sees failing: torch's Future.set_exception stores the
    exception as the value (only Python's wait() raises it; the C++ reducer would fail to cast it
    to a Tensor), so the hook hands DDP a then() of it, which wait() marks with the error."""
    return fut.then(_wait)


def _failed(exc):
    fut = torch.futures.Future()
    fut.set_exception(exc)
    return _checked(fut)


def hashsync_comm_hook(state, bucket):
    """DDP communication hook (register with model.register_comm_hook(state, hook)): the
    bucket's average over the ranks through this rank's `hashsync serve`."""
    return bucket_comm_hook(state, bucket, "hashsync serve")


def bucket_comm_hook(state, bucket, tool, opts=None):
    """The body of the bucket hooks (hashsync, compressor): the bucket copied into shared
    memory, one `sync` request naming each parameter's gradient in it (state.tensor_name(index,
    i, grad); the whole bucket as one tensor when its gradients are not views of it), the future
    completed with the sidecar's result copied back."""
    buf = _buffer(bucket)
    index = bucket.index()
    step = state.step
    if bucket.is_last():
        state.step += 1
    if buf.dtype != torch.float32 or buf.device.type != "cpu":
        return _failed(SidecarError(
            "trainwire: %s hook of rank %d: bucket %d is %s on %s; the sidecar syncs float32 CPU "
            "tensors" % (tool.split()[0], state.rank, index, buf.dtype, buf.device), tool,
            state.rank, "bad_request"))
    flat = buf.view(-1)
    try:
        region = state._region(index, flat.numel() * 4)
    except SidecarError as e:
        return _failed(e)
    region.view.copy_(flat)
    base = buf.data_ptr()
    tensors = []
    for i, g in enumerate(_gradients(bucket)):
        if g.numel() == 0:
            continue
        off = g.data_ptr() - base
        if off < 0 or off + g.numel() * 4 > region.nbytes or not g.is_contiguous():
            # not a view of the bucket: sync the bucket as one flat tensor
            tensors = [region.seg.tensor("b%d" % index, region.off, [flat.numel()])]
            break
        tensors.append(region.seg.tensor(state.tensor_name(bucket, i), region.off + off,
                                         list(g.shape)))
    fut = torch.futures.Future()
    state.requests += 1
    cf = state.client.sync(step, tensors, average=state.average, opts=opts)

    def done(cf):
        try:
            cf.result()
            flat.copy_(region.view)
            fut.set_result(buf)
        except SidecarError as e:
            fut.set_exception(SidecarError(
                "%s (DDP bucket %d, step %d)" % (e, index, step), e.tool, e.rank, e.code,
                e.culprit, e.field, e.reply))
        except BaseException as e:  # noqa: B902 - must complete the future, never hang DDP
            fut.set_exception(e)
    cf.add_done_callback(done)
    return _checked(fut)


def hashsync_hook(scheme="dense", sidecar=None, socket=None, args=(), average=True,
                  timeout=DEFAULT_TIMEOUT, connect_timeout=DEFAULT_TIMEOUT, **start_kw):
    """(state, hook) for model.register_comm_hook(state, hook): gradients summed by hashsync's
    scheme (dense: the ring allreduce; zen, auto or any baseline: row-sparse, each parameter's
    gradient cut into rows of its last dimension), divided by the world size when average.

    The sidecar: `sidecar` (a trainwire.serve.Sidecar), else the one at `socket` or at
    $TRAINWIRE_SERVE_SOCKET (started by a launcher script), else this rank's `hashsync serve
    --scheme SCHEME ARGS`, started now (binary from $TRAINWIRE_BIN or PATH) and stopped by
    state.close() or at exit. `timeout`: seconds without a reply before a request fails."""
    sidecar, own = _sidecar("hashsync", ["--scheme", scheme] + list(args), sidecar, socket, timeout,
                            connect_timeout, start_kw)
    return HashsyncState(sidecar, scheme, average, own), hashsync_comm_hook


def _sidecar(tool, args, sidecar, socket, timeout, connect_timeout, start_kw):
    """(sidecar, own): the one given, else the one at socket or $TRAINWIRE_SERVE_SOCKET (a
    launcher script's), else this rank's `TOOL serve ARGS` started now (own: stopped by close)."""
    if sidecar is not None:
        return sidecar, False
    socket = socket or os.environ.get("TRAINWIRE_SERVE_SOCKET")
    if socket:
        return attach_sidecar(socket, tool + " serve", timeout=timeout,
                              connect_timeout=connect_timeout), True
    return start_sidecar(tool, args, timeout=timeout, connect_timeout=connect_timeout,
                         **start_kw), True



from .straggle import StraggleState, straggle_hook  # noqa: E402 - builds on the helpers above

__all__ += ["straggle_hook", "StraggleState"]

from .checkpoint import CheckpointError, Checkpointer  # noqa: E402

__all__ += ["Checkpointer", "CheckpointError"]

from .gradsync import GradSync, fusion_groups  # noqa: E402

__all__ += ["GradSync", "fusion_groups"]

from .compressor import CompressorState, compressor_hook  # noqa: E402

__all__ += ["compressor_hook", "CompressorState"]

from .split import SplitState, split_hook  # noqa: E402

__all__ += ["split_hook", "SplitState"]
