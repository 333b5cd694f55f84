package check_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"trainwire.dev/lib/cli"
	"trainwire.dev/lib/cli/clitest"
	"trainwire.dev/lib/cli/verbs/check"
)

type checkCLI struct {
	cli.Globals
	Check check.Cmd `cmd:"" help:"Check the mesh."`
}

type rankResult struct {
	code           int
	stdout, stderr string
}

// runRanks runs `check` for world ranks in this process, each with its own
// CLI struct and IO, and returns their exit codes and outputs.
func runRanks(t *testing.T, world int, args func(r int) []string) []rankResult {
	t.Helper()
	port := clitest.FreePort(t)
	res := make([]rankResult, world)
	var wg sync.WaitGroup
	for r := range world {
		wg.Go(func() {
			a := append([]string{"check", "--rank", fmt.Sprint(r), "--world", fmt.Sprint(world),
				"--master", fmt.Sprintf("127.0.0.1:%d", port), "--run-id", "check-test", "--timeout", "20s"}, args(r)...)
			var out, errb bytes.Buffer
			code := cli.Run(cli.Tool{Name: "tw"}, &checkCLI{}, a, strings.NewReader(""), &out, &errb)
			res[r] = rankResult{code, out.String(), errb.String()}
		})
	}
	wg.Wait()
	return res
}

func TestCheckJSON(t *testing.T) {
	res := runRanks(t, 4, func(int) []string {
		return []string{"--sizes", "4KiB,1000,0", "--iters", "3", "--warmup", "1", "--format", "json", "--segment", "256"}
	})
	for r, x := range res {
		require.Equal(t, cli.ExitOK, x.code, "rank %d: %s", r, x.stderr)
		if r > 0 {
			require.Empty(t, x.stdout, "rank %d writes nothing to stdout", r)
		}
	}
	lines := strings.Split(strings.TrimSpace(res[0].stdout), "\n")
	require.Len(t, lines, 3)
	wantKeys := []string{"algbw_GBps", "busbw_GBps", "bytes", "correct", "iters", "op", "time_s_mean", "time_s_median", "time_s_min", "transport", "world"}
	for i, want := range []float64{4096, 1000, 0} {
		var obj map[string]any
		require.NoError(t, json.Unmarshal([]byte(lines[i]), &obj), lines[i])
		keys := make([]string, 0, len(obj))
		for k := range obj {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		require.Equal(t, wantKeys, keys)
		require.Equal(t, "allreduce", obj["op"])
		require.Equal(t, want, obj["bytes"])
		require.Equal(t, 4.0, obj["world"])
		require.Equal(t, 3.0, obj["iters"])
		require.Equal(t, "unix", obj["transport"])
		require.Equal(t, true, obj["correct"])
		mean, min := obj["time_s_mean"].(float64), obj["time_s_min"].(float64)
		require.GreaterOrEqual(t, mean, min)
		if want > 0 {
			require.InDelta(t, obj["algbw_GBps"].(float64)*1.5, obj["busbw_GBps"].(float64), 1e-9)
		}
	}
	// Logs go to stderr.
	require.Contains(t, res[0].stderr, "check: mesh up")
}

func TestCheckTableTCP(t *testing.T) {
	res := runRanks(t, 3, func(int) []string {
		return []string{"--sizes", "64KiB", "--iters", "2", "--no-unix", "--no-verify"}
	})
	for r, x := range res {
		require.Equal(t, cli.ExitOK, x.code, "rank %d: %s", r, x.stderr)
	}
	require.Contains(t, res[0].stdout, "3 ranks, transport tcp")
	require.Contains(t, res[0].stdout, "64 KiB")
	require.Contains(t, res[0].stdout, "busbw")
	require.Empty(t, res[1].stdout)
}

func TestCheckWorldOne(t *testing.T) {
	var out, errb bytes.Buffer
	code := cli.Run(cli.Tool{Name: "tw"}, &checkCLI{}, []string{"check", "--rank", "0", "--world", "1", "--sizes", "1KiB", "--iters", "1", "--format", "json"}, strings.NewReader(""), &out, &errb)
	require.Equal(t, cli.ExitOK, code, errb.String())
	var res check.Result
	require.NoError(t, json.Unmarshal(out.Bytes(), &res))
	require.Equal(t, check.Result{Op: "allreduce", Bytes: 1024, World: 1, Iters: 1, Transport: "none", TimeMean: res.TimeMean, TimeMedian: res.TimeMedian, TimeMin: res.TimeMin, AlgBW: res.AlgBW, Correct: true}, res)
	require.Zero(t, res.BusBW)
}

func TestCheckUsageErrors(t *testing.T) {
	for _, args := range [][]string{
		{"--sizes", "3"},
		{"--sizes", "1MiB,banana"},
		{"--iters", "0"},
		{"--format", "xml"},
	} {
		var out, errb bytes.Buffer
		code := cli.Run(cli.Tool{Name: "tw"}, &checkCLI{}, append([]string{"check", "--rank", "0", "--world", "1"}, args...), strings.NewReader(""), &out, &errb)
		require.Equal(t, cli.ExitUsage, code, "%v: %s", args, errb.String())
		require.NotContains(t, out.String(), "allreduce")
	}
}

// TestCheckWrongToken: a rank with another token is refused; it and rank 0
// (which then waits in vain) exit with ExitPeer and say why.
func TestCheckWrongToken(t *testing.T) {
	res := runRanks(t, 2, func(r int) []string {
		return []string{"--sizes", "1KiB", "--token", fmt.Sprintf("token-%d", r), "--connect-timeout", "1s"}
	})
	for r, x := range res {
		require.Equal(t, cli.ExitPeer, x.code, "rank %d: %s", r, x.stderr)
	}
	require.Contains(t, res[1].stderr, "token")
	require.Contains(t, res[0].stderr, "refused rendezvous connection")
}
