"""Python side of `ckpt agent`'s trainer socket (docs/ckpt.md, "Talking to the agent").

Every message is one trainwire stream: a header whose meta carries the operation, data frames,
an end frame. The fast path hands the state over in shared memory: `begin` returns the path of
one of the agent's two memfd buffers for this rank (/proc/<agent pid>/fd/<n>), the trainer copies
its state into it, `commit` returns at once and the agent seals the local replica and replicates
it in the background.

    from trainwire.ckpt import Agent
    a = Agent("/tmp/trainwire-ckpt-job-0.sock")
    a.save_shm(it, [t.numpy() for t in model.state_dict().values()])   # stall: one memcpy
    a.wait(it)                                                          # optional: global commit
    it, src = a.restore_shm(lambda buf: ...)                            # buf: memoryview
    it, src = a.restore_shm(lambda buf, ready: ..., stream=True)        # copy as it lands

With `ckpt agent --interleave`, tick at every iteration's start and wrap the training
communication so the agent keeps checkpoint traffic out of it (Algorithm 6.2's idle spans):

    a.tick(it, comm_spans_of_previous_iteration)
    with a.comm():
        dist.all_reduce(grad)
"""

import io
import mmap
import os
import socket

import msgpack
import numpy as np

from . import wire


class AgentError(Exception):
    """A refusal from the agent: .code is bad_input, refused, busy, missing, lost, ..."""

    def __init__(self, code, msg):
        super().__init__(msg)
        self.code = code


class _Moved(Exception):
    """The agent moved a streamed restore to another buffer (.meta: its answer)."""

    def __init__(self, meta):
        super().__init__("the restore moved to another buffer (%s)" % meta.get("source"))
        self.meta = meta


# glibc's memcpy copies large blocks (here from about 192 MiB) with non-temporal stores, and
# runs at less than half speed when the destination sits a little after the source modulo a page
# (4 KiB aliasing): 256 MiB at 3.3-3.6 GB/s with (dst - src) mod 4096 = 16 or 200, 7.9-8.2 GB/s
# with 0 or 1024, 5.4-5.8 GB/s in 4 MiB pieces whatever the offsets (this machine, glibc 2.36).
# A numpy array's data sits 16 bytes into its first page, our buffers' offsets are 64-aligned.
_ALIAS_MIN = 64 << 20
_ALIAS_BAD = 512
_PIECE = 4 << 20


def _page_off(a):
    return a.ctypes.data % 4096


def copy_bytes(dst, src):
    """np.copyto(dst, src) for 1-D uint8 arrays of equal length, in pieces when the two sit where
    one large memcpy would be slow (see _ALIAS_BAD)."""
    n = src.nbytes
    if n < _ALIAS_MIN or not 0 < (_page_off(dst) - _page_off(src)) % 4096 <= _ALIAS_BAD:
        np.copyto(dst, src)
        return
    for o in range(0, n, _PIECE):
        np.copyto(dst[o:o + _PIECE], src[o:o + _PIECE])


def copy_out(src):
    """A new array holding a copy of the 1-D uint8 array src, placed at src's offset in its page
    so that the copy runs at full speed (see _ALIAS_BAD)."""
    if src.nbytes < _ALIAS_MIN:
        return src.copy()
    raw = np.empty(src.nbytes + 4096, np.uint8)
    k = (_page_off(src) - _page_off(raw)) % 4096
    dst = raw[k:k + src.nbytes]
    np.copyto(dst, src)
    return dst


def _count(m, key):
    """A byte count from an agent's message, or AgentError naming it."""
    try:
        return int(m[key])
    except (KeyError, ValueError):
        raise AgentError("bad_input", "restore: %s %r in the agent's %r message" % (key, m.get(key), m.get("op"))) from None


