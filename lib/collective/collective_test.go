package collective_test

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"trainwire.dev/lib/collective"
	"trainwire.dev/lib/mesh"
	"trainwire.dev/lib/mesh/meshtest"
)

// meshes opened once per world size and shared by the property tests.
var (
	meshMu   sync.Mutex
	meshPool = map[int][]*mesh.Mesh{}
)

func worldOf(t *testing.T, n int) []*mesh.Mesh {
	meshMu.Lock()
	defer meshMu.Unlock()
	if ms := meshPool[n]; ms != nil {
		for _, m := range ms {
			if m.Err() != nil {
				t.Fatalf("shared mesh of %d is broken: %v", n, m.Err())
			}
		}
		return ms
	}
	ms, errs := meshtest.OpenAll(context.Background(), meshtest.Config(n, meshtest.Listen(t)))
	requireNoErrs(t, errs)
	meshPool[n] = ms
	return ms
}

func TestMain(m *testing.M) {
	if rankMain() {
		return
	}
	code := m.Run()
	for _, ms := range meshPool {
		meshtest.CloseAll(ms)
	}
	os.Exit(code)
}

// onAll runs f for every rank concurrently, each with its own Comm, and
// returns the errors by rank.
func onAll(ms []*mesh.Mesh, opts collective.Options, f func(r int, c *collective.Comm) error) []error {
	errs := make([]error, len(ms))
	var wg sync.WaitGroup
	for r, m := range ms {
		wg.Go(func() { errs[r] = f(r, collective.New(m, opts)) })
	}
	wg.Wait()
	return errs
}

func requireNoErrs(t require.TestingT, errs []error) {
	for r, err := range errs {
		require.NoError(t, err, "rank %d", r)
	}
}

func randFloats(rng *rand.Rand, n int) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(rng.NormFloat64())
	}
	return v
}

var awkward = []int{0, 1, 2, 3, 5, 7, 8, 11, 13, 31, 97, 257, 1021, 4099}

// genLength draws a length: an awkward one, one below the world size, or
// any up to a few thousand.
func genLength(t *rapid.T, world int) int {
	return rapid.OneOf(
		rapid.SampledFrom(awkward),
		rapid.IntRange(0, world),
		rapid.IntRange(0, 5000),
	).Draw(t, "len")
}

// genSegment draws a pipelining segment in bytes; tiny ones (one to three
// floats per message) only for small buffers, to keep the tests fast.
func genSegment(t *rapid.T, elems int) int {
	if elems > 2000 {
		return rapid.SampledFrom([]int{64, 100, 4096, 0}).Draw(t, "segment")
	}
	return rapid.SampledFrom([]int{4, 8, 12, 64, 100, 4096, 0}).Draw(t, "segment")
}

func TestChunk(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		n := rapid.IntRange(0, 10000).Draw(t, "n")
		w := rapid.IntRange(1, 64).Draw(t, "world")
		prev := 0
		for i := range w {
			lo, hi := collective.Chunk(n, w, i)
			if lo != prev || hi < lo || hi-lo < n/w || hi-lo > n/w+1 {
				t.Fatalf("chunk %d of %d/%d: [%d,%d)", i, n, w, lo, hi)
			}
			prev = hi
		}
		if prev != n {
			t.Fatalf("chunks of %d/%d end at %d", n, w, prev)
		}
	})
}

// TestAllReduceProperty: for any world 1–8, length and segment size, ring
// allreduce equals the sequential sum (within float rounding: the order
// differs) and every rank ends bit-identical.
func TestAllReduceProperty(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		world := rapid.IntRange(1, 8).Draw(rt, "world")
		L := genLength(rt, world)
		seg := genSegment(rt, L)
		seed := rapid.Uint64().Draw(rt, "seed")
		ms := worldOf(t, world)
		rng := rand.New(rand.NewPCG(seed, 1))
		in := make([][]float32, world)
		for r := range in {
			in[r] = randFloats(rng, L)
		}
		ref := make([]float64, L)
		abs := make([]float64, L)
		for _, v := range in {
			for i, x := range v {
				ref[i] += float64(x)
				abs[i] += math.Abs(float64(x))
			}
		}
		out := make([][]float32, world)
		requireNoErrs(rt, onAll(ms, collective.Options{Segment: seg}, func(r int, c *collective.Comm) error {
			out[r] = append([]float32(nil), in[r]...)
			return c.AllReduce(context.Background(), out[r])
		}))
		eps := float64(world) * 1.2e-7
		for i := range L {
			if d := math.Abs(float64(out[0][i]) - ref[i]); d > eps*abs[i]+1e-30 {
				rt.Fatalf("element %d: got %v, want %v (diff %g)", i, out[0][i], ref[i], d)
			}
		}
		for r := 1; r < world; r++ {
			for i := range L {
				if math.Float32bits(out[r][i]) != math.Float32bits(out[0][i]) {
					rt.Fatalf("rank %d element %d: %v, rank 0 has %v: not bit-identical", r, i, out[r][i], out[0][i])
				}
			}
		}
	})
}

