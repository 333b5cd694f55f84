package cli

import (
	"io"

	"trainwire.dev/lib/wire"
)

// ReadModel reads the timing model at path ("-" or "" is stdin) with
// wire.ReadModel: a trainwire stream with a model frame, or a JSON model.
func ReadModel(path string, stdin io.Reader, lim wire.Limits) (*wire.Model, error) {
	in, closeIn, err := OpenInput(path, stdin)
	if err != nil {
		return nil, err
	}
	defer closeIn()
	return wire.ReadModel(InputName(path), in, lim)
}

// InputName is how messages name an input path: "stdin" for "-" or "".
func InputName(path string) string {
	if path == "-" || path == "" {
		return "stdin"
	}
	return path
}
