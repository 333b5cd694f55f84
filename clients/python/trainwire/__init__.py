"""trainwire: a thin Python client for trainwire msgpack streams (docs/wire.md).

    from trainwire import Writer, Reader, dense, to_numpy

    with open("x.tw", "wb") as f:
        w = Writer(f, producer="myjob/1")
        w.write(dense("layer1.weight", np.ones((4, 4), np.float32), step=3))
        w.close()                      # writes the end frame (count + xxh3)

    for frame in Reader(open("x.tw", "rb")):
        if frame["t"] == "dense":
            a = to_numpy(frame)

The stream API lives in trainwire.wire (over trainwire.schema, .writer, .reader, .frames, .crc);
its names are re-exported here lazily so that
`python3 -m trainwire.wire` runs without importing the module twice.
"""

__version__ = "0.2.0"

__all__ = [
    "WireError", "Writer", "Reader", "canonical", "validate", "read_all", "write_stream",
    "header", "end", "step_end", "dense", "sparse_coo", "sparse_bitmap", "compressed", "part", "event",
    "model", "plan", "chunk", "stats", "error",
    "to_numpy", "sparse_indices", "sparse_values", "to_dense", "crc32c", "xxh3_of_frames",
    "DTYPES", "FRAME_TYPES", "DATA_TYPES", "STRUCTURE_TYPES", "SCHEMA",
    "DEFAULT_MAX_PAYLOAD", "DEFAULT_MAX_ELEMS", "MAX_STR", "MAX_DEPTH", "MAX_DIMS",
]


def __getattr__(name):  # PEP 562: lazy re-export from trainwire.wire
    if name in __all__:
        from . import wire
        return getattr(wire, name)
    raise AttributeError("module 'trainwire' has no attribute %r" % name)


def __dir__():
    return sorted(list(globals()) + __all__)
