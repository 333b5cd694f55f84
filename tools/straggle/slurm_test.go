package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"trainwire.dev/lib/cli/clitest"
)

// RNA under a real srun (scripts/slurm.sh's single-node cluster): 4 tasks,
// rank 0 4× slower, every rank learning its place from SLURM_*; every rank
// runs all its rounds, the replicas agree, and the fast ranks did not wait
// for the slow one.
func TestRNAUnderSrun(t *testing.T) {
	env := clitest.Slurm(t)
	bin := clitest.Binary(t, "straggle")
	dir := t.TempDir()
	out := clitest.Srun(t, append(env, "TRAINWIRE_TOKEN=slurm"), 4, fmt.Sprintf(`exec %s sync --toy quadratic --emit stats --timeout 20s --rounds 40 --compute 10ms --delay uniform:0ms,10ms --slow k=1,s=4 --report %s/report-$SLURM_PROCID.json > /dev/null`, bin, dir))
	var loss []float64
	for r := range 4 {
		b, err := os.ReadFile(filepath.Join(dir, fmt.Sprintf("report-%d.json", r)))
		require.NoError(t, err, "rank %d wrote no report: %s", r, out)
		var rep report
		require.NoError(t, json.Unmarshal(b, &rep))
		assert.Equal(t, 40, rep.Rounds, "rank %d", r)
		assert.Less(t, rep.ContributorsMean, 4.0, "rank %d: every round waited for every rank", r)
		loss = append(loss, rep.FinalLoss)
		if r > 0 {
			assert.Less(t, rep.IdleFraction, 0.05, "fast rank %d waited", r)
		}
	}
	for _, l := range loss {
		assert.Equal(t, loss[0], l, "replicas diverged")
	}
}
