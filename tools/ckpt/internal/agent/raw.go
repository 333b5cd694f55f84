package agent

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"net"
	"time"

	"github.com/zeebo/xxh3"
)

// The bytes of a shard travel between agents (replication and restores
// from peer memory) as raw chunk records, not as trainwire chunk frames:
// the control messages around them (replicate, credits, sealed, fetch,
// shard) stay trainwire streams, but the payload is written with one
// writev per chunk (header + the bytes, straight from the shared-memory
// version) and read straight into the destination version, so every byte
// is copied once by the kernel on each side, CRC32C'd once on each side
// (hash/crc32's Castagnoli uses the SSE4.2/ARMv8 CRC instruction) and
// XXH3'd once on the receiver, while it is still in cache.
//
// A record is a 32-byte header, then len bytes of data:
//
//	0  magic "TWCK" (a chunk) or "TWCE" (the end: len 0, offset = bytes sent)
//	4  len     uint32, ≤ R/p
//	8  offset  uint64, the chunk's place in the shard (chunks come in order)
//	16 total   uint64, the shard's length
//	24 crc32c  uint32 of the data
//	28 hcrc    uint32, CRC32C of bytes 0..27 (a corrupt header is caught
//	           before its length is believed)
//
// All integers little-endian.
const rawHdrLen = 32

var (
	rawChunkMagic = [4]byte{'T', 'W', 'C', 'K'}
	rawEndMagic   = [4]byte{'T', 'W', 'C', 'E'}
	castagnoli    = crc32.MakeTable(crc32.Castagnoli)
)

// rawHeader is a decoded record header.
type rawHeader struct {
	end        bool
	n          int64
	off, total int64
	crc        uint32
}

func putRawHeader(b []byte, end bool, n, off, total int64, crc uint32) {
	if end {
		copy(b[0:4], rawEndMagic[:])
	} else {
		copy(b[0:4], rawChunkMagic[:])
	}
	binary.LittleEndian.PutUint32(b[4:], uint32(n))
	binary.LittleEndian.PutUint64(b[8:], uint64(off))
	binary.LittleEndian.PutUint64(b[16:], uint64(total))
	binary.LittleEndian.PutUint32(b[24:], crc)
	binary.LittleEndian.PutUint32(b[28:], crc32.Checksum(b[:28], castagnoli))
}

// errRawCRC marks a chunk whose data failed its CRC32C.
var errRawCRC = errors.New("CRC32C mismatch")

// parseRawHeader decodes and checks a record header against what the
// receiver expects: the next offset, the shard's total length and the
// largest chunk (R/p). Every length is bounded before it is used.
func parseRawHeader(b []byte, next, total, limit int64) (rawHeader, error) {
	if len(b) < rawHdrLen {
		return rawHeader{}, fmt.Errorf("chunk header of %d bytes, want %d", len(b), rawHdrLen)
	}
	var h rawHeader
	switch [4]byte(b[0:4]) {
	case rawChunkMagic:
	case rawEndMagic:
		h.end = true
	default:
		return h, fmt.Errorf("bad chunk magic %q at shard offset %d (not a ckpt chunk stream)", b[0:4], next)
	}
	if got, want := crc32.Checksum(b[:28], castagnoli), binary.LittleEndian.Uint32(b[28:]); got != want {
		return h, fmt.Errorf("corrupt chunk header at shard offset %d: %w (header %08x, computed %08x)", next, errRawCRC, want, got)
	}
	n := binary.LittleEndian.Uint32(b[4:])
	off := binary.LittleEndian.Uint64(b[8:])
	tot := binary.LittleEndian.Uint64(b[16:])
	h.crc = binary.LittleEndian.Uint32(b[24:])
	if tot != uint64(total) {
		return h, fmt.Errorf("chunk of a shard of %d bytes inside one of %d", tot, total)
	}
	if off != uint64(next) {
		return h, fmt.Errorf("chunk at offset %d, expected %d", off, next)
	}
	h.off, h.total, h.n = next, total, int64(n)
	switch {
	case h.end && n != 0:
		return h, fmt.Errorf("end record with %d bytes of data", n)
	case h.end && next != total:
		return h, fmt.Errorf("shard ended at byte %d of %d", next, total)
	case !h.end && n == 0:
		return h, fmt.Errorf("empty chunk at offset %d", next)
	case h.n > limit:
		return h, fmt.Errorf("chunk of %d bytes exceeds R/p = %d", n, limit)
	case h.n > total-next:
		return h, fmt.Errorf("chunk of %d bytes at offset %d overruns the shard of %d", n, next, total)
	}
	return h, nil
}

// rawWriter writes chunk records on a connection.
type rawWriter struct {
	cn   *conn
	hdr  [rawHdrLen]byte
	bufs net.Buffers
}

