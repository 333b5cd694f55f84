package collective_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"trainwire.dev/lib/cli/clitest"
	"trainwire.dev/lib/collective"
	"trainwire.dev/lib/exit"
	"trainwire.dev/lib/launch"
	"trainwire.dev/lib/mesh"
)

// The multi-process tests re-execute this test binary as rank processes:
// with TW_TEST_RANK set, TestMain runs rankMain instead of the tests.
const (
	envRank  = "TW_TEST_RANK"
	envWorld = "TW_TEST_WORLD"
	envPort  = "TW_TEST_PORT"
	envRun   = "TW_TEST_RUN"
	envBench = "TW_BENCH"
)

// rankMain is one rank of a job: allreduce in a loop, "iter N" on stderr
// after each, until it fails (exit code from the error, message on
// stderr) or 100000 iterations pass.
func rankMain() bool {
	rs := os.Getenv(envRank)
	if rs == "" {
		return false
	}
	rank, _ := strconv.Atoi(rs)
	world, _ := strconv.Atoi(os.Getenv(envWorld))
	port, _ := strconv.Atoi(os.Getenv(envPort))
	env := launch.Env{Rank: rank, World: world, MasterAddr: "127.0.0.1", MasterPort: port, RunID: os.Getenv(envRun), Source: "flags"}
	sockbuf, _ := strconv.Atoi(os.Getenv("TW_BENCH_SOCKBUF"))
	m, err := mesh.Open(context.Background(), mesh.Config{Env: env, Timeout: 3 * time.Second, ConnectTimeout: 30 * time.Second,
		SocketBuffer: sockbuf, NoUnix: os.Getenv("TW_BENCH_NOUNIX") != ""})
	if err != nil {
		fmt.Fprintln(os.Stderr, "open:", err)
		os.Exit(exitCode(err))
	}
	if os.Getenv(envBench) != "" {
		benchRank(m)
		os.Exit(0)
	}
	c := collective.New(m, collective.Options{Segment: 64 << 10})
	data := make([]float32, 1<<18)
	for i := range 100000 {
		if err := c.AllReduce(context.Background(), data); err != nil {
			fmt.Fprintln(os.Stderr, "allreduce:", err)
			os.Exit(exitCode(err))
		}
		fmt.Fprintf(os.Stderr, "iter %d\n", i)
	}
	_ = m.Close()
	os.Exit(0)
	return true
}

func exitCode(err error) int {
	var ec interface{ ExitCode() int }
	if errors.As(err, &ec) {
		return ec.ExitCode()
	}
	return 1
}

type rankProc struct {
	cmd    *exec.Cmd
	mu     sync.Mutex
	stderr strings.Builder
	iters  int
	done   chan struct{}
	err    error
}

func (p *rankProc) output() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stderr.String()
}

func startRanks(t *testing.T, world int) []*rankProc { return startRanksEnv(t, world, nil) }

func startRanksEnv(t *testing.T, world int, extra []string) []*rankProc {
	port := clitest.FreePort(t)
	run := fmt.Sprintf("kill-%d", os.Getpid())
	procs := make([]*rankProc, world)
	for r := range world {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), envRank+"="+strconv.Itoa(r), envWorld+"="+strconv.Itoa(world), envPort+"="+strconv.Itoa(port), envRun+"="+run)
		cmd.Env = append(cmd.Env, extra...)
		pipe, err := cmd.StderrPipe()
		require.NoError(t, err)
		require.NoError(t, cmd.Start())
		p := &rankProc{cmd: cmd, done: make(chan struct{})}
		procs[r] = p
		go func() {
			sc := bufio.NewScanner(pipe)
			for sc.Scan() {
				line := sc.Text()
				p.mu.Lock()
				if strings.HasPrefix(line, "iter ") {
					p.iters++
				} else {
					p.stderr.WriteString(line + "\n")
				}
				p.mu.Unlock()
			}
			_, _ = io.Copy(io.Discard, pipe)
			p.err = cmd.Wait()
			close(p.done)
		}()
	}
	t.Cleanup(func() {
		for _, p := range procs {
			_ = p.cmd.Process.Kill()
			<-p.done
		}
	})
	return procs
}

func waitIters(t *testing.T, procs []*rankProc, n int) {
	deadline := time.Now().Add(60 * time.Second)
	for {
		ok := true
		for r, p := range procs {
			p.mu.Lock()
			it := p.iters
			p.mu.Unlock()
			select {
			case <-p.done:
				t.Fatalf("rank %d exited early: %v\n%s", r, p.err, p.output())
			default:
			}
			if it < n {
				ok = false
			}
		}
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("ranks did not reach the iteration in time")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestKillOneRank is the failure-propagation requirement: 4 rank
// processes run a long allreduce loop; one is killed with SIGKILL (or
// stopped with SIGSTOP, a hung rank) in the middle; every other rank must
// exit with code 3 and an error naming the dead rank, within a bounded
// time (the deadline is 3 s; we allow 30 s for a loaded machine).
func TestKillOneRank(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process")
	}
	for _, tc := range []struct {
		victim int
		sig    syscall.Signal
	}{{2, syscall.SIGKILL}, {0, syscall.SIGKILL}, {3, syscall.SIGSTOP}} {
		t.Run(fmt.Sprintf("%v-rank%d", tc.sig, tc.victim), func(t *testing.T) {
			procs := startRanks(t, 4)
			waitIters(t, procs, 3)
			require.NoError(t, procs[tc.victim].cmd.Process.Signal(tc.sig))
			killed := time.Now()
			for r, p := range procs {
				if r == tc.victim {
					continue
				}
				select {
				case <-p.done:
				case <-time.After(30 * time.Second):
					t.Fatalf("rank %d still running 30 s after rank %d was killed\n%s", r, tc.victim, p.output())
				}
				var ee *exec.ExitError
				require.ErrorAs(t, p.err, &ee, "rank %d: %s", r, p.output())
				require.Equal(t, exit.Peer, ee.ExitCode(), "rank %d: %s", r, p.output())
				out := p.output()
				require.Contains(t, out, fmt.Sprintf("mesh: rank %d", tc.victim), "rank %d", r)
				t.Logf("rank %d exited after %v: %s", r, time.Since(killed).Round(time.Millisecond), strings.TrimSpace(out))
			}
		})
	}
}
