"""straggle_hook: a DDP communication hook on this rank's `straggle serve` (RNA, docs/straggle.md).

A step's gradient goes to the sidecar whole: the hook copies each DDP bucket's gradients into
one shared-memory vector laid out in the model's parameter order (so DDP's rebuilding of its
buckets after the first iteration changes nothing the sidecar sees) and, at the step's last
bucket, sends one `sync` request naming every parameter. The reply completes every bucket's
future of the step. What a step applies is in straggle_hook's docstring and docs/python.md.
"""

import torch

from trainwire.serve import DEFAULT_TIMEOUT, SidecarError

from . import _HookState, _buffer, _checked, _failed, _gradients, _sidecar

__all__ = ["straggle_hook", "StraggleState", "MODES"]

MODES = ("rna", "groups", "allreduce")   # what `straggle serve` runs
_SYNC_ONLY = ("rna-h",)                   # `straggle sync`'s alone (docs/straggle.md, "serve")


class StraggleState(_HookState):
    """The hook's state: the sidecar, the model's parameters laid out in one shared-memory
    vector, the round of the last reply applied (the next request's step), and every reply's
    figures in `replies` (dicts: round, rounds, contributors, contributed). close() ends this
    rank's input: its sidecar joins the remaining rounds with null gradients, then exits."""

    def __init__(self, sidecar, params, mode, scale, world, own):
        self.sidecar, self.mode, self.scale, self.world, self._own = sidecar, mode, scale, world, own
        self.client = sidecar.client
        self.rank = sidecar.rank
        self.tool = self.client.tool
        self._where = {}     # parameter data_ptr -> (index, element offset, numel)
        self.names, self.shapes = [], []
        off = 0
        for i, p in enumerate(params):
            self._where[p.data_ptr()] = (i, off, p.numel())
            self.names.append("p%d" % i)
            self.shapes.append(list(p.shape))
            off += p.numel()
        self.dim = off
        self.seg = self.client.segment(max(4096, 4 * self.dim), "trainwire-straggle")
        self.vec = torch.from_numpy(self.seg.array(0, self.dim))   # float32, shared with the sidecar
        self._tensors = self._layout()
        self.round = 0        # the round of the last reply applied: this step's gradient's version
        self.steps = 0        # requests sent (one per step)
        self.replies = []
        self._step = []       # this step's buckets: (future, buffer, [(buffer off, vec off, numel)])
        self._refused = None  # the refusal of an earlier bucket of this step

    @staticmethod
    def _numel(shape):
        n = 1
        for d in shape:
            n *= d
        return n

    def _layout(self):
        out, off = [], 0
        for n, shape in zip(self.names, self.shapes):
            out.append(self.seg.tensor(n, 4 * off, shape))
            off += self._numel(shape)
        return out


def _fail_step(state, exc):
    step, state._step = state._step, []
    for fut, _, _ in step:
        fut.set_exception(exc)


def straggle_comm_hook(state, bucket):
    """DDP communication hook (model.register_comm_hook(state, hook)) through `straggle serve`."""
    buf = _buffer(bucket)
    fut = torch.futures.Future()

    def refuse(what):
        exc = SidecarError("trainwire: straggle hook of rank %d: DDP bucket %d %s"
                           % (state.rank, bucket.index(), what), state.tool, state.rank, "bad_request")
        _fail_step(state, exc)
        state._refused = None if bucket.is_last() else exc   # the step's later buckets fail too
        return _failed(exc)
    if state._refused is not None:   # an earlier bucket of this step was refused: nothing is sent
        return refuse("belongs to a step whose earlier bucket was refused (%s)" % state._refused)
    if buf.dtype != torch.float32 or buf.device.type != "cpu":
        return refuse("is %s on %s; straggle serve averages float32 CPU tensors"
                      % (buf.dtype, buf.device))
    flat = buf.view(-1)
    where, pos = [], 0
    for p, g in zip(bucket.parameters(), _gradients(bucket)):
        ent = state._where.get(p.data_ptr())
        if ent is None or ent[2] != g.numel():
            return refuse("holds a parameter of %d elements that is not among the model's given "
                          "to straggle_hook" % g.numel())
        _, off, n = ent
        state.vec[off:off + n].copy_(flat[pos:pos + n])
        where.append((pos, off, n))
        pos += n
    state._step.append((fut, flat, where))
    if bucket.is_last():
        _send(state)
    return _checked(fut)