// TestAllReduceExact uses small integers, whose float32 sums are exact in
// any order: the result must equal the sequential sum exactly.
func TestAllReduceExact(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		world := rapid.IntRange(1, 8).Draw(rt, "world")
		L := genLength(rt, world)
		seg := genSegment(rt, L)
		ms := worldOf(t, world)
		want := make([]float32, L)
		out := make([][]float32, world)
		for r := range world {
			out[r] = make([]float32, L)
			for i := range L {
				out[r][i] = float32((r+1)*(i%17) - 40)
				want[i] += out[r][i]
			}
		}
		requireNoErrs(rt, onAll(ms, collective.Options{Segment: seg}, func(r int, c *collective.Comm) error {
			return c.AllReduce(context.Background(), out[r])
		}))
		for r := range world {
			require.Equal(rt, want, out[r], "rank %d", r)
		}
	})
}

func TestReduceScatterProperty(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		world := rapid.IntRange(1, 8).Draw(rt, "world")
		L := genLength(rt, world)
		seg := genSegment(rt, L)
		ms := worldOf(t, world)
		want := make([]float32, L)
		data := make([][]float32, world)
		for r := range world {
			data[r] = make([]float32, L)
			for i := range L {
				data[r][i] = float32(r*3 + i%11)
				want[i] += data[r][i]
			}
		}
		requireNoErrs(rt, onAll(ms, collective.Options{Segment: seg}, func(r int, c *collective.Comm) error {
			lo, hi, err := c.ReduceScatter(context.Background(), data[r])
			if err != nil {
				return err
			}
			wlo, whi := collective.Chunk(L, world, r)
			if lo != wlo || hi != whi {
				return fmt.Errorf("bounds [%d,%d), want [%d,%d)", lo, hi, wlo, whi)
			}
			for i := lo; i < hi; i++ {
				if data[r][i] != want[i] {
					return fmt.Errorf("element %d: %v, want %v", i, data[r][i], want[i])
				}
			}
			return nil
		}))
	})
}

func TestAllGatherVProperty(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		world := rapid.IntRange(1, 8).Draw(rt, "world")
		counts := rapid.SliceOfN(rapid.OneOf(rapid.IntRange(0, 3), rapid.SampledFrom(awkward)), world, world).Draw(rt, "counts")
		total := 0
		for _, c := range counts {
			total += c
		}
		seg := genSegment(rt, total)
		ms := worldOf(t, world)
		var want []float32
		ins := make([][]float32, world)
		for r := range world {
			for i := range counts[r] {
				ins[r] = append(ins[r], float32(r*1000+i))
			}
			want = append(want, ins[r]...)
		}
		requireNoErrs(rt, onAll(ms, collective.Options{Segment: seg}, func(r int, c *collective.Comm) error {
			out := make([]float32, len(want))
			if err := c.AllGatherV(context.Background(), ins[r], counts, out); err != nil {
				return err
			}
			if fmt.Sprint(out) != fmt.Sprint(want) {
				return fmt.Errorf("got %v, want %v", out, want)
			}
			return nil
		}))
	})
}

