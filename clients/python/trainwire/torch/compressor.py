"""compressor_hook: DDP gradients compressed with error feedback by this rank's `compressor serve`.

    state, hook = compressor_hook(model, algo="topk", ratio=0.01, memory="residual")
    model.register_comm_hook(state, hook)

Each bucket travels like hashsync_hook's (shared memory, one `sync` request, a future completed
from the reply), but the sidecar compresses every gradient with its codec and error-feedback
memory, exchanges the compressed bytes by the collective (`collective`, or per tensor from a
`compressor plan` stream given as `plan`) and writes back the decoded average. Gradients are named
by their parameter names (`model`'s), so a plan made from a profile of the same model applies
tensor by tensor, and the error-feedback state stays with its parameter when DDP rebuilds its
buckets.

The error-feedback state lives in the sidecar, per tensor name. `save_every=N` has the sidecar
write it to `state_out` after every N-th step; state.state_dict() returns the last one written
(bytes of a trainwire state stream), so a Checkpointer saves it with the model
(`extra={"ef": state}`); a restarted job passes what it restored as compressor_hook(state_in=...)
(a path or those bytes) and resumes with the same residuals — pytorch#75666's problem (PowerSGD's
and the residual hooks' state is lost on restart) solved.
"""

import os
import tempfile

from trainwire.serve import DEFAULT_TIMEOUT

from . import HashsyncState, _sidecar, bucket_comm_hook

__all__ = ["compressor_hook", "CompressorState"]


class CompressorState(HashsyncState):
    """The hook's state: the sidecar, the parameters' names, where the EF state is saved."""

    def __init__(self, sidecar, names, average, own, state_out, save_every, tmpdir):
        super().__init__(sidecar, "compressor", average, own)
        self.names, self.state_out, self.save_every = names, state_out, save_every
        self.saved_step = None   # the step after which state_out was last written
        self._tmpdir = tmpdir

    def tensor_name(self, bucket, i):
        """The parameter's name when the hook knows the model, else bucket and index."""
        params = bucket.parameters() if hasattr(bucket, "parameters") else None
        if self.names and params is not None and i < len(params):
            name = self.names.get(id(params[i]))
            if name is not None:
                return name
        return super().tensor_name(bucket, i)

    def _opts(self, bucket):
        """save_state on the last bucket of every save_every-th step."""
        if self.save_every > 0 and bucket.is_last() and (self.step + 1) % self.save_every == 0:
            self.saved_step = self.step
            return {"save_state": True}
        return None

    def state_dict(self):
        """The error-feedback state last saved (None before the first save): a dict a
        Checkpointer stores."""
        if self.saved_step is None or not os.path.exists(self.state_out):
            return {"step": None, "ef": None}
        with open(self.state_out, "rb") as f:
            return {"step": self.saved_step, "ef": f.read()}

    def close(self):
        super().close()
        if self._tmpdir is not None:
            self._tmpdir.cleanup()
            self._tmpdir = None


def compressor_comm_hook(state, bucket):
    """DDP communication hook: the bucket's average over the ranks, compressed with error
    feedback through this rank's `compressor serve`."""
    return bucket_comm_hook(state, bucket, "compressor serve", state._opts(bucket))


def _param_names(model):
    if model is None:
        return {}
    net = getattr(model, "module", model)   # DDP wraps the module: plans name its parameters
    return {id(p): n for n, p in net.named_parameters()}


def _state_in(state_in, tmpdir):
    """A path for --state-in: state_in itself, or a file holding its bytes (a Checkpointer's
    restored {"ef": bytes} or the bytes)."""
    if isinstance(state_in, dict):
        state_in = state_in.get("ef")
    if state_in is None or isinstance(state_in, (str, os.PathLike)):
        return state_in
    path = os.path.join(tmpdir.name, "ef-in.tw")
    with open(path, "wb") as f:
        f.write(bytes(state_in))
    return path


def compressor_hook(model=None, algo="topk", ratio=None, memory="residual", collective="auto",
                    plan=None, state_in=None, state_out=None, save_every=0, sidecar=None,
                    socket=None, args=(), average=True, timeout=DEFAULT_TIMEOUT,
                    connect_timeout=DEFAULT_TIMEOUT, **start_kw):
    """(state, hook) for model.register_comm_hook(state, hook): every gradient compressed by
    `algo` (see `compressor list`; ratio: the sparsifiers' density) with error feedback `memory`
    (none, residual, dgc, efsignsgd, powersgd), exchanged by `collective` (auto, allgather, ring,
    partitioned, powersgd, dense, …) or as `plan` (a `compressor plan` or `fuser plan` stream)
    says, decoded and averaged over the ranks. model names the gradients (strongly advised: plans
    and the EF state are per parameter name). state_in/state_out/save_every: the EF state (module
    doc). args: more `compressor serve` flags. The sidecar is started (or attached to) as
    hashsync_hook's is."""
    tmpdir = tempfile.TemporaryDirectory(prefix="trainwire-ef-")
    flags = ["--algo", algo, "--memory", memory, "--collective", collective]
    if ratio is not None:
        flags += ["--ratio", repr(float(ratio))]
    if plan is not None:
        flags += ["--plan", os.fspath(plan)]
    path_in = _state_in(state_in, tmpdir)
    if path_in is not None:
        flags += ["--state-in", os.fspath(path_in)]
    if save_every > 0 and state_out is None:
        state_out = os.path.join(tmpdir.name, "ef-out.tw")
    if state_out is not None:
        flags += ["--state-out", os.fspath(state_out)]
    sidecar, own = _sidecar("compressor", flags + list(args), sidecar, socket, timeout,
                            connect_timeout, start_kw)
    state = CompressorState(sidecar, _param_names(model), average, own, state_out, save_every,
                            tmpdir)
    return state, compressor_comm_hook