def _send(state):
    step, state._step = state._step, []
    version, n = state.round, state.steps
    state.steps += 1
    cf = state.client.sync(version, state._tensors)

    def done(cf):
        try:
            rep = cf.result()
            info = dict(rep.get("info") or {})
            state.replies.append(info)
            state.round = max(state.round, int(info.get("round", 0)))
            k = 1.0
            if state.scale == "world":
                k = float(info.get("contributors", 0)) / state.world
            for fut, flat, where in step:
                for pos, off, cnt in where:
                    torch.mul(state.vec[off:off + cnt], k, out=flat[pos:pos + cnt])
            for fut, flat, _ in step:
                fut.set_result(flat)
        except SidecarError as e:
            err = SidecarError("%s (straggle hook, DDP step %d)" % (e, n), e.tool, e.rank, e.code,
                               e.culprit, e.field, e.reply)
            for fut, _, _ in step:
                fut.set_exception(err)
        except BaseException as e:  # noqa: B902 - must complete the futures, never hang DDP
            for fut, _, _ in step:
                fut.set_exception(e)
    cf.add_done_callback(done)


def straggle_hook(model, mode="rna", scale="world", rounds=None, group_size=2, sidecar=None,
                  socket=None, args=(), world=None, timeout=DEFAULT_TIMEOUT,
                  connect_timeout=DEFAULT_TIMEOUT, **start_kw):
    """(state, hook) for model.register_comm_hook(state, hook): straggler-tolerant steps on
    this rank's `straggle serve --mode MODE --dim D ARGS` (D: the model's trainable elements).

    mode "rna": RNA, non-blocking. Each step hands this rank's gradient to the sidecar and gets
    back the rounds RNA ran since the previous reply: R = (Σ over those rounds of the sum of
    the gradients in them) / C, C = the number of gradients summed (`contributors`). Ranks
    that had no gradient ready when a round ran are left out of it (not counted as zeros),
    so a slow rank holds nobody back; its gradient lands in a later round, and gradients are
    never lost nor counted twice. With scale="world" (the default) the gradient DDP gets is
    R·C/world = (Σ of the gradients in the rounds)/world: what DDP's average gives when every
    rank is in the one round, and a proportionally smaller step when fewer are (RNA's rule:
    the learning rate scaled by the contributor count). scale="contributors" gives R itself,
    the average over whoever contributed. Replicas stay identical while every reply holds one
    round; a reply that folds several rounds (this rank's trainer was slower than the rounds)
    agrees with the other ranks' only up to float rounding.
    mode "groups": the Prague-style baseline: each step is one round in which the ranks are cut
    into random groups of `group_size` (from the seed, the same on every rank) and each rank gets
    its group's sum (scale "world": divided by world; "contributors": the group's average).
    Replicas in different groups drift apart, and a slow rank holds back its group. Needs
    `rounds`: every rank makes exactly that many steps (one more fails: the run is over).
    mode "allreduce": blocking, every rank in every round (the baseline).
    "rna-h" is `straggle sync`'s only (its parameter server exchanges the groups' models, which
    the sidecar does not hold) and is refused here.

    `model`: the DDP module (or its module); its trainable parameters, in order, fix the
    layout. `world`: the ranks (default torch.distributed's). The sidecar as in hashsync_hook
    (`sidecar`, `socket`, $TRAINWIRE_SERVE_SOCKET, else started now); `args` are more flags
    (e.g. ["--eta", "2"]); injection flags and TRAINWIRE_STRAGGLE_* in the environment apply."""
    if mode in _SYNC_ONLY:
        raise ValueError("trainwire: straggle_hook: mode %r runs in `straggle sync` only (its "
                         "parameter server exchanges the groups' models, which a sidecar does not "
                         "hold); straggle serve runs %s" % (mode, ", ".join(MODES)))
    if (mode == "groups") != (rounds is not None):
        raise ValueError("trainwire: straggle_hook: rounds= is for mode 'groups', which needs it "
                         "(every rank runs that many steps)")
    if mode not in MODES:
        raise ValueError("trainwire: straggle_hook: mode %r: one of %s" % (mode, ", ".join(MODES)))
    if scale not in ("world", "contributors"):
        raise ValueError("trainwire: straggle_hook: scale %r: 'world' or 'contributors'" % (scale,))
    params = [p for p in model.parameters() if p.requires_grad]
    if not params:
        raise ValueError("trainwire: straggle_hook: the model has no trainable parameter")
    if world is None:
        import torch.distributed as dist
        world = dist.get_world_size() if dist.is_initialized() else 1
    dim = sum(p.numel() for p in params)
    flags = ["--mode", mode, "--dim", str(dim)]
    if mode == "groups":
        flags += ["--rounds", str(int(rounds)), "--group-size", str(int(group_size))]
    sidecar, own = _sidecar("straggle", flags + list(args), sidecar,
                            socket, timeout, connect_timeout, start_kw)
    try:
        state = StraggleState(sidecar, params, mode, scale, world, own)
    except BaseException:
        if own:
            sidecar.close()
        raise
    return state, straggle_comm_hook
