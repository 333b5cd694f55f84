package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"trainwire.dev/lib/cli/clitest"
	"trainwire.dev/lib/codec"
	"trainwire.dev/lib/wire"
	"trainwire.dev/tools/compressor/internal/csync"
)

// TestSyncHierarchical: 4 real processes as 2 nodes × 2 (the launcher's
// env: node r%2, local rank r/2, so the nodes are ranks {0, 2} and {1, 3})
// with --hierarchical: every rank's sums equal HierRef (node sums, then
// the reference over the 2 nodes) bit for bit, for a compressed
// allgather, the compressed ring and PowerSGD with error feedback over 2
// steps; the leaders send the inter-node bytes, the others only "intra".
func TestSyncHierarchical(t *testing.T) {
	for _, c := range []struct {
		algo, coll, mem string
		args            []string
	}{
		{"topk", "allgather", "residual", []string{"--ratio", "0.1"}},
		{"fp16", "ring", "none", nil},
		{"powersgd", "powersgd", "powersgd", []string{"--powersgd-rank", "2"}},
	} {
		t.Run(c.algo+"/"+c.coll, func(t *testing.T) {
			const world, steps = 4, 2
			nodes := [][]int{{0, 2}, {1, 3}}
			ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
			defer cancel()
			data := make([][][][]float32, world)
			for r := range world {
				data[r] = rankData(r, steps)
			}
			bin := clitest.Binary(t, "compressor")
			master := fmt.Sprintf("127.0.0.1:%d", clitest.FreePort(t))
			stats := t.TempDir() + "/stats"
			ps := make([]*clitest.Proc, world)
			for r := range world {
				env := append(os.Environ(), fmt.Sprint("TRAINWIRE_NODE_RANK=", r%2), "TRAINWIRE_NUM_NODES=2",
					fmt.Sprint("TRAINWIRE_LOCAL_RANK=", r/2), "TRAINWIRE_LOCAL_WORLD=2")
				a := append([]string{"sync", "--rank", fmt.Sprint(r), "--world", fmt.Sprint(world), "--master", master,
					"--timeout", "20s", "--hierarchical", "--stats", fmt.Sprint(stats, r),
					"--algo", c.algo, "--collective", c.coll, "--memory", c.mem}, c.args...)
				ps[r] = clitest.Start(t, ctx, bin, env, bytes.NewReader(streamOf(t, data[r])), a...)
			}
			sf := SyncCodecFlags{Ratio: 0.01, Levels: 64, Threshold: 0.01, Samplings: 30, PowerSGDRank: 1, Momentum: 0.9}
			for i := 0; i+1 < len(c.args); i += 2 {
				switch c.args[i] {
				case "--ratio":
					fmt.Sscan(c.args[i+1], &sf.Ratio)
				case "--powersgd-rank":
					fmt.Sscan(c.args[i+1], &sf.PowerSGDRank)
				}
			}
			cd, err := codec.New(c.algo, sf.Options())
			require.NoError(t, err)
			sp := csync.Spec{Collective: c.coll, Memory: c.mem, Codec: cd}
			ref := csync.NewRef(len(nodes))
			var want [][]float32
			for s := range steps {
				for i, mt := range e2eModel {
					us := make([]*csync.Unit, world)
					for r := range world {
						us[r] = &csync.Unit{Name: mt.name, Step: int64(s), Shape: mt.shape, Data: data[r][s][i]}
					}
					x, err := csync.HierRef(ref, nodes, us, sp)
					require.NoError(t, err)
					want = append(want, x)
				}
			}
			for r, p := range ps {
				require.NoError(t, p.Cmd.Wait(), "rank %d: %s", r, p.Stderr.String())
				require.Equal(t, steps*len(e2eModel), checkSums(t, r, p.Stdout.Bytes(), want), "rank %d", r)
				sb, err := os.ReadFile(fmt.Sprint(stats, r))
				require.NoError(t, err)
				var inter, intra float64
				for _, f := range readFrames(t, sb) {
					if st, ok := f.(*wire.Stats); ok {
						for k, v := range st.Values {
							if strings.HasPrefix(k, "sent_bytes.inter.") {
								inter += v
							}
						}
						intra += st.Values["sent_bytes.intra"]
					}
				}
				require.Positive(t, intra, "rank %d sent nothing within its node", r)
				if r < 2 {
					require.Positive(t, inter, "leader %d sent nothing to the other node", r)
				} else {
					require.Zero(t, inter, "rank %d is no leader", r)
				}
			}
		})
	}
}
