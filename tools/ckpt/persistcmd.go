package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"trainwire.dev/lib/cli"
	"trainwire.dev/lib/launch"
	"trainwire.dev/lib/wire"
	"trainwire.dev/tools/ckpt/internal/agent"
	"trainwire.dev/tools/ckpt/internal/catalog"
	"trainwire.dev/tools/ckpt/internal/safetensors"
	"trainwire.dev/tools/ckpt/internal/tier"
)

// DirFlag is the persistent directory every persistent-tier verb takes.
type DirFlag struct {
	Dir string `required:"" help:"The persistent directory (local disk, NFS, a mounted object store): shard files and the pebble catalog." env:"TRAINWIRE_CKPT_PERSISTENT" type:"path"`
}

// PersistCmd is `ckpt persist`.
type PersistCmd struct {
	launch.Flags `embed:""`
	DirFlag
	Peers    []string      `required:"" help:"Every rank's agent address host:port, in rank order (as given to the agents)." env:"TRAINWIRE_CKPT_PEERS"`
	Token    string        `help:"The job token the agents share; prefer the env var." env:"TRAINWIRE_TOKEN"`
	M        int           `name:"m" help:"Replicas per checkpoint, as given to the agents (orders the holders tried)." default:"2" env:"TRAINWIRE_CKPT_REPLICAS"`
	Timeout  time.Duration `help:"Deadline for every connect, read and write to an agent." default:"30s" env:"TRAINWIRE_TIMEOUT"`
	Wait     time.Duration `help:"Wait this long for the lock if another persist or prune holds it (0: skip this run at once, exit 75)." default:"0s"`
	Tag      []string      `help:"Retention tags recorded in the catalog (pin: prune never removes it)."`
	Rate     string        `help:"Cap the write rate (e.g. 200MB per second) to spare a shared file system; none: no cap." default:"none" env:"TRAINWIRE_CKPT_PERSIST_RATE"`
	Metrics  string        `help:"Write Prometheus textfile metrics here (node_exporter's textfile collector): last success, duration, bytes." env:"TRAINWIRE_CKPT_METRICS" type:"path"`
	Progress string        `help:"Progress bar on stderr: auto (when stderr is a terminal), always, never." enum:"auto,always,never" default:"auto"`
}

// Run persists the latest committed checkpoint.
func (c *PersistCmd) Run(rio *cli.IO) (err error) {
	start := time.Now()
	var res tier.Result
	skipped := false
	defer func() {
		if c.Metrics != "" && !skipped {
			if merr := writeMetrics(c.Metrics, "persist", start, err == nil, res.Bytes, res.Iter); merr != nil {
				rio.Log.Warn("could not write the metrics file", "path", c.Metrics, "err", merr)
			}
		}
	}()
	env, err := c.Flags.Resolve(os.Environ())
	if err != nil {
		return cli.WithCode(cli.ExitUsage, err)
	}
	run := env.RunID
	if run == "" {
		run = "default"
	}
	var rate float64
	if c.Rate != "none" && c.Rate != "" {
		if rate, err = parseRate(c.Rate); err != nil {
			return cli.WithCode(cli.ExitUsage, fmt.Errorf("--rate: %w", err))
		}
	}
	unlock, err := lockDir(c.Dir, c.Wait, "persist")
	if errors.Is(err, tier.ErrBusy) {
		skipped = true // the lock holder writes the metrics
	}
	if err != nil {
		return err
	}
	defer unlock()
	rem, err := agent.NewRemote(c.Peers, []byte(c.Token), run, c.M, c.Timeout)
	if err != nil {
		return cli.WithCode(cli.ExitUsage, err)
	}
	bar := newBar(rio.Stderr, c.Progress, "persist")
	res, err = tier.Persist(rio.Ctx, c.Dir, rem, tier.Options{Run: run, Tags: c.Tag, Rate: rate, Progress: bar.Set})
	bar.Done()
	if errors.Is(err, tier.ErrUnavailable) {
		return cli.WithCode(cli.ExitPeer, err)
	}
	if err != nil {
		return err // the persistent directory: exit 1, the checkpoint is still in memory
	}
	if res.Skipped {
		fmt.Fprintf(rio.Stderr, "ckpt: iteration %d is already persisted in %s; nothing to do\n", res.Iter, c.Dir)
		return nil
	}
	d := time.Since(start)
	fmt.Fprintf(rio.Stderr, "ckpt: persisted iteration %d (%d shards, %d bytes) to %s in %v (%.1f MB/s)\n",
		res.Iter, res.Shards, res.Bytes, c.Dir, d.Round(time.Millisecond), float64(res.Bytes)/1e6/d.Seconds())
	return nil
}

