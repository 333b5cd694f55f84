package main

import (
	"context"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"trainwire.dev/lib/cli/clitest"
	"trainwire.dev/lib/serve"
	"trainwire.dev/lib/wire"
)

// serveA2AInput is rank r's alltoall of step s: random split sizes (zeros
// included) of rows of `width` bytes, each byte naming its sender, its
// receiver and its place.
func serveA2AInput(r, s, world, width int) ([]int64, []byte) {
	rng := rand.New(rand.NewPCG(uint64(r), uint64(s)))
	splits := make([]int64, world)
	var data []byte
	for k := range world {
		splits[k] = int64(rng.IntN(4))
		for i := range int(splits[k]) * width {
			data = append(data, byte(r*64+k*16+i))
		}
	}
	return splits, data
}

func i64s(v []int64) []byte {
	b := make([]byte, 8*len(v))
	for k, x := range v {
		binary.LittleEndian.PutUint64(b[8*k:], uint64(x))
	}
	return b
}

// a2aRequest is rank r's step s: one pair of f32 rows of width 3 (12 bytes).
func a2aRequest(r, s, world int) *serve.Request {
	splits, data := serveA2AInput(r, s, world, 12)
	return &serve.Request{Op: serve.OpAllToAll, Step: int64(s), Tensors: []serve.Tensor{
		{Name: "x.splits", DType: wire.I64, Shape: []int64{int64(world)}, Inline: true, Data: i64s(splits)},
		{Name: "x", DType: wire.F32, Shape: []int64{int64(len(data) / 12), 3}, Inline: true, Data: data},
	}}
}

// a2aWant is what rank me receives: every rank's part for it, in rank order.
func a2aWant(me, s, world int) ([]byte, []byte) {
	var got []int64
	var rows []byte
	for r := range world {
		splits, data := serveA2AInput(r, s, world, 12)
		off := 0
		for k := range me {
			off += int(splits[k]) * 12
		}
		got = append(got, splits[me])
		rows = append(rows, data[off:off+int(splits[me])*12]...)
	}
	if rows == nil {
		rows = []byte{}
	}
	return i64s(got), rows
}

// Four `hashsync serve` sidecars answer alltoall requests, several in
// flight per client, interleaved with syncs: each rank gets every rank's
// part for it, in rank order, with the split sizes.
func TestServeAllToAll(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	const world, steps = 4, 6
	sc := startSidecars(t, ctx, world, "--scheme", "dense", "--timeout", "20s")
	chs := make([][]<-chan *serve.Reply, world)
	for r := range world {
		for s := range steps {
			req := a2aRequest(r, s, world)
			if s == 3 {
				req = request(r, s, 64, sc.segs[r])
			}
			_, ch, err := sc.clients[r].Go(req, -1)
			require.NoError(t, err)
			chs[r] = append(chs[r], ch)
		}
	}
	for r := range world {
		for s, ch := range chs[r] {
			rep := clitest.Recv(t, ctx, ch, fmt.Sprintf("rank %d step %d", r, s))
			require.True(t, rep.OK, "rank %d step %d: %s", r, s, rep.Error)
			if s == 3 {
				continue
			}
			sp, rows := a2aWant(r, s, world)
			require.Equal(t, [][]byte{sp, rows}, rep.Data, "rank %d step %d", r, s)
		}
	}
	for r := range world {
		require.NoError(t, sc.clients[r].Close())
		require.Equal(t, 0, clitest.ExitCode(sc.procs[r].Cmd.Wait()), sc.procs[r].Stderr.String())
	}
}

// A rank whose split sizes do not sum to its rows refuses its request:
// every rank's request fails naming it, and the sidecars go on.
func TestServeAllToAllRefused(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	const world = 3
	sc := startSidecars(t, ctx, world, "--scheme", "dense", "--timeout", "20s")
	chs := make([]<-chan *serve.Reply, world)
	for r := range world {
		req := a2aRequest(r, 0, world)
		if r == 1 {
			req.Tensors[0].Data = i64s([]int64{1, 1, 99})
		}
		_, ch, err := sc.clients[r].Go(req, -1)
		require.NoError(t, err)
		chs[r] = ch
	}
	for r, ch := range chs {
		rep := clitest.Recv(t, ctx, ch, fmt.Sprintf("rank %d", r))
		require.False(t, rep.OK)
		if r == 1 {
			assert.Equal(t, serve.CodeBadRequest, rep.Code)
			assert.Equal(t, "tensors[0]", rep.Field)
			assert.Contains(t, rep.Error, "rank 2")
			continue
		}
		assert.Equal(t, serve.CodeRejected, rep.Code, rep.Error)
		assert.Contains(t, rep.Error, "rank 1 refused")
	}
	for r := range world { // still in step
		_, ch, err := sc.clients[r].Go(a2aRequest(r, 1, world), -1)
		require.NoError(t, err)
		chs[r] = ch
	}
	for r, ch := range chs {
		rep := clitest.Recv(t, ctx, ch, fmt.Sprintf("rank %d", r))
		require.True(t, rep.OK, rep.Error)
	}
}

// A sidecar killed while the others wait in an alltoall fails them with
// code peer naming its rank, and they exit 3.
func TestServeAllToAllKilledRank(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	const world, victim = 4, 2
	sc := startSidecars(t, ctx, world, "--scheme", "dense", "--timeout", "20s")
	chs := map[int]<-chan *serve.Reply{}
	for r := range world {
		if r != victim {
			_, ch, err := sc.clients[r].Go(a2aRequest(r, 0, world), -1)
			require.NoError(t, err)
			chs[r] = ch
		}
	}
	_, err := sc.clients[victim].Do(&serve.Request{Op: serve.OpPing})
	require.NoError(t, err)
	require.NoError(t, sc.procs[victim].Cmd.Process.Signal(syscall.SIGKILL))
	for r, ch := range chs {
		rep := clitest.Recv(t, ctx, ch, fmt.Sprintf("rank %d", r))
		assert.False(t, rep.OK, "rank %d", r)
		assert.Equal(t, serve.CodePeer, rep.Code, "rank %d: %s", r, rep.Error)
		assert.Equal(t, int64(victim), rep.Rank, "rank %d: %s", r, rep.Error)
		assert.Contains(t, rep.Error, "rank 2", "rank %d", r)
		assert.Equal(t, 3, clitest.ExitCode(sc.procs[r].Cmd.Wait()), "rank %d: %s", r, sc.procs[r].Stderr.String())
	}
}
