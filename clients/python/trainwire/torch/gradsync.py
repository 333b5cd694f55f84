"""GradSync: plan-driven gradient sync on this rank's `hashsync serve` (Horovod-style, no DDP).

    gs = GradSync(model, fusion_plan="plan.tw")   # a `fuser plan` frame: groups of tensor names
    for batch in data:
        opt.zero_grad()
        loss_fn(model(batch)).backward()          # each group's sync starts when its last gradient is ready
        gs.synchronize()                          # waits; p.grad = the average over the ranks
        opt.step()

A hook on every trainable parameter records its gradient as autograd computes it; when the last
gradient of a fusion group is in, and every group before it in the plan has been sent, the
group's gradients are copied into shared memory and sent as one `sync` request (one tensor per
parameter, named by the model's parameter name), so communication overlaps the rest of backward.
Groups go out in plan order on every rank, which is what the sidecars' collectives need.
"""

import threading

import torch

from trainwire import wire
from trainwire.serve import DEFAULT_TIMEOUT, SidecarError

from . import _HookState, _sidecar

__all__ = ["GradSync", "fusion_groups"]


def _frames(plan):
    if isinstance(plan, dict):
        return [plan]
    if isinstance(plan, (str, bytes)) or hasattr(plan, "__fspath__"):
        with open(plan, "rb") as f:
            return list(wire.Reader(f))
    return list(plan)


def fusion_groups(plan):
    """The groups of tensor names of a fusion plan: a `plan` frame (kind "fusion", one item per
    group with `names`), a list of frames, or a trainwire stream's path (`fuser plan` output)."""
    plans = [f for f in _frames(plan) if f.get("t") == "plan"]
    if len(plans) != 1 or plans[0].get("kind") != "fusion":
        raise ValueError("trainwire: GradSync: a fusion plan is one plan frame of kind fusion; got %s"
                         % [(f.get("t"), f.get("kind")) for f in _frames(plan)])
    groups = []
    for i, it in enumerate(plans[0].get("items", [])):
        names = it.get("names")
        if not isinstance(names, list) or not names or not all(isinstance(n, str) for n in names):
            raise ValueError("trainwire: GradSync: fusion plan item %d has no list of tensor names "
                             "(`names`)" % i)
        groups.append(list(names))
    return groups


