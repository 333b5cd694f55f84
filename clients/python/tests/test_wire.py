#!/usr/bin/python3
"""Tests of trainwire.wire. Run from the repository root:

    /usr/bin/python3 -m unittest discover -s clients/python/tests -t clients/python
"""

import io
import os
import re
import subprocess
import sys
import tracemalloc
import unittest

import msgpack
import numpy as np
import xxhash

HERE = os.path.dirname(os.path.abspath(__file__))
PYROOT = os.path.dirname(HERE)
REPO = os.path.dirname(os.path.dirname(PYROOT))
if PYROOT not in sys.path:
    sys.path.insert(0, PYROOT)

from trainwire import wire as W  # noqa: E402
from trainwire.wire import WireError  # noqa: E402


def stream_bytes(frames, producer="test/1", meta=None):
    buf = io.BytesIO()
    W.write_stream(buf, frames, producer, meta)
    return buf.getvalue()


def read(b, **kw):
    r = W.Reader(io.BytesIO(b), **kw)
    return r, list(r)


def packed_stream(frames, producer="test/1"):
    """A stream assembled by hand with msgpack.packb (for malformed frames)."""
    h = xxhash.xxh3_64()
    out = [msgpack.packb(W.header(producer), use_bin_type=True)]
    for f in frames:
        W._feed_bins(f, h)
        out.append(msgpack.packb(f, use_bin_type=True))
    out.append(msgpack.packb(W.end(len(frames), h.intdigest()), use_bin_type=True))
    return b"".join(out)


class Trickle(io.RawIOBase):
    """A file that returns at most `step` bytes per read (a slow pipe)."""

    def __init__(self, data, step=1):
        self._b = io.BytesIO(data)
        self.step = step
        self.max_request = 0

    def readable(self):
        return True

    def read(self, n=-1):
        self.max_request = max(self.max_request, n)
        return self._b.read(min(self.step, n) if n >= 0 else self.step)

    def read1(self, n=-1):
        return self.read(n)


