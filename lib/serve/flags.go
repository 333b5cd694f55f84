package serve

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"

	"trainwire.dev/lib/cli"
	"trainwire.dev/lib/launch"
)

// Flags are every serve verb's own flags (docs/serve.md, "Flags").
type Flags struct {
	Socket     string       `help:"Path of the Unix socket to listen on (mode 0600; its directory must be this user's and writable by nobody else); {rank} and {local_rank} in it are replaced, for launchers that give every rank the same environment." env:"TRAINWIRE_SERVE_SOCKET" required:"" envscope:"shared"`
	MaxRequest cli.ByteSize `help:"Largest request or reply message, inline tensors included." default:"64MiB" env:"TRAINWIRE_SERVE_MAX_REQUEST" envscope:"shared"`
	MaxTensors int          `help:"Most tensors in one request." default:"65536" env:"TRAINWIRE_SERVE_MAX_TENSORS" envscope:"shared"`
}

// Listen checks the flags and listens on the socket, {rank} and
// {local_rank} replaced from env: before the mesh is joined, so that a bad
// path fails this rank alone, at once. Errors exit with cli.ExitUsage.
func (f *Flags) Listen(env launch.Env) (*net.UnixListener, string, error) {
	if f.MaxRequest > 1<<31 {
		return nil, "", cli.WithCode(cli.ExitUsage, fmt.Errorf("serve: --max-request %d: at most 2 GiB", f.MaxRequest))
	}
	socket := strings.NewReplacer("{rank}", fmt.Sprint(env.Rank), "{local_rank}", fmt.Sprint(env.LocalRank)).Replace(f.Socket)
	ln, err := Listen(socket)
	if err != nil {
		return nil, "", cli.WithCode(cli.ExitUsage, err)
	}
	return ln, socket, nil
}

// Limits are the flags' limits, with the tool's options.
func (f *Flags) Limits(options ...string) Limits {
	return Limits{MaxMessage: int(f.MaxRequest), MaxTensors: f.MaxTensors, Options: options}
}

// ExitError is a serve verb's error for Serve's result other than
// ErrClientGone (the normal end, which each tool finishes its own way):
// an interrupt exits 130 or 143, broken framing 2 (cli.ExitBadInput), a
// job failure 3 (the mesh's error).
func ExitError(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return cli.WithCode(cli.InterruptCode(ctx), fmt.Errorf("serve: %w", err))
	}
	var fe *FrameError
	if errors.As(err, &fe) {
		return cli.WithCode(cli.ExitBadInput, err)
	}
	return fmt.Errorf("serve: %w", err)
}
