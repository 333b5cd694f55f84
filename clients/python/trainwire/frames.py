"""Frame constructors (each returns a dict in canonical order), numpy views of payloads, and the
deterministic sample stream."""

import numpy as np

from trainwire.crc import (  # noqa: F401
    crc32c)
from trainwire.schema import (  # noqa: F401
    DTYPES, VERSION, WireError, _prod)

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