class GradSync(_HookState):
    """Per-parameter gradient hooks launching each fusion group's sum over the ranks on this
    rank's `hashsync serve --scheme SCHEME` (started as hashsync_hook starts it, or `sidecar`,
    `socket`). fusion_plan: a fusion plan (see fusion_groups); default: one group per parameter,
    in reverse definition order (roughly backprop's). compression_plan: refused (not
    built yet; DDP with compressor_hook(model, plan=...) executes compression plans). average: divide the sums by the world size (the gradients DDP
    would give). `requests` counts the sync requests sent."""

    def __init__(self, model, fusion_plan=None, compression_plan=None, scheme="dense", average=True,
                 sidecar=None, socket=None, args=(), timeout=DEFAULT_TIMEOUT,
                 connect_timeout=DEFAULT_TIMEOUT, **start_kw):
        if compression_plan is not None:
            raise NotImplementedError(
                "trainwire: GradSync does not execute compression plans yet (it syncs on hashsync "
                "serve, uncompressed); with DDP, compressor_hook(model, plan=...) executes one")
        named = [(n, p) for n, p in model.named_parameters() if p.requires_grad]
        if not named:
            raise ValueError("trainwire: GradSync: the model has no trainable parameter")
        params = dict(named)
        groups = fusion_groups(fusion_plan) if fusion_plan is not None else [[n] for n, _ in reversed(named)]
        seen = {}
        for g, names in enumerate(groups):
            for n in names:
                if n not in params:
                    raise ValueError("trainwire: GradSync: fusion plan group %d names %r, not a trainable "
                                     "parameter of the model (it has %s)" % (g, n, ", ".join(params)))
                if n in seen:
                    raise ValueError("trainwire: GradSync: %r is in fusion plan groups %d and %d"
                                     % (n, seen[n], g))
                seen[n] = g
        missing = [n for n in params if n not in seen]
        if missing:
            raise ValueError("trainwire: GradSync: the fusion plan leaves out %s" % ", ".join(missing))
        for n, p in named:
            if p.dtype != torch.float32 or p.device.type != "cpu":
                raise ValueError("trainwire: GradSync: %s is %s on %s; hashsync serve sums float32 CPU "
                                 "tensors" % (n, p.dtype, p.device))
        self.sidecar, self._own = _sidecar("hashsync", ["--scheme", scheme] + list(args), sidecar,
                                           socket, timeout, connect_timeout, start_kw)
        self.client, self.rank, self.average = self.sidecar.client, self.sidecar.rank, average
        self.groups = [[(n, params[n]) for n in names] for names in groups]
        total = sum(p.numel() for _, p in named)
        try:
            self.seg = self.client.segment(max(4096, 4 * total + 64 * len(named)), "trainwire-gradsync")
        except BaseException:
            self.close()
            raise
        self._where = {}   # name -> (byte offset, float32 view of the shared memory)
        self._tensors = []
        for group in self.groups:
            ts = []
            for n, p in group:
                off = self.seg.alloc(4 * p.numel())
                self._where[n] = (off, torch.from_numpy(self.seg.array(off, p.numel())).view(p.shape))
                ts.append(self.seg.tensor(n, off, list(p.shape)))
            self._tensors.append(ts)
        self.step, self.requests = 0, 0
        self._lock = threading.Lock()
        self._reset()
        self._handles = [p.register_hook(self._hook(g, n)) for g, group in enumerate(self.groups)
                         for n, p in group]

    def _reset(self):
        self._got = [set() for _ in self.groups]
        self._next = 0           # the next group to send, in plan order
        self._futures = []

    def _hook(self, g, name):
        def hook(grad):
            with self._lock:
                self._where[name][1].copy_(grad)
                self._got[g].add(name)
                self._launch(False)
            return None
        return hook

    def _launch(self, all_groups):
        """Sends every group whose gradients are all in (all_groups: every group left, a missing
        gradient as zeros), in plan order."""
        while self._next < len(self.groups):
            g = self._next
            if len(self._got[g]) < len(self.groups[g]):
                if not all_groups:
                    return
                for n, _ in self.groups[g]:
                    if n not in self._got[g]:
                        self._where[n][1].zero_()
            self._futures.append((g, self.client.sync(self.step, self._tensors[g], average=self.average)))
            self.requests += 1
            self._next += 1

    def synchronize(self, timeout=None):
        """Sends the groups not sent yet (a parameter without a gradient this step counts as
        zeros), waits for every reply and sets each parameter's .grad to the result."""
        with self._lock:
            self._launch(True)
            futures, step = self._futures, self.step
            self._reset()
            self.step += 1
        err = None
        for g, f in futures:
            try:
                f.result(timeout if timeout is not None else self.client.timeout)
            except SidecarError as e:
                err = err or SidecarError("%s (GradSync group %d, step %d)" % (e, g, step), e.tool,
                                          e.rank, e.code, e.culprit, e.field, e.reply)
            except Exception as e:  # noqa: B902 - a timeout of the wait: name the tool and rank
                err = err or SidecarError("trainwire: %s: GradSync group %d, step %d: %s"
                                          % (self.client.who(), g, step, e or type(e).__name__),
                                          self.client.tool, self.rank, "timeout")
        if err is not None:
            raise err
        for group in self.groups:
            for n, p in group:
                res = self._where[n][1]
                if p.grad is None:
                    p.grad = res.clone()
                else:
                    p.grad.copy_(res)

    def close(self):
        """Removes the hooks and stops (or disconnects from) the sidecar."""
        for h in getattr(self, "_handles", ()):
            h.remove()
        self._handles = []
        super().close()
