// Package cli is the command-line plumbing every trainwire tool shares: the
// kong parser set up the same way everywhere (help on every verb,
// TRAINWIRE_* environment variables by one rule, documented exit codes),
// logging to stderr, inputs and atomic outputs, progress bars and the
// version verb. The verbs many tools embed live below it: dump and env in
// lib/cli/verbs, check (which needs the mesh) in lib/cli/verbs/check, so
// a tool without a mesh links none.
//
// A tool's main is one line:
//
//	func main() { os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr)) }
//
// and run hands its kong struct to Run.
package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"runtime/debug"
	"sync/atomic"
	"syscall"

	"github.com/alecthomas/kong"

	"trainwire.dev/lib/exit"
)

// Exit codes shared by every tool: lib/exit's, under the names the CLI
// layer has always used.
const (
	ExitOK          = exit.OK
	ExitFailure     = exit.Failure
	ExitBadInput    = exit.BadInput
	ExitPeer        = exit.Peer
	ExitSkipped     = exit.Skipped
	ExitInterrupted = exit.Interrupted
	ExitTerminated  = exit.Terminated
	ExitUsage       = exit.Usage
)

// ExitCoder is implemented by errors that choose their process exit code.
type ExitCoder = exit.Coder

// ExitError wraps an error with an exit code.
type ExitError = exit.Error

// WithCode wraps err so that the tool exits with code. A nil err stays nil.
func WithCode(code int, err error) error { return exit.WithCode(code, err) }

// Version is the version of the trainwire tools; release builds set it with
// -ldflags "-X trainwire.dev/lib/cli.Version=v1.2.3".
var Version = "dev"

// Tool describes one binary.
type Tool struct {
	// Name is the binary's name, e.g. "hashsync".
	Name string
	// Description is the one-paragraph help text shown by --help.
	Description string
}

// IO is what a command may touch of the outside world. Run binds it so that
// every command's Run method can take it as a parameter; tests pass buffers.
type IO struct {
	Stdin  io.Reader
	Stdout io.Writer
	Stderr io.Writer
	// Ctx is cancelled on SIGINT/SIGTERM; the verb then has DefaultGrace
	// (or SetGrace's) to return before Run stops the process. Stdin's
	// reads fail with ErrInterrupted from then on.
	Ctx context.Context
	// Log writes to Stderr at the level the user chose.
	Log *slog.Logger
	// Tool is the name of the running binary.
	Tool string
	// grace: SetGrace's, in ns (0: DefaultGrace).
	grace atomic.Int64
}

// Globals are the flags every tool has, embedded in its CLI struct.
type Globals struct {
	Version   kong.VersionFlag `help:"Print the tool's version and exit."`
	LogLevel  string           `help:"Log level: debug, info, warn or error." enum:"debug,info,warn,error" default:"info" env:"TRAINWIRE_LOG_LEVEL" envscope:"shared"`
	LogFormat string           `help:"Log format on stderr: text or json." enum:"text,json" default:"text" env:"TRAINWIRE_LOG_FORMAT" envscope:"shared"`
}

// Logger returns a logger on w at the chosen level and format.
func (g *Globals) Logger(w io.Writer, tool string) *slog.Logger {
	var lvl slog.Level
	_ = lvl.UnmarshalText([]byte(g.LogLevel))
	opts := &slog.HandlerOptions{Level: lvl}
	var h slog.Handler
	if g.LogFormat == "json" {
		h = slog.NewJSONHandler(w, opts)
	} else {
		h = slog.NewTextHandler(w, opts)
	}
	return slog.New(h).With("tool", tool)
}

// globaler lets Run find the embedded Globals of any CLI struct.
type globaler interface{ globals() *Globals }

func (g *Globals) globals() *Globals { return g }

type exitPanic int

