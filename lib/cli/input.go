package cli

import (
	"errors"
	"fmt"
	"io"
	"os"

	"trainwire.dev/lib/wire"
)

// WireFlags are the stream limits every reading verb takes.
type WireFlags struct {
	MaxPayload ByteSize `help:"Largest payload (bin value) accepted from a stream." default:"4294967295" env:"TRAINWIRE_MAX_PAYLOAD" envscope:"shared"`
	MaxElems   int      `help:"Largest array or map accepted from a stream, in elements." default:"1048576" env:"TRAINWIRE_MAX_ELEMS" envscope:"shared"`
}

// Limits returns the wire limits the flags ask for.
func (f WireFlags) Limits() wire.Limits {
	return wire.Limits{MaxPayload: int64(f.MaxPayload), MaxElems: f.MaxElems}
}

// OpenInput opens a file argument, "-" meaning stdin. The returned closer
// is a no-op for stdin.
func OpenInput(name string, stdin io.Reader) (io.Reader, func() error, error) {
	if name == "-" || name == "" {
		return stdin, func() error { return nil }, nil
	}
	f, err := os.Open(name)
	if err != nil {
		return nil, nil, err
	}
	return f, f.Close, nil
}

// EachFrame reads the named streams in order ("-", or no names at all, is
// stdin) and calls fn for every data frame, and for every header and end
// too when headers is set. Read errors name the file; the first error
// stops the walk.
func EachFrame(files []string, stdin io.Reader, lim wire.Limits, headers bool, fn func(wire.Frame) error) error {
	if len(files) == 0 {
		files = []string{"-"}
	}
	for _, name := range files {
		in, closeIn, err := OpenInput(name, stdin)
		if err != nil {
			return err
		}
		err = readStream(name, in, lim, headers, fn)
		if cerr := closeIn(); err == nil {
			err = cerr
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// readStream is EachFrame for one opened input; stream errors name the
// file (not stdin).
func readStream(name string, in io.Reader, lim wire.Limits, headers bool, fn func(wire.Frame) error) error {
	if err := eachFrame(wire.NewReader(in, lim), headers, fn); err != nil {
		return inputErr(name, err)
	}
	return nil
}

// inputErr names the input file in a decode error ("-", stdin, is not
// named).
func inputErr(name string, err error) error {
	var de *wire.DecodeError
	if name != "-" && name != "" && (errors.As(err, &de) || errors.Is(err, wire.ErrTruncated)) {
		return fmt.Errorf("%s: %w", name, err)
	}
	return err
}

func eachFrame(r *wire.Reader, headers bool, fn func(wire.Frame) error) error {
	for {
		var f wire.Frame
		var err error
		if headers {
			f, err = r.NextFrame()
		} else {
			f, err = r.Next()
		}
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		if err := fn(f); err != nil {
			return err
		}
	}
}
