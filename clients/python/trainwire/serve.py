"""Python side of the sidecars' protocol (docs/serve.md): a client of `hashsync serve` (and of
the sidecars to come on the same protocol), tensors in memfd shared memory, several requests in
flight, replies matched by id on a reader thread. No torch here: trainwire.torch builds on it.

    from trainwire.serve import Sidecar
    with Sidecar.start("hashsync", ["--scheme", "dense"]) as sc:   # this rank's sidecar
        seg = sc.client.segment(1 << 20)          # memfd, attached (sealed against shrinking)
        a = seg.array(0, 4)                       # numpy float32 view of the shared memory
        a[:] = 1
        sc.client.sync(step=0, tensors=[seg.tensor("w", 0, [4])]).result()   # a[:] is the sum

Failures keep their contract: a sidecar that dies, closes its socket or stays silent past the
timeout, and every error reply, become SidecarError naming the tool, this rank and (when the
sidecar says so) the rank held responsible.
"""

import atexit
import concurrent.futures
import mmap
import os
import select
import shutil
import signal
import socket
import struct
import subprocess
import tempfile
import threading
import time

import msgpack
import numpy as np

__all__ = ["SidecarError", "Client", "Segment", "Sidecar", "find_binary", "DEFAULT_TIMEOUT"]

DEFAULT_TIMEOUT = 120.0      # seconds: the mesh's rendezvous deadline (docs/mesh.md), and a reply's
MAX_MESSAGE = 64 << 20       # the sidecar's default --max-request
MAX_SEGMENTS = 64            # the sidecar's limit on attached segments
_ALIGN = 64


class SidecarError(RuntimeError):
    """A sidecar refused or failed a request, or is gone. Attributes: tool, rank (this rank),
    code (the reply's code, or "gone" / "timeout"), culprit (the rank the sidecar held
    responsible, -1 if none), field (the request's field at fault), reply (the reply map)."""

    def __init__(self, msg, tool="", rank=-1, code="failed", culprit=-1, field="", reply=None):
        super().__init__(msg)
        self.tool, self.rank, self.code = tool, rank, code
        self.culprit, self.field, self.reply = culprit, field, reply


def _signame(code):
    if code is None:
        return "still running"
    if code < 0:
        try:
            return "killed by %s" % signal.Signals(-code).name
        except ValueError:
            return "killed by signal %d" % -code
    return "exit %d" % code


def find_binary(tool):
    """The tool's binary: $TRAINWIRE_BIN (a directory holding it, or the binary itself), else PATH."""
    b = os.environ.get("TRAINWIRE_BIN")
    if b:
        for p in (os.path.join(b, tool), b):
            if os.path.isfile(p) and os.access(p, os.X_OK) and \
                    (p != b or os.path.basename(b) == tool):
                return os.path.abspath(p)
    p = shutil.which(tool)
    if p:
        return p
    raise FileNotFoundError("trainwire: no %s binary: set TRAINWIRE_BIN to the directory holding it "
                            "(make build puts it in bin/) or put it on PATH" % tool)


class Segment:
    """A memfd shared with the sidecar (attached as number `seg`); `mem` is this side's mapping."""

    def __init__(self, seg, size, name="trainwire"):
        self.seg, self.size = seg, size
        self.fd = os.memfd_create(name, os.MFD_ALLOW_SEALING | os.MFD_CLOEXEC)
        os.ftruncate(self.fd, size)
        self.mem = mmap.mmap(self.fd, size)
        self._used = 0

    def alloc(self, nbytes):
        """Byte offset of a fresh range of nbytes (64-byte aligned), or None if it does not fit."""
        off = (self._used + _ALIGN - 1) // _ALIGN * _ALIGN
        if off + nbytes > self.size:
            return None
        self._used = off + nbytes
        return off

    def array(self, off, count, dtype=np.float32):
        """numpy view of count elements at byte off (no copy)."""
        return np.frombuffer(self.mem, dtype, count=count, offset=off)

    def tensor(self, name, off, shape, dtype="f32"):
        """The request's description of a tensor at byte off of this segment."""
        n = 4
        for d in shape:
            n *= int(d)
        return {"name": name, "dtype": dtype, "shape": [int(d) for d in shape],
                "seg": self.seg, "off": int(off), "len": n}

    def close(self):
        try:
            self.mem.close()
        except BufferError:   # numpy/torch views still alive: the mapping goes with them
            pass
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1


