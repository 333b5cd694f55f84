package wire

import (
	"bufio"
	"errors"
	"fmt"
	"io"

	"github.com/vmihailenco/msgpack/v5"
	"github.com/zeebo/xxh3"

	"trainwire.dev/lib/tensor"
)

// countReader is the byte source of a Reader: it counts consumed bytes so
// errors can name offsets, and implements io.ByteScanner so the msgpack
// decoder reads through it without a second buffer.
type countReader struct {
	br *bufio.Reader
	n  int64
}

func (c *countReader) Read(p []byte) (int, error) {
	n, err := c.br.Read(p)
	c.n += int64(n)
	return n, err
}

func (c *countReader) ReadByte() (byte, error) {
	b, err := c.br.ReadByte()
	if err == nil {
		c.n++
	}
	return b, err
}

func (c *countReader) UnreadByte() error {
	err := c.br.UnreadByte()
	if err == nil {
		c.n--
	}
	return err
}

// Reader reads streams strictly. It accepts several streams one after the
// other (cat a b | tool), checks each End frame's count and digest, and
// bounds every allocation by its Limits. After an error it keeps returning
// that error. A Reader is not safe for concurrent use.
type Reader struct {
	cr       *countReader
	d        *msgpack.Decoder
	lim      Limits
	index    int64
	hdr      *Header
	inStream bool
	streams  int
	count    int64
	hash     *xxh3.Hasher
	pool     *tensor.Pool
	err      error
}

// NewReader returns a Reader of r with limits lim (zero fields take
// DefaultLimits).
func NewReader(r io.Reader, lim Limits) *Reader {
	br, ok := r.(*bufio.Reader)
	if !ok || br.Size() < 1<<16 {
		br = bufio.NewReaderSize(r, 1<<16)
	}
	cr := &countReader{br: br}
	d := msgpack.NewDecoder(cr)
	return &Reader{cr: cr, d: d, lim: lim.withDefaults(), hash: xxh3.New()}
}

// SetPool makes the payloads the Reader allocates (those of at least 4
// KiB, a whole number of float32) come from p: a caller that hands a
// frame's payload back with p.Put once done with it (tensor.Float32s of
// it) spares the next one a fresh zeroed allocation. Builds whose byte
// views are copies (tensor.ZeroCopy false) ignore it.
func (r *Reader) SetPool(p *tensor.Pool) {
	if tensor.ZeroCopy {
		r.pool = p
	}
}

// Header returns the header of the stream being read (nil before the
// first frame).
func (r *Reader) Header() *Header { return r.hdr }

// Offset returns the number of bytes consumed so far.
func (r *Reader) Offset() int64 { return r.cr.n }

// Frames returns the number of frames read so far, headers and ends
// included.
func (r *Reader) Frames() int64 { return r.index }

// Next returns the next data frame, reading through headers, ends and
// step ends. At the end of the input, after a complete stream, it returns
// io.EOF. Filters that answer step by step read with NextFrame instead.
func (r *Reader) Next() (Frame, error) {
	for {
		f, err := r.NextFrame()
		if err != nil {
			return nil, err
		}
		switch f.(type) {
		case *Header, *End, *StepEnd:
			continue
		}
		return f, nil
	}
}

// NextFrame returns the next frame, headers, ends and step ends included;
// a returned End has been checked against the stream. At the end of the
// input, after a complete stream, it returns io.EOF.
func (r *Reader) NextFrame() (Frame, error) {
	if r.err != nil {
		return nil, r.err
	}
	f, err := r.frame()
	if err != nil {
		r.err = err
		return nil, err
	}
	return f, nil
}

func (r *Reader) frame() (Frame, error) {
	start := r.cr.n
	first, err := r.cr.br.Peek(1)
	if err != nil {
		if err != io.EOF {
			return nil, fmt.Errorf("wire: reading at byte %d: %w", start, err)
		}
		if r.inStream {
			return nil, fmt.Errorf("wire: %w: %d data frames read, no end frame, at byte %d",
				ErrTruncated, r.count, start)
		}
		if r.streams == 0 {
			return nil, fmt.Errorf("wire: %w: empty input, no stream header", ErrTruncated)
		}
		return nil, io.EOF
	}
	idx := r.index
	r.index++
	if first[0] < 0x80 {
		// A positive fixint never starts a frame (a map); text does.
		return nil, &DecodeError{Frame: idx, Offset: start, Err: notStream(r.cr.br)}
	}
	d := &dec{d: r.d, cr: r.cr, lim: &r.lim, pool: r.pool}
	typ, f, err := d.frame(r.inStream, r.hash)
	if err == nil {
		err = f.validate(&r.lim)
	}
	if err == nil {
		err = r.sequence(f)
	}
	if err != nil {
		de := &DecodeError{Frame: idx, Offset: start, Type: typ, Err: err}
		var fe *fieldError
		if errors.As(err, &fe) {
			de.Field, de.Err = fe.field, fe.err
		}
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			de.Err = fmt.Errorf("%w: input ends inside the frame, at byte %d", ErrTruncated, r.cr.n)
		}
		return nil, de
	}
	return f, nil
}

// sequence enforces header, data*, end and checks the end frame.
func (r *Reader) sequence(f Frame) error {
	switch f := f.(type) {
	case *Header:
		if r.inStream {
			return fmt.Errorf("header inside a stream: the previous stream (%d data frames) has no end frame", r.count)
		}
		r.hdr, r.inStream, r.count = f, true, 0
		r.hash.Reset()
		r.streams++
	case *End:
		if !r.inStream {
			return errors.New("end frame without a header")
		}
		if f.Count != r.count {
			return fmt.Errorf("%w: end says %d data frames, %d were read", ErrDigest, f.Count, r.count)
		}
		if h := r.hash.Sum64(); f.XXH3 != h {
			return fmt.Errorf("%w: end says xxh3 %016x, payloads hash to %016x", ErrDigest, f.XXH3, h)
		}
		r.inStream = false
	case *StepEnd:
		if !r.inStream {
			return errors.New("step_end frame outside a stream (before its header or after its end)")
		}
	default:
		if !r.inStream {
			return fmt.Errorf("%s frame before a stream header", f.Type())
		}
		r.count++
	}
	return nil
}
