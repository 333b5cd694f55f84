"""Writer: canonical streams, byte-identical to lib/wire's encoder (header on first use, data
frames, end frame with count and XXH3-64 on close)."""

import struct

import msgpack
import xxhash

from trainwire.crc import (  # noqa: F401
    _nbytes)
from trainwire.schema import (  # noqa: F401
    DEFAULT_MAX_ELEMS, DEFAULT_PRODUCER, SCHEMA, VERSION, WireError, _BIG_BIN, _Bad, _env_int,
    _feed_bins, _limits, _semantics, _structure, validate)

# --------------------------------------------------------------------------------------------
# Writer

def _map_header(n):
    if n <= 15:
        return bytes((0x80 | n,))
    if n <= 0xFFFF:
        return b"\xde" + struct.pack(">H", n)
    return b"\xdf" + struct.pack(">I", n)


def _bin_header(n):
    if n <= 0xFF:
        return bytes((0xC4, n))
    if n <= 0xFFFF:
        return b"\xc5" + struct.pack(">H", n)
    return b"\xc6" + struct.pack(">I", n)


def header(producer=DEFAULT_PRODUCER, meta=None):
    return {"t": "header", "v": VERSION, "producer": producer, "schema": SCHEMA,
            "meta": dict(meta or {})}


def end(count, xxh3):
    return {"t": "end", "v": VERSION, "count": count, "xxh3": xxh3}


def step_end(step):
    """The frame that ends step `step` inside a stream (Writer.end_step writes and flushes it)."""
    return {"t": "step_end", "v": VERSION, "step": step}


class Writer:
    """Writes one canonical stream: header (on first use), data frames, end (on close()).

    fileobj needs write(); producer and meta go into the header. write() validates every frame
    (validate=False skips the payload cross-checks but never the canonical ordering). Used as a
    context manager, the end frame is written only if the block exits without an exception, so
    a failed producer leaves a truncated stream that readers reject.
    """

    def __init__(self, fileobj, producer=DEFAULT_PRODUCER, meta=None, max_elems=None):
        self._f = fileobj
        self.producer = producer
        self.meta = dict(meta or {})
        self.max_elems = _env_int("TRAINWIRE_MAX_ELEMS", DEFAULT_MAX_ELEMS) \
            if max_elems is None else int(max_elems)
        self._packer = msgpack.Packer(use_bin_type=True, use_single_float=False, autoreset=True)
        self._h = xxhash.xxh3_64()
        self.count = 0
        self.started = False
        self.closed = False

    def _emit(self, c, hashed):
        pk = self._packer.pack
        w = self._f.write
        buf = [_map_header(len(c))]
        for k, v in c.items():
            buf.append(pk(k))
            if isinstance(v, (bytes, bytearray, memoryview)):
                n = _nbytes(v)
                if hashed:
                    self._h.update(v)
                if n >= _BIG_BIN:  # write big payloads straight from their memory
                    buf.append(_bin_header(n))
                    w(b"".join(buf))
                    w(v)
                    buf = []
                    continue
            elif hashed and isinstance(v, (list, dict)):
                _feed_bins(v, self._h)
            buf.append(pk(v))
        if buf:
            w(b"".join(buf))

    def _start(self):
        if not self.started:
            self.started = True
            h = _structure(header(self.producer, self.meta))
            self._emit(h, False)

    def write(self, frame, validate=True):
        """Writes a data frame (any key order; it is written canonically)."""
        if self.closed:
            raise WireError("write after close")
        old = _limits.max_elems
        _limits.max_elems = self.max_elems
        try:
            c = _structure(frame)
            if c["t"] in ("header", "end"):
                raise _Bad("Writer writes header and end itself", "t")
            if validate:
                _semantics(c, strict_bool=True)
        except _Bad as e:
            msg = e.reason if not e.field else 'field "%s": %s' % (e.field, e.reason)
            raise WireError("frame %d (%s): %s" % (self.count + 1, frame.get("t"), msg)) from None
        finally:
            _limits.max_elems = old
        self._start()
        if c["t"] == "step_end":   # structure: not hashed, not counted
            self._emit(c, False)
            return
        self._emit(c, True)
        self.count += 1

    def end_step(self, step):
        """Writes a step_end frame for step and flushes: a filter reading this stream answers
        step `step` as soon as it reads it (docs/wire.md, "Steps")."""
        self.write(step_end(step))
        fl = getattr(self._f, "flush", None)
        if fl:
            fl()

    @property
    def digest(self):
        return self._h.intdigest()

    def close(self):
        """Writes the end frame (count, xxh3) and flushes; does not close fileobj."""
        if self.closed:
            return
        self._start()
        self._emit(end(self.count, self.digest), False)
        self.closed = True
        fl = getattr(self._f, "flush", None)
        if fl:
            fl()

    def __enter__(self):
        return self

    def __exit__(self, et, ev, tb):
        if et is None:
            self.close()
        return False


def write_stream(fileobj, frames, producer=DEFAULT_PRODUCER, meta=None):
    """Writes a whole stream of data frames; returns (count, xxh3)."""
    w = Writer(fileobj, producer, meta)
    for f in frames:
        w.write(f)
    w.close()
    return w.count, w.digest