class TestRoundTrip(unittest.TestCase):
    def setUp(self):
        self.frames = list(W.sample_frames())

    def test_every_type_in_sample(self):
        types = {f["t"] for f in self.frames}
        self.assertEqual(types, set(W.DATA_TYPES))

    def test_roundtrip_every_frame_type(self):
        b = stream_bytes(self.frames, "test/1", {"rank": "0", "a": "b"})
        r, got = read(b)
        self.assertEqual(r.header["producer"], "test/1")
        self.assertEqual(list(r.header["meta"]), ["a", "rank"])  # sorted
        self.assertEqual(len(got), len(self.frames))
        for want, g in zip(self.frames, got):
            c = W.canonical(want)
            self.assertEqual(list(g), list(c), g["t"])          # wire key order = canonical
            self.assertEqual(repr(W.canonical(g)), repr(c))    # values (NaN-safe via repr)
        # re-writing what was read is byte-identical
        self.assertEqual(stream_bytes(got, "test/1", r.header["meta"]), b)

    def test_step_end_is_structure(self):
        buf = io.BytesIO()
        w = W.Writer(buf, "test/1")
        for step in range(2):
            w.write(W.dense("g", np.array([step], np.uint8), step=step))
            w.end_step(step)
        w.close()
        b = buf.getvalue()
        self.assertIn(msgpack.packb(W.step_end(1)), b)
        r = W.Reader(io.BytesIO(b))
        kinds = [f["t"] for f in r.frames()]
        self.assertEqual(kinds, ["header", "dense", "step_end", "dense", "step_end", "end"])
        self.assertEqual(r.ends[0]["count"], 2)               # not a data frame
        self.assertEqual(len(list(W.Reader(io.BytesIO(b)))), 2)  # iteration skips it
        with self.assertRaisesRegex(WireError, "negative step"):
            W.Writer(io.BytesIO()).write(W.step_end(-1))

    def test_writer_matches_msgpack_packb(self):
        b = stream_bytes(self.frames)
        frames = list(msgpack.Unpacker(io.BytesIO(b), raw=False))
        again = b"".join(msgpack.packb(f, use_bin_type=True) for f in frames)
        self.assertEqual(again, b)
        self.assertEqual(frames[0]["t"], "header")
        self.assertEqual(frames[-1], {"t": "end", "v": 1, "count": len(self.frames),
                                      "xxh3": frames[-1]["xxh3"]})
        h = xxhash.xxh3_64()
        for f in frames[1:-1]:
            W._feed_bins(f, h)
        self.assertEqual(frames[-1]["xxh3"], h.intdigest())
        self.assertEqual(W.xxh3_of_frames(self.frames), h.intdigest())

    def test_keys_t_v_first_and_documented_order(self):
        doc = os.path.join(REPO, "docs", "wire.md")
        if not os.path.exists(doc):
            self.skipTest("docs/wire.md not found")
        with open(doc, encoding="utf-8") as fh:
            text = fh.read()
        for t, keys in W.KEYS.items():
            m = re.search(r"^### `%s`.*?\n(.*?)(?=^### |\Z)" % t, text, re.S | re.M)
            self.assertIsNotNone(m, t)
            doc_keys = []
            for line in m.group(1).splitlines():
                cell = re.match(r"^\| ([a-z0-9_, ]+) \|", line)
                if cell:
                    for k in cell.group(1).split(","):
                        k = k.strip()
                        if k not in ("t", "v", "key"):
                            doc_keys.append(k)
            self.assertEqual(list(keys[2:]), doc_keys, t)

    def test_canonical_reorders_and_drops_unknown(self):
        f = W.stats("t", "n", {"b": 1, "a": 2.5}, labels={"z": "1", "y": "2"})
        shuffled = dict(reversed(list(f.items())))
        shuffled["future_key"] = b"ignored"
        c = W.canonical(shuffled)
        self.assertEqual(list(c), list(W.KEYS["stats"]))
        self.assertEqual(list(c["values"]), ["a", "b"])
        self.assertIsInstance(c["values"]["b"], float)
        self.assertNotIn("future_key", c)
        buf = io.BytesIO()
        w = W.Writer(buf)
        w.write(shuffled)
        w.close()
        self.assertEqual(buf.getvalue(), stream_bytes([f], W.DEFAULT_PRODUCER))

    def test_unknown_keys_are_ignored_by_reader(self):
        f = dict(W.error("c", "m"))
        f["later"] = [1, {"x": b"abc"}]
        b = packed_stream([f])
        _, got = read(b)
        self.assertEqual(got[0]["later"], [1, {"x": b"abc"}])
        self.assertEqual(W.canonical(got[0]), W.canonical(W.error("c", "m")))

    def test_numpy_views(self):
        fr = {f["name"]: f for f in self.frames if "name" in f}
        a = W.to_numpy(fr["encoder.layer.0.weight"])
        self.assertEqual(a.shape, (3, 4))
        self.assertTrue(np.isnan(a[0, 2]))
        self.assertTrue(np.signbit(a[0, 1]) and a[0, 1] == 0)
        self.assertEqual(a[1, 1], np.float32(1e-45))               # subnormal survives
        self.assertEqual(W.to_numpy(fr["scalar.loss"]).shape, ())
        self.assertEqual(W.to_numpy(fr["empty"]).shape, (0,))
        bf = W.to_numpy(fr["bf16.act"])
        self.assertEqual(bf.dtype, np.float32)
        self.assertEqual(bf[0, 0], 1.0)
        self.assertAlmostEqual(float(bf[1, 0]), 3.140625)
        self.assertTrue(np.isnan(bf[1, 1]))
        self.assertEqual(W.to_numpy(fr["bool.flags"]).tolist(), [True, False, True])
        emb = fr["embedding.weight"]
        self.assertEqual(W.sparse_indices(emb).tolist(), [0, 5, 7, 8, 12])
        d = W.to_dense(emb)
        self.assertEqual(d.shape, (13, 3))
        self.assertEqual(d[5].tolist(), [-4.0, -3.0, -2.0])
        self.assertEqual(d[1].tolist(), [0.0, 0.0, 0.0])
        coo = fr["grad.coo.i64"]
        self.assertEqual(W.to_dense(coo)[9].tolist(), [4.0, 5.0, 6.0, 7.0])
        comp = fr["fc.weight"]
        self.assertEqual(W.to_numpy(comp["parts"][0]).tolist(), [9, 2, 5])

    def test_concatenated_streams(self):
        a = stream_bytes([W.error("a", "1")], "p/a")
        b = stream_bytes([], "p/b")
        c = stream_bytes([W.event("x")], "p/c")
        r, got = read(a + b + c)
        self.assertEqual([h["producer"] for h in r.headers], ["p/a", "p/b", "p/c"])
        self.assertEqual([f["t"] for f in got], ["error", "event"])
        self.assertEqual(len(r.ends), 3)
        # multi=False stops after the first stream
        r = W.Reader(io.BytesIO(a + c), multi=False)
        self.assertEqual(len(list(r)), 1)
        self.assertEqual(r.offset, len(a))

    def test_header_property_and_empty_stream(self):
        r = W.Reader(io.BytesIO(stream_bytes([], "p/x", {"k": "v"})))
        self.assertEqual(r.header["producer"], "p/x")
        self.assertEqual(list(r), [])
        with self.assertRaises(WireError) as cm:
            list(W.Reader(io.BytesIO(b"")))
        self.assertIn("empty input", str(cm.exception))
        self.assertEqual(list(W.Reader(io.BytesIO(b""), allow_empty=True)), [])

    def test_trickling_input(self):
        b = stream_bytes(self.frames)
        for step in (1, 7, 4096):
            t = Trickle(b, step)
            got = list(W.Reader(t))
            self.assertEqual(len(got), len(self.frames))

    def test_big_payload(self):
        a = np.arange(3 << 20, dtype=np.float32)   # 12 MiB: the direct write/read path
        b = stream_bytes([W.dense("big", a), W.chunk("j", 1, a.tobytes()[:5 << 20])])
        _, got = read(b)
        self.assertTrue(np.array_equal(W.to_numpy(got[0]), a))
        self.assertEqual(got[1]["crc32c"], W.crc32c(a.tobytes()[:5 << 20]))
        self.assertEqual(stream_bytes(got), b)

    def test_context_manager_leaves_truncated_stream_on_error(self):
        buf = io.BytesIO()
        with self.assertRaises(RuntimeError):
            with W.Writer(buf) as w:
                w.write(W.event("x"))
                raise RuntimeError("producer died")
        with self.assertRaises(WireError) as cm:
            list(W.Reader(io.BytesIO(buf.getvalue())))
        self.assertIn("truncated", str(cm.exception))
        buf = io.BytesIO()
        with W.Writer(buf) as w:
            w.write(W.event("x"))
        self.assertEqual(len(list(W.Reader(io.BytesIO(buf.getvalue())))), 1)