// lockDir takes the persistent directory's writer lock for verb, waiting
// up to wait. When another run holds it past that, the error exits
// cli.ExitSkipped (75), which cron scripts tell from success and from
// failure.
func lockDir(dir string, wait time.Duration, verb string) (func(), error) {
	unlock, err := tier.Lock(dir, wait)
	if errors.Is(err, tier.ErrBusy) {
		return nil, cli.WithCode(cli.ExitSkipped, fmt.Errorf("skipped: %w in %s; this %s did nothing (exit %d: try again later, or give --wait)", err, dir, verb, cli.ExitSkipped))
	}
	return unlock, err
}

// LsCmd is `ckpt ls`.
type LsCmd struct {
	DirFlag
	Format string `help:"table, or json: one JSON manifest per line." enum:"table,json" default:"table" env:"TRAINWIRE_CKPT_FORMAT"`
}

// Run lists the catalog.
func (c *LsCmd) Run(rio *cli.IO) error {
	cat, err := openCatalog(c.Dir)
	if err != nil {
		return err
	}
	all, err := cat.List()
	cat.Close()
	if err != nil {
		return err
	}
	if c.Format == "json" {
		for _, m := range all {
			b, _ := jsonLine(m)
			fmt.Fprintln(rio.Stdout, string(b))
		}
		return nil
	}
	tw := tabwriter.NewWriter(rio.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "iter\tranks\tbytes\tcreated\ttags")
	for _, m := range all {
		fmt.Fprintf(tw, "%d\t%d\t%d\t%s\t%s\n", m.Iter, len(m.Shards), m.Bytes, m.Created.Format(time.RFC3339), strings.Join(m.Tags, ","))
	}
	return tw.Flush()
}

func openCatalog(dir string) (*catalog.Catalog, error) {
	if _, err := os.Stat(filepath.Join(dir, "catalog")); err != nil {
		return nil, fmt.Errorf("%s holds no ckpt catalog (run `ckpt persist --dir %s` first)", dir, dir)
	}
	return catalog.Open(dir, tier.CatalogWait)
}

// VerifyCmd is `ckpt verify`.
type VerifyCmd struct {
	DirFlag
	Iter     int64  `help:"Verify only this iteration (-1: every one the catalog names)." default:"-1"`
	Metrics  string `help:"Write Prometheus textfile metrics here." env:"TRAINWIRE_CKPT_VERIFY_METRICS" type:"path"`
	Progress string `help:"Progress bar on stderr: auto, always, never." enum:"auto,always,never" default:"auto"`
}

// Run re-hashes every shard the catalog names.
func (c *VerifyCmd) Run(rio *cli.IO) (err error) {
	start := time.Now()
	var total int64
	defer func() {
		if c.Metrics != "" {
			if merr := writeMetrics(c.Metrics, "verify", start, err == nil, total, c.Iter); merr != nil {
				rio.Log.Warn("could not write the metrics file", "err", merr)
			}
		}
	}()
	cat, err := openCatalog(c.Dir)
	if err != nil {
		return err
	}
	all, err := cat.List()
	cat.Close()
	if err != nil {
		return err
	}
	var size int64
	var sel []*catalog.Manifest
	for _, m := range all {
		if c.Iter < 0 || m.Iter == c.Iter {
			sel = append(sel, m)
			size += m.Bytes
		}
	}
	if c.Iter >= 0 && len(sel) == 0 {
		return fmt.Errorf("the catalog names no iteration %d", c.Iter)
	}
	bar := newBar(rio.Stderr, c.Progress, "verify")
	bar.SetTotal(size)
	var bad []error
	shards := 0
	for _, m := range sel {
		for _, s := range m.Shards {
			base := total
			n, err := tier.CheckShard(c.Dir, s, func(n int64) { bar.Set(base + n) })
			total += n
			shards++
			if err != nil {
				p := tier.Problem{Iter: m.Iter, Rank: s.Rank, File: s.File, Err: err}
				bad = append(bad, p)
				fmt.Fprintf(rio.Stdout, "BAD %s\n", p.Error())
			}
		}
	}
	bar.Done()
	if len(bad) > 0 {
		return fmt.Errorf("%d of %d shards failed verification: %w", len(bad), shards, errors.Join(bad...))
	}
	fmt.Fprintf(rio.Stderr, "ckpt: verified %d iterations, %d shards, %d bytes in %v\n", len(sel), shards, total, time.Since(start).Round(time.Millisecond))
	return nil
}

// PruneCmd is `ckpt prune`.
type PruneCmd struct {
	DirFlag
	Keep      int           `required:"" help:"Keep the N newest persisted iterations."`
	KeepEvery int64         `help:"Also keep every iteration divisible by K (0: none)." default:"0"`
	Wait      time.Duration `help:"Wait this long for the lock if another persist or prune holds it (0: skip this run at once, exit 75)." default:"0s"`
	DryRun    bool          `help:"Say what would be removed; remove nothing."`
}

