package csync

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"
)

// TestBatchExactness: a batch of tensors with different collectives and
// codecs, in small buckets (so they are encoded while the previous one is
// on the wire, and batched into one ring or allgather), gives every rank
// each tensor's reference result bit for bit, over several steps, and
// sends the sum of the tensors' closed-form bytes.
func TestBatchExactness(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		n := rapid.IntRange(1, 6).Draw(rt, "n")
		k := rapid.IntRange(1, 7).Draw(rt, "tensors")
		steps := rapid.IntRange(1, 3).Draw(rt, "steps")
		cases := make([]syncCase, k)
		names := make([]string, k)
		for i := range cases {
			names[i] = fmt.Sprint("t", i)
			// A tensor twice in a batch (its second sync reads the error
			// feedback of its first): the buckets run one after the other.
			if i > 0 && rapid.IntRange(0, 9).Draw(rt, "again") == 0 {
				j := rapid.IntRange(0, i-1).Draw(rt, "which")
				cases[i], names[i] = cases[j], names[j]
				continue
			}
			c := drawCase(rt, 1)
			c.n = n
			// Runs of one collective batch together: repeat the previous one's often.
			if i > 0 && rapid.Bool().Draw(rt, "same") {
				c.coll, c.algo = cases[i-1].coll, cases[i-1].algo
				if c.algo == "powersgd" && c.shape == nil {
					c.shape = []int64{1, int64(c.d)}
				}
			}
			cases[i] = c
		}
		bucket := rapid.SampledFrom([]int{0, 1, 200, 1500}).Draw(rt, "bucket bytes")
		ms := worldOf(rt, n)
		ctx := context.Background()
		ss := make([]*Syncer, n)
		errs := onAll(n, func(r int) error {
			var err error
			ss[r], err = New(ctx, ms[r], []string{"test=batch"})
			if err == nil {
				ss[r].BucketBytes = bucket
			}
			return err
		})
		for _, err := range errs {
			require.NoError(rt, err)
		}
		ref := NewRef(n)
		rng := rand.New(rand.NewPCG(uint64(k), 11))
		for step := range steps {
			us := make([][]*Unit, n)
			sps := make([]Spec, k)
			want := make([][]float32, k)
			vol := Volume{}
			for i, c := range cases {
				sps[i] = c.spec(rt)
				ref1 := make([]*Unit, n)
				for r := range n {
					u := &Unit{Name: names[i], Step: int64(step), Shape: c.shape, Data: gradient(rng, c.d)}
					us[r] = append(us[r], u)
					ref1[r] = u
				}
				var v Volume
				var err error
				want[i], v, err = ref.Sync(ref1, sps[i])
				require.NoError(rt, err, "reference %d: %v", i, c)
				for ph, b := range v {
					if vol[ph] == nil {
						vol[ph] = make([]int64, n)
					}
					for r := range n {
						vol[ph][r] += b[r]
					}
				}
			}
			outs := make([][][]float32, n)
			stats := make([]*Stats, n)
			errs := onAll(n, func(r int) error {
				var err error
				outs[r], stats[r], err = ss[r].SyncBatch(ctx, us[r], sps)
				return err
			})
			for r := range n {
				require.NoError(rt, errs[r], "rank %d step %d", r, step)
				for i := range cases {
					for e := range want[i] {
						if math.Float32bits(want[i][e]) != math.Float32bits(outs[r][i][e]) {
							rt.Fatalf("rank %d step %d tensor %d (%v) element %d: %v, reference %v", r, step, i, cases[i], e, outs[r][i][e], want[i][e])
						}
					}
				}
				for ph, b := range vol {
					require.Equal(rt, b[r], stats[r].Sent[ph], "rank %d step %d: %s bytes sent", r, step, ph)
				}
			}
		}
		errs = onAll(n, func(r int) error { return ss[r].Finish(ctx) })
		for _, err := range errs {
			require.NoError(rt, err)
		}
	})
}

// A batch whose tensors differ on one rank fails every rank with a
// mismatch naming that tensor (its number in the job) and the rank, after
// one agreement; so does a batch with a tensor more.
func TestBatchMismatch(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		k    func(r int) int
		want string
	}{
		{"shape", func(int) int { return 3 }, `tensor #3 \("t2"\): rank \d has shape`},
		{"count", func(r int) int { return 3 + r%2 }, `tensor #4.*rank \d has tensor`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ms := worldOf(t, 3)
			errs := onAll(3, func(r int) error {
				s, err := New(ctx, ms[r], nil)
				if err != nil {
					return err
				}
				var us []*Unit
				var sps []Spec
				for i := range tc.k(r) {
					d := 6
					if tc.name == "shape" && i == 2 && r == 1 {
						d = 5
					}
					us = append(us, &Unit{Name: fmt.Sprint("t", i), Data: make([]float32, d)})
					sps = append(sps, Spec{Collective: Dense})
				}
				_, _, err = s.SyncBatch(ctx, us, sps)
				return err
			})
			for r, err := range errs {
				var me *MismatchError
				require.ErrorAs(t, err, &me, "rank %d: %v", r, err)
				require.Regexp(t, tc.want, err.Error(), "rank %d", r)
			}
		})
	}
}

// SyncAvailable syncs the prefix every rank has: ranks that passed 2, 3
// and 4 tensors all sync 2, and the next call (the rest, with what the
// others had) syncs on; the sums are each tensor's alone.
func TestSyncAvailablePrefix(t *testing.T) {
	ctx := context.Background()
	ms := worldOf(t, 3)
	const total = 4
	data := func(r, i int) []float32 { return []float32{float32(r + 1), float32(10 * i), -1} }
	errs := onAll(3, func(r int) error {
		s, err := New(ctx, ms[r], nil)
		if err != nil {
			return err
		}
		done := 0
		for _, have := range [][]int{{2, 3, 4}, {4, 4, 4}} {
			var us []*Unit
			var sps []Spec
			for i := done; i < have[r]; i++ {
				us = append(us, &Unit{Name: fmt.Sprint("t", i), Data: data(r, i)})
				sps = append(sps, Spec{Collective: Dense})
			}
			outs, _, err := s.SyncAvailable(ctx, us, sps)
			if err != nil {
				return err
			}
			if want := min(have[0], have[1], have[2]) - done; len(outs) != want {
				return fmt.Errorf("rank %d: synced %d tensors, want %d", r, len(outs), want)
			}
			for k, out := range outs {
				i := done + k
				want := []float32{6, float32(30 * i), -3}
				if fmt.Sprint(out) != fmt.Sprint(want) {
					return fmt.Errorf("rank %d tensor %d: %v, want %v", r, i, out, want)
				}
			}
			done += len(outs)
		}
		if done != total {
			return fmt.Errorf("rank %d: %d tensors synced", r, done)
		}
		return s.Finish(ctx)
	})
	for r, err := range errs {
		require.NoError(t, err, "rank %d", r)
	}
}
