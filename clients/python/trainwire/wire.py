#!/usr/bin/python3
"""The trainwire stream contract (docs/wire.md, schema 1) in Python.

Writer writes canonical streams (byte-identical to lib/wire's encoder); Reader reads them
strictly: every length is bounded before anything is allocated, every frame is checked (t/v first,
known type and version, every documented key with its type, payload sizes against
shape/dtype/nnz/len, CRC32C of chunks) and the end frame's count and XXH3-64 digest are verified.
Errors are WireError, naming the frame index (0 = header, counted per stream) and the byte offset
(from the start of the byte stream) at which the frame starts.

Dependencies: the standard library, msgpack (>= 1.0), numpy, xxhash (xxh3_64). CRC32C uses
python3-crcmod's C extension when it is installed (~330 MB/s), else numpy lanes for payloads of
256 KiB and more (~130 MB/s) and a pure-Python slice-by-8 table loop below that (~6-15 MB/s).

CLI (exit 0 ok, 1 usage or I/O error, 2 malformed input):

    python3 -m trainwire.wire sample      > out.tw   # deterministic stream with every frame type
    python3 -m trainwire.wire roundtrip   < in.tw > out.tw   # strict read, canonical re-write
    python3 -m trainwire.wire dump        < in.tw    # JSON lines, payloads as size + xxh3
"""

import functools
import json
import math
import os
import struct
import sys
import threading

import msgpack
import numpy as np
import xxhash

__all__ = [
    "WireError", "Writer", "Reader", "canonical", "validate", "read_all", "write_stream",
    "header", "end", "step_end", "dense", "sparse_coo", "sparse_bitmap", "compressed", "part", "event",
    "model", "plan", "chunk", "stats", "error",
    "to_numpy", "sparse_indices", "sparse_values", "to_dense", "crc32c", "xxh3_of_frames",
    "DTYPES", "FRAME_TYPES", "DATA_TYPES", "STRUCTURE_TYPES", "SCHEMA",
    "DEFAULT_MAX_PAYLOAD", "DEFAULT_MAX_ELEMS", "MAX_STR", "MAX_DEPTH", "MAX_DIMS",
]

SCHEMA = 1
VERSION = 1                       # every frame type's version in schema 1
DEFAULT_PRODUCER = "python/trainwire"

MAX_BIN32 = 0xFFFFFFFF            # 4 GiB - 1
DEFAULT_MAX_PAYLOAD = MAX_BIN32   # bytes in one bin
DEFAULT_MAX_ELEMS = 1 << 20       # elements in one array or map
MAX_STR = 1 << 20                 # bytes in one str
MAX_DEPTH = 16                    # nesting of free-form values (see _c_any)
MAX_DIMS = 16                     # dimensions of a shape

_BIG_BIN = 1 << 20                # bins above this are read/written straight, not via the buffer

# dtype -> numpy dtype of its little-endian storage (bf16 is stored as its raw uint16 bits)
DTYPES = {
    "f32": "<f4", "f64": "<f8", "f16": "<f2", "bf16": "<u2",
    "i8": "i1", "u8": "u1", "i16": "<i2", "i32": "<i4", "i64": "<i8",
    "u32": "<u4", "u64": "<u8", "bool": "u1",
}
_SIZE = {k: np.dtype(v).itemsize for k, v in DTYPES.items()}
ITYPES = ("u32", "i64")


class WireError(Exception):
    """A malformed stream or frame.

    Attributes: frame (index in its stream, 0 = header; None if not known), offset (byte offset of
    the frame's start), ftype (frame type if known), field (key if known), reason (the bare cause).
    """

    def __init__(self, reason, frame=None, offset=None, ftype=None, field=None, stream=None):
        self.reason = reason
        self.frame = frame
        self.offset = offset
        self.ftype = ftype
        self.field = field
        self.stream = stream
        super().__init__(self._format())

    def _format(self):
        if self.frame is None:
            return "wire: " + self.reason
        s = "wire: "
        if self.stream:
            s += "stream %d " % self.stream
        s += "frame %d" % self.frame
        if self.ftype:
            s += " (%s)" % self.ftype
        if self.offset is not None:
            s += " at byte %d" % self.offset
        if self.field:
            s += ': field "%s"' % self.field
        return s + ": " + self.reason


class _Bad(Exception):
    """Internal: a check failed; the caller adds frame context."""

    def __init__(self, reason, field=None):
        super().__init__(reason)
        self.reason = reason
        self.field = field


class _Truncated(Exception):
    pass


# --------------------------------------------------------------------------------------------
# CRC32C (Castagnoli, reflected polynomial 0x82F63B78)

def _make_tables():
    t0 = []
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        t0.append(c)
    tables = [t0]
    for _ in range(7):
        prev = tables[-1]
        tables.append([(prev[i] >> 8) ^ t0[prev[i] & 0xFF] for i in range(256)])
    return tables


_CRC_T = _make_tables()


