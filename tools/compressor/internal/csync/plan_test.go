package csync

import (
	"bufio"
	"bytes"
	"os"
	"testing"

	"github.com/stretchr/testify/require"

	"trainwire.dev/lib/wire"
)

// Every one of the decision tree's 174 paths runs as one of the
// collectives; the flat ones as the table in docs/compressor.md says.
func TestCollectiveForEveryPath(t *testing.T) {
	f, err := os.Open("../../testdata/plan/paths-174.txt")
	require.NoError(t, err)
	defer f.Close()
	sc := bufio.NewScanner(f)
	n := 0
	counts := map[string]int{}
	for sc.Scan() {
		c, err := CollectiveForPath(sc.Text())
		require.NoError(t, err, sc.Text())
		counts[c]++
		n++
	}
	require.Equal(t, 174, n)
	t.Log(counts)
	for path, want := range map[string]string{
		"F:AR": Dense, "F1:RS > F2:AG": Dense, "F1:RS > C > F2:AG* > D": RSAG, "F1:Reduce > F2:BC": Dense,
		"C > F:AG* > D": AllGather, "C@cpu > F:AG* > D@gpu": AllGather, "C > F1:A2A* > F2:AG* > D": A2AAG,
		"C > F1:A2A* > D > F2:AG": A2ADense, "C > F1:A2A* > D > C > F2:AG* > D": Partitioned,
		"C > F1:GA* > D > C > F2:BC* > D": Partitioned,
		"I1:RS > C > X:AG* > D > I2:AG":   AllGather, "I1:RS > X:AR > I2:AG": Dense,
		"I1:RS > C > X1:A2A* > D > C > X2:AG* > D > I2:AG": Partitioned,
	} {
		got, err := CollectiveForPath(path)
		require.NoError(t, err)
		require.Equal(t, want, got, path)
	}
	_, err = CollectiveForPath("C > F:AR")
	require.Error(t, err)
}

func planStream(t *testing.T, frames ...wire.Frame) []byte {
	var b bytes.Buffer
	w := wire.NewWriter(&b, "test")
	w.SetMeta(map[string]string{"model": "m1"})
	for _, f := range frames {
		require.NoError(t, w.Write(f))
	}
	require.NoError(t, w.Close())
	return b.Bytes()
}

func compFrame(name, path string, numel int64) *wire.Plan {
	return &wire.Plan{Kind: "compression", Algo: "espresso", Groups: [][2]int64{{0, 0}},
		Items: []map[string]any{{"name": name, "numel": numel, "path": path}}, Meta: map[string]any{"codec": "topk"}}
}

func TestReadPlans(t *testing.T) {
	var p Plan
	require.NoError(t, p.ReadPlan(bytes.NewReader(planStream(t, compFrame("a", "F:AR", 10), compFrame("b", "C > F:AG* > D", 20))), wire.Limits{}))
	require.Equal(t, "topk", p.Codec)
	require.Equal(t, "m1", p.Model)
	pt, ok, err := p.Check("b", 20)
	require.True(t, ok)
	require.NoError(t, err)
	require.Equal(t, AllGather, pt.Collective)
	_, _, err = p.Check("b", 21)
	require.ErrorContains(t, err, "another model")
	_, _, err = p.Check("zzz", 21)
	require.ErrorContains(t, err, `tensor "zzz" is not in the compression plan for model "m1"`)

	fus := &wire.Plan{Kind: "fusion", Algo: "cupcake", Groups: [][2]int64{{0, 1}},
		Items: []map[string]any{{"names": []any{"a", "b"}}}, Meta: map[string]any{"model": "m1"}}
	require.NoError(t, p.ReadPlan(bytes.NewReader(planStream(t, fus)), wire.Limits{}))
	g, members, ok, err := p.GroupOf("b")
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, 0, g)
	require.Equal(t, []string{"a", "b"}, members)
	_, _, _, err = p.GroupOf("c")
	require.ErrorContains(t, err, "another model")

	var q Plan
	fus.Meta["model"] = "m2"
	require.NoError(t, q.ReadPlan(bytes.NewReader(planStream(t, fus)), wire.Limits{}))
	require.ErrorContains(t, q.ReadPlan(bytes.NewReader(planStream(t, compFrame("a", "F:AR", 1))), wire.Limits{}), "two models")
	bad := &wire.Plan{Kind: "fusion", Groups: [][2]int64{{1, 1}}, Items: []map[string]any{{"names": []any{"a"}}}}
	require.ErrorContains(t, (&Plan{}).ReadPlan(bytes.NewReader(planStream(t, bad)), wire.Limits{}), "in order from 0")
	require.ErrorContains(t, (&Plan{}).ReadPlan(bytes.NewReader(planStream(t)), wire.Limits{}), "no plan frame")
}

// FuzzReadPlan: any bytes give a plan or an error, never a panic.
func FuzzReadPlan(f *testing.F) {
	tt := &testing.T{}
	f.Add(planStream(tt, compFrame("a", "F:AR", 10), compFrame("b", "C > F1:A2A* > D > C > F2:AG* > D", 20)))
	f.Add(planStream(tt, &wire.Plan{Kind: "fusion", Groups: [][2]int64{{0, 1}, {2, 2}},
		Items: []map[string]any{{"names": []any{"a", "b"}}, {"names": []any{"c"}}}, Meta: map[string]any{"model": "m"}}))
	f.Fuzz(func(t *testing.T, b []byte) {
		var p Plan
		if err := p.ReadPlan(bytes.NewReader(b), wire.Limits{MaxPayload: 1 << 20}); err != nil {
			return
		}
		for name, pt := range p.Tensors {
			_, _, _ = p.Check(name, pt.Numel)
		}
		for _, g := range p.Groups {
			for _, n := range g {
				_, _, _, err := p.GroupOf(n)
				require.NoError(t, err)
			}
		}
	})
}

// FuzzCollectiveForPath: any text maps to a collective or an error.
func FuzzCollectiveForPath(f *testing.F) {
	f.Add("C > F1:A2A* > D > C > F2:AG* > D")
	f.Add("I1:RS > C > X:AG* > D > I2:AG")
	f.Fuzz(func(t *testing.T, s string) {
		c, err := CollectiveForPath(s)
		if err == nil {
			require.Contains(t, Collectives, c)
		}
	})
}
