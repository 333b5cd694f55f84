"""The trainwire stream contract (docs/wire.md, schema 1): constants, WireError, every frame
type's keys and checks, canonical() and validate(), the XXH3-64 digest of data frames."""

import os
import threading

import numpy as np
import xxhash

from trainwire.crc import (  # noqa: F401
    _nbytes, crc32c)

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
# Frame schemas: (key, kind) in canonical order, t and v first.

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


def _env_int(name, default):
    v = os.environ.get(name)
    if not v:
        return default
    try:
        return int(v, 0)
    except ValueError:
        raise WireError("%s=%r is not an integer" % (name, v)) from None