class _ShmStream:
    """One buffer of a streamed shared-memory restore: mapped at once, filled as the agent's
    "progress" messages say, checked when "done" comes."""

    def __init__(self, agent, m):
        self.agent = agent
        self.size = _count(m, "len")
        self.done = m.get("stream") != "1"  # an agent that does not stream answers when all is in
        self.ready = self.size if self.done else _count(m, "ready")
        if not 0 <= self.ready <= self.size:
            raise AgentError("bad_input", "restore answer: ready %s of %d bytes" % (m.get("ready"), self.size))
        self.mm = None  # a mapping of our own, closed with the stream
        self.view = memoryview(b"")
        if self.size:
            try:
                fd = os.open(m["path"], os.O_RDONLY)
            except OSError:
                if not self.done:
                    agent.recv()  # the agent gave up on the buffer: its error says why
                raise
            try:
                st = os.fstat(fd)
                kept = agent._maps.get((st.st_ino, st.st_dev))
                if kept is not None and kept[1] >= self.size:
                    # This process saved into this buffer and keeps it mapped: its page tables
                    # are there already (a trainer that stayed up while the job rolled back).
                    self.view = memoryview(kept[0]).toreadonly()[:self.size]
                else:
                    # No MAP_POPULATE: setting up every page table entry before the first byte
                    # is copied delayed the copy by 170-280 ms for 512 MiB per rank with four
                    # ranks restoring at once (bench/ckpt/run.sh); faulted in as the copy reads
                    # (the kernel maps 16 pages a fault), the whole restore was faster.
                    self.mm = mmap.mmap(fd, self.size, flags=mmap.MAP_SHARED, prot=mmap.PROT_READ)
                    self.view = memoryview(self.mm)
            finally:
                os.close(fd)

    def wait(self, n):
        """Blocks until the first n bytes of the buffer are in."""
        n = min(n, self.size)
        while self.ready < n:
            self._next()

    def finish(self):
        """Waits for the agent's verdict on the whole shard."""
        while not self.done:
            self._next()

    def _next(self):
        if self.done:
            raise AgentError("bad_input", "restore: the agent ended the stream")
        m, _ = self.agent.recv()
        op = m.get("op")
        if op == "moved":
            raise _Moved(m)
        if op not in ("progress", "done"):
            raise AgentError("bad_input", "restore: %r message in a streamed restore" % op)
        n = _count(m, "ready")
        if not self.ready <= n <= self.size or (op == "done" and n != self.size):
            raise AgentError("bad_input", "restore progress %s after %d of %d bytes" % (m.get("ready"), self.ready, self.size))
        self.ready, self.done = n, op == "done"

    def close(self):
        try:
            self.view.release()
        except BufferError:  # use kept a view of it: the mapping goes when that does
            return
        if self.mm is not None:
            try:
                self.mm.close()
            except BufferError:
                pass