// Run removes catalog entries first (one synced batch), then their files.
func (c *PruneCmd) Run(rio *cli.IO) error {
	if c.Keep < 1 {
		return cli.WithCode(cli.ExitUsage, fmt.Errorf("--keep %d: keep at least the newest iteration", c.Keep))
	}
	unlock, err := lockDir(c.Dir, c.Wait, "prune")
	if err != nil {
		return err
	}
	defer unlock()
	cat, err := openCatalog(c.Dir)
	if err != nil {
		return err
	}
	defer cat.Close()
	all, err := cat.List()
	if err != nil {
		return err
	}
	keep := tier.Keep(all, c.Keep, c.KeepEvery)
	var drop []int64
	for _, m := range all {
		if !keep[m.Iter] {
			drop = append(drop, m.Iter)
		}
	}
	for _, it := range drop {
		fmt.Fprintf(rio.Stdout, "prune %d\n", it)
	}
	if c.DryRun {
		return nil
	}
	if err := cat.Delete(drop...); err != nil {
		return err
	}
	named := map[int64]bool{}
	for it := range keep {
		named[it] = true
	}
	gone, err := tier.Cleanup(c.Dir, named, true)
	if err != nil {
		return err
	}
	fmt.Fprintf(rio.Stderr, "ckpt: pruned %d iterations (kept %d); removed %d directories\n", len(drop), len(all)-len(drop), len(gone))
	return nil
}

// writeMetrics writes a Prometheus textfile atomically (cli.CreateAtomic),
// keeping the last success time of a previous successful run.
func writeMetrics(path, verb string, start time.Time, ok bool, bytes, iter int64) error {
	name := "ckpt_" + verb
	lastOK := float64(0)
	if b, err := os.ReadFile(path); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if v, found := strings.CutPrefix(l, name+"_last_success_timestamp_seconds "); found {
				lastOK, _ = strconv.ParseFloat(v, 64)
			}
		}
	}
	now := time.Now()
	success := 0
	if ok {
		success, lastOK = 1, float64(now.UnixNano())/1e9
	}
	var b strings.Builder
	fmt.Fprintf(&b, "# HELP %s_last_success_timestamp_seconds Unix time of the last successful ckpt %s.\n# TYPE %s_last_success_timestamp_seconds gauge\n%s_last_success_timestamp_seconds %.3f\n", name, verb, name, name, lastOK)
	fmt.Fprintf(&b, "# HELP %s_last_run_timestamp_seconds Unix time the last ckpt %s ended.\n# TYPE %s_last_run_timestamp_seconds gauge\n%s_last_run_timestamp_seconds %.3f\n", name, verb, name, name, float64(now.UnixNano())/1e9)
	fmt.Fprintf(&b, "# HELP %s_success Whether the last ckpt %s succeeded.\n# TYPE %s_success gauge\n%s_success %d\n", name, verb, name, name, success)
	fmt.Fprintf(&b, "# HELP %s_duration_seconds How long the last ckpt %s took.\n# TYPE %s_duration_seconds gauge\n%s_duration_seconds %.3f\n", name, verb, name, name, now.Sub(start).Seconds())
	fmt.Fprintf(&b, "# HELP %s_bytes Bytes the last ckpt %s wrote or read.\n# TYPE %s_bytes gauge\n%s_bytes %d\n", name, verb, name, name, bytes)
	fmt.Fprintf(&b, "# HELP %s_iteration Iteration of the last ckpt %s.\n# TYPE %s_iteration gauge\n%s_iteration %d\n", name, verb, name, name, iter)
	f, err := cli.CreateAtomic(path)
	if err != nil {
		return err
	}
	defer f.Abort()
	if _, err := f.WriteString(b.String()); err != nil {
		return err
	}
	return f.Commit()
}

// newBar is lib/cli's progress bar for --progress (auto: only on a
// terminal), counting bytes.
func newBar(w io.Writer, mode, label string) *cli.Progress {
	return cli.NewProgress(w, cli.ProgressOptions{Label: label, Bytes: true, Mode: mode})
}

func jsonLine(v any) ([]byte, error) { return json.Marshal(v) }

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

// denseFrames reads the dense frames of a trainwire stream held in data.
func denseFrames(data []byte) ([]*wire.Dense, error) {
	r := wire.NewReader(bytes.NewReader(data), wire.Limits{MaxPayload: int64(len(data)) + 1})
	var ds []*wire.Dense
	for {
		f, err := r.Next()
		if errors.Is(err, io.EOF) {
			return ds, nil
		}
		if err != nil {
			return nil, cli.WithCode(cli.ExitBadInput, err)
		}
		d, ok := f.(*wire.Dense)
		if !ok {
			return nil, cli.WithCode(cli.ExitBadInput, fmt.Errorf("the checkpoint holds a %s frame; safetensors holds dense tensors only", f.Type()))
		}
		ds = append(ds, d)
	}
}