func TestAllGatherEqual(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		world := rapid.IntRange(1, 8).Draw(rt, "world")
		n := rapid.SampledFrom(awkward).Draw(rt, "n")
		ms := worldOf(t, world)
		requireNoErrs(rt, onAll(ms, collective.Options{Segment: genSegment(rt, world*n)}, func(r int, c *collective.Comm) error {
			in := make([]float32, n)
			for i := range in {
				in[i] = float32(r*7 + i)
			}
			out := make([]float32, world*n)
			// In place: in aliases its slot.
			copy(out[r*n:], in)
			if err := c.AllGather(context.Background(), out[r*n:(r+1)*n], out); err != nil {
				return err
			}
			for k := range world {
				for i := range n {
					if out[k*n+i] != float32(k*7+i) {
						return fmt.Errorf("slot %d element %d: %v", k, i, out[k*n+i])
					}
				}
			}
			return nil
		}))
	})
}

func TestBroadcastProperty(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		world := rapid.IntRange(1, 8).Draw(rt, "world")
		root := rapid.IntRange(0, world-1).Draw(rt, "root")
		L := genLength(rt, world)
		ms := worldOf(t, world)
		requireNoErrs(rt, onAll(ms, collective.Options{Segment: genSegment(rt, L)}, func(r int, c *collective.Comm) error {
			data := make([]float32, L)
			for i := range data {
				data[i] = float32(r*100000 + i)
			}
			if err := c.Broadcast(context.Background(), data, root); err != nil {
				return err
			}
			for i := range data {
				if data[i] != float32(root*100000+i) {
					return fmt.Errorf("element %d: %v", i, data[i])
				}
			}
			return nil
		}))
	})
}

func TestAllToAllVProperty(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		world := rapid.IntRange(1, 8).Draw(rt, "world")
		// counts[i][j]: elements rank i sends rank j.
		counts := make([][]int, world)
		for i := range counts {
			counts[i] = rapid.SliceOfN(rapid.IntRange(0, 40), world, world).Draw(rt, fmt.Sprintf("counts%d", i))
		}
		ms := worldOf(t, world)
		val := func(from, to, k int) float32 { return float32(from*10000 + to*100 + k) }
		requireNoErrs(rt, onAll(ms, collective.Options{}, func(r int, c *collective.Comm) error {
			var send []float32
			recvCounts := make([]int, world)
			total := 0
			for j := range world {
				for k := range counts[r][j] {
					send = append(send, val(r, j, k))
				}
				recvCounts[j] = counts[j][r]
				total += recvCounts[j]
			}
			recv := make([]float32, total)
			if err := c.AllToAllV(context.Background(), send, counts[r], recv, recvCounts); err != nil {
				return err
			}
			i := 0
			for j := range world {
				for k := range recvCounts[j] {
					if recv[i] != val(j, r, k) {
						return fmt.Errorf("from %d element %d: %v", j, k, recv[i])
					}
					i++
				}
			}
			return nil
		}))
	})
}

func TestBarrier(t *testing.T) {
	for world := 1; world <= 8; world++ {
		ms := worldOf(t, world)
		for range 3 {
			requireNoErrs(t, onAll(ms, collective.Options{}, func(r int, c *collective.Comm) error {
				return c.Barrier(context.Background())
			}))
		}
	}
}

