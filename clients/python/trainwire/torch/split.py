"""split_hook: each parameter's gradient to the sidecar made for it — row-sparse embeddings to
`hashsync serve` (Zen), dense layers to `compressor serve` (codec, error feedback, plan).

    state, hook = split_hook(model, sparse=["emb.weight"], scheme="zen",
                             compressor=dict(algo="topk", ratio=0.01, plan="compression.tw"))
    model.register_comm_hook(state, hook)

A recommender's gradient is both: a huge embedding table whose step touches a few rows, and
dense layers. DDP takes one hook, so this one splits every bucket by parameter: the gradients of
the parameters named in `sparse` (default: every nn.Embedding/EmbeddingBag weight) go in one
request to this rank's `hashsync serve`, the others in one request to its `compressor serve`, both
at once; the bucket's future completes when both replies are in. Both sidecars join their own mesh
(hashsync on MASTER_PORT+1, compressor on MASTER_PORT+2). The result is the average over the ranks
of each gradient as its sidecar computes it: Zen's exact sum for the sparse ones, the decoded
compressed sum for the dense ones.
"""

import threading

import torch

from trainwire.serve import DEFAULT_TIMEOUT, SidecarError

from . import _buffer, _checked, _failed, _gradients, hashsync_hook, torch_env
from .compressor import compressor_hook

__all__ = ["split_hook", "SplitState"]


def embedding_params(model):
    """The names of the weights of model's nn.Embedding and nn.EmbeddingBag modules."""
    net = getattr(model, "module", model)
    return [name + ".weight" if name else "weight" for name, m in net.named_modules()
            if isinstance(m, (torch.nn.Embedding, torch.nn.EmbeddingBag))]


class SplitState:
    """Both hooks' states (sparse: HashsyncState, dense: CompressorState) and which parameter
    goes where."""

    def __init__(self, sparse_state, dense_state, names, sparse):
        self.sparse, self.dense = sparse_state, dense_state
        self.names, self.sparse_names = names, set(sparse)
        self.step, self.requests = 0, 0
        self.rank = sparse_state.rank

    def close(self):
        """Stops both sidecars."""
        try:
            self.sparse.close()
        finally:
            self.dense.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False


def _send(st, bucket, flat, base, picks, step, tool, opts=None):
    """Copies the bucket into st's shared memory and syncs the gradients picked: (future,
    region, [(offset, numel)] to copy back)."""
    region = st._region(bucket.index(), flat.numel() * 4)
    region.view.copy_(flat)
    tensors, spans = [], []
    for name, g in picks:
        off = g.data_ptr() - base
        tensors.append(region.seg.tensor(name, region.off + off, list(g.shape)))
        spans.append((off // 4, g.numel()))
    st.requests += 1
    return st.client.sync(step, tensors, average=st.average, opts=opts), region, spans


def split_comm_hook(state, bucket):
    """DDP communication hook: the bucket's sparse gradients through hashsync serve, the others
    through compressor serve, averaged over the ranks."""
    buf = _buffer(bucket)
    step = state.step
    if bucket.is_last():
        state.step += 1
    if buf.dtype != torch.float32 or buf.device.type != "cpu":
        return _failed(SidecarError("trainwire: split hook of rank %d: bucket %d is %s on %s"
                                    % (state.rank, bucket.index(), buf.dtype, buf.device),
                                    "hashsync serve", state.rank, "bad_request"))
    flat, base = buf.view(-1), buf.data_ptr()
    params = bucket.parameters()
    sparse, dense = [], []
    for i, g in enumerate(_gradients(bucket)):
        if g.numel() == 0:
            continue
        if not g.is_contiguous() or g.data_ptr() < base:
            return _failed(SidecarError("trainwire: split hook of rank %d: bucket %d's gradients "
                                        "are not views of it" % (state.rank, bucket.index()),
                                        "hashsync serve", state.rank, "bad_request"))
        name = state.names.get(id(params[i]), "b%d.%d" % (bucket.index(), i))
        (sparse if name in state.sparse_names else dense).append((name, g))
    sends = []
    try:
        if sparse:
            sends.append(_send(state.sparse, bucket, flat, base, sparse, step, "hashsync serve"))
        if dense:
            opts = state.dense._opts(bucket)
            sends.append(_send(state.dense, bucket, flat, base, dense, step, "compressor serve", opts))
    except SidecarError as e:
        return _failed(e)
    state.requests += 1
    fut = torch.futures.Future()
    left = [len(sends)]
    lock = threading.Lock()

    def done(cf, region, spans):
        try:
            cf.result()
            for off, n in spans:
                flat[off:off + n].copy_(region.view[off:off + n])
        except BaseException as e:  # noqa: B902 - must complete the future, never hang DDP
            with lock:
                if not fut.done():
                    fut.set_exception(e)
            return
        with lock:
            left[0] -= 1
            if left[0] == 0 and not fut.done():
                fut.set_result(buf)
    for cf, region, spans in sends:
        cf.add_done_callback(lambda cf, region=region, spans=spans: done(cf, region, spans))
    return _checked(fut)


def split_hook(model, sparse=None, scheme="zen", compressor=None, average=True,
               timeout=DEFAULT_TIMEOUT, connect_timeout=DEFAULT_TIMEOUT):
    """(state, hook) for model.register_comm_hook(state, hook): the gradients of the parameters
    named in `sparse` (default: every embedding weight) through hashsync_hook's sidecar (`scheme`),
    the others through compressor_hook's (`compressor`: its keyword arguments, e.g. algo, ratio,
    memory, plan). model is the DDP model (its module's parameter names are the tensors' names)."""
    sparse = list(sparse) if sparse is not None else embedding_params(model)
    net = getattr(model, "module", model)
    names = {id(p): n for n, p in net.named_parameters()}
    unknown = [n for n in sparse if n not in set(names.values())]
    if unknown:
        raise ValueError("trainwire: split_hook: %s: not parameters of the model" % ", ".join(unknown))
    _, _, master = torch_env()
    sparse_state, _ = hashsync_hook(scheme=scheme, average=average, timeout=timeout,
                                    connect_timeout=connect_timeout)
    try:
        kw = dict(compressor or {})
        if master and "master" not in kw:
            host, port = master.rsplit(":", 1)
            kw["master"] = "%s:%d" % (host, int(port) + 1)   # hashsync's mesh has MASTER_PORT+1
        dense_state, _ = compressor_hook(model, average=average, timeout=timeout,
                                         connect_timeout=connect_timeout, **kw)
    except BaseException:
        sparse_state.close()
        raise
    return SplitState(sparse_state, dense_state, names, sparse), split_comm_hook

