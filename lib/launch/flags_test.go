package launch

import (
	"reflect"
	"strings"
	"testing"

	"github.com/alecthomas/kong"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// verb is a networked verb as a tool declares it.
type verb struct {
	Flags `embed:""`
	Input string `arg:"" optional:""`
}

func parse(t *testing.T, args ...string) Flags {
	t.Helper()
	var cli struct {
		Sync verb `cmd:""`
	}
	p, err := kong.New(&cli, kong.Name("tool"), kong.Exit(func(int) { t.Fatal("kong exited") }))
	require.NoError(t, err)
	_, err = p.Parse(append([]string{"sync"}, args...))
	require.NoError(t, err)
	return cli.Sync.Flags
}

func TestFlagsKong(t *testing.T) {
	assert.Equal(t, NewFlags(), parse(t), "no flag given: all unset")
	got := parse(t, "--rank", "0", "--world", "4", "--local-rank", "0", "--local-world", "2",
		"--node-rank", "0", "--num-nodes", "2", "--master", "h:1", "--run-id", "r")
	assert.Equal(t, Flags{Rank: 0, World: 4, LocalRank: 0, LocalWorld: 2, NodeRank: 0, NumNodes: 2,
		Master: "h:1", RunID: "r"}, got, "0 is a value, distinct from unset")
}

func TestFlagsHelp(t *testing.T) {
	var cli struct {
		Sync verb `cmd:""`
	}
	var out strings.Builder
	p, err := kong.New(&cli, kong.Name("tool"), kong.Writers(&out, &out), kong.Exit(func(int) {}))
	require.NoError(t, err)
	_, _ = p.Parse([]string{"sync", "--help"})
	for _, want := range []string{"--rank=N", "--world=N", "--local-rank=N", "--local-world=N", "--node-rank=N",
		"--num-nodes=N", "--master=HOST:PORT", "--run-id=ID", "TRAINWIRE_RANK", "TRAINWIRE_MASTER_ADDR", "MASTER_PORT+1"} {
		assert.Contains(t, out.String(), want)
	}
}

// TestFlagsNoEnvTags: TRAINWIRE_* belong to Detect, so that programs
// without kong read them too; an env tag would make kong read them first.
func TestFlagsNoEnvTags(t *testing.T) {
	ft := reflect.TypeFor[Flags]()
	for i := range ft.NumField() {
		f := ft.Field(i)
		_, hasEnv := f.Tag.Lookup("env")
		assert.False(t, hasEnv, f.Name)
		assert.NotEmpty(t, f.Tag.Get("help"), f.Name)
		assert.NotEmpty(t, f.Tag.Get("name"), f.Name)
	}
}

func TestFlagsResolve(t *testing.T) {
	torch := readEnv(t, "torchrun-2.x-c10d-rank6.env")
	ompi2 := []string{"OMPI_COMM_WORLD_RANK=5", "OMPI_COMM_WORLD_SIZE=8", "OMPI_COMM_WORLD_LOCAL_RANK=1",
		"OMPI_COMM_WORLD_LOCAL_SIZE=4"}
	set := func(mod func(*Flags)) Flags {
		f := NewFlags()
		mod(&f)
		return f
	}
	tests := []struct {
		name  string
		flags Flags
		env   []string
		want  Env
	}{
		{"no flags is Detect", NewFlags(), torch, Env{
			Rank: 6, World: 8, LocalRank: 2, LocalWorld: 4, NodeRank: 1, NumNodes: 2,
			MasterAddr: "gpu01.cluster.local", MasterPort: 44124, RunID: "job42", Source: "torchrun"}},
		{"rank and world by hand, one host", set(func(f *Flags) { f.Rank, f.World = 2, 4 }), nil, Env{
			Rank: 2, World: 4, LocalRank: 2, LocalWorld: 4, NodeRank: 0, NumNodes: 1,
			MasterAddr: "127.0.0.1", MasterPort: DefaultPort, Source: "flags"}},
		{"one flag overrides one field", set(func(f *Flags) { f.RunID = "mine" }), torch, Env{
			Rank: 6, World: 8, LocalRank: 2, LocalWorld: 4, NodeRank: 1, NumNodes: 2,
			MasterAddr: "gpu01.cluster.local", MasterPort: 44124, RunID: "mine", Source: "flags"}},
		{"--master rescues openmpi across nodes", set(func(f *Flags) { f.Master = "node7:9000" }), ompi2, Env{
			Rank: 5, World: 8, LocalRank: 1, LocalWorld: 4, NodeRank: -1, NumNodes: -1,
			MasterAddr: "node7", MasterPort: 9000, Source: "flags"}},
		{"--master host only keeps the port", set(func(f *Flags) { f.Master = "h0" }), torch, Env{
			Rank: 6, World: 8, LocalRank: 2, LocalWorld: 4, NodeRank: 1, NumNodes: 2,
			MasterAddr: "h0", MasterPort: 44124, RunID: "job42", Source: "flags"}},
		{"--master :port only keeps the host", set(func(f *Flags) { f.Master = ":7" }), torch, Env{
			Rank: 6, World: 8, LocalRank: 2, LocalWorld: 4, NodeRank: 1, NumNodes: 2,
			MasterAddr: "gpu01.cluster.local", MasterPort: 7, RunID: "job42", Source: "flags"}},
		{"--master IPv6", set(func(f *Flags) { f.Master = "[fd00::1]:7" }), torch, Env{
			Rank: 6, World: 8, LocalRank: 2, LocalWorld: 4, NodeRank: 1, NumNodes: 2,
			MasterAddr: "fd00::1", MasterPort: 7, RunID: "job42", Source: "flags"}},
		{"--master bare IPv6", set(func(f *Flags) { f.Master = "fd00::1" }), nil, Env{
			Rank: 0, World: 1, LocalRank: 0, LocalWorld: 1, NodeRank: 0, NumNodes: 1,
			MasterAddr: "fd00::1", MasterPort: DefaultPort, Source: "flags"}},
		{"flags beat TRAINWIRE_*", set(func(f *Flags) { f.Rank = 1 }),
			[]string{"TRAINWIRE_RANK=3", "TRAINWIRE_WORLD=4", "TRAINWIRE_MASTER_PORT=6000"}, Env{
				Rank: 1, World: 4, LocalRank: 1, LocalWorld: 4, NodeRank: 0, NumNodes: 1,
				MasterAddr: "127.0.0.1", MasterPort: 6000, Source: "flags"}},
		{"full placement by hand", set(func(f *Flags) {
			f.Rank, f.World, f.LocalRank, f.LocalWorld, f.NodeRank, f.NumNodes = 5, 8, 1, 4, 1, 2
			f.Master = "10.0.0.1:29600"
		}), nil, Env{
			Rank: 5, World: 8, LocalRank: 1, LocalWorld: 4, NodeRank: 1, NumNodes: 2,
			MasterAddr: "10.0.0.1", MasterPort: 29600, Source: "flags"}},
		{"rank and world ignore a broken launcher", set(func(f *Flags) { f.Rank, f.World = 0, 2 }),
			[]string{"RANK=1", "WORLD_SIZE=2", "LOCAL_RANK=0", "TRAINWIRE_MASTER_PORT=6001"}, Env{
				Rank: 0, World: 2, LocalRank: 0, LocalWorld: 2, NodeRank: 0, NumNodes: 1,
				MasterAddr: "127.0.0.1", MasterPort: 6001, Source: "flags"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.flags.Resolve(tt.env)
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
}

func TestFlagsResolveErrors(t *testing.T) {
	set := func(mod func(*Flags)) Flags {
		f := NewFlags()
		mod(&f)
		return f
	}
	tests := []struct {
		name    string
		flags   Flags
		env     []string
		is      error
		mention string
	}{
		{"rank >= world", set(func(f *Flags) { f.Rank, f.World = 4, 4 }), nil, ErrInconsistent, "--rank=4 must be less than --world=4"},
		{"negative rank", set(func(f *Flags) { f.Rank = -2 }), nil, ErrInvalid, "--rank=-2"},
		{"bad master", set(func(f *Flags) { f.Master = "h:1:2" }), nil, ErrInvalid, `--master="h:1:2"`},
		{"bad master port", set(func(f *Flags) { f.Master = "h:99999" }), nil, ErrInvalid, `--master="h:99999": port "99999"`},
		{"empty master", set(func(f *Flags) { f.Master = ":" }), nil, ErrInvalid, `--master=":"`},
		{"node rank past nodes", set(func(f *Flags) { f.NodeRank = 1 }), nil, ErrInconsistent, "--node-rank=1"},
		{"broken launcher without rank and world", set(func(f *Flags) { f.Rank = 0 }), []string{"RANK=1", "WORLD_SIZE=2"},
			ErrIncomplete, "RANK=1"},
		{"zero Flags literal says world 0", Flags{}, nil, ErrInconsistent, "--world=0"},
		{"several nodes by hand without master", set(func(f *Flags) { f.Rank, f.World, f.NumNodes, f.LocalRank, f.LocalWorld = 1, 4, 2, 1, 2 }),
			nil, ErrNoMaster, "--master"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := tt.flags.Resolve(tt.env)
			require.Error(t, err)
			assert.ErrorIs(t, err, tt.is)
			assert.Contains(t, err.Error(), tt.mention)
		})
	}
}
