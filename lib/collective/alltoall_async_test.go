package collective_test

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"trainwire.dev/lib/collective"
	"trainwire.dev/lib/mesh"
	"trainwire.dev/lib/mesh/meshtest"
)

// a2aCase is one alltoallv: counts[i][j] bytes from rank i to rank j, the
// bytes a function of (from, to, k).
type a2aCase struct{ counts [][]int }

func (a a2aCase) val(from, to, k int) byte { return byte(from*31 + to*7 + k*13 + k>>8) }

func (a a2aCase) send(r int) []byte {
	var b []byte
	for j := range a.counts {
		for k := range a.counts[r][j] {
			b = append(b, a.val(r, j, k))
		}
	}
	return b
}

func (a a2aCase) recvCounts(r int) []int {
	rc := make([]int, len(a.counts))
	for j := range a.counts {
		rc[j] = a.counts[j][r]
	}
	return rc
}

func (a a2aCase) want(r int) []byte {
	var b []byte
	for j := range a.counts {
		for k := range a.counts[j][r] {
			b = append(b, a.val(j, r, k))
		}
	}
	return b
}

func drawCase(rt *rapid.T, world, most int) a2aCase {
	counts := make([][]int, world)
	for i := range counts {
		counts[i] = rapid.SliceOfN(rapid.IntRange(0, most), world, world).Draw(rt, fmt.Sprintf("counts%d", i))
	}
	return a2aCase{counts}
}

// TestAllToAllVAsyncProperty: the asynchronous alltoallv gives the same
// bytes as the synchronous baseline, and the expected ones, for worlds of
// 1 to 8 and awkward sizes (empty parts included).
func TestAllToAllVAsyncProperty(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		world := rapid.IntRange(1, 8).Draw(rt, "world")
		tc := drawCase(rt, world, rapid.SampledFrom([]int{0, 3, 97, 5000}).Draw(rt, "most"))
		ms := worldOf(t, world)
		requireNoErrs(rt, onAll(ms, collective.Options{}, func(r int, c *collective.Comm) error {
			rc := tc.recvCounts(r)
			async, sync := make([]byte, sum(rc)), make([]byte, sum(rc))
			if err := c.AllToAllVAsync(context.Background(), tc.send(r), tc.counts[r], async, rc); err != nil {
				return err
			}
			if err := c.AllToAllVBytes(context.Background(), tc.send(r), tc.counts[r], sync, rc); err != nil {
				return err
			}
			if !bytes.Equal(async, sync) || !bytes.Equal(async, tc.want(r)) {
				return fmt.Errorf("rank %d: async %v, sync %v, want %v", r, async, sync, tc.want(r))
			}
			return nil
		}))
	})
}

// TestStartAllToAllProperty: parts of any size, posted in any order and
// at different times on each rank, arrive whole at their rank; the
// receiver learns their sizes from the parts themselves.
func TestStartAllToAllProperty(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		world := rapid.IntRange(1, 8).Draw(rt, "world")
		tc := drawCase(rt, world, 300)
		orders := make([][]int, world)
		for r := range orders {
			orders[r] = rapid.Permutation(seq(world)).Draw(rt, fmt.Sprintf("order%d", r))
		}
		ms := worldOf(t, world)
		requireNoErrs(rt, onAll(ms, collective.Options{}, func(r int, c *collective.Comm) error {
			a, err := c.StartAllToAll(context.Background(), 300)
			if err != nil {
				return err
			}
			for _, k := range orders[r] {
				part := make([]byte, 0, tc.counts[r][k])
				for i := range tc.counts[r][k] {
					part = append(part, tc.val(r, k, i))
				}
				if r%2 == 1 {
					time.Sleep(time.Duration(k) * 100 * time.Microsecond)
				}
				if err := a.Post(k, part); err != nil {
					return err
				}
			}
			parts, err := a.Wait()
			if err != nil {
				return err
			}
			if got := bytes.Join(parts, nil); !bytes.Equal(got, tc.want(r)) {
				return fmt.Errorf("rank %d: got %v, want %v", r, got, tc.want(r))
			}
			for k, p := range parts {
				if len(p) != tc.counts[k][r] {
					return fmt.Errorf("rank %d: part from %d has %d bytes, want %d", r, k, len(p), tc.counts[k][r])
				}
			}
			return nil
		}))
	})
}

func seq(n int) []int {
	s := make([]int, n)
	for i := range s {
		s[i] = i
	}
	return s
}

func sum(v []int) int {
	s := 0
	for _, x := range v {
		s += x
	}
	return s
}

