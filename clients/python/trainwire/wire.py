#!/usr/bin/python3
"""The trainwire stream contract (docs/wire.md, schema 1) in Python: one namespace over the modules
that implement it, by concern:

- trainwire.schema: constants, WireError, every frame type's keys and checks, canonical(), validate()
- trainwire.writer: Writer (canonical streams, byte-identical to lib/wire's encoder), write_stream()
- trainwire.reader: Reader (strict: every length bounded before anything is allocated, every frame
  checked, the end frame's count and XXH3-64 digest verified), read_all()
- trainwire.frames: frame constructors, numpy views, the sample stream
- trainwire.crc: CRC32C

Errors are WireError, naming the frame index (0 = header, counted per stream) and the byte offset
(from the start of the byte stream) at which the frame starts.

Dependencies: the standard library, msgpack (>= 1.0), numpy, xxhash (xxh3_64).

CLI (exit 0 ok, 1 usage or I/O error, 2 malformed input; `python3 -m trainwire` is the same behind
argparse, exiting 80 on bad usage):

    python3 -m trainwire.wire sample      > out.tw   # deterministic stream with every frame type
    python3 -m trainwire.wire roundtrip   < in.tw > out.tw   # strict read, canonical re-write
    python3 -m trainwire.wire dump        < in.tw    # JSON lines, payloads as size + xxh3
"""

import json
import math
import sys

import xxhash

from trainwire.crc import *  # noqa: F401,F403
from trainwire.schema import *  # noqa: F401,F403
from trainwire.writer import *  # noqa: F401,F403
from trainwire.reader import *  # noqa: F401,F403
from trainwire.frames import *  # noqa: F401,F403
# names the CLI and the tests use that `import *` leaves out
from trainwire.crc import CRC32C_IMPL, _crc32c_np, _crc32c_py, _nbytes  # noqa: F401
from trainwire.schema import (  # noqa: F401
    DEFAULT_PRODUCER, DTYPES, WireError, _feed_bins)
from trainwire.writer import Writer  # noqa: F401
from trainwire.reader import Reader  # noqa: F401
from trainwire.frames import (  # noqa: F401
    chunk, compressed, dense, error, event, model, part, plan, sparse_bitmap, sparse_coo, stats,
    to_numpy)

__all__ = [
    "WireError", "Writer", "Reader", "canonical", "validate", "read_all", "write_stream",
    "header", "end", "step_end", "dense", "sparse_coo", "sparse_bitmap", "compressed", "part", "event",
    "model", "plan", "chunk", "stats", "error",
    "to_numpy", "sparse_indices", "sparse_values", "to_dense", "crc32c", "xxh3_of_frames",
    "DTYPES", "FRAME_TYPES", "DATA_TYPES", "STRUCTURE_TYPES", "SCHEMA",
    "DEFAULT_MAX_PAYLOAD", "DEFAULT_MAX_ELEMS", "MAX_STR", "MAX_DEPTH", "MAX_DIMS",
]


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