class Client:
    """One connection to a sidecar's socket. submit() sends a request and returns a
    concurrent.futures.Future of its reply; a reader thread completes them by id, so many
    requests may be in flight. Every error becomes a SidecarError on the future."""

    def __init__(self, path, tool="hashsync serve", rank=-1, timeout=DEFAULT_TIMEOUT, proc=None,
                 log=None, connect_timeout=DEFAULT_TIMEOUT):
        self.path, self.tool, self.rank, self.timeout = path, tool, rank, timeout
        self.proc, self.log = proc, log
        self._lock = threading.Lock()        # sending, ids, pending, state
        self._pending = {}                   # id -> (future, sent at)
        self._next = 0
        self._dead = None                    # SidecarError once the connection is over
        self._segments = []
        self.sock = self._connect(path, connect_timeout)
        self._stop = False
        self._reader = threading.Thread(target=self._read_loop, name="trainwire-%s-reader" % rank,
                                        daemon=True)
        self._reader.start()

    def who(self):
        return "%s of rank %d" % (self.tool, self.rank) if self.rank >= 0 else self.tool

    def _log_tail(self, n=3):
        if not self.log:
            return ""
        try:
            with open(self.log, "rb") as f:
                f.seek(0, os.SEEK_END)
                f.seek(max(0, f.tell() - 4096))
                lines = f.read().decode("utf-8", "replace").strip().splitlines()[-n:]
        except OSError:
            return ""
        return "; its log (%s) ends: %s" % (self.log, " | ".join(lines)) if lines else ""

    def _gone(self, what, code="gone"):
        if self.proc is not None:
            try:
                self.proc.wait(timeout=2)
            except subprocess.TimeoutExpired:
                pass
            what += " (%s)" % _signame(self.proc.poll())
        return SidecarError("trainwire: %s %s%s" % (self.who(), what, self._log_tail()),
                            self.tool, self.rank, code)

    def _connect(self, path, timeout):
        deadline = time.monotonic() + timeout
        while True:
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                s.connect(path)
                return s
            except (FileNotFoundError, ConnectionRefusedError) as e:
                s.close()
                if self.proc is not None and self.proc.poll() is not None:
                    raise self._gone("exited before listening on %s" % path) from None
                if time.monotonic() > deadline:
                    raise SidecarError("trainwire: %s: no socket at %s after %.0f s: %s%s"
                                       % (self.who(), path, timeout, e, self._log_tail()),
                                       self.tool, self.rank, "timeout") from None
                time.sleep(0.05)

    # -- sending
    def submit(self, req, fds=()):
        """Sends req (a map without "id"; one is assigned) and returns a Future of the reply map.
        The reply's ok is not checked here: see call() and the SidecarError of result()."""
        fut = concurrent.futures.Future()
        with self._lock:
            if self._dead is not None:
                fut.set_exception(self._dead)
                return fut
            rid = self._next
            self._next += 1
            body = msgpack.packb(dict({"id": rid}, **req), use_bin_type=True)
            if len(body) > MAX_MESSAGE:
                fut.set_exception(SidecarError("trainwire: %s: request %d is %d bytes, more than "
                                               "--max-request %d" % (self.who(), rid, len(body), MAX_MESSAGE),
                                               self.tool, self.rank, "bad_request"))
                return fut
            self._pending[rid] = (fut, time.monotonic(), req.get("op"))
            msg = struct.pack(">I", len(body)) + body
            try:
                anc = [(socket.SOL_SOCKET, socket.SCM_RIGHTS, struct.pack("%di" % len(fds), *fds))] \
                    if fds else []
                sent = self.sock.sendmsg([msg], anc)
                if sent < len(msg):
                    self.sock.sendall(msg[sent:])
            except OSError as e:
                err = self._gone("closed its socket (send: %s)" % e)
                self._fail_locked(err)
        return fut

    def call(self, req, fds=(), timeout=None):
        """submit() and wait; raises SidecarError unless the reply is ok."""
        return self.check(self.submit(req, fds).result(timeout))

    def check(self, reply):
        if reply.get("ok"):
            return reply
        code, culprit = reply.get("code", "failed"), reply.get("rank", -1)
        msg = "trainwire: %s: request %s (%s) failed: %s" % (
            self.who(), reply.get("id"), code, reply.get("error", ""))
        if culprit is not None and culprit >= 0 and ("rank %d" % culprit) not in msg:
            msg += " (rank %d held responsible)" % culprit
        raise SidecarError(msg, self.tool, self.rank, code, culprit, reply.get("field", ""), reply)

    def ping(self, timeout=None):
        return self.call({"op": "ping"}, timeout=timeout)

    def segment(self, size, name="trainwire"):
        """A new memfd of size bytes, attached (waits for the reply)."""
        if len(self._segments) >= MAX_SEGMENTS:
            raise SidecarError("trainwire: %s: %d segments attached already" % (self.who(), MAX_SEGMENTS),
                               self.tool, self.rank, "bad_request")
        seg = Segment(len(self._segments), size, name)
        try:
            rep = self.call({"op": "attach", "seg": seg.seg}, [seg.fd], timeout=self.timeout)
        except BaseException:
            seg.close()
            raise
        seg.size = min(seg.size, rep.get("size", seg.size))
        self._segments.append(seg)
        return seg

    def sync(self, step, tensors, average=False, opts=None):
        """Future of the reply to a sync of tensors (maps from Segment.tensor(), or inline ones
        with "data"); its result raises SidecarError unless ok. opts: the tool's other request
        options (compressor serve: save_state, reset_state)."""
        o = dict(opts or {})
        o["average"] = bool(average)
        f = self.submit({"op": "sync", "step": int(step), "tensors": tensors, "opts": o})
        out = concurrent.futures.Future()

        def done(f):
            try:
                out.set_result(self.check(f.result()))
            except BaseException as e:  # noqa: B902 - handed to the waiter
                out.set_exception(e)
        f.add_done_callback(done)
        return out

    # -- receiving
    def _fail_locked(self, err):
        if self._dead is None:
            self._dead = err
        pend, self._pending = self._pending, {}
        for fut, _, _ in pend.values():
            if not fut.done():
                fut.set_exception(err)

    def _fail(self, err):
        with self._lock:
            self._fail_locked(err)

    def _read_loop(self):
        buf = bytearray()
        try:
            while not self._stop:
                r, _, _ = select.select([self.sock], [], [], 0.5)
                if not r:
                    self._watchdog()
                    continue
                try:
                    d = self.sock.recv(1 << 20)
                    why = ""
                except OSError as e:
                    d, why = b"", " (%s)" % e
                if not d:
                    if self._stop:
                        return
                    with self._lock:
                        n = len(self._pending)
                    self._fail(self._gone("closed its socket%s%s" % (
                        " with %d request(s) pending" % n if n else "", why)))
                    return
                buf += d
                while len(buf) >= 4:
                    n = struct.unpack_from(">I", buf)[0]
                    if n > MAX_MESSAGE:
                        raise ConnectionError("reply of %d bytes, more than %d" % (n, MAX_MESSAGE))
                    if len(buf) < 4 + n:
                        break
                    body = bytes(buf[4:4 + n])
                    del buf[:4 + n]
                    self._deliver(msgpack.unpackb(body, raw=False, strict_map_key=True,
                                                  max_bin_len=n, max_str_len=n,
                                                  max_array_len=n, max_map_len=n))
        except Exception as e:  # a broken reply breaks the connection: fail everything
            self._fail(self._gone("sent a reply this client cannot read (%s)" % e, "failed"))
            self._stop = True
            try:
                self.sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def _deliver(self, rep):
        if not isinstance(rep, dict) or not isinstance(rep.get("id"), int):
            raise ValueError("reply is not a map with an int id")
        with self._lock:
            ent = self._pending.pop(rep["id"], None)
            if ent is None and rep["id"] == -1 and not rep.get("ok"):
                # the sidecar could not read a request's id: the connection's order is lost
                self._fail_locked(SidecarError("trainwire: %s: a request was unreadable: %s"
                                               % (self.who(), rep.get("error")), self.tool,
                                               self.rank, rep.get("code", "failed")))
                return
        if ent is not None:
            ent[0].set_result(rep)

    def _watchdog(self):
        if self.proc is not None and self.proc.poll() is not None:
            self._fail(self._gone("exited"))
            self._stop = True
            return
        if not self.timeout:
            return
        with self._lock:
            if not self._pending:
                return
            rid, (_, since, op) = min(self._pending.items(), key=lambda kv: kv[1][1])
        if time.monotonic() - since > self.timeout:
            # closing the socket makes the sidecar abort the job naming this rank: the other
            # ranks' requests fail too instead of waiting for this one
            self._fail(SidecarError("trainwire: %s: no reply to request %d (%s) in %.0f s%s"
                                    % (self.who(), rid, op, self.timeout, self._log_tail()),
                                    self.tool, self.rank, "timeout"))
            self._stop = True
            try:
                self.sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def close(self):
        """Closes the connection (a sidecar this client started then exits 0, or aborts the job
        if requests were pending); pending futures fail."""
        self._stop = True
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.sock.close()
        if self._reader is not threading.current_thread():
            self._reader.join(timeout=5)
        self._fail(SidecarError("trainwire: %s: client closed" % self.who(), self.tool, self.rank,
                                "closed"))
        for s in self._segments:
            s.close()
        self._segments = []