class TestErrors(unittest.TestCase):
    def setUp(self):
        self.frames = list(W.sample_frames())
        self.b = stream_bytes(self.frames)

    def offsets(self, b):
        """Start offsets of every frame of a well-formed byte stream."""
        u = msgpack.Unpacker(io.BytesIO(b), raw=False)
        offs = []
        while True:
            offs.append(u.tell())
            try:
                u.unpack()
            except msgpack.OutOfData:
                return offs[:-1]

    def assertWire(self, b, *needles, **kw):
        with self.assertRaises(WireError) as cm:
            read(b, **kw)
        msg = str(cm.exception)
        for n in needles:
            self.assertIn(n, msg)
        return cm.exception

    def test_truncated_at_frame_boundary(self):
        offs = self.offsets(self.b)
        last = offs[-1]  # the end frame
        e = self.assertWire(self.b[:last], "stream truncated", "%d frames read" % (len(offs) - 1),
                            "at byte %d" % last)
        self.assertIsNone(e.frame)

    def test_truncated_inside_frame(self):
        offs = self.offsets(self.b)
        i = 10  # some dense frame
        cut = offs[i] + 30
        e = self.assertWire(self.b[:cut], "frame %d" % i, "at byte %d" % offs[i], "truncated")
        self.assertEqual(e.frame, i)
        self.assertEqual(e.offset, offs[i])

    def test_truncated_every_prefix(self):
        b = stream_bytes(self.frames[:3] + self.frames[14:16])
        for n in range(len(b)):
            with self.assertRaises(WireError, msg="prefix %d" % n):
                read(b[:n])

    def test_str_instead_of_bin(self):
        f = dict(W.dense("x", np.zeros(2, np.float32)))
        f["data"] = "\x00" * 8
        b = packed_stream([f])
        e = self.assertWire(b, 'frame 1 (dense) at byte ', 'field "data"', "want bin")
        self.assertEqual((e.frame, e.field, e.ftype), (1, "data", "dense"))
        # and a nil payload
        f["data"] = None
        self.assertWire(packed_stream([f]), 'field "data"', "want bin")

    def test_bad_digest(self):
        b = bytearray(self.b)
        pos = self.b.index(self.frames[0]["data"]) + 5
        b[pos] ^= 0x01   # inside the first dense payload: only the digest notices
        e = self.assertWire(bytes(b), "(end)", "xxh3 mismatch", 'field "xxh3"')
        self.assertEqual(e.frame, len(self.frames) + 1)

    def test_bad_count(self):
        f = W.error("c", "m")
        raw = [msgpack.packb(W.header(), use_bin_type=True), msgpack.packb(f, use_bin_type=True),
               msgpack.packb(W.end(2, xxhash.xxh3_64_intdigest(b"")), use_bin_type=True)]
        self.assertWire(b"".join(raw), "end says 2 data frames, read 1")

    def test_oversize_bin_rejected_before_allocating(self):
        head = msgpack.packb(W.header(), use_bin_type=True)
        f = msgpack.packb({"t": "dense", "v": 1, "name": "x", "step": 0, "rank": -1,
                           "dtype": "u8", "shape": [0xFFFFFFFF]}, use_bin_type=True)
        frame = bytes([f[0] + 1]) + f[1:] + msgpack.packb("data") + b"\xc6\xff\xff\xff\xff"
        b = head + frame + b"\x00" * 1000
        tracemalloc.start()
        try:
            e = self.assertWire(b, "frame 1 (dense)", 'field "data"', "exceeds --max-payload",
                                max_payload=1 << 20)
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        self.assertLess(peak, 8 << 20)
        self.assertEqual(e.offset, len(head))
        # with the default limit (4 GiB - 1) the short input is a truncation, and memory follows
        # the bytes actually present (reads are never larger than 16 MiB)
        t = Trickle(b, 1 << 30)
        tracemalloc.start()
        try:
            with self.assertRaises(WireError) as cm:
                list(W.Reader(t))
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        self.assertIn("truncated", str(cm.exception))
        self.assertLessEqual(t.max_request, 1 << 24)
        self.assertLess(peak, 8 << 20)

    def test_oversize_array_and_str(self):
        head = msgpack.packb(W.header(), use_bin_type=True)
        # event whose args is a map32 declaring 2^32-1 entries
        f = msgpack.packb({"t": "event", "v": 1, "name": "x"}, use_bin_type=True)
        frame = bytes([f[0] + 1]) + f[1:] + msgpack.packb("args") + b"\xdf\xff\xff\xff\xff"
        self.assertWire(head + frame, "map of 4294967295 entries exceeds --max-elems")
        frame = bytes([f[0] + 1]) + f[1:] + msgpack.packb("args") + b"\xdd\x00\x10\x00\x01"
        self.assertWire(head + frame, "array of 1048577 elements exceeds --max-elems")
        frame = bytes([f[0] + 1]) + f[1:] + msgpack.packb("cat") + b"\xdb\x10\x00\x00\x00"
        self.assertWire(head + frame, "str of 268435456 bytes exceeds the limit")
        # a frame map itself
        self.assertWire(head + b"\xdf\x7f\xff\xff\xff", "frame 1 at byte", "exceeds --max-elems")

    def frame_with(self, key, raw_value, base=None):
        """A stream whose one event frame carries raw_value (msgpack bytes) under key."""
        f = msgpack.packb(base or {"t": "event", "v": 1, "name": "x"}, use_bin_type=True)
        return msgpack.packb(W.header(), use_bin_type=True) + bytes([f[0] + 1]) + f[1:] + \
            msgpack.packb(key) + raw_value

    def test_values_refused_by_the_unpacker(self):
        # duplicate keys, ext types (timestamp included), non-str keys and bad UTF-8 anywhere in
        # a value; each names the frame, its offset and the field (keys are checked by the pairs
        # hook, so strict_map_key is off: a list as a key is refused, not hashed)
        head = len(msgpack.packb(W.header(), use_bin_type=True))
        cases = [
            (b"\x82\xa1a\x01\xa1a\x02", 'duplicate map key "a"'),
            (b"\x81\xa1z\x82\xa1a\x01\xa1a\x02", 'duplicate map key "a"'),
            (b"\xd4\x05\x00", "ext type 5 (1 bytes) is not allowed"),
            (b"\x91\xc7\x02\x07ab", "ext type 7 (2 bytes) is not allowed"),
            (b"\x81\xa1t\xd6\xff\x00\x00\x00\x01", "ext type -1 (timestamp) is not allowed"),
            (b"\x81\x01\x02", "want str"),
            (b"\x81\xc4\x01k\x02", "want str"),
            (b"\x81\x91\x01\x02", "want str"),
            (b"\x91\xa2\xff\xfe", "not valid UTF-8"),
            (b"\x91\xc1", "invalid msgpack"),
        ]
        for raw, want in cases:
            e = self.assertWire(self.frame_with("args", raw), "frame 1 (event) at byte %d" % head,
                                'field "args"', want)
            self.assertEqual((e.frame, e.offset, e.field), (1, head, "args"), raw)
        # nesting: 16 levels below a free-form map are fine, 17 are not (as lib/wire)
        deep = {"a": 1}
        for _ in range(15):
            deep = {"a": deep}
        ok = dict(W.event("x"), args=deep)
        self.assertEqual(len(read(packed_stream([ok]))[1]), 1)
        bad = dict(W.event("x"), args={"a": [deep]})
        self.assertWire(packed_stream([bad]), 'field "args"', "deeper")
        # a frame key given twice
        f = msgpack.packb(W.error("c", "m"), use_bin_type=True)
        dup = bytes([f[0] + 1]) + f[1:] + msgpack.packb("rank") + b"\x00"
        self.assertWire(msgpack.packb(W.header(), use_bin_type=True) + dup, 'field "rank"', "duplicate key")

    def test_unpacker_values_across_reads(self):
        # a free-form value bigger than the first feed, trickling in: decoded whole, digest right
        args = {"k%04d" % i: [i, "v" * (i % 50), {"b": bytes([i % 256]) * (i % 300)}] for i in range(2000)}
        b = stream_bytes([W.event("x", args=args)])
        for step in (1, 977, 1 << 20):
            got = list(W.Reader(Trickle(b, step)))
            self.assertEqual(W.canonical(got[0])["args"], W.canonical(W.event("x", args=args))["args"])

    def test_env_limits(self):
        b = stream_bytes([W.dense("x", np.zeros(100, np.float32))])
        os.environ["TRAINWIRE_MAX_PAYLOAD"] = "100"
        try:
            self.assertWire(b, "exceeds --max-payload 100")
        finally:
            del os.environ["TRAINWIRE_MAX_PAYLOAD"]
        self.assertEqual(len(read(b)[1]), 1)

    def test_unknown_type_and_version(self):
        self.assertWire(packed_stream([{"t": "telemetry", "v": 1}]),
                        'frame 1 (telemetry) at byte', 'unknown frame type "telemetry"')
        f = dict(W.error("c", "m"))
        f["v"] = 2
        self.assertWire(packed_stream([f]), "version 2", "newer")

    def test_t_v_must_lead(self):
        f = W.error("c", "m")
        f2 = {"v": 1, "t": "error", **{k: f[k] for k in list(f)[2:]}}
        self.assertWire(packed_stream([f2]), 'first key is not "t"')
        f3 = {"t": "error", "code": "c", "v": 1, "msg": "m", "rank": -1, "frame": -1}
        self.assertWire(packed_stream([f3]), 'second key is not "v"')
        self.assertWire(packed_stream([[1, 2]]), "frame 1 at byte", "want map")

    def test_text_is_not_a_stream(self):
        # JSON or other text where a stream is expected is named as such (as lib/wire does)
        self.assertWire(b'{"traceEvents": []}', "frame 0 at byte 0",
                        'this looks like JSON, not a trainwire stream (it starts with "{\\"traceEvents\\": []}")')
        self.assertWire(b"\n  [1, 2]\n", "this looks like JSON", '(it starts with "[1, 2]")')
        self.assertWire(b"Usage: hashsync gen [flags]\n", "this looks like text")
        self.assertWire(b"\x01\x02", "byte 0x01 cannot start a frame")
        first = packed_stream([])
        self.assertWire(first + b'{"a": 1}', "stream 1 frame 0 at byte %d" % len(first), "this looks like JSON")

    def test_missing_and_mistyped_keys(self):
        f = dict(W.error("c", "m"))
        del f["rank"]
        self.assertWire(packed_stream([f]), 'field "rank"', "missing")
        f = dict(W.error("c", "m"))
        f["rank"] = "0"
        self.assertWire(packed_stream([f]), 'field "rank"', "want int")
        f = dict(W.plan("fusion", "x"))
        f["proven_optimal"] = 1
        self.assertWire(packed_stream([f]), 'field "proven_optimal"', "want bool")

    def test_stream_structure(self):
        f = msgpack.packb(W.error("c", "m"), use_bin_type=True)
        self.assertWire(f, "frame 0 (error) at byte 0", "does not start with a header")
        h = msgpack.packb(W.header(), use_bin_type=True)
        self.assertWire(h + h, "frame 1 (header)", "header inside a stream")
        self.assertWire(h + b"\xc1", "frame 1 at byte %d" % len(h))

    def test_payload_size_checks(self):
        d = dict(W.dense("x", np.zeros((2, 3), np.float32)))
        d["shape"] = [3, 3]
        self.assertWire(packed_stream([d]), 'field "data"', "want 36")
        d = dict(W.dense("x", np.zeros(2, np.float32)))
        d["dtype"] = "f128"
        self.assertWire(packed_stream([d]), 'unknown dtype "f128"')
        d = dict(W.dense("x", np.zeros(2, np.uint8), dtype="bool"))
        d["data"] = b"\x00\x02"
        self.assertEqual(len(read(packed_stream([d]))[1]), 1)   # readers accept, as lib/wire
        with self.assertRaises(WireError) as cm:                 # the writer does not
            W.Writer(io.BytesIO()).write(d)
        self.assertIn("bool payload", str(cm.exception))
        d = dict(W.dense("x", np.zeros([2] * 17, np.uint8)))
        self.assertWire(packed_stream([d]), "17 dimensions")

    def test_sparse_checks(self):
        s = dict(W.sparse_coo("s", [10], [1, 2], np.ones(2, np.float32)))
        s["nnz"] = 3
        self.assertWire(packed_stream([s]), "values are 8 bytes")
        s = dict(W.sparse_coo("s", [10], [1, 10], np.ones(2, np.float32)))
        self.assertWire(packed_stream([s]), "row index out of [0, 10)")
        s = dict(W.sparse_coo("s", [10, 3], [1], np.ones(3, np.float32), width=4))
        self.assertWire(packed_stream([s]), "does not divide")
        s = dict(W.sparse_bitmap("s", [10], [1, 9], np.ones(2, np.float32)))
        s["nnz"] = 1
        s["values"] = np.ones(1, np.float32).tobytes()
        self.assertWire(packed_stream([s]), "bitmap has 2 bits set, nnz is 1")
        s = dict(W.sparse_bitmap("s", [10], [1, 9], np.ones(2, np.float32)))
        s["indices"] = bytes([0x02, 0x06])   # bit 10 (past 10 rows) set
        self.assertWire(packed_stream([s]), "bits set past row 10")
        s = dict(W.sparse_bitmap("s", [10], [1], np.ones(1, np.float32)))
        s["itype"] = "u32"
        self.assertWire(packed_stream([s]), 'field "itype"')
        s = dict(W.sparse_coo("s", [10], [1], np.ones(1, np.float32)))
        s["format"] = "csr"
        self.assertWire(packed_stream([s]), 'format "csr"')

    def test_chunk_checks(self):
        c = dict(W.chunk("j", 1, b"hello"))
        c["crc32c"] ^= 1
        self.assertWire(packed_stream([c]), 'field "crc32c"', "CRC32C")
        c = dict(W.chunk("j", 1, b"hello"))
        c["len"] = 4
        self.assertWire(packed_stream([c]), "len says 4")
        c = dict(W.chunk("j", 1, b"hello", offset=10, total_len=12))
        self.assertWire(packed_stream([c]), "exceeds total_len")

    def test_free_form_checks(self):
        deep = 1
        for _ in range(17):
            deep = [deep]
        with self.assertRaises(WireError):
            W.Writer(io.BytesIO()).write(W.event("x", args={"d": deep}))
        with self.assertRaises(WireError):
            W.Writer(io.BytesIO()).write(W.event("x", args={1: "int key"}))
        with self.assertRaises(WireError):
            W.Writer(io.BytesIO()).write(W.event("x", args={"o": object()}))
        ok = 1
        for _ in range(15):
            ok = [ok]
        W.Writer(io.BytesIO()).write(W.event("x", args={"d": ok}))   # the 1 sits at depth 16
        W.Writer(io.BytesIO()).write(W.event("x", args={"d": self._nest([], 15)}))  # [] at 16
        with self.assertRaises(WireError):   # a scalar at depth 17
            W.Writer(io.BytesIO()).write(W.event("x", args={"d": self._nest(1, 16)}))
        # the reader applies the same rule
        self.assertEqual(len(read(packed_stream([W.event("x", args={"d": ok})]))[1]), 1)
        with self.assertRaises(WireError):
            read(packed_stream([W.event("x", args={"d": self._nest(1, 16)})]))

    @staticmethod
    def _nest(v, n):
        for _ in range(n):
            v = [v]
        return v

    def test_go_aligned_checks(self):
        c = dict(W.compressed("x", "", {}, [1], "f32", []))
        self.assertWire(packed_stream([c]), 'field "algo"', "empty")
        e = dict(W.event("x", dur=-1))
        self.assertWire(packed_stream([e]), 'field "dur"', "negative")

    def test_writer_validates(self):
        w = W.Writer(io.BytesIO())
        d = dict(W.dense("x", np.zeros(2, np.float32)))
        d["data"] = b"\x00"
        with self.assertRaises(WireError) as cm:
            w.write(d)
        self.assertIn('field "data"', str(cm.exception))
        with self.assertRaises(WireError):
            w.write(W.header())
        with self.assertRaises(WireError):
            w.write({"t": "nope", "v": 1})