// NewParser is the kong parser Run uses for a tool's CLI struct: help on
// stdout, errors on stderr, exit through a panic Run recovers, and every
// flag given its environment variable by the rule (EnvRule). Tests use
// it to walk a tool's model as the tool sees it.
func NewParser(tool Tool, cli any, stdout, stderr io.Writer) (*kong.Kong, error) {
	return kong.New(cli,
		kong.Name(tool.Name),
		kong.Description(tool.Description),
		kong.Writers(stdout, stderr),
		kong.Exit(func(c int) { panic(exitPanic(c)) }),
		kong.ConfigureHelp(kong.HelpOptions{Compact: true, FlagsLast: true}),
		kong.Vars{"version": tool.Name + " " + Version},
		kong.PostBuild(func(k *kong.Kong) error {
			EnvRule(tool.Name, k.Model.Node)
			return nil
		}),
	)
}

// Run parses args into cli (a pointer to the tool's kong struct, which
// embeds Globals), runs the selected command and returns the process exit
// code. Help and parse errors never touch os.Exit, so Run is testable.
func Run(tool Tool, cli any, args []string, stdin io.Reader, stdout, stderr io.Writer) (code int) {
	defer func() {
		if r := recover(); r != nil {
			if c, ok := r.(exitPanic); ok {
				code = int(c)
				return
			}
			panic(r)
		}
	}()
	parser, err := NewParser(tool, cli, stdout, stderr)
	if err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", tool.Name, err)
		return ExitFailure
	}
	kctx, err := parser.Parse(args)
	if err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", tool.Name, err)
		var pe *kong.ParseError
		if errors.As(err, &pe) {
			// Kong prints help on its Stdout: right for --help, which the
			// user asked for, wrong here, where stdout may be the next
			// tool's input (`tool --bad | compressor encode`).
			pe.Context.Kong.Stdout = stderr
			_ = pe.Context.PrintUsage(true)
		}
		return ExitUsage
	}
	g := &Globals{LogLevel: "info", LogFormat: "text"}
	if gl, ok := cli.(globaler); ok {
		g = gl.globals()
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	rio := &IO{Stdin: interruptible(ctx, stdin), Stdout: guardTerminal(stdout), Stderr: stderr, Ctx: ctx, Log: g.Logger(stderr, tool.Name), Tool: tool.Name}
	done := make(chan struct{})
	defer close(done)
	go watchdog(ctx, done, rio)
	err = kctx.Run(rio)
	if err == nil {
		if ctx.Err() != nil {
			// A verb that stopped cleanly on the signal (a daemon
			// closing its connections) still says it was stopped.
			return InterruptCode(ctx)
		}
		return ExitOK
	}
	code = ExitCodeOf(err)
	if ctx.Err() != nil { // interrupted: whatever the verb's error says, the signal stopped it
		code = InterruptCode(ctx)
	}
	fmt.Fprintf(stderr, "%s: %v\n", tool.Name, err)
	return code
}

// InterruptCode is the exit code for a run that Run's context stopped:
// ExitTerminated when SIGTERM cancelled it, else ExitInterrupted.
func InterruptCode(ctx context.Context) int {
	if c := context.Cause(ctx); c != nil && c.Error() == syscall.SIGTERM.String()+" signal received" {
		return ExitTerminated
	}
	return ExitInterrupted
}

// ExitCodeOf maps an error to the process exit code: exit.CodeOf's (the
// first ExitCoder in its chain; malformed and truncated streams carry 2),
// else ExitFailure.
func ExitCodeOf(err error) int { return exit.CodeOf(err) }

// VersionCmd prints the tool's version and build information.
type VersionCmd struct{}

// Run prints "<tool> <version> (<go version>)".
func (VersionCmd) Run(rio *IO) error {
	gov := "unknown"
	if bi, ok := debug.ReadBuildInfo(); ok {
		gov = bi.GoVersion
	}
	_, err := fmt.Fprintf(rio.Stdout, "%s %s (%s)\n", rio.Tool, Version, gov)
	return err
}
