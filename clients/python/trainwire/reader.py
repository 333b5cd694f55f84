"""Reader: strict reading of trainwire streams; every length is bounded before anything is
allocated, every frame checked, the end frame's count and digest verified."""

import json
import re
import struct

import msgpack
import xxhash

from trainwire.schema import (  # noqa: F401
    DEFAULT_MAX_ELEMS, DEFAULT_MAX_PAYLOAD, FIELDS, MAX_DEPTH, MAX_STR, STRUCTURE_TYPES,
    VERSION, WireError, _BIG_BIN, _Bad, _Truncated, _env_int, _feed_bins, _limits, _semantics,
    _structure, _tname, _want)

# --------------------------------------------------------------------------------------------
# Reader: frames laid out by hand (t and v first, keys one by one, bins streamed), values
# decoded by msgpack.Unpacker; every length is checked before the bytes behind it are read.

_U8, _U16, _U32 = struct.Struct(">B"), struct.Struct(">H"), struct.Struct(">I")
# bin and str headers: read here, so that their limits are checked before the body is read
_BIN_STR = {0xC4: ("bin", _U8), 0xC5: ("bin", _U16), 0xC6: ("bin", _U32),
            0xD9: ("str", _U8), 0xDA: ("str", _U16), 0xDB: ("str", _U32)}
_BIN_STR.update({b: ("str", None) for b in range(0xA0, 0xC0)})
_ONE_BYTE = {b: (b if b < 0x80 else b - 0x100) for b in (*range(0x80), *range(0xE0, 0x100))}
_ONE_BYTE.update({0xC0: None, 0xC2: False, 0xC3: True})
_MISSING = object()
_MAX_BUFFER = 0   # msgpack.Unpacker: 0 = 4 GiB - 1 buffered for one value (bins are capped anyway);
#                  read_size 4096 keeps it from allocating 1 MiB up front for every value
_LIMIT_MSG = {"bin": "bin of %s bytes exceeds --max-payload %s",
              "str": "str of %s bytes exceeds the limit %s",
              "array": "array of %s elements exceeds --max-elems %s",
              "map": "map of %s entries exceeds --max-elems %s"}


def _pairs(pairs):
    """object_pairs_hook: a dict in wire order; keys must be str and unique."""
    d = {}
    for k, v in pairs:
        if not isinstance(k, str):
            raise _Bad("map key is %s, want str" % _tname(k))
        if k in d:
            raise _Bad('duplicate map key "%s"' % k)
        d[k] = v
    return d


def _no_ext(code, data):
    raise _Bad("ext type %d (%d bytes) is not allowed in a trainwire stream" % (code, len(data)))


def _check_nesting(v, depth, max_depth):
    """Arrays and maps at most max_depth deep (a frame's value is at depth 1); msgpack's
    Timestamp (ext -1, decoded without ext_hook) refused like every ext type."""
    if isinstance(v, dict):
        kids = v.values()
    elif isinstance(v, list):
        kids = v
    elif isinstance(v, msgpack.Timestamp):
        raise _Bad("ext type -1 (timestamp) is not allowed in a trainwire stream")
    else:
        return
    if depth >= max_depth:
        raise _Bad("nesting deeper than %d" % max_depth)
    for x in kids:
        _check_nesting(x, depth + 1, max_depth)


def _unpacker_error(e, first):
    """msgpack.Unpacker's error in this reader's words."""
    m = re.match(r"(\d+) exceeds max_(bin|str|array|map)_len\((\d+)\)", str(e))
    if m:
        return _LIMIT_MSG[m.group(2)] % (m.group(1), m.group(3))
    if isinstance(e, msgpack.FormatError):
        return "invalid msgpack in a value starting with %s (a never-used byte such as 0xc1)" \
            % _fmt_name(first)
    if isinstance(e, msgpack.StackError):
        return "nesting deeper than msgpack's decoder allows"
    if isinstance(e, msgpack.BufferFull):
        return "a value larger than 4 GiB"
    return "malformed %s value: %s" % (_fmt_name(first), e or type(e).__name__)

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

    def obj(self, depth=1):
        """One value of a frame (depth 1 = a frame's value). Bins and strs are read here, their
        limit checked on the header before anything is allocated, big payloads straight from the
        file; every other value is decoded by msgpack.Unpacker with the same limits (its tell()
        says how many bytes it took), maps with str keys only and no duplicate, ext types
        refused, nesting bounded. Bins inside a value are fed to the hasher in wire order."""
        if self._pos >= len(self._buf):
            self._more(1)
        b = self._buf[self._pos]
        one = _ONE_BYTE.get(b, _MISSING)   # fixints, nil, bools: no decoder needed
        if one is not _MISSING:
            self._pos += 1
            return one
        hdr = _BIN_STR.get(b)
        if hdr is not None:
            kind, st = hdr
            self._pos += 1
            n = b & 0x1F if st is None else self._unpack(st)
            return self._bin(n) if kind == "bin" else self._str(n)
        u = msgpack.Unpacker(raw=False, strict_map_key=False, object_pairs_hook=_pairs,
                             ext_hook=_no_ext, max_buffer_size=_MAX_BUFFER, read_size=4096,
                             max_bin_len=self.max_payload, max_str_len=self.max_str,
                             max_array_len=self.max_elems, max_map_len=self.max_elems)
        fed, window = 0, 4096        # bytes of this value fed so far; the next feed's size
        while True:
            start = self._pos
            if start + fed >= len(self._buf):
                self._more(fed + 1)  # keeps _buf[_pos:], so this value's bytes stay at _pos
                continue
            k = min(len(self._buf) - start - fed, window)
            u.feed(self._buf[start + fed:start + fed + k])
            fed += k
            window *= 2
            try:
                v = u.unpack()
            except msgpack.OutOfData:
                continue
            except _Bad:
                raise
            except UnicodeDecodeError:
                raise _Bad("str is not valid UTF-8") from None
            except (ValueError, msgpack.UnpackException) as e:
                raise _Bad(_unpacker_error(e, b)) from None
            self._pos = start + u.tell()
            if not isinstance(v, (int, float)):   # containers (and a stray Timestamp)
                _check_nesting(v, depth, self.max_depth)
                if self.hasher is not None:
                    _feed_bins(v, self.hasher)
            return v


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