// TestVolumes checks the byte counters against the textbook volumes,
// exactly, with integer chunk sizes: ring allreduce sends
// 4·(L−|chunk r|) bytes in the reduce-scatter and 4·(L−|chunk r+1|) in
// the allgather, which is (n−1)/n·M each when n divides L.
func TestVolumes(t *testing.T) {
	for _, world := range []int{2, 3, 4, 5, 8} {
		for _, L := range []int{0, 1, 3, 7, 1000, 1001, 4096} {
			t.Run(fmt.Sprintf("n=%d/L=%d", world, L), func(t *testing.T) {
				ms := meshtest.Open(t, world, nil)
				requireNoErrs(t, onAll(ms, collective.Options{Segment: 256}, func(r int, c *collective.Comm) error {
					return c.AllReduce(context.Background(), make([]float32, L))
				}))
				size := func(k int) int64 {
					lo, hi := collective.Chunk(L, world, k)
					return int64(hi - lo)
				}
				var totalSent int64
				for r, m := range ms {
					c := m.Counters()
					rs, ag := c["reduce-scatter"].Total(), c["allgather"].Total()
					require.Equal(t, 4*(int64(L)-size(r)), rs.BytesSent, "rank %d reduce-scatter sent", r)
					require.Equal(t, 4*(int64(L)-size((r+world-1)%world)), rs.BytesRecv, "rank %d reduce-scatter received", r)
					require.Equal(t, 4*(int64(L)-size((r+1)%world)), ag.BytesSent, "rank %d allgather sent", r)
					require.Equal(t, 4*(int64(L)-size(r)), ag.BytesRecv, "rank %d allgather received", r)
					if L%world == 0 {
						M := int64(4 * L)
						require.Equal(t, M*int64(world-1)/int64(world), rs.BytesSent)
						require.Equal(t, 2*M*int64(world-1)/int64(world), rs.BytesSent+ag.BytesSent)
					}
					// Everything goes to the next rank only.
					for p := range world {
						if p != (r+1)%world {
							require.Zero(t, c["reduce-scatter"][p].BytesSent+c["allgather"][p].BytesSent)
						}
					}
					totalSent += rs.BytesSent + ag.BytesSent
				}
				// Over the job: 2(n−1)·M.
				require.Equal(t, 2*int64(world-1)*4*int64(L), totalSent)
				for _, m := range ms {
					m.ResetCounters()
				}

				// Allgather of equal blocks: (n−1)·block per rank.
				requireNoErrs(t, onAll(ms, collective.Options{Segment: 256}, func(r int, c *collective.Comm) error {
					return c.AllGather(context.Background(), make([]float32, L), make([]float32, world*L))
				}))
				for r, m := range ms {
					require.Equal(t, int64(world-1)*4*int64(L), m.Counters()["allgather"].Total().BytesSent, "rank %d", r)
					require.Equal(t, int64(world-1)*4*int64(L), m.Counters()["allgather"].Total().BytesRecv, "rank %d", r)
				}

				// Broadcast from rank 1: everyone but the chain's last
				// (rank 0) sends M once; everyone but the root receives M.
				requireNoErrs(t, onAll(ms, collective.Options{Segment: 256}, func(r int, c *collective.Comm) error {
					return c.Broadcast(context.Background(), make([]float32, L), 1)
				}))
				for r, m := range ms {
					b := m.Counters()["broadcast"].Total()
					wantSent, wantRecv := int64(4*L), int64(4*L)
					if r == 0 {
						wantSent = 0
					}
					if r == 1 {
						wantRecv = 0
					}
					require.Equal(t, wantSent, b.BytesSent, "rank %d", r)
					require.Equal(t, wantRecv, b.BytesRecv, "rank %d", r)
				}
			})
		}
	}
}

func TestMismatchedLengthsFail(t *testing.T) {
	ms := meshtest.Open(t, 3, nil)
	errs := onAll(ms, collective.Options{}, func(r int, c *collective.Comm) error {
		n := 30
		if r == 2 {
			n = 33
		}
		return c.AllReduce(context.Background(), make([]float32, n))
	})
	for r, err := range errs {
		require.Error(t, err, "rank %d", r)
	}
	require.ErrorIs(t, errsJoin(errs), mesh.ErrDesync)
}

func errsJoin(errs []error) error {
	for _, err := range errs {
		if err != nil && isDesync(err) {
			return err
		}
	}
	return errs[0]
}

func isDesync(err error) bool {
	for e := err; e != nil; {
		if e == mesh.ErrDesync {
			return true
		}
		u, ok := e.(interface{ Unwrap() error })
		if !ok {
			return false
		}
		e = u.Unwrap()
	}
	return false
}

func TestCancelAborts(t *testing.T) {
	ms := meshtest.Open(t, 3, nil)
	ctx, cancel := context.WithCancel(context.Background())
	errs := onAll(ms, collective.Options{}, func(r int, c *collective.Comm) error {
		if r == 1 {
			cancel()
			return c.AllReduce(ctx, make([]float32, 100))
		}
		// Ranks 0 and 2 wait in a collective rank 1 never joins.
		return c.AllReduce(context.Background(), make([]float32, 100))
	})
	for r, err := range errs {
		require.Error(t, err, "rank %d", r)
	}
	var pe *mesh.PeerError
	require.ErrorAs(t, errs[0], &pe)
	require.Equal(t, 1, pe.Rank)
	require.Contains(t, errs[2].Error(), "context canceled")
}
