"""Checkpointer: a training loop's state in this rank's `ckpt agent` (docs/ckpt.md), every N steps.

    ck = Checkpointer(model, opt, every=50, extra={"ef": hook_state})   # socket: $TRAINWIRE_CKPT_SOCKET
    start = ck.restore()              # 0, or the committed iteration the job rolls back to
    for it in range(start, steps):
        ...train one step...
        ck.step(it + 1)               # saves when (it + 1) % every == 0

The state — model.state_dict(), optimizer.state_dict() and `extra` — goes to the agent through
its shared-memory buffer (one copy: `begin` hands back the buffer, the tensors are copied into
it, `commit` returns at once; the agent replicates in the background and commits the iteration
when every rank's shard is on all its holders). restore() asks the agent for the latest
committed iteration, which it takes from local memory, else a peer's, else the persistent tier
(with `ckpt agent --persistent DIR`): every rank gets the same iteration.

The shard's layout: b"TWCKPT01", the skeleton's length (u64 LE), the skeleton (msgpack: the
state's dicts and lists, each tensor an ext value of type 1 = msgpack [dtype, shape, offset,
nbytes]), then every tensor's bytes at a 64-byte aligned offset.
"""

import os
import struct
import time

import msgpack
import numpy as np
import torch

from trainwire.ckpt import Agent, AgentError, copy_out

__all__ = ["Checkpointer", "CheckpointError", "pack_state", "unpack_state"]

_MAGIC = b"TWCKPT01"
_EXT_TENSOR = 1
_ALIGN = 64


class CheckpointError(RuntimeError):
    """A save or restore failed: names this rank and `ckpt agent`; .code is the agent's."""

    def __init__(self, msg, rank=-1, code=""):
        super().__init__(msg)
        self.rank, self.code = rank, code


def _state_of(obj):
    return obj.state_dict() if hasattr(obj, "state_dict") else obj


def pack_state(state):
    """(header bytes, [uint8 arrays]) laying out state (nested dicts/lists/tuples of tensors,
    numpy arrays, numbers, strings, bytes, None) as the shard format above."""
    arrays, off = [], [0]

    def default(obj):
        if isinstance(obj, np.ndarray):
            obj = torch.from_numpy(np.ascontiguousarray(obj))
        if not isinstance(obj, torch.Tensor):
            raise TypeError("trainwire: Checkpointer cannot save a %s" % type(obj).__name__)
        t = obj.detach().cpu().contiguous()
        b = t.reshape(-1).view(torch.uint8).numpy() if t.numel() else np.zeros(0, np.uint8)
        start = (off[0] + _ALIGN - 1) // _ALIGN * _ALIGN
        arrays.append((start, b))
        off[0] = start + b.nbytes
        return msgpack.ExtType(_EXT_TENSOR, msgpack.packb(
            [str(t.dtype).replace("torch.", ""), list(t.shape), start, b.nbytes]))

    skel = msgpack.packb(state, default=default, use_bin_type=True, strict_types=False)
    head = _MAGIC + struct.pack("<Q", len(skel)) + skel
    base = (len(head) + _ALIGN - 1) // _ALIGN * _ALIGN
    out, pos = [np.frombuffer(head, np.uint8)], len(head)
    for start, b in arrays:
        if base + start > pos:
            out.append(np.zeros(base + start - pos, np.uint8))
        out.append(b)
        pos = base + start + b.nbytes
    return out


def unpack_state(buf, ready=None):
    """The state pack_state laid out, from a buffer (memoryview); tensors are copies. ready(n),
    if given, is called before the first n bytes are read (a streamed restore: it blocks until
    they have arrived)."""
    buf = memoryview(buf)
    ready = ready or (lambda n: None)
    ready(16)
    if bytes(buf[:8]) != _MAGIC:
        raise ValueError("not a trainwire.torch checkpoint (magic %r)" % bytes(buf[:8]))
    n = struct.unpack_from("<Q", buf, 8)[0]
    if 16 + n > len(buf):
        raise ValueError("skeleton of %d bytes in a shard of %d" % (n, len(buf)))
    base = (16 + n + _ALIGN - 1) // _ALIGN * _ALIGN
    ready(16 + n)

    def ext(code, data):
        if code != _EXT_TENSOR:
            raise ValueError("unknown ext type %d" % code)
        dtype, shape, start, nbytes = msgpack.unpackb(data)
        if base + start + nbytes > len(buf):
            raise ValueError("tensor at %d+%d past the shard's %d bytes" % (base + start, nbytes, len(buf)))
        ready(base + start + nbytes)
        raw = torch.from_numpy(copy_out(np.frombuffer(buf, np.uint8, count=nbytes, offset=base + start)))
        dt = getattr(torch, dtype)
        if nbytes == 0:
            return torch.zeros(shape, dtype=dt)
        return raw.view(dt).reshape(shape)

    return msgpack.unpackb(buf[16:16 + n], ext_hook=ext, raw=False, strict_map_key=False,
                           max_bin_len=n, max_str_len=n, max_array_len=n, max_map_len=n)


def _nothing_saved(e):
    """Whether the agent's refusal says the job has no checkpoint at all: every agent reachable
    and none holding a committed iteration, and no persistent tier, or an empty one."""
    msg = str(e)
    return "no committed checkpoint in the memory of any live agent (unreachable: none)" in msg and \
        (e.code == "missing" or (e.code == "lost" and "has none" in msg))


