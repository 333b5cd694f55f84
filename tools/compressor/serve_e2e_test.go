package main

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"trainwire.dev/lib/cli/clitest"
	"trainwire.dev/lib/codec"
	"trainwire.dev/lib/serve"
	"trainwire.dev/lib/serve/servetest"
	"trainwire.dev/lib/shm"
	"trainwire.dev/lib/tensor"
	"trainwire.dev/lib/wire"
	"trainwire.dev/tools/compressor/internal/csync"
)

// serveRequest is step s of rank r: "w" (a 2-D tensor in the segment)
// and "b" (inline).
func serveRequest(r, s int, seg *shm.Segment) (*serve.Request, [][]float32) {
	data := rankData(r*10+s, 1)[0]
	w, b := data[1], data[0] // fc.weight [12 37], fc.bias [37]
	copy(seg.Bytes(), tensor.Bytes(w))
	return &serve.Request{Op: serve.OpSync, Step: int64(s), Tensors: []serve.Tensor{
		{Name: "w", DType: wire.F32, Shape: []int64{12, 37}, Seg: 0, Off: 0, Len: int64(4 * len(w))},
		{Name: "b", DType: wire.F32, Shape: []int64{37}, Inline: true, Data: tensor.Bytes(b)},
	}}, [][]float32{w, b}
}

func sameBits(t *testing.T, want, got []float32, what string) {
	require.Equal(t, len(want), len(got), what)
	for i := range want {
		if math.Float32bits(want[i]) != math.Float32bits(got[i]) {
			t.Fatalf("%s: element %d: %v, reference %v", what, i, got[i], want[i])
		}
	}
}

// Four sidecars run sync's collectives on every request, in place in
// shared memory and inline, bit for bit as the reference computes them
// with each tensor's error feedback carried from step to step; a
// save_state request writes the state; the clients leave and every
// sidecar exits 0.
func TestServeCompressed(t *testing.T) {
	for _, c := range []struct{ algo, coll, mem string }{
		{"fp16", "ring", "none"}, {"topk", "allgather", "residual"}, {"efsignsgd", "partitioned", "efsignsgd"}, {"powersgd", "powersgd", "powersgd"},
	} {
		t.Run(c.algo+"/"+c.coll, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
			defer cancel()
			const world = 4
			state := filepath.Join(t.TempDir(), "state")
			sc := servetest.Start(t, ctx, "compressor", world, 1<<20, func(r int) []string {
				return []string{"--state-out", fmt.Sprint(state, r)}
			}, "--algo", c.algo, "--collective", c.coll, "--memory", c.mem, "--ratio", "0.1", "--timeout", "20s")
			cd, err := codec.New(c.algo, codec.Options{Ratio: 0.1})
			require.NoError(t, err)
			sp := csync.Spec{Collective: c.coll, Codec: cd, Memory: c.mem}
			ref := csync.NewRef(world)
			for s := range 3 {
				chs := make([]<-chan *serve.Reply, world)
				ins := make([][][]float32, world)
				for r := range world {
					req, in := serveRequest(r, s, sc.Segs[r])
					ins[r] = in
					if s == 2 {
						req.Opts = map[string]bool{OptSaveState: true}
					}
					_, chs[r], err = sc.Clients[r].Go(req, -1)
					require.NoError(t, err)
				}
				var want [][]float32
				for k, name := range []string{"w", "b"} {
					us := make([]*csync.Unit, world)
					for r := range world {
						shape := []int64{12, 37}
						if k == 1 {
							shape = []int64{37}
						}
						us[r] = &csync.Unit{Name: name, Step: int64(s), Shape: shape, Data: ins[r][k]}
					}
					x, _, err := ref.Sync(us, sp)
					require.NoError(t, err)
					want = append(want, x)
				}
				for r := range world {
					rep := clitest.Recv(t, ctx, chs[r], fmt.Sprintf("rank %d step %d", r, s))
					require.True(t, rep.OK, "rank %d step %d: %s; stderr: %s", r, s, rep.Error, sc.Procs[r].Stderr.String())
					got := tensor.Float32s(append([]byte(nil), sc.Segs[r].Bytes()[:4*12*37]...))
					sameBits(t, want[0], got, fmt.Sprintf("rank %d step %d w", r, s))
					sameBits(t, want[1], tensor.Float32s(append([]byte(nil), rep.Data[1]...)), fmt.Sprintf("rank %d step %d b", r, s))
				}
			}
			for r, cl := range sc.Clients {
				require.NoError(t, cl.Close())
				require.NoError(t, sc.Procs[r].Cmd.Wait(), "rank %d: %s", r, sc.Procs[r].Stderr.String())
				// The state each sidecar saved is the reference's rank r.
				b, err := os.ReadFile(fmt.Sprint(state, r))
				require.NoError(t, err)
				st, err := codec.ReadStore(wire.NewReader(bytes.NewReader(b), wire.Limits{}))
				require.NoError(t, err)
				var want bytes.Buffer
				ww := wire.NewWriter(&want, "x")
				require.NoError(t, ref.Stores[r].WriteTo(ww))
				var got bytes.Buffer
				gw := wire.NewWriter(&got, "x")
				require.NoError(t, st.WriteTo(gw))
				require.Equal(t, want.Bytes(), got.Bytes(), "rank %d: state", r)
			}
		})
	}
}