class Sidecar:
    """This rank's sidecar: started here (start) or attached to (attach). close() (also at exit
    and when leaving a with block) disconnects and waits for a started process to end."""

    def __init__(self, client, proc=None, tmpdir=None):
        self.client, self.proc, self._tmpdir = client, proc, tmpdir
        self.closed = False
        atexit.register(self.close)

    @property
    def rank(self):
        return self.client.rank

    @classmethod
    def start(cls, tool, args=(), socket_path=None, rank=None, world=None, master=None, env=None,
              timeout=DEFAULT_TIMEOUT, connect_timeout=DEFAULT_TIMEOUT, binary=None, verb="serve"):
        """Starts `TOOL serve ARGS --socket PATH` and waits until it answers a ping (so the mesh
        is up: the sidecar joins it before serving). Without rank/world/master the tool detects
        the launcher from the environment (torchrun, mpirun, Slurm...: docs/launch.md); env
        (default os.environ) is passed to it."""
        binary = binary or find_binary(tool)
        env = dict(os.environ if env is None else env)
        tmpdir = None
        if socket_path is None:
            tmpdir = tempfile.mkdtemp(prefix="tw-%s-" % tool)   # 0700, ours: serve accepts it
            socket_path = os.path.join(tmpdir, "serve.sock")
        log = os.path.join(tmpdir or tempfile.mkdtemp(prefix="tw-%s-" % tool), "%s.log" % tool)
        cmd = [binary, verb] + list(args) + ["--socket", socket_path]
        if rank is not None:
            cmd += ["--rank", str(rank)]
        if world is not None:
            cmd += ["--world", str(world)]
        if master is not None:
            cmd += ["--master", master]
        if rank is None:
            rank = _env_rank(env)
        env.pop("TRAINWIRE_SERVE_SOCKET", None)
        with open(log, "ab") as lf:
            proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=lf, stderr=lf, env=env)
        name = "%s %s" % (tool, verb)
        try:
            client = Client(socket_path, name, rank, timeout, proc, log, connect_timeout)
        except BaseException:
            _stop(proc)
            raise
        sc = cls(client, proc, tmpdir)
        try:
            client.ping(timeout=connect_timeout)
        except concurrent.futures.TimeoutError:
            sc.close()
            raise SidecarError("trainwire: %s: not ready (no mesh) after %.0f s%s"
                               % (client.who(), connect_timeout, client._log_tail()),
                               name, rank, "timeout") from None
        except BaseException:
            sc.close()
            raise
        return sc

    @classmethod
    def attach(cls, socket_path, tool="hashsync serve", rank=None, timeout=DEFAULT_TIMEOUT,
               connect_timeout=DEFAULT_TIMEOUT):
        """Connects to a sidecar a launcher script started; {rank} and {local_rank} in the path
        are replaced from the environment, as the sidecar does."""
        if rank is None:
            rank = _env_rank(os.environ)
        local = os.environ.get("LOCAL_RANK", os.environ.get("TRAINWIRE_LOCAL_RANK", str(rank)))
        path = socket_path.replace("{rank}", str(rank)).replace("{local_rank}", local)
        client = Client(path, tool, rank, timeout, None, None, connect_timeout)
        sc = cls(client)
        try:
            client.ping(timeout=connect_timeout)
        except BaseException:
            sc.close()
            raise
        return sc

    def close(self):
        if self.closed:
            return
        self.closed = True
        atexit.unregister(self.close)
        self.client.close()
        if self.proc is not None:
            _stop(self.proc)
        if self._tmpdir:
            shutil.rmtree(self._tmpdir, ignore_errors=True)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False


def _env_rank(env):
    for k in ("RANK", "TRAINWIRE_RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "SLURM_PROCID"):
        v = env.get(k)
        if v not in (None, ""):
            try:
                return int(v)
            except ValueError:
                pass
    return -1


def _stop(proc, grace=10.0):
    """Waits for a sidecar whose client left (it exits on its own), then SIGTERM, then SIGKILL."""
    for sig, wait in ((None, grace), (signal.SIGTERM, 5.0), (signal.SIGKILL, 5.0)):
        if sig is not None and proc.poll() is None:
            proc.send_signal(sig)
        try:
            proc.wait(timeout=wait)
            return
        except subprocess.TimeoutExpired:
            continue