def _crc32c_py(data, crc=0):
    """Pure-Python CRC32C, slice-by-8 (about 15-20 MB/s on CPython 3.11)."""
    t0, t1, t2, t3, t4, t5, t6, t7 = _CRC_T
    mv = memoryview(data).cast("B")
    n8 = len(mv) & ~7
    crc ^= 0xFFFFFFFF
    for a, b in struct.iter_unpack("<II", mv[:n8]):
        a ^= crc
        crc = (t7[a & 0xFF] ^ t6[(a >> 8) & 0xFF] ^ t5[(a >> 16) & 0xFF] ^ t4[a >> 24] ^
               t3[b & 0xFF] ^ t2[(b >> 8) & 0xFF] ^ t1[(b >> 16) & 0xFF] ^ t0[b >> 24])
    for x in mv[n8:]:
        crc = t0[(crc ^ x) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


_CRC_T0_NP = np.array(_CRC_T[0], np.uint32)
_CRC_LANES = 4096


@functools.lru_cache(maxsize=8)
def _crc_shift_tables(n):
    """Byte-sliced tables of the linear map 'run the CRC register over n zero bytes'."""
    regs = np.left_shift(np.uint32(1), np.arange(32, dtype=np.uint32))
    m, e = np.uint32(0xFF), np.uint32(8)
    for _ in range(n):
        regs = _CRC_T0_NP[regs & m] ^ (regs >> e)
    img = regs.tolist()
    tabs = []
    for b in range(4):
        t = [0] * 256
        for v in range(1, 256):
            t[v] = t[v & (v - 1)] ^ img[8 * b + (v & -v).bit_length() - 1]
        tabs.append(t)
    return tabs


def _crc32c_np(data, crc=0, block=1 << 22):
    """CRC32C with numpy (about 130 MB/s): each 4 MiB block is cut into 4096 lanes whose CRC
    registers advance together, one vectorized table step per byte column; the lanes are then
    joined with the register's linearity (reg(A||B) = shift_len(B)(reg(A)) ^ reg(B) from 0)."""
    mv = memoryview(data).cast("B")
    n = len(mv)
    r = crc ^ 0xFFFFFFFF
    k = _CRC_LANES
    m, e = np.uint32(0xFF), np.uint32(8)
    pos = 0
    while n - pos >= k * 64:
        L = min(block, n - pos) // k
        cols = np.ascontiguousarray(np.frombuffer(mv[pos:pos + k * L], np.uint8).reshape(k, L).T)
        regs = np.zeros(k, np.uint32)
        regs[0] = r
        x = np.empty(k, np.uint32)
        for j in range(L):
            np.bitwise_xor(regs, cols[j], out=x)
            np.bitwise_and(x, m, out=x)
            np.right_shift(regs, e, out=regs)
            np.bitwise_xor(regs, _CRC_T0_NP[x], out=regs)
        t0, t1, t2, t3 = _crc_shift_tables(L)
        lanes = regs.tolist()
        r = lanes[0]
        for li in lanes[1:]:
            r = t0[r & 0xFF] ^ t1[(r >> 8) & 0xFF] ^ t2[(r >> 16) & 0xFF] ^ t3[r >> 24] ^ li
        pos += k * L
    if pos < n:
        return _crc32c_py(mv[pos:], r ^ 0xFFFFFFFF)
    return r ^ 0xFFFFFFFF


try:  # Debian python3-crcmod ships a C extension: hundreds of MB/s
    import importlib
    _crcmod_predefined = importlib.import_module("crcmod.predefined")
    if not getattr(importlib.import_module("crcmod.crcmod"), "_usingExtension", False):
        raise ImportError("crcmod without its C extension")
    _crc32c_ext = _crcmod_predefined.mkCrcFun("crc-32c")
    if _crc32c_ext(b"123456789") != 0xE3069283:
        raise ImportError("crcmod crc-32c mismatch")
except Exception:  # pragma: no cover - depends on the host
    _crc32c_ext = None

CRC32C_IMPL = "crcmod" if _crc32c_ext else "numpy"


def crc32c(data, crc=0):
    """CRC32C (Castagnoli) of a bytes-like object; crc continues a previous result."""
    if _crc32c_ext is not None:
        return _crc32c_ext(memoryview(data).cast("B"), crc)
    if _nbytes(data) >= 1 << 18:
        return _crc32c_np(data, crc)
    return _crc32c_py(data, crc)


# --------------------------------------------------------------------------------------------
# Frame schemas: (key, kind) in canonical order, t and v first.

def _nbytes(b):
    return b.nbytes if isinstance(b, memoryview) else len(b)


def _tname(v):
    if v is None:
        return "nil"
    if isinstance(v, bool):
        return "bool"
    if isinstance(v, int):
        return "int"
    if isinstance(v, float):
        return "float"
    if isinstance(v, str):
        return "str"
    if isinstance(v, (bytes, bytearray, memoryview)):
        return "bin"
    if isinstance(v, (list, tuple)):
        return "array"
    if isinstance(v, dict):
        return "map"
    return type(v).__name__


def _want(v, want):
    return "got %s, want %s" % (_tname(v), want)


def _c_str(v, f):
    if not isinstance(v, str):
        raise _Bad(_want(v, "str"), f)
    if len(v) > MAX_STR // 4 and len(v.encode("utf-8", "surrogatepass")) > MAX_STR:
        raise _Bad("string longer than %d bytes" % MAX_STR, f)
    return v


def _c_int(v, f):
    if isinstance(v, bool) or not isinstance(v, (int, np.integer)):
        raise _Bad(_want(v, "int"), f)
    v = int(v)
    if not -(1 << 63) <= v < (1 << 64):
        raise _Bad("integer %d out of the int64/uint64 range" % v, f)
    return v


def _c_bool(v, f):
    if not isinstance(v, (bool, np.bool_)):
        raise _Bad(_want(v, "bool"), f)
    return bool(v)


def _c_float(v, f):
    if isinstance(v, bool) or not isinstance(v, (int, float, np.integer, np.floating)):
        raise _Bad(_want(v, "float"), f)
    return float(v)


def _c_bin(v, f):
    if isinstance(v, (bytes, bytearray)):
        n = len(v)
    elif isinstance(v, memoryview):
        if not v.c_contiguous:
            raise _Bad("payload memoryview is not contiguous", f)
        v = v.cast("B") if v.format != "B" or v.ndim != 1 else v
        n = v.nbytes
    else:
        raise _Bad(_want(v, "bin") if not isinstance(v, str) else "payload is str, want bin", f)
    if n > MAX_BIN32:
        raise _Bad("payload of %d bytes exceeds the bin32 maximum (split the tensor)" % n, f)
    return v


def _c_list(v, f):
    if not isinstance(v, (list, tuple)):
        raise _Bad(_want(v, "array"), f)
    if len(v) > _limits.max_elems:
        raise _Bad("array of %d elements exceeds the limit %d" % (len(v), _limits.max_elems), f)
    return v


def _c_map(v, f):
    if not isinstance(v, dict):
        raise _Bad(_want(v, "map"), f)
    if len(v) > _limits.max_elems:
        raise _Bad("map of %d entries exceeds the limit %d" % (len(v), _limits.max_elems), f)
    for k in v:
        if not isinstance(k, str):
            raise _Bad("map key %r is %s, want str" % (k, _tname(k)), f)
        _c_str(k, f)
    return v


def _c_shape(v, f):
    _c_list(v, f)
    if len(v) > MAX_DIMS:
        raise _Bad("shape has %d dimensions, more than %d" % (len(v), MAX_DIMS), f)
    out = []
    for d in v:
        d = _c_int(d, f)
        if d < 0:
            raise _Bad("negative dimension %d" % d, f)
        out.append(d)
    return out


def _c_strmap(v, f):
    _c_map(v, f)
    return {k: _c_str(v[k], f + "." + k) for k in sorted(v)}


def _c_floatmap(v, f):
    _c_map(v, f)
    return {k: _c_float(v[k], f + "." + k) for k in sorted(v)}


def _c_any(v, f, depth):
    # depth: the free-form map (args, params, meta, an item of plan.items) is 0, its values 1;
    # nothing may sit deeper than MAX_DEPTH (as lib/wire)
    if depth > MAX_DEPTH:
        raise _Bad("free-form value nested deeper than %d" % MAX_DEPTH, f)
    if v is None or isinstance(v, (bool, str)):
        return _c_str(v, f) if isinstance(v, str) else v
    if isinstance(v, (int, np.integer)):
        return _c_int(v, f)
    if isinstance(v, (float, np.floating)):
        return float(v)
    if isinstance(v, (bytes, bytearray, memoryview)):
        return _c_bin(v, f)
    if isinstance(v, (list, tuple, dict)):
        if isinstance(v, dict):
            _c_map(v, f)
            return {k: _c_any(v[k], f, depth + 1) for k in sorted(v)}
        _c_list(v, f)
        return [_c_any(x, f, depth + 1) for x in v]
    raise _Bad("free-form value of type %s (want nil, bool, int, float, str, bin, array, map)"
               % type(v).__name__, f)


def _c_anymap(v, f):
    _c_map(v, f)
    return _c_any(v, f, 0)


def _record(spec, what):
    def check(v, f):
        _c_map(v, f)
        out = {}
        for k, kind in spec:
            if k not in v:
                raise _Bad("%s without key \"%s\"" % (what, k), f)
            out[k] = kind(v[k], f + "." + k)
        return out
    return check


def _records(spec, what):
    one = _record(spec, what)

    def check(v, f):
        _c_list(v, f)
        return [one(x, "%s[%d]" % (f, i)) for i, x in enumerate(v)]
    return check


def _c_groups(v, f):
    _c_list(v, f)
    out = []
    for i, g in enumerate(v):
        fi = "%s[%d]" % (f, i)
        _c_list(g, fi)
        if len(g) != 2:
            raise _Bad("group has %d elements, want [first, last]" % len(g), fi)
        a, b = _c_int(g[0], fi), _c_int(g[1], fi)
        if a < 0 or b < a:
            raise _Bad("bad range [%d, %d]" % (a, b), fi)
        out.append([a, b])
    return out


def _c_items(v, f):
    _c_list(v, f)
    return [_c_anymap(x, "%s[%d]" % (f, i)) for i, x in enumerate(v)]


_PART = [("name", _c_str), ("dtype", _c_str), ("shape", _c_shape), ("data", _c_bin)]
_GRAD = [("name", _c_str), ("bytes", _c_int), ("numel", _c_int), ("dtype", _c_str),
         ("ready_ns", _c_int), ("compute_ns", _c_int)]
_COMM = [("op", _c_str), ("bytes", _c_int), ("ns", _c_int), ("world", _c_int)]
_c_parts = _records(_PART, "part")
_c_grads = _records(_GRAD, "grad")
_c_comm = _records(_COMM, "comm sample")

_NSR = [("name", _c_str), ("step", _c_int), ("rank", _c_int)]

FIELDS = {
    "header": [("producer", _c_str), ("schema", _c_int), ("meta", _c_strmap)],
    "end": [("count", _c_int), ("xxh3", _c_int)],
    "step_end": [("step", _c_int)],
    "dense": _NSR + [("dtype", _c_str), ("shape", _c_shape), ("data", _c_bin)],
    "sparse": _NSR + [("dtype", _c_str), ("shape", _c_shape), ("width", _c_int),
                      ("format", _c_str), ("itype", _c_str), ("nnz", _c_int),
                      ("indices", _c_bin), ("values", _c_bin)],
    "compressed": _NSR + [("algo", _c_str), ("params", _c_anymap), ("dtype", _c_str),
                          ("shape", _c_shape), ("parts", _c_parts)],
    "event": [("name", _c_str), ("cat", _c_str), ("ph", _c_str), ("rank", _c_int),
              ("pid", _c_int), ("tid", _c_int), ("stream", _c_int), ("ts", _c_int),
              ("dur", _c_int), ("corr", _c_int), ("args", _c_anymap)],
    "model": [("name", _c_str), ("world", _c_int), ("iters", _c_int), ("iter_ns", _c_int),
              ("forward_ns", _c_int), ("backward_ns", _c_int), ("grads", _c_grads),
              ("comm", _c_comm), ("meta", _c_anymap)],
    "plan": [("kind", _c_str), ("algo", _c_str), ("groups", _c_groups), ("items", _c_items),
             ("predicted_ns", _c_int), ("proven_optimal", _c_bool), ("meta", _c_anymap)],
    "chunk": [("job", _c_str), ("iter", _c_int), ("src_rank", _c_int), ("replica_of", _c_int),
              ("offset", _c_int), ("len", _c_int), ("total_len", _c_int), ("crc32c", _c_int),
              ("data", _c_bin)],
    "stats": [("tool", _c_str), ("name", _c_str), ("step", _c_int), ("rank", _c_int),
              ("values", _c_floatmap), ("labels", _c_strmap)],
    "error": [("code", _c_str), ("msg", _c_str), ("rank", _c_int), ("frame", _c_int)],
}
FRAME_TYPES = tuple(FIELDS)
# Structure: not data frames, not counted in end.count, no bins (step_end: docs/wire.md "Steps").
STRUCTURE_TYPES = ("header", "end", "step_end")
DATA_TYPES = tuple(t for t in FIELDS if t not in STRUCTURE_TYPES)
KEYS = {t: ("t", "v") + tuple(k for k, _ in spec) for t, spec in FIELDS.items()}


class _Limits(threading.local):
    max_elems = DEFAULT_MAX_ELEMS   # per thread: Writer/Reader set it around their checks


_limits = _Limits()


def _structure(frame):
    """Canonical copy of frame (documented keys only, in order); raises _Bad."""
    if not isinstance(frame, dict):
        raise _Bad("frame is %s, want map" % _tname(frame))
    t = frame.get("t")
    if not isinstance(t, str):
        raise _Bad(_want(t, "str") if "t" in frame else "no \"t\" key", "t")
    spec = FIELDS.get(t)
    if spec is None:
        raise _Bad("unknown frame type \"%s\"" % t, "t")
    v = frame.get("v", VERSION)
    v = _c_int(v, "v")
    if v > VERSION:
        raise _Bad("version %d of \"%s\" is newer than this reader (%d)" % (v, t, VERSION), "v")
    if v < 1:
        raise _Bad("bad version %d" % v, "v")
    out = {"t": t, "v": v}
    for k, kind in spec:
        if k not in frame:
            raise _Bad("missing", k)
        out[k] = kind(frame[k], k)
    return out


def _dtype(d, f="dtype"):
    if d not in _SIZE:
        raise _Bad("unknown dtype \"%s\"" % d, f)
    return _SIZE[d]


def _prod(shape):
    n = 1
    for d in shape:
        n *= d
    return n


def _check_bool_payload(data, f):
    if _nbytes(data) and np.frombuffer(data, np.uint8).max() > 1:
        raise _Bad("bool payload has a byte other than 0 or 1", f)


_POP = np.array([bin(i).count("1") for i in range(256)], np.uint8)


def _popcount(b):
    a = np.frombuffer(b, np.uint8)
    total = 0
    for i in range(0, len(a), 1 << 24):
        total += int(_POP[a[i:i + (1 << 24)]].sum(dtype=np.int64))
    return total


def _semantics(c, verify_crc=True, strict_bool=False):
    """Cross-checks of a canonical frame (payload sizes, ranges, CRC); raises _Bad.
    strict_bool: bool payloads must hold only 0 and 1 bytes (the writer's rule; readers accept
    any byte, as lib/wire does)."""
    t = c["t"]
    if t == "header":
        if c["schema"] != SCHEMA:
            raise _Bad("schema %d, this reader knows %d" % (c["schema"], SCHEMA), "schema")
    elif t == "end":
        if c["count"] < 0:
            raise _Bad("negative count", "count")
        if not 0 <= c["xxh3"] < (1 << 64):
            raise _Bad("xxh3 out of the uint64 range", "xxh3")
    elif t == "step_end":
        if c["step"] < 0:
            raise _Bad("negative step %d" % c["step"], "step")
    elif t == "dense":
        size = _dtype(c["dtype"])
        want = _prod(c["shape"]) * size
        if _nbytes(c["data"]) != want:
            raise _Bad("payload is %d bytes, want %d (shape %s of %s)"
                       % (_nbytes(c["data"]), want, c["shape"], c["dtype"]), "data")
        if strict_bool and c["dtype"] == "bool":
            _check_bool_payload(c["data"], "data")
    elif t == "sparse":
        _check_sparse(c, strict_bool)
    elif t == "compressed":
        if not c["algo"]:
            raise _Bad("empty", "algo")
        _dtype(c["dtype"])
        for i, p in enumerate(c["parts"]):
            f = "parts[%d]" % i
            size = _dtype(p["dtype"], f + ".dtype")
            want = _prod(p["shape"]) * size
            if _nbytes(p["data"]) != want:
                raise _Bad("payload is %d bytes, want %d (shape %s of %s)"
                           % (_nbytes(p["data"]), want, p["shape"], p["dtype"]), f + ".data")
    elif t == "event":
        if c["dur"] < 0:
            raise _Bad("negative duration %d" % c["dur"], "dur")
    elif t == "chunk":
        n = _nbytes(c["data"])
        if c["len"] != n:
            raise _Bad("data is %d bytes, len says %d" % (n, c["len"]), "data")
        if c["offset"] < 0:
            raise _Bad("negative offset", "offset")
        if c["total_len"] < c["offset"] + c["len"]:
            raise _Bad("offset+len %d exceeds total_len %d"
                       % (c["offset"] + c["len"], c["total_len"]), "total_len")
        if not 0 <= c["crc32c"] <= 0xFFFFFFFF:
            raise _Bad("crc32c out of the uint32 range", "crc32c")
        if verify_crc:
            got = crc32c(c["data"])
            if got != c["crc32c"]:
                raise _Bad("CRC32C of data is 0x%08x, frame says 0x%08x" % (got, c["crc32c"]),
                           "crc32c")


def _check_sparse(c, strict_bool):
    size = _dtype(c["dtype"])
    total = _prod(c["shape"])
    width = c["width"]
    if width < 1:
        raise _Bad("width %d < 1" % width, "width")
    if total % width:
        raise _Bad("width %d does not divide prod(shape) %d" % (width, total), "width")
    rows = total // width
    nnz = c["nnz"]
    if not 0 <= nnz <= rows:
        raise _Bad("nnz %d outside [0, %d rows]" % (nnz, rows), "nnz")
    want = nnz * width * size
    if _nbytes(c["values"]) != want:
        raise _Bad("values are %d bytes, want nnz*width*sizeof(%s) = %d"
                   % (_nbytes(c["values"]), c["dtype"], want), "values")
    if strict_bool and c["dtype"] == "bool":
        _check_bool_payload(c["values"], "values")
    fmt = c["format"]
    if fmt == "coo":
        it = c["itype"]
        if it not in ITYPES:
            raise _Bad("itype \"%s\", want u32 or i64" % it, "itype")
        want = nnz * _SIZE[it]
        if _nbytes(c["indices"]) != want:
            raise _Bad("indices are %d bytes, want nnz*sizeof(%s) = %d"
                       % (_nbytes(c["indices"]), it, want), "indices")
        if nnz:
            idx = np.frombuffer(c["indices"], DTYPES[it])
            lo, hi = int(idx.min()), int(idx.max())
            if lo < 0 or hi >= rows:
                raise _Bad("row index out of [0, %d): min %d max %d" % (rows, lo, hi), "indices")
    elif fmt == "bitmap":
        if c["itype"] != "":
            raise _Bad("itype must be \"\" for bitmap, got \"%s\"" % c["itype"], "itype")
        want = (rows + 7) // 8
        b = c["indices"]
        if _nbytes(b) != want:
            raise _Bad("bitmap is %d bytes, want ceil(%d rows / 8) = %d"
                       % (_nbytes(b), rows, want), "indices")
        if rows % 8 and (memoryview(b).cast("B")[-1] >> (rows % 8)):
            raise _Bad("bitmap has bits set past row %d" % rows, "indices")
        pc = _popcount(b)
        if pc != nnz:
            raise _Bad("bitmap has %d bits set, nnz is %d" % (pc, nnz), "indices")
    else:
        raise _Bad("format \"%s\", want coo or bitmap" % fmt, "format")


def canonical(frame):
    """A copy of frame in canonical order: t, v, documented keys in order, free-form maps sorted,
    stats values as float, unknown keys dropped. Raises WireError if a key is missing or has the
    wrong type. Payload sizes are not checked here: see validate()."""
    try:
        return _structure(frame)
    except _Bad as e:
        t = frame.get("t") if isinstance(frame, dict) else None
        raise WireError(e.reason, ftype=t if isinstance(t, str) else None,
                        field=e.field) from None


def validate(frame, verify_crc=True):
    """Canonical copy of frame after every check (structure, payload sizes, CRC32C of chunks)."""
    try:
        c = _structure(frame)
        _semantics(c, verify_crc, strict_bool=True)
        return c
    except _Bad as e:
        t = frame.get("t") if isinstance(frame, dict) else None
        msg = e.reason if not e.field else 'field "%s": %s' % (e.field, e.reason)
        raise WireError(("%s frame: " % t if isinstance(t, str) else "") + msg) from None


def _feed_bins(v, h):
    if isinstance(v, (bytes, bytearray, memoryview)):
        h.update(v)
    elif isinstance(v, dict):
        for x in v.values():
            _feed_bins(x, h)
    elif isinstance(v, (list, tuple)):
        for x in v:
            _feed_bins(x, h)


def xxh3_of_frames(frames):
    """XXH3-64 (seed 0) of every bin value of the given (data) frames, in canonical order."""
    h = xxhash.xxh3_64()
    for f in frames:
        _feed_bins(canonical(f), h)
    return h.intdigest()


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


# --------------------------------------------------------------------------------------------
# Reader: a small strict msgpack decoder that checks every length before reading it.

def _env_int(name, default):
    v = os.environ.get(name)
    if not v:
        return default
    try:
        return int(v, 0)
    except ValueError:
        raise WireError("%s=%r is not an integer" % (name, v)) from None


_U8, _U16, _U32, _U64 = struct.Struct(">B"), struct.Struct(">H"), struct.Struct(">I"), \
    struct.Struct(">Q")
_I8, _I16, _I32, _I64 = struct.Struct(">b"), struct.Struct(">h"), struct.Struct(">i"), \
    struct.Struct(">q")
_F32, _F64 = struct.Struct(">f"), struct.Struct(">d")

_FMT_NAMES = {0xC0: "nil", 0xC1: "never-used byte 0xc1", 0xC2: "bool", 0xC3: "bool",
              0xC4: "bin8", 0xC5: "bin16", 0xC6: "bin32", 0xC7: "ext8", 0xC8: "ext16",
              0xC9: "ext32", 0xCA: "float32", 0xCB: "float64", 0xCC: "uint8", 0xCD: "uint16",
              0xCE: "uint32", 0xCF: "uint64", 0xD0: "int8", 0xD1: "int16", 0xD2: "int32",
              0xD3: "int64", 0xD4: "fixext1", 0xD5: "fixext2", 0xD6: "fixext4",
              0xD7: "fixext8", 0xD8: "fixext16", 0xD9: "str8", 0xDA: "str16", 0xDB: "str32",
              0xDC: "array16", 0xDD: "array32", 0xDE: "map16", 0xDF: "map32"}


def _fmt_name(b):
    if b <= 0x7F:
        return "positive fixint"
    if b <= 0x8F:
        return "fixmap"
    if b <= 0x9F:
        return "fixarray"
    if b <= 0xBF:
        return "fixstr"
    if b >= 0xE0:
        return "negative fixint"
    return _FMT_NAMES[b]


def _not_stream(head):
    """What input that cannot be a frame looks like (lib/wire's notStream)."""
    try:
        text = head.decode("utf-8")
    except UnicodeDecodeError as e:
        text = None
        if e.reason == "unexpected end of data":  # a character cut where the buffer ends
            text = head[:e.start].decode("utf-8")
    if text is None or any((c < " " and c not in "\t\r\n") or c == "\x7f" for c in text):
        return "not a trainwire stream: byte 0x%02x cannot start a frame (a frame is a msgpack map)" % head[0]
    body = text.lstrip(" \t\r\n")
    what = "JSON" if body[:1] in ("{", "[") else "text"
    body = body.split("\n", 1)[0]
    return "this looks like %s, not a trainwire stream (it starts with %s)" % (
        what, json.dumps(body, ensure_ascii=False))


class _Decoder:
    """Streaming msgpack decoder with limits checked on every header."""

    def __init__(self, f, max_payload, max_elems, max_str=MAX_STR, max_depth=MAX_DEPTH + 3):
        self._read_some = getattr(f, "read1", None) or f.read
        self._read_full = f.read
        self._buf = b""
        self._pos = 0
        self._base = 0        # byte offset of _buf[0]
        self._eof = False
        self.max_payload = max_payload
        self.max_elems = max_elems
        self.max_str = max_str
        self.max_depth = max_depth
        self.hasher = None    # bins are fed to it when set

    def tell(self):
        return self._base + self._pos

    def _more(self, n):
        have = len(self._buf) - self._pos
        chunks = [self._buf[self._pos:]] if have else []
        self._base += self._pos
        while have < n and not self._eof:
            d = self._read_some(max(n - have, 1 << 16))
            if not d:
                self._eof = True
                break
            chunks.append(d)
            have += len(d)
        self._buf = chunks[0] if len(chunks) == 1 else b"".join(chunks)
        self._pos = 0
        if have < n:
            raise _Truncated()

    def at_eof(self):
        if self._pos < len(self._buf):
            return False
        try:
            self._more(1)
        except _Truncated:
            return True
        return False

    def _take(self, n):
        pos = self._pos
        if len(self._buf) - pos < n:
            if n > _BIG_BIN:
                return self._take_big(n)
            self._more(n)
            pos = 0
        self._pos = pos + n
        return self._buf[pos:pos + n]

    def _take_big(self, n):
        have = len(self._buf) - self._pos
        chunks = [self._buf[self._pos:]] if have else []
        self._base += len(self._buf)
        self._buf, self._pos = b"", 0
        need = n - have
        while need > 0:  # never ask for more than 16 MiB at once: memory follows actual data
            d = self._read_full(min(need, 1 << 24))
            if not d:
                self._eof = True
                raise _Truncated()
            chunks.append(d)
            need -= len(d)
            self._base += len(d)
        return chunks[0] if len(chunks) == 1 else b"".join(chunks)

    def buffered(self, n):
        """Up to n bytes already read and not consumed (never reads more)."""
        return self._buf[self._pos:self._pos + n]

    def _byte(self):
        if self._pos >= len(self._buf):
            self._more(1)
        b = self._buf[self._pos]
        self._pos += 1
        return b

    def _unpack(self, st):
        n = st.size
        if len(self._buf) - self._pos < n:
            self._more(n)
        v = st.unpack_from(self._buf, self._pos)[0]
        self._pos += n
        return v

    def _str(self, n):
        if n > self.max_str:
            raise _Bad("str of %d bytes exceeds the limit %d" % (n, self.max_str))
        try:
            return self._take(n).decode("utf-8")
        except UnicodeDecodeError:
            raise _Bad("str is not valid UTF-8") from None

    def _bin(self, n):
        if n > self.max_payload:
            raise _Bad("bin of %d bytes exceeds --max-payload %d" % (n, self.max_payload))
        b = self._take(n)
        if self.hasher is not None:
            self.hasher.update(b)
        return b

    def _array(self, n, depth):
        if n > self.max_elems:
            raise _Bad("array of %d elements exceeds --max-elems %d" % (n, self.max_elems))
        if depth >= self.max_depth:
            raise _Bad("nesting deeper than %d" % self.max_depth)
        obj = self.obj
        return [obj(depth + 1) for _ in range(n)]

    def _map(self, n, depth):
        if n > self.max_elems:
            raise _Bad("map of %d entries exceeds --max-elems %d" % (n, self.max_elems))
        if depth >= self.max_depth:
            raise _Bad("nesting deeper than %d" % self.max_depth)
        d = {}
        for _ in range(n):
            k = self.key()
            if k in d:
                raise _Bad("duplicate map key \"%s\"" % k)
            d[k] = self.obj(depth + 1)
        return d

    def map_len(self):
        b = self._byte()
        if 0x80 <= b <= 0x8F:
            n = b & 0x0F
        elif b == 0xDE:
            n = self._unpack(_U16)
        elif b == 0xDF:
            n = self._unpack(_U32)
        else:
            raise _Bad("frame is %s, want map" % _fmt_name(b))
        if n > self.max_elems:
            raise _Bad("map of %d entries exceeds --max-elems %d" % (n, self.max_elems))
        return n

    def key(self):
        b = self._byte()
        if 0xA0 <= b <= 0xBF:
            return self._str(b & 0x1F)
        if b == 0xD9:
            return self._str(self._unpack(_U8))
        if b == 0xDA:
            return self._str(self._unpack(_U16))
        if b == 0xDB:
            return self._str(self._unpack(_U32))
        raise _Bad("map key is %s, want str" % _fmt_name(b))

    def obj(self, depth=0):
        b = self._byte()
        if b <= 0x7F:
            return b
        if b >= 0xE0:
            return b - 0x100
        if b >= 0xA0 and b <= 0xBF:
            return self._str(b & 0x1F)
        if b >= 0x90 and b <= 0x9F:
            return self._array(b & 0x0F, depth)
        if b >= 0x80 and b <= 0x8F:
            return self._map(b & 0x0F, depth)
        if b == 0xC0:
            return None
        if b == 0xC2:
            return False
        if b == 0xC3:
            return True
        if b == 0xC4:
            return self._bin(self._unpack(_U8))
        if b == 0xC5:
            return self._bin(self._unpack(_U16))
        if b == 0xC6:
            return self._bin(self._unpack(_U32))
        if b == 0xCA:
            return self._unpack(_F32)
        if b == 0xCB:
            return self._unpack(_F64)
        if b == 0xCC:
            return self._unpack(_U8)
        if b == 0xCD:
            return self._unpack(_U16)
        if b == 0xCE:
            return self._unpack(_U32)
        if b == 0xCF:
            return self._unpack(_U64)
        if b == 0xD0:
            return self._unpack(_I8)
        if b == 0xD1:
            return self._unpack(_I16)
        if b == 0xD2:
            return self._unpack(_I32)
        if b == 0xD3:
            return self._unpack(_I64)
        if b == 0xD9:
            return self._str(self._unpack(_U8))
        if b == 0xDA:
            return self._str(self._unpack(_U16))
        if b == 0xDB:
            return self._str(self._unpack(_U32))
        if b == 0xDC:
            return self._array(self._unpack(_U16), depth)
        if b == 0xDD:
            return self._array(self._unpack(_U32), depth)
        if b == 0xDE:
            return self._map(self._unpack(_U16), depth)
        if b == 0xDF:
            return self._map(self._unpack(_U32), depth)
        raise _Bad("%s is not allowed in a trainwire stream" % _fmt_name(b))


class Reader:
    """Strict reader of trainwire streams (possibly several concatenated ones).

    Iterating yields the data frames (dicts as decoded, wire key order, unknown keys kept; pass
    them through canonical() for the canonical form). `.header` is the current stream's header,
    `.headers` every header seen, `.ends` every verified end frame. frames() also yields header,
    step_end and end frames. With multi=False, reading stops after the first end frame (the rest
    of the file is left unread). An empty input is an error unless allow_empty=True.

    Limits (checked before anything is allocated): max_payload bytes per bin (default
    $TRAINWIRE_MAX_PAYLOAD or 4 GiB-1), max_elems per array/map (default $TRAINWIRE_MAX_ELEMS or
    1 Mi), 1 MiB per str, free-form nesting 16, shape dims 16.
    """

    def __init__(self, fileobj, max_payload=None, max_elems=None, multi=True,
                 allow_empty=False, verify_crc=True):
        if max_payload is None:
            max_payload = _env_int("TRAINWIRE_MAX_PAYLOAD", DEFAULT_MAX_PAYLOAD)
        if max_elems is None:
            max_elems = _env_int("TRAINWIRE_MAX_ELEMS", DEFAULT_MAX_ELEMS)
        self.max_payload = int(max_payload)
        self.max_elems = int(max_elems)
        self.multi = multi
        self.allow_empty = allow_empty
        self.verify_crc = verify_crc
        self._d = _Decoder(fileobj, self.max_payload, self.max_elems)
        self._gen = None
        self._pending = []
        self._header = None
        self.headers = []
        self.ends = []
        self.stream = -1      # index of the current stream
        self.index = 0        # index of the next frame in the current stream
        self.count = 0        # data frames read in the current stream

    @property
    def header(self):
        """The current stream's header (read from the input on first access)."""
        if self._header is None and not self._pending:
            self.read_header()
        return self._header

    @property
    def offset(self):
        """Byte offset of the next unread byte."""
        return self._d.tell()

    def read_header(self):
        """Reads up to and including the next stream's header; returns it."""
        if self._gen is None:
            self._gen = self._frames()
        for f in self._gen:
            self._pending.append(f)   # frames() still yields everything, in order
            if f["t"] == "header":
                return f
        return None

    def frames(self):
        """Every frame, header and end included, each checked before it is yielded."""
        if self._gen is None:
            self._gen = self._frames()
        while self._pending:
            yield self._pending.pop(0)
        yield from self._gen

    def __iter__(self):
        for f in self.frames():
            if f["t"] not in STRUCTURE_TYPES:
                yield f

    def _err(self, reason, start, t=None, field=None):
        return WireError(reason, frame=self.index, offset=start, ftype=t, field=field,
                         stream=self.stream if self.stream > 0 else None)

    def _frames(self):
        d = self._d
        in_stream = False
        while True:
            start = d.tell()
            if d.at_eof():
                if in_stream:
                    raise WireError("stream truncated: %d frames read, no end frame, at byte %d"
                                    % (self.index, start), stream=self.stream or None)
                if self.stream < 0 and not self.allow_empty:
                    raise WireError("empty input: no header at byte 0")
                return
            if not in_stream:
                self.stream += 1
                self.index = 0
                self.count = 0
                self._h = xxhash.xxh3_64()
            frame = self._decode_frame(start, in_stream)
            t = frame["t"]
            old = _limits.max_elems
            _limits.max_elems = self.max_elems
            try:
                c = _structure(frame)
                _semantics(c, self.verify_crc)
            except _Bad as e:
                raise self._err(e.reason, start, t, e.field) from None
            finally:
                _limits.max_elems = old
            if t == "header":
                self._header = frame
                self.headers.append(frame)
                in_stream = True
            elif t == "end":
                if c["count"] != self.count:
                    raise self._err("end says %d data frames, read %d" % (c["count"], self.count),
                                    start, t, "count")
                got = self._h.intdigest()
                if c["xxh3"] != got:
                    raise self._err("xxh3 mismatch: end says 0x%016x, data hashes to 0x%016x"
                                    % (c["xxh3"], got), start, t, "xxh3")
                self.ends.append(frame)
                in_stream = False
            elif t != "step_end":
                self.count += 1
            self.index += 1
            yield frame
            if t == "end" and not self.multi:
                return

    def _decode_frame(self, start, in_stream):
        d = self._d
        t = None
        field = None
        try:
            head = d.buffered(40)
            if head and head[0] < 0x80:
                raise _Bad(_not_stream(head))  # a positive fixint never starts a frame; text does
            n = d.map_len()
            if n < 2:
                raise _Bad("frame map has %d keys, want at least t and v" % n)
            if d.key() != "t":
                raise _Bad("first key is not \"t\"")
            field = "t"
            t = d.obj(1)
            if not isinstance(t, str):
                raise _Bad(_want(t, "str"))
            if t not in FIELDS:
                raise _Bad("unknown frame type \"%s\"" % t)
            field = None
            if d.key() != "v":
                raise _Bad("second key is not \"v\"")
            field = "v"
            v = d.obj(1)
            if isinstance(v, bool) or not isinstance(v, int):
                raise _Bad(_want(v, "int"))
            if v > VERSION:
                raise _Bad("version %d of \"%s\" is newer than this reader knows (%d)"
                           % (v, t, VERSION))
            if v < 1:
                raise _Bad("bad version %d" % v)
            field = None
            if t == "header":
                if in_stream:
                    raise _Bad("header inside a stream (previous stream has no end frame)")
            elif not in_stream:
                raise _Bad("stream does not start with a header")
            is_data = t not in STRUCTURE_TYPES
            d.hasher = self._h if is_data else None
            frame = {"t": t, "v": v}
            for _ in range(n - 2):
                field = None
                k = d.key()
                field = k
                if k in frame:
                    raise _Bad("duplicate key")
                frame[k] = d.obj(1)
            d.hasher = None
            return frame
        except _Bad as e:
            d.hasher = None
            raise self._err(e.reason, start, t, field) from None
        except _Truncated:
            d.hasher = None
            raise self._err("stream truncated inside the frame (%d frames read before it), "
                            "at byte %d" % (self.index, d.tell()), start, t, field) from None


def read_all(fileobj, **kw):
    """(headers, data frames) of every stream in fileobj, checked."""
    r = Reader(fileobj, **kw)
    frames = list(r)
    return r.headers, frames


# --------------------------------------------------------------------------------------------
# Frame constructors (each returns a dict in canonical order)

_NP2DT = {("f", 4): "f32", ("f", 8): "f64", ("f", 2): "f16", ("i", 1): "i8", ("u", 1): "u8",
          ("i", 2): "i16", ("i", 4): "i32", ("i", 8): "i64", ("u", 4): "u32", ("u", 8): "u64",
          ("b", 1): "bool", ("u", 2): "u16?"}


def _wire_dtype(a):
    dt = _NP2DT.get((a.dtype.kind, a.dtype.itemsize))
    if dt is None or dt.endswith("?"):
        raise WireError("numpy dtype %s has no trainwire dtype" % a.dtype)
    return dt


def _f32_to_bf16_bits(a):
    u = np.ascontiguousarray(a, "<f4").view("<u4").astype(np.uint64)
    nan = np.isnan(np.ascontiguousarray(a, "<f4"))
    r = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype("<u2")   # round to nearest even
    r[nan] = ((u[nan] >> 16) | 0x40).astype("<u2")           # keep NaN a (quiet) NaN
    return r


def _payload(a, dtype=None):
    """(wire dtype, shape, little-endian bytes) of a numpy array (or array-like)."""
    a = np.asarray(a)
    if dtype is None:
        dtype = _wire_dtype(a)
    if dtype not in DTYPES:
        raise WireError("unknown dtype \"%s\"" % dtype)
    if dtype == "bf16":
        a = _f32_to_bf16_bits(a) if a.dtype.kind == "f" else a.astype("<u2")
    elif dtype == "bool":
        a = a.astype(bool).view(np.uint8)
    else:
        a = a.astype(DTYPES[dtype], copy=False)
    return dtype, [int(d) for d in a.shape], np.ascontiguousarray(a).tobytes()


def dense(name, array, step=0, rank=-1, dtype=None):
    """Dense frame from a numpy array (dtype from the array, or forced: e.g. "bf16" from f32)."""
    dt, shape, data = _payload(array, dtype)
    return {"t": "dense", "v": VERSION, "name": name, "step": int(step), "rank": int(rank),
            "dtype": dt, "shape": shape, "data": data}


def _rows_values(shape, values, width, dtype):
    total = _prod(shape)
    if width is None:
        width = 1
    v = np.asarray(values)
    dt, _, data = _payload(v.reshape(-1), dtype)
    return total, int(width), dt, data


def sparse_coo(name, shape, indices, values, width=1, step=0, rank=-1, itype=None, dtype=None):
    """Sparse COO frame: indices are row indices (rows of `width` elements), values hold
    len(indices)*width elements (any shape, row-major)."""
    shape = [int(d) for d in shape]
    idx = np.asarray(indices).reshape(-1)
    _, width, dt, vals = _rows_values(shape, values, width, dtype)
    if itype is None:
        if idx.dtype == np.int64:
            itype = "i64"
        elif idx.size == 0 or (int(idx.min()) >= 0 and int(idx.max()) <= 0xFFFFFFFF):
            itype = "u32"
        else:
            itype = "i64"
    ib = np.ascontiguousarray(idx.astype(DTYPES[itype])).tobytes()
    return {"t": "sparse", "v": VERSION, "name": name, "step": int(step), "rank": int(rank),
            "dtype": dt, "shape": shape, "width": width, "format": "coo", "itype": itype,
            "nnz": int(idx.size), "indices": ib, "values": vals}


def sparse_bitmap(name, shape, rows, values, width=1, step=0, rank=-1, dtype=None):
    """Sparse bitmap frame: rows is a boolean mask of the rows present (length prod(shape)/width)
    or an array of row indices; values hold nnz*width elements in row order."""
    shape = [int(d) for d in shape]
    total, width, dt, vals = _rows_values(shape, values, width, dtype)
    nrows = total // width if width else 0
    r = np.asarray(rows)
    if r.dtype == bool:
        mask = r.reshape(-1)
        if mask.size != nrows:
            raise WireError("bitmap mask has %d rows, want %d" % (mask.size, nrows))
    else:
        mask = np.zeros(nrows, bool)
        mask[r.reshape(-1).astype(np.int64)] = True
    bits = np.packbits(mask, bitorder="little").tobytes()
    return {"t": "sparse", "v": VERSION, "name": name, "step": int(step), "rank": int(rank),
            "dtype": dt, "shape": shape, "width": width, "format": "bitmap", "itype": "",
            "nnz": int(mask.sum()), "indices": bits, "values": vals}


def part(name, array, dtype=None):
    """One output of a codec for compressed(): {"name", "dtype", "shape", "data"}."""
    dt, shape, data = _payload(array, dtype)
    return {"name": name, "dtype": dt, "shape": shape, "data": data}


def compressed(name, algo, params, shape, dtype, parts, step=0, rank=-1):
    """Compressed frame; parts are part() dicts or (name, numpy array) pairs."""
    ps = [p if isinstance(p, dict) else part(*p) for p in parts]
    return {"t": "compressed", "v": VERSION, "name": name, "step": int(step), "rank": int(rank),
            "algo": algo, "params": dict(params or {}), "dtype": dtype,
            "shape": [int(d) for d in shape], "parts": ps}


def event(name, cat="other", ph="X", ts=0, dur=0, rank=-1, pid=0, tid=0, stream=-1, corr=-1,
          args=None):
    return {"t": "event", "v": VERSION, "name": name, "cat": cat, "ph": ph, "rank": int(rank),
            "pid": int(pid), "tid": int(tid), "stream": int(stream), "ts": int(ts),
            "dur": int(dur), "corr": int(corr), "args": dict(args or {})}


def model(name, world=1, iters=0, iter_ns=0, forward_ns=0, backward_ns=0, grads=(), comm=(),
          meta=None):
    """grads: dicts {name, bytes, numel, dtype, ready_ns, compute_ns} in backprop order;
    comm: dicts {op, bytes, ns, world}."""
    return {"t": "model", "v": VERSION, "name": name, "world": int(world), "iters": int(iters),
            "iter_ns": int(iter_ns), "forward_ns": int(forward_ns),
            "backward_ns": int(backward_ns), "grads": [dict(g) for g in grads],
            "comm": [dict(c) for c in comm], "meta": dict(meta or {})}


def plan(kind, algo, groups=(), items=(), predicted_ns=0, proven_optimal=False, meta=None):
    return {"t": "plan", "v": VERSION, "kind": kind, "algo": algo,
            "groups": [[int(a), int(b)] for a, b in groups], "items": [dict(i) for i in items],
            "predicted_ns": int(predicted_ns), "proven_optimal": bool(proven_optimal),
            "meta": dict(meta or {})}


def chunk(job, iter, data, offset=0, total_len=None, src_rank=-1, replica_of=-1):
    """Checkpoint chunk; len and crc32c are computed from data."""
    data = bytes(data) if not isinstance(data, (bytes, bytearray)) else data
    n = len(data)
    return {"t": "chunk", "v": VERSION, "job": job, "iter": int(iter), "src_rank": int(src_rank),
            "replica_of": int(replica_of), "offset": int(offset), "len": n,
            "total_len": int(offset) + n if total_len is None else int(total_len),
            "crc32c": crc32c(data), "data": data}


def stats(tool, name, values, labels=None, step=0, rank=-1):
    return {"t": "stats", "v": VERSION, "tool": tool, "name": name, "step": int(step),
            "rank": int(rank), "values": {k: float(v) for k, v in values.items()},
            "labels": dict(labels or {})}


def error(code, msg, rank=-1, frame=-1):
    return {"t": "error", "v": VERSION, "code": code, "msg": msg, "rank": int(rank),
            "frame": int(frame)}


# --------------------------------------------------------------------------------------------
# numpy helpers

def _np(data, dtype, shape=None):
    a = np.frombuffer(data, DTYPES[dtype])
    if dtype == "bf16":
        a = (a.astype("<u4") << 16).view("<f4")
    elif dtype == "bool":
        a = a.view(bool)
    return a if shape is None else a.reshape(shape)


def to_numpy(frame):
    """numpy array of a dense frame or a compressed frame's part (read-only view, except bf16
    which is widened to float32)."""
    return _np(frame["data"], frame["dtype"], frame["shape"])


def sparse_indices(frame):
    """Row indices of a sparse frame (int64 for bitmap, the frame's itype for coo)."""
    if frame["format"] == "coo":
        return np.frombuffer(frame["indices"], DTYPES[frame["itype"]])
    rows = _prod(frame["shape"]) // frame["width"]
    bits = np.unpackbits(np.frombuffer(frame["indices"], np.uint8), bitorder="little")[:rows]
    return np.flatnonzero(bits)


def sparse_values(frame):
    """Values of a sparse frame as an (nnz, width) array."""
    return _np(frame["values"], frame["dtype"]).reshape(frame["nnz"], frame["width"])


def to_dense(frame):
    """Dense numpy array of a sparse or dense frame (absent rows are zero)."""
    if frame["t"] == "dense":
        return to_numpy(frame)
    vals = sparse_values(frame)
    rows = _prod(frame["shape"]) // frame["width"]
    out = np.zeros((rows, frame["width"]), vals.dtype)
    out[sparse_indices(frame).astype(np.int64)] = vals
    return out.reshape(frame["shape"])


# --------------------------------------------------------------------------------------------
# CLI

def sample_frames():
    """The deterministic sample stream's data frames: every frame type, awkward values."""
    f32 = np.array([1.0, -0.0, np.nan, np.inf, -np.inf, 1e-45, 1.17549435e-38, -3.5,
                    65504.0, 3.4028235e38, 0.1, 7.0], np.float32).reshape(3, 4)
    yield dense("encoder.layer.0.weight", f32, step=7, rank=0)
    yield dense("f64.bias", np.array([0.5, -1e-300, 5e-324, -np.inf], np.float64), step=7, rank=1)
    yield dense("i64.counts", np.array([-(1 << 63), -1, 0, (1 << 63) - 1], np.int64))
    yield dense("bf16.act", np.array([[1.0, -2.5], [3.14159, np.nan]], np.float32), dtype="bf16")
    yield dense("f16.half", np.array([0.5, -0.0, 65504.0], np.float16))
    yield dense("u8.mask", np.arange(0, 256, 17, dtype=np.uint8))
    yield dense("bool.flags", np.array([True, False, True]))
    yield dense("empty", np.zeros(0, np.float32))
    yield dense("scalar.loss", np.array(2.718281828, np.float32), step=9, rank=3)
    yield dense("big." + "x" * 40, np.arange(20000, dtype=np.float32) * 0.25)  # bin32, str8
    yield sparse_coo("grad.coo.u32", [1000], np.array([0, 3, 999], np.uint32),
                     np.array([0.5, -1.5, np.nan], np.float32), step=1, rank=2)
    yield sparse_coo("grad.coo.i64", [10, 4], np.array([1, 9], np.int64),
                     np.arange(8, dtype=np.float32), width=4, itype="i64")
    yield sparse_bitmap("embedding.weight", [13, 3], np.array([0, 5, 7, 8, 12]),
                        np.arange(15, dtype=np.float32).reshape(5, 3) - 7, width=3, step=4)
    yield sparse_coo("grad.empty", [0, 8], np.zeros(0, np.uint32), np.zeros(0, np.float32),
                     width=8)
    yield compressed("fc.weight", "topk",
                     {"k": 3, "ratio": 0.25, "seed": 42, "sorted": True, "mode": "abs",
                      "neg": -7, "none": None},
                     [3, 4], "f32",
                     [part("indices", np.array([9, 2, 5], np.uint32)),
                      part("values", np.array([-9.5, 8.25, 0.0], np.float32))], step=3, rank=1)
    yield event("ncclAllReduce", cat="comm", ph="X", ts=1234567890123, dur=4500, rank=0, pid=1,
                tid=7, stream=13, corr=-1,
                args={"bytes": 1 << 20, "nested": {"z": [1, 2.5, "s", None, True,
                                                         {"deep": [b"\x00\x01"]}],
                                                   "a": {"b": {"c": -200}}},
                      "Zeta": "upper sorts first", "é": "non-ascii key",
                      "u64": (1 << 64) - 1, "i64": -(1 << 63), "i16": -30000, "u16": 60000,
                      "f": -0.0, "inf": float("inf"), "blob": b"\xff" * 300,
                      "many": list(range(20))})
    yield event("step", cat="user", ph="i", ts=5, rank=-1)
    yield model("resnet50", world=4, iters=10, iter_ns=120_000_000, forward_ns=40_000_000,
                backward_ns=75_000_000,
                grads=[{"name": "fc.weight", "bytes": 8192000, "numel": 2048000, "dtype": "f32",
                        "ready_ns": 1_000_000, "compute_ns": 900_000},
                       {"name": "conv1.weight", "bytes": 37632, "numel": 9408, "dtype": "f32",
                        "ready_ns": 74_000_000, "compute_ns": 500_000}],
                comm=[{"op": "allreduce", "bytes": 1 << 20, "ns": 950_000, "world": 4}],
                meta={"device": "cpu", "trace": "x.json", "gpus": 0})
    yield plan("fusion", "cupcake", groups=[[i, i + 1] for i in range(0, 40, 2)],
               items=[{"algo": "topk", "ratio": 0.01, "where": "gpu"}, {"algo": "none"}],
               predicted_ns=99_000_000, proven_optimal=True,
               meta={"explored": 1234, "baseline_ns": 130_000_000})
    shard = bytes(range(256)) * 3
    yield chunk("job-42", 1000, shard[:500], offset=0, total_len=len(shard), src_rank=1,
                replica_of=2)
    yield chunk("job-42", 1000, shard[500:], offset=500, total_len=len(shard), src_rank=1,
                replica_of=2)
    yield chunk("job-42", 1001, b"", offset=0, total_len=0)
    yield stats("python", "allreduce", {"time_s": 0.0123, "GBps": 1.5, "count": 3,
                                        "neg": -0.0, "nan": float("nan")},
                labels={"impl": "gloo", "size": "64MiB"}, step=2, rank=0)
    yield error("bad_input", "frame 3: payload is str8, want bin", rank=1, frame=3)
    yield error("", "", -1, -1)


def _cmd_sample(out):
    w = Writer(out, producer=DEFAULT_PRODUCER, meta={"kind": "sample", "schema_doc": "wire.md"})
    for f in sample_frames():
        w.write(f)
    w.end_step(9)
    w.close()


def _cmd_roundtrip(inp, out, max_payload=None, max_elems=None):
    r = Reader(inp, max_payload=max_payload, max_elems=max_elems)
    w = None
    for f in r.frames():
        t = f["t"]
        if t == "header":
            w = Writer(out, producer=f["producer"], meta=f["meta"],
                       max_elems=r.max_elems)
            w._start()
        elif t == "end":
            w.close()
        else:
            w.write(f, validate=False)   # the reader checked it already


def _jsonable(v, values=0):
    if isinstance(v, (bytes, bytearray, memoryview)):
        return {"bin": _nbytes(v), "xxh3": "%016x" % xxhash.xxh3_64_intdigest(bytes(v))}
    if isinstance(v, float) and not math.isfinite(v):
        return repr(v)
    if isinstance(v, dict):
        return {k: _jsonable(x, values) for k, x in v.items()}
    if isinstance(v, list):
        return [_jsonable(x, values) for x in v]
    return v


def _cmd_dump(inp, out, values=0):
    for f in Reader(inp).frames():
        j = _jsonable(f)
        if values and f["t"] in ("dense",) and f["dtype"] in DTYPES:
            j["values"] = [repr(float(x)) for x in to_numpy(f).reshape(-1)[:values]]
        out.write((json.dumps(j, ensure_ascii=False) + "\n").encode())


_USAGE = """usage: python3 -m trainwire.wire COMMAND
  sample                  write a deterministic sample stream (every frame type) to stdout
  roundtrip               read streams from stdin strictly, write them canonically to stdout
  dump [--values N]       print streams from stdin as JSON lines
options: --max-payload N, --max-elems N (default $TRAINWIRE_MAX_PAYLOAD, $TRAINWIRE_MAX_ELEMS)
exit status: 0 ok, 1 usage or I/O error, 2 malformed input
"""


def main(argv=None):
    argv = list(sys.argv[1:] if argv is None else argv)
    opts = {}
    pos = []
    while argv:
        a = argv.pop(0)
        if a in ("-h", "--help"):
            sys.stdout.write(_USAGE)
            return 0
        if a in ("--max-payload", "--max-elems", "--values"):
            if not argv:
                sys.stderr.write("%s needs a value\n%s" % (a, _USAGE))
                return 1
            try:
                opts[a[2:].replace("-", "_")] = int(argv.pop(0), 0)
            except ValueError:
                sys.stderr.write("%s needs an integer\n" % a)
                return 1
        else:
            pos.append(a)
    if len(pos) != 1 or pos[0] not in ("sample", "roundtrip", "dump"):
        sys.stderr.write(_USAGE)
        return 1
    inp, out = sys.stdin.buffer, sys.stdout.buffer
    try:
        if pos[0] == "sample":
            _cmd_sample(out)
        elif pos[0] == "roundtrip":
            _cmd_roundtrip(inp, out, opts.get("max_payload"), opts.get("max_elems"))
        else:
            _cmd_dump(inp, out, opts.get("values", 0))
        out.flush()
    except WireError as e:
        try:
            out.flush()
        except OSError:
            pass
        sys.stderr.write("%s\n" % e)
        return 2
    except BrokenPipeError:
        try:
            sys.stdout = None
        finally:
            return 1
    except OSError as e:
        sys.stderr.write("trainwire.wire: %s\n" % e)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