class Agent:
    def __init__(self, path, timeout=120.0):
        self.s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.s.settimeout(timeout)
        self.s.connect(path)
        self.u = msgpack.Unpacker(raw=False, max_buffer_size=1 << 31)
        self._maps = {}  # (path, inode) -> (mmap, size): the agent's buffers, kept mapped

    def close(self):
        for m, _ in self._maps.values():
            m.close()
        self._maps = {}
        self.s.close()

    # -- messages
    def send(self, meta, frames=()):
        b = io.BytesIO()
        w = wire.Writer(b, "python/ckpt", {k: str(v) for k, v in meta.items()})
        for f in frames:
            w.write(f)
        w.close()
        self.s.sendall(b.getbuffer())

    def _frame(self):
        while True:
            try:
                return next(self.u)
            except StopIteration:
                d = self.s.recv(1 << 20)
                if not d:
                    raise ConnectionError("agent closed the connection")
                self.u.feed(d)

    def recv(self):
        h = self._frame()
        if not isinstance(h, dict) or h.get("t") != "header":
            raise AgentError("bad_input", "agent sent %r where a header belongs" % (h,))
        frames = []
        while True:
            f = self._frame()
            if f.get("t") == "end":
                break
            frames.append(f)
        meta = h.get("meta", {})
        if meta.get("op") == "error":
            raise AgentError(meta.get("code", ""), meta.get("msg", ""))
        return meta, frames

    # -- buffers
    def _map(self, path, size, write):
        st = os.stat(path)
        key = (st.st_ino, st.st_dev)
        m = self._maps.get(key)
        if m is None or m[1] != size:
            if m is not None:
                m[0].close()
            fd = os.open(path, os.O_RDWR if write else os.O_RDONLY)
            try:
                # MAP_POPULATE: the page tables of the agent's (already allocated) buffer are set
                # up in one call instead of one fault per 4 KiB page during the copy.
                mm = mmap.mmap(fd, size, flags=mmap.MAP_SHARED | getattr(mmap, "MAP_POPULATE", 0),
                               prot=mmap.PROT_READ | (mmap.PROT_WRITE if write else 0))
            finally:
                os.close(fd)
            m = (mm, size)
            if write:
                # Not inherited by forked children (DataLoader workers): when this process exits,
                # nothing is left that can write the agent's buffer, and the agent checks the
                # shard then, at rest, instead of during a restarted trainer's restore.
                if hasattr(mmap, "MADV_DONTFORK"):
                    mm.madvise(mmap.MADV_DONTFORK)
                self._maps[key] = m
        return m[0]

    # -- operations
    def save_shm(self, it, arrays, wait=None):
        """Copies the arrays (numpy, any dtype) back to back into the agent's buffer for
        iteration it, then commits. Returns the number of bytes."""
        arrays = [np.ascontiguousarray(a) for a in arrays]
        size = sum(a.nbytes for a in arrays)
        meta = {"op": "begin", "iter": it, "len": size, "format": "raw"}
        if wait is not None:
            meta["wait"] = "%gs" % wait
        self.send(meta)
        m, _ = self.recv()
        if size:
            mm = self._map(m["path"], size, True)
            dst = np.frombuffer(mm, dtype=np.uint8, count=size)
            off = 0
            for a in arrays:
                n = a.nbytes
                copy_bytes(dst[off:off + n], a.reshape(-1).view(np.uint8))
                off += n
            del dst
        self.send({"op": "commit", "iter": it})
        self.recv()
        return size

    def save_frames(self, it, frames):
        """Sends tensor frames (wire.dense(...)) as the shard of iteration it."""
        self.send({"op": "save", "iter": it, "format": "wire"}, frames)
        return self.recv()[0]

    def tick(self, it, comm=()):
        """Marks the start of iteration it; comm lists the previous iteration's communication
        spans as (start_s, end_s) relative to that iteration's start (online profiling)."""
        frames = [{"t": "event", "v": 1, "name": "allreduce", "cat": "comm", "ph": "X", "rank": -1,
                   "pid": 0, "tid": 0, "stream": -1, "ts": int(a * 1e9), "dur": int((b - a) * 1e9),
                   "corr": -1, "args": {}} for a, b in comm]
        self.send({"op": "tick", "iter": it}, frames)
        self.recv()

    def comm_begin(self):
        """Tells the agent a training communication op (allreduce, all-gather, ...) starts now:
        with --interleave it writes no checkpoint byte until comm_end. No answer is awaited (one
        write on the socket); the agent also uses the spans the ticks report to size its chunks."""
        self._comm("begin")

    def comm_end(self):
        """Tells the agent the training communication op that comm_begin announced is over."""
        self._comm("end")

    def comm(self):
        """Context manager around a training communication op: `with agent.comm(): all_reduce(g)`."""
        agent = self

        class _Comm:
            def __enter__(self):
                agent.comm_begin()

            def __exit__(self, *exc):
                agent.comm_end()
                return False
        return _Comm()

    def _comm(self, phase):
        cache = self.__dict__.setdefault("_comm_msgs", {})
        b = cache.get(phase)
        if b is None:
            buf = io.BytesIO()
            w = wire.Writer(buf, "python/ckpt", {"op": "comm", "phase": phase})
            w.close()
            b = cache[phase] = bytes(buf.getbuffer())
        self.s.sendall(b)

    def wait(self, it, timeout="120s"):
        self.send({"op": "wait", "iter": it, "wait": timeout})
        return int(self.recv()[0]["committed"])

    def _restore(self, mode, it):
        """Asks for iteration it (the latest committed when None) in mode; returns (meta, frames)."""
        meta = {"op": "restore", "mode": mode}
        if it is None:
            meta["latest"] = "1"
        else:
            meta["iter"] = it
        self.send(meta)
        return self.recv()

    def restore_shm(self, use, it=None, stream=False):
        """Restores iteration it (the latest committed when None) through the agent's shared
        memory, mapped read-only, and returns (iter, source).

        stream=False: use(buf) once the whole shard is in and checked (buf: memoryview).
        stream=True: use(buf, ready) as soon as the agent has the buffer the shard lands in;
        ready(n) blocks until its first n bytes are there, so a shard fetched from a peer is
        copied out while the rest is on the wire. The agent may move the restore to another
        buffer (the peer it fetched from failed, another serves it): use is then called again
        from the start. What use copied is the checkpoint only if restore_shm returns: the agent
        checked the whole shard against its commit record (AgentError otherwise)."""
        meta = {"op": "restore", "mode": "shm", "stream": "1"}
        if it is None:
            meta["latest"] = "1"
        else:
            meta["iter"] = it
        self.send(meta)
        m, _ = self.recv()
        while True:
            st = _ShmStream(self, m)
            try:
                if stream:
                    use(st.view, st.wait)
                else:
                    st.finish()
                    use(st.view)
                st.finish()
            except _Moved as mv:
                m = mv.meta
                continue
            finally:
                st.close()
            break
        self.send({"op": "release"})
        self.recv()
        return int(m["iter"]), m["source"]

    def restore_frames(self, it=None):
        m, frames = self._restore("frames", it)
        return int(m["iter"]), m["source"], frames

    def status(self):
        self.send({"op": "status"})
        return self.recv()