// Requests that disagree (another tensor name on one rank, another
// codec option) fail on every rank with code mismatch naming a rank, and
// the sidecars go on serving; a NaN fails every rank's request naming
// the rank that has it.
func TestServeMismatchGoesOn(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	const world = 3
	sc := servetest.Start(t, ctx, "compressor", world, 1<<20, nil, "--algo", "topk", "--memory", "residual", "--timeout", "20s")
	for _, bad := range []string{"name", "nan", "none"} {
		chs := make([]<-chan *serve.Reply, world)
		for r := range world {
			req, _ := serveRequest(r, 0, sc.Segs[r])
			switch {
			case bad == "name" && r == 1:
				req.Tensors[1].Name = "bias"
			case bad == "nan" && r == 2:
				x := tensor.Float32s(append([]byte(nil), req.Tensors[1].Data...))
				x[3] = float32(math.NaN())
				req.Tensors[1].Data = tensor.Bytes(x)
			}
			var err error
			_, chs[r], err = sc.Clients[r].Go(req, -1)
			require.NoError(t, err)
		}
		for r := range world {
			rep := clitest.Recv(t, ctx, chs[r], fmt.Sprintf("%s: rank %d", bad, r))
			if bad == "none" {
				require.True(t, rep.OK, "rank %d: %s", r, rep.Error)
				continue
			}
			require.False(t, rep.OK, "%s: rank %d", bad, r)
			require.Equal(t, serve.CodeMismatch, rep.Code, "%s: rank %d: %s", bad, r, rep.Error)
			require.GreaterOrEqual(t, rep.Rank, int64(0))
			require.Contains(t, rep.Error, "rank ")
			if bad == "nan" && r != 2 {
				require.Equal(t, int64(2), rep.Rank, rep.Error)
				require.Contains(t, rep.Error, "NaN")
			}
		}
	}
	for r, cl := range sc.Clients {
		require.NoError(t, cl.Close())
		require.NoError(t, sc.Procs[r].Cmd.Wait(), "rank %d: %s", r, sc.Procs[r].Stderr.String())
	}
}

// A sidecar killed while the others wait in a collective: their pending
// requests fail with peer_failed naming it, and they exit 3.
func TestServeDeadRank(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	const world = 3
	sc := servetest.Start(t, ctx, "compressor", world, 1<<20, nil, "--algo", "fp16", "--timeout", "10s")
	require.NoError(t, sc.Procs[1].Cmd.Process.Signal(syscall.SIGKILL))
	for _, r := range []int{0, 2} {
		req, _ := serveRequest(r, 0, sc.Segs[r])
		_, ch, err := sc.Clients[r].Go(req, -1)
		require.NoError(t, err)
		rep := clitest.Recv(t, ctx, ch, fmt.Sprintf("rank %d", r))
		require.False(t, rep.OK)
		require.Equal(t, serve.CodePeer, rep.Code, "rank %d: %s", r, rep.Error)
		require.Equal(t, int64(1), rep.Rank, rep.Error)
	}
	for _, r := range []int{0, 2} {
		err := sc.Procs[r].Cmd.Wait()
		require.Equal(t, 3, clitest.ExitCode(err), "rank %d: %s", r, sc.Procs[r].Stderr.String())
	}
}
