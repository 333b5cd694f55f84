package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"time"

	"trainwire.dev/lib/cli"
	"trainwire.dev/lib/wire"
	"trainwire.dev/tools/ckpt/internal/agent"
	"trainwire.dev/tools/ckpt/internal/safetensors"
	"trainwire.dev/tools/ckpt/internal/tier"
)

// RestoreCmd is `ckpt restore`.
type RestoreCmd struct {
	AgentFlags
	cli.WireFlags
	Latest   bool          `help:"The latest globally committed iteration (the default)."`
	Iter     int64         `help:"This iteration (it must be committed; -1: the latest)." default:"-1"`
	Output   string        `short:"o" help:"Write the state here; - for stdout." default:"-" type:"path"`
	Format   string        `help:"bytes: exactly what was saved (stream, safetensors or raw); frames: the saved tensors as a trainwire stream; safetensors: as a safetensors file (from frames or safetensors)." enum:"bytes,frames,safetensors" default:"bytes"`
	Shm      bool          `help:"Copy straight from the agent's shared memory into --output (a file, e.g. in /dev/shm), not through the socket."`
	Timeout  time.Duration `help:"Deadline for the agent's answers." default:"120s" env:"TRAINWIRE_TIMEOUT"`
	From     string        `help:"memory: ask the local agent (local memory, else a peer's); persistent: read the persistent tier (--dir), no agent needed." enum:"memory,persistent" default:"memory"`
	Dir      string        `help:"With --from persistent: the persistent directory." env:"TRAINWIRE_CKPT_PERSISTENT" type:"path"`
	Progress string        `help:"With --from persistent: progress bar on stderr: auto (on a terminal), always, never." enum:"auto,always,never" default:"auto"`
}

// Run restores and says where the state came from.
func (c *RestoreCmd) Run(rio *cli.IO) error {
	env, socket, err := c.resolve()
	if err != nil {
		return err
	}
	if c.From == "persistent" {
		return c.fromPersistent(rio, env.Rank)
	}
	cl, err := agent.Dial(socket, c.Timeout, c.Limits())
	if err != nil {
		return err
	}
	defer cl.Close()
	iter := c.Iter
	if c.Latest {
		if iter >= 0 {
			return cli.WithCode(cli.ExitUsage, errors.New("give --latest or --iter, not both"))
		}
		iter = -1
	}
	// The state goes to a temporary file renamed over --output only when
	// the whole restore succeeded: a failed, interrupted or killed restore
	// leaves the caller's file as it was.
	var out io.Writer = rio.Stdout
	var file *cli.AtomicFile
	if c.Output != "-" {
		file, err = cli.CreateAtomic(c.Output)
		if err != nil {
			return err
		}
		defer file.Abort()
		out = file
	}
	// Ctrl-C (or SIGTERM) closes the connection, which ends the restore.
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		select {
		case <-rio.Ctx.Done():
			cl.Close()
		case <-stop:
		}
	}()
	bw := bufio.NewWriterSize(out, 1<<20)
	start := time.Now()
	var res agent.Result
	switch {
	case c.Shm:
		if file == nil {
			return cli.WithCode(cli.ExitUsage, errors.New("--shm needs --output FILE"))
		}
		res, err = cl.RestoreShm(iter, func(b []byte, ready func(int64) error) error {
			return writeAsReady(file, b, ready)
		})
	case c.Format == "frames":
		w := wire.NewWriter(bw, "ckpt/"+cli.Version)
		res, err = cl.Restore(iter, "frames", nil, w, nil)
		if err == nil {
			err = w.Close()
		}
	case c.Format == "safetensors":
		var ds []*wire.Dense
		res, err = cl.Restore(iter, "frames", nil, nil, func(f wire.Frame) error {
			d, ok := f.(*wire.Dense)
			if !ok {
				return fmt.Errorf("the checkpoint holds a %s frame; safetensors holds dense tensors only", f.Type())
			}
			ds = append(ds, d)
			return nil
		})
		if err == nil {
			err = safetensors.Write(bw, ds)
		}
	default:
		res, err = cl.Restore(iter, "chunks", bw, nil, nil)
	}
	if err == nil {
		err = bw.Flush()
	}
	if rio.Ctx.Err() != nil {
		return cli.WithCode(cli.ExitInterrupted, fmt.Errorf("restore interrupted (%v)%s", err, keptNote(c.Output)))
	}
	if err == nil && file != nil {
		err = file.Commit()
	}
	if err != nil {
		if file != nil {
			return fmt.Errorf("%w%s", err, keptNote(c.Output))
		}
		return err
	}
	src := res["source"]
	where := "local memory"
	if len(src) > 5 && src[:5] == "peer:" {
		where = "peer memory (rank " + src[5:] + ")"
	}
	if p, ok := strings.CutPrefix(src, "persistent:"); ok {
		where = "persistent storage (" + p + ", the agent's fallback)"
	}
	fmt.Fprintf(rio.Stderr, "ckpt: rank %d restored iteration %s (%s bytes, %s) from %s in %v\n", env.Rank, res["iter"], res["len"], res["format"], where, time.Since(start).Round(time.Millisecond))
	return nil
}

