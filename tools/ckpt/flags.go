package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"trainwire.dev/lib/cli"
	"trainwire.dev/lib/launch"
)

// AgentFlags are what every verb talking to a local agent shares.
type AgentFlags struct {
	launch.Flags `embed:""`
	Socket       string `help:"The agent's Unix socket (default: $XDG_RUNTIME_DIR or /tmp, trainwire-ckpt-<run>-<rank>.sock)." env:"TRAINWIRE_CKPT_SOCKET"`
}

func (f *AgentFlags) resolve() (launch.Env, string, error) {
	env, err := f.Flags.Resolve(os.Environ())
	if err != nil {
		return env, "", cli.WithCode(cli.ExitUsage, err)
	}
	if f.Socket != "" {
		return env, f.Socket, nil
	}
	dir := os.Getenv("XDG_RUNTIME_DIR")
	if dir == "" {
		dir = os.TempDir()
	}
	run := env.RunID
	if run == "" {
		run = "default"
	}
	return env, filepath.Join(dir, fmt.Sprintf("trainwire-ckpt-%s-%d.sock", sanitize(run), env.Rank)), nil
}

func sanitize(s string) string {
	return strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.' {
			return r
		}
		return '_'
	}, s)
}

// parseRate parses bytes per second: 100e6, 100MB, 1.25GB, 95MiB, 1Gbit.
func parseRate(s string) (float64, error) {
	t := strings.TrimSpace(s)
	u := strings.ToLower(t)
	mult := 1.0
	for _, x := range []struct {
		suf string
		m   float64
	}{{"gbit", 1e9 / 8}, {"mbit", 1e6 / 8}, {"kbit", 1e3 / 8}, {"kib", 1 << 10}, {"mib", 1 << 20}, {"gib", 1 << 30}, {"kb", 1e3}, {"mb", 1e6}, {"gb", 1e9}, {"b", 1}} {
		if strings.HasSuffix(u, x.suf) {
			u, mult = strings.TrimSpace(strings.TrimSuffix(u, x.suf)), x.m
			break
		}
	}
	v, err := strconv.ParseFloat(u, 64)
	if err != nil || v <= 0 || v*mult > 1e15 {
		return 0, fmt.Errorf("bad rate %q (bytes per second, e.g. 100MB, 95MiB, 1Gbit)", s)
	}
	return v * mult, nil
}

// DirFlag is the persistent directory every persistent-tier verb takes.
type DirFlag struct {
	Dir string `required:"" help:"The persistent directory (local disk, NFS, a mounted object store): shard files and the pebble catalog." env:"TRAINWIRE_CKPT_PERSISTENT" type:"path"`
}