def _socket_path(path):
    path = path or os.environ.get("TRAINWIRE_CKPT_SOCKET")
    if not path:
        raise CheckpointError("trainwire: Checkpointer: no agent socket: pass socket= or set "
                              "TRAINWIRE_CKPT_SOCKET ({rank} and {local_rank} are replaced)")
    rank = os.environ.get("RANK", "0")
    return path.replace("{rank}", rank).replace("{local_rank}", os.environ.get("LOCAL_RANK", rank))


class Checkpointer:
    """Saves model, optimizer and `extra` (a dict of state_dict()-able objects or plain state)
    to this rank's ckpt agent every `every` steps, and restores them.

    `socket`: the agent's trainer socket (default $TRAINWIRE_CKPT_SOCKET; {rank}, {local_rank}
    replaced). `wait`: seconds a save waits for the previous checkpoint's commit (the agent's
    --commit-wait otherwise). `timeout`: seconds for one operation; `connect_timeout`: for the
    agent's socket to appear. Attributes: `restored` (iteration, source) of the last restore,
    `saved` (iterations saved), `extra` (after restore: what was saved, objects loaded in place)."""

    def __init__(self, model, optimizer=None, every=100, extra=None, socket=None, timeout=120.0,
                 wait=None, rank=None, connect_timeout=60.0):
        self.model, self.optimizer, self.every = model, optimizer, int(every)
        self.extra = extra if extra is not None else {}
        self.rank = int(os.environ.get("RANK", "0")) if rank is None else rank
        self.path = _socket_path(socket)
        self.timeout, self.wait, self.connect_timeout = timeout, wait, connect_timeout
        self.restored, self.saved = None, []
        self._agent = None

    def _who(self):
        return "ckpt agent of rank %d (%s)" % (self.rank, self.path)

    def agent(self):
        """The connection to the agent; waits up to connect_timeout for its socket (an agent
        being replaced, or started beside the trainer, may not listen yet)."""
        deadline = time.monotonic() + self.connect_timeout
        while self._agent is None:
            try:
                self._agent = Agent(self.path, self.timeout)
            except (FileNotFoundError, ConnectionRefusedError) as e:
                if time.monotonic() > deadline:
                    raise CheckpointError("trainwire: Checkpointer: no %s after %.0f s: %s"
                                          % (self._who(), self.connect_timeout, e), self.rank,
                                          "gone") from None
                time.sleep(0.05)
            except OSError as e:
                raise CheckpointError("trainwire: Checkpointer: no %s: %s" % (self._who(), e),
                                      self.rank, "gone") from None
        return self._agent

    def state(self):
        st = {"model": self.model.state_dict(),
              "extra": {k: _state_of(v) for k, v in self.extra.items()}}
        if self.optimizer is not None:
            st["optimizer"] = self.optimizer.state_dict()
        return st

    def save(self, it):
        """Hands iteration it's state to the agent now (commit in the background)."""
        arrays = pack_state(dict(self.state(), iter=int(it)))
        try:
            self.agent().save_shm(int(it), arrays, wait=self.wait)
        except (AgentError, OSError) as e:
            self._drop()
            raise CheckpointError("trainwire: Checkpointer: %s failed to save iteration %d: %s"
                                  % (self._who(), it, e), self.rank, getattr(e, "code", "gone")) from None
        self.saved.append(int(it))

    def step(self, it):
        """Call after iteration it (counted from 1) finished: saves when it is a multiple of every."""
        if self.every > 0 and it > 0 and it % self.every == 0:
            self.save(it)
            return True
        return False

    def restore(self):
        """Loads the latest committed iteration into model, optimizer and extra, and returns
        it; 0 when the job has none (a fresh start). The agent rolls the job back to it."""
        got = {}
        try:
            it, src = self.agent().restore_shm(lambda buf, ready: got.update(st=unpack_state(buf, ready)),
                                               stream=True)
        except AgentError as e:
            if _nothing_saved(e):
                self.restored = (0, None)
                return 0
            self._drop()
            raise CheckpointError("trainwire: Checkpointer: %s failed to restore: %s"
                                  % (self._who(), e), self.rank, e.code) from None
        except (OSError, ValueError) as e:
            self._drop()
            raise CheckpointError("trainwire: Checkpointer: %s failed to restore: %s"
                                  % (self._who(), e), self.rank, "failed") from None
        st = got["st"]
        if st.get("iter") != it:
            raise CheckpointError("trainwire: Checkpointer: %s restored iteration %d holding "
                                  "iteration %s's state" % (self._who(), it, st.get("iter")), self.rank)
        self.model.load_state_dict(st["model"])
        if self.optimizer is not None and "optimizer" in st:
            self.optimizer.load_state_dict(st["optimizer"])
        for k, v in st.get("extra", {}).items():
            if k in self.extra and hasattr(self.extra[k], "load_state_dict"):
                self.extra[k].load_state_dict(v)
            else:
                self.extra[k] = v
        self.restored = (it, src)
        return it

    def _drop(self):
        if self._agent is not None:
            try:
                self._agent.close()
            except OSError:
                pass
            self._agent = None

    def close(self):
        self._drop()
