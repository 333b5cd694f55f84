package main

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"trainwire.dev/lib/cli"
	"trainwire.dev/lib/wire"
	"trainwire.dev/tools/ckpt/internal/agent"
	"trainwire.dev/tools/ckpt/internal/safetensors"
)

// SaveCmd is `ckpt save`: hand one rank's state to the local agent.
type SaveCmd struct {
	AgentFlags
	cli.WireFlags
	Iter    int64         `required:"" help:"Iteration the state is of (must increase from save to save)."`
	Input   string        `arg:"" optional:"" default:"-" help:"The state: a trainwire stream of tensor frames, a safetensors file, or raw bytes; - for stdin." type:"path"`
	Format  string        `help:"Input format: auto (detect), wire, safetensors or raw." enum:"auto,wire,safetensors,raw" default:"auto"`
	Shm     bool          `help:"The input is a file in shared memory (e.g. /dev/shm/state): the agent reads it itself, no copy through the socket."`
	Wait    time.Duration `help:"Wait this long for the previous checkpoint's global commit (default: the agent's --commit-wait)." default:"-1ns"`
	Commit  bool          `help:"Return only when this iteration is globally committed (every rank's shard on all its holders)."`
	Timeout time.Duration `help:"Deadline for the agent's answers." default:"120s" env:"TRAINWIRE_TIMEOUT"`
}

// Run sends the state and reports where it went.
func (c *SaveCmd) Run(rio *cli.IO) error {
	env, socket, err := c.resolve()
	if err != nil {
		return err
	}
	cl, err := agent.Dial(socket, c.Timeout, c.Limits())
	if err != nil {
		return err
	}
	defer cl.Close()
	start := time.Now()
	var res agent.Result
	format := c.Format
	if c.Shm {
		if c.Input == "-" {
			return cli.WithCode(cli.ExitUsage, errors.New("--shm needs the path of a file in shared memory, not stdin"))
		}
		// Only the first bytes are read here (the format, an empty or a
		// header-only stream); the agent reads the file itself.
		f, err := os.Open(c.Input)
		if err != nil {
			return err
		}
		br := bufio.NewReaderSize(f, 64<<10)
		format, err = c.check(br, format, nil)
		f.Close()
		if err != nil {
			return err
		}
		res, err = cl.SaveFile(c.Iter, format, c.Input, c.Wait)
		if err != nil {
			return err
		}
	} else {
		in, closeIn, err := cli.OpenInput(c.Input, rio.Stdin)
		if err != nil {
			return err
		}
		defer closeIn()
		br := bufio.NewReaderSize(in, 1<<20)
		r := wire.NewReader(br, c.Limits())
		if format, err = c.check(br, format, r); err != nil {
			return err
		}
		switch format {
		case "wire":
			res, err = cl.SaveStream(c.Iter, r, c.Wait)
			if errors.Unwrap(err) == wire.ErrTruncated {
				// The input stream ended between frames (the reader's own
				// error; a connection that closed is wrapped by the client).
				err = cli.WithCode(cli.ExitBadInput, fmt.Errorf("%s: %w", c.inputName(), err))
			}
		default:
			var data []byte
			data, err = io.ReadAll(io.LimitReader(br, int64(c.MaxPayload)+1))
			if err == nil && int64(len(data)) > int64(c.MaxPayload) {
				err = cli.WithCode(cli.ExitBadInput, fmt.Errorf("input larger than --max-payload (%d bytes)", c.MaxPayload))
			}
			if err == nil && format == "safetensors" {
				if ts, perr := safetensors.Parse(data); perr == nil && len(ts) == 0 {
					err = cli.WithCode(cli.ExitBadInput, fmt.Errorf("%s: the safetensors file holds no tensor: nothing to save as iteration %d", c.inputName(), c.Iter))
				}
			}
			if err == nil {
				res, err = cl.SaveBytes(c.Iter, format, data, 8<<20, c.Wait)
			}
		}
		if err != nil {
			return err
		}
	}
	rio.Log.Info("saved to the local agent", "rank", env.Rank, "iter", c.Iter, "format", format, "bytes", res["len"], "stall", time.Since(start).Round(time.Microsecond))
	if c.Commit {
		if _, err := cl.Wait(c.Iter, c.Timeout); err != nil {
			return err
		}
		rio.Log.Info("globally committed", "iter", c.Iter, "elapsed", time.Since(start).Round(time.Millisecond))
	}
	return nil
}

func (c *SaveCmd) inputName() string {
	if c.Input == "-" {
		return "stdin"
	}
	return c.Input
}

// check looks at the start of the input (peeked, not consumed, except a
// stream's leading headers, read by r): it picks the format for auto and
// refuses an empty input, and a stream with no data frame (a header only),
// as bad input: saving either would commit an empty checkpoint. r is the
// stream's reader when the input is read here (nil for --shm).
func (c *SaveCmd) check(br *bufio.Reader, format string, r *wire.Reader) (string, error) {
	if format == "auto" {
		format = detect(br)
	}
	if _, err := br.Peek(1); err == io.EOF {
		return format, cli.WithCode(cli.ExitBadInput, fmt.Errorf("empty input (%s): nothing to save as iteration %d", c.inputName(), c.Iter))
	}
	if format != "wire" {
		return format, nil
	}
	if r == nil {
		r = wire.NewReader(br, c.Limits())
	}
	// Read the leading headers (and empty streams) until a data frame
	// starts; the agent then gets the stream from there.
	for {
		b, _ := br.Peek(wire.PeekLen)
		if len(b) == 0 {
			return format, cli.WithCode(cli.ExitBadInput, fmt.Errorf("%s: the stream holds no tensor frame (a header only): nothing to save as iteration %d", c.inputName(), c.Iter))
		}
		if typ, ok := wire.PeekType(b); !ok || (typ != wire.TypeHeader && typ != wire.TypeEnd) {
			return format, nil // a data frame, or bytes the reader will name
		}
		if _, err := r.NextFrame(); err != nil {
			if cli.ExitCodeOf(err) == cli.ExitFailure && errors.Is(err, wire.ErrTruncated) {
				err = cli.WithCode(cli.ExitBadInput, err)
			}
			return format, fmt.Errorf("%s: %w", c.inputName(), err)
		}
	}
}

// detect tells a trainwire stream, a safetensors file (an 8-byte length,
// then '{') and raw bytes apart from the first bytes of the input. A
// stream starts with a header frame: a msgpack map whose first key "t" is
// "header" and whose second is "v" (wire.PeekType). A first byte that is
// a msgpack map code (0x80–0x8f, 0xde, 0xdf), which one random state in
// 14 has, is not enough: such bytes are raw.
func detect(br *bufio.Reader) string {
	b, _ := br.Peek(max(wire.PeekLen, 9))
	return detectBytes(b)
}

func detectBytes(b []byte) string {
	if typ, ok := wire.PeekType(b); ok && typ == wire.TypeHeader {
		return "wire"
	}
	if len(b) >= 9 && b[8] == '{' && binary.LittleEndian.Uint64(b) < 100<<20 {
		return "safetensors"
	}
	return "raw"
}
