package main

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"trainwire.dev/lib/cli"
	"trainwire.dev/lib/wire"
	"trainwire.dev/tools/ckpt/internal/agent"
	"trainwire.dev/tools/ckpt/internal/health"
	"trainwire.dev/tools/ckpt/internal/tier"
)

// AgentCmd is `ckpt agent`.
type AgentCmd struct {
	AgentFlags
	Peers          []string      `help:"Every rank's agent address host:port, in rank order (this rank listens on its own)." env:"TRAINWIRE_CKPT_PEERS"`
	M              int           `name:"m" help:"Replicas of each checkpoint, the local one included (Algorithm 6.1's m)." default:"2" env:"TRAINWIRE_CKPT_REPLICAS"`
	Memory         cli.ByteSize  `help:"Most bytes of replicas this agent holds (two versions per slot, m slots); 0: half the machine's memory." default:"0" env:"TRAINWIRE_CKPT_MEMORY"`
	Buffer         cli.ByteSize  `help:"Receive buffer R for checkpoint traffic; chunks are at most R/p." default:"128MiB" env:"TRAINWIRE_CKPT_BUFFER"`
	Parts          int           `help:"Sub-buffers p of R: credits a receiver grants (pipelining)." default:"4" env:"TRAINWIRE_CKPT_PARTS"`
	Token          string        `help:"Shared job token every agent connection proves (HMAC-SHA256 challenge-response, as lib/mesh); prefer the env var." env:"TRAINWIRE_TOKEN"`
	Timeout        time.Duration `help:"Deadline for every connect, read and write between agents." default:"30s" env:"TRAINWIRE_TIMEOUT"`
	CommitWait     time.Duration `help:"How long a save waits for the previous checkpoint's global commit before refusing." default:"60s" env:"TRAINWIRE_CKPT_COMMIT_WAIT"`
	Retries        int           `help:"Retries of a failed replication (e.g. a corrupt chunk) before the iteration is abandoned." default:"2" env:"TRAINWIRE_CKPT_RETRIES"`
	Interleave     bool          `help:"Schedule replication into the training traffic's idle spans (Algorithm 6.2): the trainer ticks each iteration and reports its comm ops as they start and end (no checkpoint byte is written during one; span k opens when the k-th op ends); spans from --spans, --trace, or profiled online from the ticks."`
	Spans          []string      `help:"With --interleave: the idle spans of one iteration as START:LEN in seconds from the iteration's start (e.g. 0:0.05,0.12:0.3)."`
	Trace          string        `help:"With --interleave: derive the idle spans from a trainwire event stream (comm spans busy, ProfilerStep* iterations)." type:"path"`
	ProfileIters   int           `help:"With --interleave and no spans given: iterations profiled online before checkpoints are interleaved (thesis: 20)." default:"20"`
	Bandwidth      string        `help:"With --interleave: link bandwidth B for f(s) = α + s/B (bytes/s, e.g. 125MB, 1Gbit)." default:"1Gbit"`
	Alpha          float64       `help:"With --interleave: per-chunk start-up time α in seconds." default:"0.0005"`
	Mu             float64       `help:"With --interleave: share μ of each idle span to use." default:"0.9"`
	Persistent     string        `help:"The persistent tier's directory (as given to ckpt persist): when CPU memory cannot serve every rank, every rank restores its latest catalogued iteration." env:"TRAINWIRE_CKPT_PERSISTENT" type:"path"`
	Etcd           []string      `help:"etcd endpoints (http://host:port,…): heartbeat under a lease, elect one root agent that classifies failures and publishes recovery decisions." env:"TRAINWIRE_CKPT_ETCD"`
	Machine        string        `help:"With --etcd: this machine's identity (default: hostname and boot id); a rank back on the same machine is a software failure." env:"TRAINWIRE_CKPT_MACHINE"`
	HeartbeatTTL   time.Duration `help:"With --etcd: the heartbeat lease's TTL (failure detection takes about this long)." default:"3s" env:"TRAINWIRE_CKPT_HEARTBEAT_TTL"`
	Grace          time.Duration `help:"With --etcd: how long the root waits for a vanished rank to come back before calling it a hardware failure (0: the TTL)." default:"0s" env:"TRAINWIRE_CKPT_GRACE"`
	Timeline       string        `help:"Append one JSON line per tick and per replication chunk sent or received (absolute times, Unix ns) to this file: the checkpoint traffic's timeline (bench/ckpt/timeline.py lays it against the trainer's)." env:"TRAINWIRE_CKPT_TIMELINE" type:"path"`
	Pace           string        `help:"Traffic pacing of replication: none, or a rate such as 100MB (bytes per second) to stay under a link's share." default:"none" env:"TRAINWIRE_CKPT_PACE"`
	CheckOnRestore bool          `help:"Hash a restored shard at every restore, beside the trainer's copy, even when this agent checked it at rest (after the last process that could write it exited; docs/ckpt.md, \"A shard at rest\")." env:"TRAINWIRE_CKPT_CHECK_ON_RESTORE"`
	CPUProfile     string        `name:"cpu-profile" help:"Write a Go CPU profile of this agent to this file until it stops (go tool pprof)." type:"path"`
}