// TestAllToAllAsyncVolumes: the byte counters equal the closed form
// (docs/sven.md, V.1): rank r sends Σ_{k≠r} s_{r→k} payload bytes and
// receives Σ_{k≠r} s_{k→r}, for both versions; the parts of any size add
// 8 bytes per peer each way under "alltoall-lengths", and nothing else.
func TestAllToAllAsyncVolumes(t *testing.T) {
	for _, world := range []int{2, 3, 5, 8} {
		t.Run(fmt.Sprint(world), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(uint64(world), 1))
			tc := a2aCase{make([][]int, world)}
			for i := range tc.counts {
				for range world {
					tc.counts[i] = append(tc.counts[i], rng.IntN(1000))
				}
			}
			ms := meshtest.Open(t, world, nil)
			requireNoErrs(t, onAll(ms, collective.Options{}, func(r int, c *collective.Comm) error {
				rc := tc.recvCounts(r)
				if err := c.AllToAllVAsync(context.Background(), tc.send(r), tc.counts[r], make([]byte, sum(rc)), rc); err != nil {
					return err
				}
				a, err := c.StartAllToAll(context.Background(), 1000)
				if err != nil {
					return err
				}
				send := tc.send(r)
				off := 0
				for k, n := range tc.counts[r] {
					if err := a.Post(k, send[off:off+n]); err != nil {
						return err
					}
					off += n
				}
				_, err = a.Wait()
				return err
			}))
			for r, m := range ms {
				cs := m.Counters()
				var sent, recvd int64
				for k := range world {
					if k != r {
						sent += int64(tc.counts[r][k])
						recvd += int64(tc.counts[k][r])
					}
				}
				a2a, lens := cs["alltoall"].Total(), cs["alltoall-lengths"].Total()
				require.Equal(t, 2*sent, a2a.BytesSent, "rank %d payload sent", r)
				require.Equal(t, 2*recvd, a2a.BytesRecv, "rank %d payload received", r)
				require.Equal(t, int64(collective.LengthBytes*(world-1)), lens.BytesSent, "rank %d lengths sent", r)
				require.Equal(t, int64(collective.LengthBytes*(world-1)), lens.BytesRecv, "rank %d lengths received", r)
				require.Equal(t, 2*sent+int64(8*(world-1)), cs.Total().BytesSent, "rank %d: nothing else on the wire", r)
			}
		})
	}
}

// TestStartAllToAllBounds: a part over the sender's bound is refused
// before it is sent, and a part over the receiver's bound is refused by
// the receiver from its length, naming the sender; every rank fails.
func TestStartAllToAllBounds(t *testing.T) {
	for _, tc := range []struct {
		name            string
		bad             int // the rank that sends 17 bytes to rank 2
		bound, boundOf2 int // every rank's bound but rank 2's, and rank 2's
		want2           int // the rank whose error says it
		want            string
	}{
		{"sender", 1, 16, 64, 1, "part for rank 2 has 17 bytes, more than the bound of 16"},
		{"receiver", 0, 64, 8, 2, "rank 0 announced a part of 17 bytes, more than the bound of 8"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ms := meshtest.Open(t, 3, nil)
			errs := onAll(ms, collective.Options{}, func(r int, c *collective.Comm) error {
				bound := tc.bound
				if r == 2 {
					bound = tc.boundOf2
				}
				a, err := c.StartAllToAll(context.Background(), bound)
				if err != nil {
					return err
				}
				for k := range 3 {
					n := 4
					if r == tc.bad && k == 2 {
						n = 17
					}
					_ = a.Post(k, make([]byte, n))
				}
				_, err = a.Wait()
				return err
			})
			require.ErrorContains(t, errs[tc.want2], tc.want)
			requireAllFail(t, ms, errs)
		})
	}
	t.Run("missing post", func(t *testing.T) {
		ms := meshtest.Open(t, 2, nil)
		errs := onAll(ms, collective.Options{}, func(r int, c *collective.Comm) error {
			a, err := c.StartAllToAll(context.Background(), 8)
			if err != nil {
				return err
			}
			_ = a.Post(r, nil)
			if r == 0 {
				_ = a.Post(1, nil)
			}
			_, err = a.Wait()
			return err
		})
		require.ErrorContains(t, errs[1], "nothing posted to rank 0")
		requireAllFail(t, ms, errs)
	})
}

// TestAllToAllVAsyncMismatch: a rank expecting another size from a peer
// than the peer sends fails with mesh.ErrDesync, like the synchronous one.
func TestAllToAllVAsyncMismatch(t *testing.T) {
	ms := meshtest.Open(t, 3, nil)
	errs := onAll(ms, collective.Options{}, func(r int, c *collective.Comm) error {
		rc := []int{4, 4, 4}
		if r == 2 {
			rc[0] = 5
		}
		return c.AllToAllVAsync(context.Background(), make([]byte, 12), []int{4, 4, 4}, make([]byte, sum(rc)), rc)
	})
	requireAllFail(t, ms, errs)
	require.ErrorIs(t, errsJoin(errs), mesh.ErrDesync)
}

// requireAllFail: every rank failed, or finished its part of the
// alltoall before the failure and finds its mesh aborted at once after
// (an asynchronous alltoall does not wait for the ranks it is done with).
func requireAllFail(t *testing.T, ms []*mesh.Mesh, errs []error) {
	t.Helper()
	for r, err := range errs {
		if err == nil {
			require.Eventually(t, func() bool { return ms[r].Err() != nil }, 10*time.Second, 5*time.Millisecond, "rank %d neither failed nor saw the abort", r)
		}
	}
}
