package scheme

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"trainwire.dev/lib/collective"

	"trainwire.dev/lib/zen"
	"trainwire.dev/tools/hashsync/internal/volume"
)

// T2 (exact): the payload bytes the mesh counted equal the formulas
// evaluated on the actual index sets, scheme by scheme and rank by rank;
// and they agree with the closed forms of package model evaluated on the
// measured density and densification.
func TestPayloadBytes(t *testing.T) {
	const n, rows, width = 4, 30000, 2
	in := make([]*Tensor, n)
	for r := range n {
		in[r] = randTensor(rand.New(rand.NewPCG(11, uint64(r))), "g", rows, width, 0.03, false)
	}
	ref, err := Reference(in)
	require.NoError(t, err)
	union := ref.Nnz() // no cancellations with normal values
	mean := 0.0
	for _, x := range in {
		mean += float64(x.Nnz()) / n
	}
	d, gamma := mean/rows, float64(union)/mean
	row := 4 * width
	tb, _ := zen.TableFor(rows, n, zen.DefaultSeeds(0, 3)[0])
	// Per server: its rows in the union; per worker, per server: rows sent.
	unionPart := make([]int, n)
	for _, i := range ref.Idx {
		unionPart[tb.Part(i)]++
	}
	sendPart := make([][]int, n)
	for r, x := range in {
		sendPart[r] = make([]int, n)
		for _, i := range x.Idx {
			sendPart[r][tb.Part(i)]++
		}
	}
	for _, sch := range []string{"zen", "zen-bitmap", "zen-coo", "bp-coo", "agsparse", "dense", "sparcml", "sparse-ps"} {
		t.Run(sch, func(t *testing.T) {
			cfg := DefaultConfig(sch)
			switch sch {
			case "zen-bitmap":
				cfg.Scheme, cfg.Pull = "zen", "bitmap"
			case "zen-coo":
				cfg.Scheme, cfg.Pull = "zen", "coo"
			}
			stats := make([]*Stats, n)
			errs := runAll(t, n, cfg, func(r int, s *Syncer) error {
				_, st, err := s.Sync(context.Background(), s.Prepare(in[r]))
				stats[r] = st
				return err
			})
			for r, err := range errs {
				require.NoError(t, err, "rank %d", r)
			}
			for r := range n {
				st := stats[r]
				switch sch {
				case "zen", "zen-bitmap", "zen-coo", "bp-coo":
					push := 0
					for j := range n {
						if j != r {
							push += sendPart[r][j] * (4 + row)
						}
					}
					assert.Equal(t, int64(push), st.Sent["push"], "rank %d push sent", r)
					var pullBM, pullCOO int
					for j := range n {
						if j != r {
							pullBM += zen.BitmapBytes(tb.Size(j)) + unionPart[j]*row
							pullCOO += unionPart[j] * (4 + row)
						}
					}
					want := pullCOO
					if sch == "zen-bitmap" || (sch == "zen" && pullBM < pullCOO) {
						want = pullBM
					}
					if sch == "zen" {
						// auto chooses per message: at most either.
						assert.LessOrEqual(t, st.Recv["pull"], int64(min(pullBM, pullCOO)), "rank %d pull", r)
					} else {
						assert.Equal(t, int64(want), st.Recv["pull"], "rank %d pull received", r)
					}
				case "agsparse":
					want := 0
					for q := range n {
						if q != r {
							want += in[q].Nnz() * (4 + row)
						}
					}
					assert.Equal(t, int64(want), st.Recv["allgather"], "rank %d", r)
				case "dense":
					lo, hi := collective.Chunk(rows*width, n, r)
					want := 2 * 4 * (rows*width - (hi - lo))
					assert.Equal(t, int64(want), st.Sent["reduce-scatter"]+st.Sent["allgather"], "rank %d", r)
				}
			}
			// Against the closed forms (measured d and γ; R6: the bitmaps
			// total |G|/8 over the servers).
			p := volume.Params{N: n, Rows: rows, Width: width, Density: d, Gamma: func(k int) float64 {
				if k == n {
					return gamma
				}
				return 1 + (gamma-1)*float64(k-1)/float64(n-1)
			}}
			var recv float64
			for r := range n {
				tot := int64(0)
				for ph, b := range stats[r].Recv {
					if ph != "meta" {
						tot += b
					}
				}
				recv += float64(tot) / n
			}
			var want float64
			switch sch {
			case "zen-bitmap":
				p.Pull = "bitmap"
				want = p.Zen().Bytes
			case "zen-coo", "bp-coo":
				want = p.BPCOO().Bytes
			case "zen":
				want = p.Zen().Bytes
			case "agsparse":
				want = p.AGsparse().Bytes
			case "dense":
				want = p.Dense().Bytes
			default:
				return
			}
			assert.InDelta(t, want, recv, want*0.03, "%s: mean bytes received per rank vs closed form", sch)
			t.Logf("%s: measured %.0f B/rank, closed form %.0f", sch, recv, want)
		})
	}
}

// R4: zen's stats report push and pull imbalance near 1; sparse-ps's are
// the skewness on skewed data.
func TestImbalanceStats(t *testing.T) {
	const n = 4
	in := make([]*Tensor, n)
	for r := range n {
		in[r] = randTensor(rand.New(rand.NewPCG(12, uint64(r))), "g", 200000, 1, 0.05, false)
	}
	for sch, check := range map[string]func(push, pull float64) bool{
		"zen":       func(push, pull float64) bool { return push < 1.1 && pull < 1.1 },
		"sparse-ps": func(push, pull float64) bool { return push > 1.5 && pull > 1.3 },
	} {
		errs := runAll(t, n, DefaultConfig(sch), func(r int, s *Syncer) error {
			_, st, err := s.Sync(context.Background(), s.Prepare(in[r]))
			if err == nil && !check(st.PushImbalance, st.PullImbalance) {
				err = fmt.Errorf("%s: push imbalance %.3f, pull %.3f", sch, st.PushImbalance, st.PullImbalance)
			}
			return err
		})
		for r, err := range errs {
			require.NoError(t, err, "rank %d", r)
		}
	}
}

// T7, Fig. 7: 3 ranks, 15 gradients, 6 non-zeros each, 4 of them in the
// middle range: with even ranges server 1 receives 4× what servers 0 and 2
// receive from each worker.
func TestFig7RangeImbalance(t *testing.T) {
	rows := []uint32{2, 5, 6, 8, 9, 13} // ranges [0,5) [5,10) [10,15): 1, 4, 1
	stats := make([]*Stats, 3)
	errs := runAll(t, 3, DefaultConfig("sparse-ps"), func(r int, s *Syncer) error {
		x := &Tensor{Name: "fig7", Rows: 15, Width: 1, Idx: rows, Val: []float32{1, 2, 3, 4, 5, 6}}
		_, st, err := s.Sync(context.Background(), s.Prepare(x))
		stats[r] = st
		return err
	})
	for r, err := range errs {
		require.NoError(t, err, "rank %d", r)
	}
	for r, st := range stats {
		assert.InDelta(t, 2.0, st.PushImbalance, 1e-9, "rank %d: n·max/|I| = 3·4/6", r)
	}
	// Push bytes received by server 1 from worker 0 vs by server 0 from worker 1.
	assert.Equal(t, int64(4*8), stats[1].RecvPeer["push"][0])
	assert.Equal(t, int64(1*8), stats[0].RecvPeer["push"][1])
	assert.Equal(t, int64(1*8), stats[2].RecvPeer["push"][0])
}
