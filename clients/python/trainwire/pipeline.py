"""Sven's four-stage pipeline under bounded staleness (docs/sven.md, section 6.1.2), as a reusable
engine for a training loop whose collectives go through a trainwire sidecar.

A model-parallel step is split in two halves that the engine schedules across mini-batches:

* ``prepare(u)``: the sparse forward of mini-batch *u*: its input redistribution, its embedding
  lookups, its forward alltoall submitted (a Future from the sidecar, not waited);
* ``train(t)``: the rest of mini-batch *t*: the forward alltoall's result, the dense forward and
  backward, the backward alltoall and the allreduce, then the update (which makes the next version
  of the parameters).

The rule is Sven's, and explicit: mini-batch *u*'s lookups read version ``v(u) = max(0, u - S)`` of
the parameters (version *k* is after *k* updates, applied in order). So iteration *t* prepares
mini-batch *t + S* right after update *t* - 1 and before training *t*: up to S + 1 mini-batches are
in flight between their lookup and their update (the chapter's queues), their communication in the
sidecar while this process computes. A sequential run of the same schedule (every Future waited as
it is submitted) makes the same calls in the same order, so it gives the same parameters bit for
bit; only the waiting moves.

The engine checks the rule on every lookup and raises :class:`StalenessError` when a mini-batch
would read another version (a bound it can never exceed silently); :attr:`Pipeline.max_staleness` is
what was measured. :func:`sequential` and :func:`pipelined` are Eq. 6.1 and Eq. 6.2: the step time a
schedule should reach from the measured stage times.
"""

import time

#: Sven's bound: three updates.
DEFAULT_STALENESS = 3

#: The stages of Eq. 6.1, in order: input redistribution, sparse forward, forward alltoall, dense
#: forward, dense backward, allreduce, optimizer, backward alltoall, sparse backward.
STAGES = ("all2all", "SFP", "fall2all", "FP", "BP", "allreduce", "opt", "ball2all", "SBP")


class StalenessError(RuntimeError):
    """A mini-batch would read a version of the parameters other than ``max(0, u - S)``."""


class PipelineError(RuntimeError):
    """A stage failed; the message names the half (prepare or train) and the mini-batch."""


class Pipeline:
    """Runs ``prepare`` and ``train`` over ``steps`` mini-batches under staleness ``staleness``.

    ``prepare(u)`` returns nothing (it stashes what ``train`` needs); ``train(t)`` returns the
    step's result (say its loss) and must apply mini-batch *t*'s update. ``staleness`` 0 is the
    plain sequential schedule; Sven's is 3.
    """

    def __init__(self, prepare, train, steps, staleness=DEFAULT_STALENESS):
        if staleness < 0:
            raise ValueError("pipeline: staleness %d: want 0 or more" % staleness)
        if steps < 0:
            raise ValueError("pipeline: steps %d: want 0 or more" % steps)
        self.prepare, self.train, self.steps, self.s = prepare, train, steps, staleness
        #: Updates applied so far: the newest version of the parameters.
        self.version = 0
        #: The most updates a lookup lagged behind (``u - version`` at ``prepare(u)``).
        self.max_staleness = 0
        #: Every lookup's (mini-batch, version read), in order: what tests check the rule on.
        self.reads = []
        self._next = 0  # the next mini-batch to prepare

    def step(self, t):
        """Iteration t (called for t = 0, 1, ... in order): prepares what the rule allows, then
        trains t. Returns train(t)'s result."""
        if t != self.version:
            raise PipelineError("pipeline: step %d called after %d updates (steps run in order)" % (t, self.version))
        while self._next < self.steps and self._next <= t + self.s:
            self._prepare(self._next)
            self._next += 1
        try:
            r = self.train(t)
        except Exception as e:
            raise PipelineError("pipeline: train, mini-batch %d: %s" % (t, e)) from e
        self.version += 1
        return r

    def run(self):
        """Every step in order; yields each train(t)'s result."""
        for t in range(self.steps):
            yield self.step(t)

    def _prepare(self, u):
        want = max(0, u - self.s)
        if self.version != want:
            raise StalenessError("pipeline: mini-batch %d would read version %d, the rule says %d (staleness %d)"
                                 % (u, self.version, want, self.s))
        self.max_staleness = max(self.max_staleness, u - self.version)
        self.reads.append((u, self.version))
        try:
            self.prepare(u)
        except Exception as e:
            raise PipelineError("pipeline: prepare, mini-batch %d: %s" % (u, e)) from e


class StageTimer:
    """Seconds spent per stage of Eq. 6.1 (under a sequential schedule an alltoall's time includes
    its wait; pipelined, only what was left to wait)."""

    def __init__(self):
        self.times = {k: 0.0 for k in STAGES}

    def timed(self, stage, f, *args):
        """f(*args), its seconds added to stage."""
        t0 = time.perf_counter()
        try:
            return f(*args)
        finally:
            self.times[stage] += time.perf_counter() - t0

    def per_step_ms(self, steps):
        """Milliseconds per step of every stage."""
        return {k: 1e3 * v / max(1, steps) for k, v in self.times.items()}


def sequential(st):
    """Eq. 6.1 per step: every stage one after the other (st maps STAGES to times)."""
    return sum(st[k] for k in STAGES)


def pipelined(st):
    """Eq. 6.2 per step: each communication overlapped with another mini-batch's computation, the
    input redistribution off the critical path."""
    return (max(st["SFP"] + st["FP"], st["fall2all"]) + max(st["BP"], st["ball2all"])
            + max(st["allreduce"], st["SBP"]) + st["opt"])