// Run serves until interrupted.
func (c *AgentCmd) Run(rio *cli.IO) error {
	rio.SetGrace(cli.ServiceGrace)
	env, socket, err := c.resolve()
	if err != nil {
		return err
	}
	stopProfile, err := cli.StartCPUProfile(c.CPUProfile)
	if err != nil {
		return err
	}
	defer stopProfile()
	peers := c.Peers
	if len(peers) == 0 && env.World == 1 {
		peers = []string{"127.0.0.1:0"}
	}
	mem := int64(c.Memory)
	if mem == 0 {
		mem = physMem() / 2
	}
	if c.Parts < 1 || int64(c.Buffer) < int64(c.Parts) {
		return cli.WithCode(cli.ExitUsage, fmt.Errorf("--buffer %d in --parts %d: need at least one byte per part", c.Buffer, c.Parts))
	}
	cfg := agent.Config{Rank: env.Rank, World: env.World, Peers: peers, Socket: socket, M: c.M, Memory: mem,
		Buffer: int64(c.Buffer), Parts: c.Parts, Token: []byte(c.Token), Run: env.RunID, Timeout: c.Timeout,
		CommitWait: c.CommitWait, Retries: c.Retries, Persistent: c.Persistent, CheckOnRestore: c.CheckOnRestore, Log: rio.Log}
	if c.Pace != "none" && c.Pace != "" {
		rate, err := parseRate(c.Pace)
		if err != nil {
			return cli.WithCode(cli.ExitUsage, fmt.Errorf("--pace: %w", err))
		}
		cfg.Pace = agent.RatePacer(rate)
	}
	if cfg.Run == "" {
		cfg.Run = "default"
	}
	if c.Timeline != "" {
		f, err := os.OpenFile(c.Timeline, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
		if err != nil {
			return fmt.Errorf("--timeline: %w", err)
		}
		defer f.Close()
		cfg.Timeline = f
	}
	if c.Interleave {
		il, err := c.interleave(rio)
		if err != nil {
			return err
		}
		cfg.Interleave = il
	}
	a, err := agent.New(cfg)
	if err != nil {
		return cli.WithCode(cli.ExitUsage, err)
	}
	if len(c.Etcd) == 0 {
		return a.Serve(rio.Ctx)
	}
	ctx, cancel := context.WithCancel(rio.Ctx)
	defer cancel()
	hc := health.Config{Endpoints: c.Etcd, Run: cfg.Run, Rank: env.Rank, World: env.World, M: c.M, Machine: c.Machine,
		TTL: c.HeartbeatTTL, Grace: c.Grace, Log: rio.Log,
		OnDecision: func(d health.Decision) { a.OnDecision(d.Kind, d.Ranks) }}
	if c.Persistent != "" {
		hc.Persistent = func() (int64, error) {
			m, err := tier.Latest(c.Persistent, -1)
			if err != nil {
				return -1, err
			}
			return m.Iter, nil
		}
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := health.Run(ctx, hc); err != nil {
			rio.Log.Error("etcd health", "err", err)
		}
	}()
	err = a.Serve(ctx)
	cancel()
	<-done
	return err
}

func physMem() int64 {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return 8 << 30
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var kb int64
		if n, _ := fmt.Sscanf(sc.Text(), "MemTotal: %d kB", &kb); n == 1 {
			return kb << 10
		}
	}
	return 8 << 30
}

func (c *AgentCmd) interleave(rio *cli.IO) (*agent.Interleave, error) {
	bw, err := parseRate(c.Bandwidth)
	if err != nil {
		return nil, cli.WithCode(cli.ExitUsage, fmt.Errorf("--bandwidth: %w", err))
	}
	il := &agent.Interleave{ProfileIters: c.ProfileIters, Bandwidth: bw, Alpha: c.Alpha, Mu: c.Mu}
	if !(c.Mu > 0 && c.Mu <= 1) || c.Alpha < 0 {
		return nil, cli.WithCode(cli.ExitUsage, fmt.Errorf("--mu %g must be in (0,1] and --alpha %g ≥ 0", c.Mu, c.Alpha))
	}
	for _, s := range c.Spans {
		a, b, ok := strings.Cut(s, ":")
		st, e1 := strconv.ParseFloat(a, 64)
		ln, e2 := strconv.ParseFloat(b, 64)
		if !ok || e1 != nil || e2 != nil || st < 0 || ln < 0 {
			return nil, cli.WithCode(cli.ExitUsage, fmt.Errorf("--spans: %q is not START:LEN in seconds", s))
		}
		il.Starts, il.Spans = append(il.Starts, st), append(il.Spans, ln)
	}
	if c.Trace != "" {
		p, err := profileTrace(c.Trace, rio, wire.DefaultLimits, -1)
		if err != nil {
			return nil, err
		}
		if !p.Stable() {
			rio.Log.Warn("idle spans in the trace vary by more than 10% across iterations", "norm_std", p.NormStd)
		}
		il.Starts, il.Spans = p.Starts, p.Spans
	}
	return il, nil
}