// chunk writes one record: its header and data in one writev. gate, if
// set, is called before every slice of at most slice bytes (interleaving:
// it blocks while the training traffic runs); slice ≤ 0 writes at once.
//
// crc is the data's CRC32C if known (hashGrid), else -1.
func (w *rawWriter) chunk(off, total int64, data []byte, crc int64, gate func() error, slice int) error {
	if err := w.cn.flush(); err != nil { // control bytes still buffered go first
		return err
	}
	if crc < 0 {
		crc = int64(crc32.Checksum(data, castagnoli))
	}
	putRawHeader(w.hdr[:], false, int64(len(data)), off, total, uint32(crc))
	if gate == nil || slice <= 0 || len(data) <= slice {
		if gate != nil {
			if err := gate(); err != nil {
				return err
			}
		}
		return w.write(w.hdr[:], data)
	}
	first := true
	for len(data) > 0 {
		n := min(slice, len(data))
		if err := gate(); err != nil {
			return err
		}
		var err error
		if first {
			err, first = w.write(w.hdr[:], data[:n]), false
		} else {
			err = w.write(nil, data[:n])
		}
		if err != nil {
			return err
		}
		data = data[n:]
	}
	return nil
}

// end writes the end record (sent bytes in all).
func (w *rawWriter) end(sent, total int64) error {
	if err := w.cn.flush(); err != nil {
		return err
	}
	putRawHeader(w.hdr[:], true, 0, sent, total, 0)
	return w.write(w.hdr[:], nil)
}

func (w *rawWriter) write(hdr, data []byte) error {
	w.cn.arm()
	w.bufs = w.bufs[:0]
	if hdr != nil {
		w.bufs = append(w.bufs, hdr)
	}
	if len(data) > 0 {
		w.bufs = append(w.bufs, data)
	}
	b := w.bufs // WriteTo consumes its receiver
	_, err := b.WriteTo(w.cn.c)
	return w.cn.wrap("send chunk", err)
}

// rawReader receives a shard's chunk records straight into dst and checks
// them: the header before its length is believed, the order and the total
// length, and every byte's CRC32C and the shard's XXH3, computed slice by
// slice right after each slice arrives (while it is still in cache: one
// pass over memory, the kernel's copy, instead of two).
type rawReader struct {
	cn    *conn
	dst   []byte
	limit int64
	// verified is called after each chunk passed its CRC32C (credits).
	verified func(off, n int64) error
	// onRecv is called after each chunk's bytes arrived (timeline).
	onRecv func(off, n int64)
	// Sum is the XXH3 of the whole shard once Read returned nil.
	Sum uint64
}

// rawSlice is how much is read and hashed at a time (fits in L2).
const rawSlice = 256 << 10

// Read receives every chunk and the end record. An error names the shard
// offset; errors.Is(err, errRawCRC) tells a corrupt chunk.
func (r *rawReader) Read() error {
	total := int64(len(r.dst))
	h := xxh3.New()
	var hb [rawHdrLen]byte
	var next int64
	for {
		_ = r.cn.c.SetReadDeadline(time.Now().Add(r.cn.timeout))
		if _, err := io.ReadFull(r.cn.br, hb[:]); err != nil {
			return r.cn.wrap("receive", err)
		}
		rh, err := parseRawHeader(hb[:], next, total, r.limit)
		if err != nil {
			return fmt.Errorf("%s: %w", r.cn.who, err)
		}
		if rh.end {
			r.Sum = h.Sum64()
			return nil
		}
		b := r.dst[rh.off : rh.off+rh.n]
		crc := uint32(0)
		for len(b) > 0 {
			n := min(rawSlice, len(b))
			_ = r.cn.c.SetReadDeadline(time.Now().Add(r.cn.timeout))
			if _, err := io.ReadFull(r.cn.br, b[:n]); err != nil {
				return r.cn.wrap("receive", err)
			}
			crc = crc32.Update(crc, castagnoli, b[:n])
			_, _ = h.Write(b[:n])
			b = b[n:]
		}
		if r.onRecv != nil {
			r.onRecv(rh.off, rh.n)
		}
		if crc != rh.crc {
			return fmt.Errorf("%s: corrupt chunk at shard offset %d (%d bytes): %w (chunk says %08x, data has %08x)", r.cn.who, rh.off, rh.n, errRawCRC, rh.crc, crc)
		}
		if r.verified != nil {
			if err := r.verified(rh.off, rh.n); err != nil {
				return err
			}
		}
		next += rh.n
	}
}

// hashGrid computes, in one pass over data, its XXH3 and the CRC32C of
// each grid-sized piece (the chunks a non-interleaved send cuts), so the
// sender does not read the shard again for the chunk CRCs.
func hashGrid(data []byte, grid int64) (uint64, []uint32) {
	h := xxh3.New()
	var crcs []uint32
	for off := int64(0); off < int64(len(data)); off += grid {
		b := data[off:min(off+grid, int64(len(data)))]
		crc := uint32(0)
		for len(b) > 0 {
			n := min(rawSlice, len(b))
			crc = crc32.Update(crc, castagnoli, b[:n])
			_, _ = h.Write(b[:n])
			b = b[n:]
		}
		crcs = append(crcs, crc)
	}
	return h.Sum64(), crcs
}
