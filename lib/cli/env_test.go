package cli

import (
	"bytes"
	"encoding/json"
	"io"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"trainwire.dev/lib/launch"
)

type envCLI struct {
	Globals
	Env EnvCmd `cmd:""`
}

func TestEnvFromTorchrunVariables(t *testing.T) {
	for k, v := range map[string]string{"RANK": "2", "WORLD_SIZE": "4", "LOCAL_RANK": "2", "LOCAL_WORLD_SIZE": "4",
		"GROUP_RANK": "0", "MASTER_ADDR": "10.0.0.1", "MASTER_PORT": "29500", "TORCHELASTIC_RUN_ID": "job7"} {
		t.Setenv(k, v)
	}
	var out, errb bytes.Buffer
	require.Equal(t, ExitOK, Run(Tool{Name: "t"}, &envCLI{}, []string{"env"}, nil, &out, &errb), errb.String())
	var env launch.Env
	require.NoError(t, json.Unmarshal(out.Bytes(), &env))
	assert.Equal(t, 2, env.Rank)
	assert.Equal(t, 4, env.World)
	assert.Equal(t, "torchrun", env.Source)
	assert.Equal(t, 29501, env.MasterPort)

	out.Reset()
	require.Equal(t, ExitOK, Run(Tool{Name: "t"}, &envCLI{}, []string{"env", "--rank", "3"}, nil, &out, &errb))
	require.NoError(t, json.Unmarshal(out.Bytes(), &env))
	assert.Equal(t, 3, env.Rank)
	assert.Equal(t, "flags", env.Source)
}

func TestEnvBadRankIsUsageError(t *testing.T) {
	var out, errb bytes.Buffer
	code := Run(Tool{Name: "t"}, &envCLI{}, []string{"env", "--rank", "5", "--world", "2"}, nil, &out, &errb)
	assert.Equal(t, ExitUsage, code)
	assert.Contains(t, errb.String(), "rank")
}

// ruleCLI has two verbs with an --out each that are different flags, one
// shared --level, and a flag with a legacy name.
type ruleCLI struct {
	Globals
	A struct {
		Out   string `help:"A's output."`
		Level int    `help:"Level."`
	} `cmd:""`
	B struct {
		Out   string `help:"B's output."`
		Level int    `help:"Level."`
		Seed  int    `help:"Seed." env:"TRAINWIRE_SEED"`
	} `cmd:""`
}

// TestEnvRuleReads: the rule's variables set the flags — per verb where
// two verbs' flags of one name differ, per tool where they are the same
// flag — and a legacy name still works, after the rule's.
func TestEnvRuleReads(t *testing.T) {
	t.Setenv("TRAINWIRE_ET_A_OUT", "a.tw")
	t.Setenv("TRAINWIRE_ET_B_OUT", "b.tw")
	t.Setenv("TRAINWIRE_ET_LEVEL", "3")
	t.Setenv("TRAINWIRE_SEED", "7")
	var c ruleCLI
	k, err := NewParser(Tool{Name: "et"}, &c, io.Discard, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := k.Parse([]string{"a"}); err != nil {
		t.Fatal(err)
	}
	if c.A.Out != "a.tw" || c.A.Level != 3 {
		t.Errorf("a: --out %q --level %d, want a.tw and 3", c.A.Out, c.A.Level)
	}
	if _, err := k.Parse([]string{"b"}); err != nil {
		t.Fatal(err)
	}
	if c.B.Out != "b.tw" || c.B.Level != 3 || c.B.Seed != 7 {
		t.Errorf("b: --out %q --level %d --seed %d, want b.tw, 3 and 7", c.B.Out, c.B.Level, c.B.Seed)
	}
	t.Setenv("TRAINWIRE_ET_SEED", "9")
	if _, err := k.Parse([]string{"b"}); err != nil {
		t.Fatal(err)
	}
	if c.B.Seed != 9 {
		t.Errorf("b --seed %d: the rule's TRAINWIRE_ET_SEED=9 must win over the legacy TRAINWIRE_SEED=7", c.B.Seed)
	}
}