// keptNote tells, after a failed restore into path, that path was not
// touched.
func keptNote(path string) string {
	if path == "-" {
		return ""
	}
	return fmt.Sprintf("; %s left as it was", path)
}

// fromPersistent restores this rank's shard from the persistent tier.
func (c *RestoreCmd) fromPersistent(rio *cli.IO, rank int) error {
	if c.Dir == "" {
		return cli.WithCode(cli.ExitUsage, errors.New("--from persistent needs --dir (or TRAINWIRE_CKPT_PERSISTENT)"))
	}
	if c.Shm {
		return cli.WithCode(cli.ExitUsage, errors.New("--shm restores from an agent's memory; with --from persistent use -o FILE"))
	}
	start := time.Now()
	iter := c.Iter
	if c.Latest {
		iter = -1
	}
	m, err := tier.Latest(c.Dir, iter)
	if err != nil {
		return err
	}
	bar := newBar(rio.Stderr, c.Progress, "restore")
	for _, sh := range m.Shards {
		if sh.Rank == rank {
			bar.SetTotal(sh.Len)
		}
	}
	data, s, err := tier.ReadShardProgress(c.Dir, m, rank, bar.Set)
	bar.Done()
	if err != nil {
		return err
	}
	var out io.Writer = rio.Stdout
	var file *cli.AtomicFile
	if c.Output != "-" {
		if file, err = cli.CreateAtomic(c.Output); err != nil {
			return err
		}
		defer file.Abort()
		out = file
	}
	bw := bufio.NewWriterSize(out, 1<<20)
	err = convertShard(data, s.Format, c.Format, bw)
	if err == nil {
		err = bw.Flush()
	}
	if err == nil && file != nil {
		err = file.Commit()
	}
	if err != nil {
		return fmt.Errorf("%w%s", err, keptNote(c.Output))
	}
	fmt.Fprintf(rio.Stderr, "ckpt: rank %d restored iteration %d (%d bytes, %s) from persistent storage (%s) in %v\n", rank, m.Iter, len(data), s.Format, filepath.Join(c.Dir, s.File), time.Since(start).Round(time.Millisecond))
	return nil
}

// convertShard writes a shard saved in format as want (bytes: as saved;
// frames: a trainwire stream of its tensors; safetensors).
func convertShard(data []byte, format, want string, w io.Writer) error {
	switch {
	case want == "bytes", want == "frames" && format == agent.FormatWire, want == "safetensors" && format == agent.FormatSafetensors:
		_, err := w.Write(data)
		return err
	case want == "frames" && format == agent.FormatSafetensors:
		ds, err := safetensors.Dense(data)
		if err != nil {
			return cli.WithCode(cli.ExitBadInput, err)
		}
		fw := wire.NewWriter(w, "ckpt/"+cli.Version)
		for _, d := range ds {
			if err := fw.Write(d); err != nil {
				return err
			}
		}
		return fw.Close()
	case want == "safetensors" && format == agent.FormatWire:
		ds, err := denseFrames(data)
		if err != nil {
			return err
		}
		return safetensors.Write(w, ds)
	}
	return cli.WithCode(cli.ExitBadInput, fmt.Errorf("the shard was saved as %s bytes, not tensors; restore it with --format bytes", format))
}

// writeAsReady writes a streamed restore's buffer b to f piece by piece,
// each as soon as the agent says it arrived.
func writeAsReady(f *cli.AtomicFile, b []byte, ready func(int64) error) error {
	if err := f.Truncate(int64(len(b))); err != nil {
		return err
	}
	const piece = 8 << 20
	for off := 0; off < len(b); off += piece {
		end := min(off+piece, len(b))
		if err := ready(int64(end)); err != nil {
			return err
		}
		if _, err := f.WriteAt(b[off:end], int64(off)); err != nil {
			return err
		}
	}
	return nil
}