class TestCRC32C(unittest.TestCase):
    VECTORS = [(b"", 0), (b"123456789", 0xE3069283), (b"\x00" * 32, 0x8A9136AA),
               (b"\xff" * 32, 0x62A8AB43), (bytes(range(32)), 0x46DD794E),
               (bytes(range(31, -1, -1)), 0x113FDB5C)]

    def test_vectors_all_impls(self):
        for data, want in self.VECTORS:
            self.assertEqual(W._crc32c_py(data), want, data)
            self.assertEqual(W.crc32c(data), want, data)

    def test_impls_agree_on_large_input(self):
        rng = np.random.default_rng(1)
        for n in (0, 1, 7, 8, 9, 4096 * 64 - 1, 4096 * 64, 300_001, (1 << 22) + 12345):
            d = rng.integers(0, 256, n, dtype=np.uint8).tobytes()
            want = W._crc32c_py(d) if n < 400_000 else None
            got_np = W._crc32c_np(d)
            if want is not None:
                self.assertEqual(got_np, want, n)
            self.assertEqual(W.crc32c(d), got_np, n)
            # continuation
            k = n // 3
            self.assertEqual(W.crc32c(d[k:], W.crc32c(d[:k])), got_np, n)


class TestCLI(unittest.TestCase):
    def run_cli(self, args, inp=b""):
        env = dict(os.environ, PYTHONPATH=PYROOT)
        return subprocess.run([sys.executable, "-m", "trainwire.wire"] + args, input=inp,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env,
                              timeout=120)

    def test_sample_is_deterministic_and_roundtrips(self):
        a = self.run_cli(["sample"])
        b = self.run_cli(["sample"])
        self.assertEqual(a.returncode, 0, a.stderr)
        self.assertEqual(a.stderr, b"")
        self.assertEqual(a.stdout, b.stdout)
        r = self.run_cli(["roundtrip"], a.stdout)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout, a.stdout)
        two = a.stdout + stream_bytes([W.error("x", "y")], "other/2")
        r = self.run_cli(["roundtrip"], two)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout, two)

    def test_roundtrip_canonicalizes(self):
        f = dict(W.stats("t", "n", {"b": 1, "a": 2}))
        f = {"t": f["t"], "v": 1, **dict(reversed([(k, f[k]) for k in list(f)[2:]]))}
        f["values"] = {"b": 1, "a": 2}   # ints and unsorted keys
        r = self.run_cli(["roundtrip"], packed_stream([f], "p/9"))
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout, stream_bytes([W.stats("t", "n", {"a": 2.0, "b": 1.0})], "p/9"))

    def test_malformed_exit_2(self):
        a = self.run_cli(["sample"]).stdout
        r = self.run_cli(["roundtrip"], a[:-5])
        self.assertEqual(r.returncode, 2)
        self.assertRegex(r.stderr.decode(), r"wire: frame \d+ \(end\) at byte \d+: .*truncated")
        r = self.run_cli(["roundtrip"], a[:200])
        self.assertEqual(r.returncode, 2)
        self.assertRegex(r.stderr.decode(), r"wire: frame 1 \(dense\) at byte \d+")
        r = self.run_cli(["roundtrip", "--max-payload", "1000"], a)
        self.assertEqual(r.returncode, 2)
        self.assertIn("exceeds --max-payload 1000", r.stderr.decode())
        r = self.run_cli(["bogus"])
        self.assertEqual(r.returncode, 1)

    def test_dump(self):
        a = self.run_cli(["sample"]).stdout
        r = self.run_cli(["dump", "--values", "2"], a)
        self.assertEqual(r.returncode, 0, r.stderr)
        lines = r.stdout.decode().splitlines()
        # the data frames, the header, the sample's step_end and the end
        self.assertEqual(len(lines), len(list(W.sample_frames())) + 3)


if __name__ == "__main__":
    unittest.main()
