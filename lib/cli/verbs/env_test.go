package verbs

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"trainwire.dev/lib/cli"
	"trainwire.dev/lib/launch"
)

type envCLI struct {
	cli.Globals
	Env EnvCmd `cmd:""`
}

func TestEnvFromTorchrunVariables(t *testing.T) {
	for k, v := range map[string]string{"RANK": "2", "WORLD_SIZE": "4", "LOCAL_RANK": "2", "LOCAL_WORLD_SIZE": "4",
		"GROUP_RANK": "0", "MASTER_ADDR": "10.0.0.1", "MASTER_PORT": "29500", "TORCHELASTIC_RUN_ID": "job7"} {
		t.Setenv(k, v)
	}
	var out, errb bytes.Buffer
	require.Equal(t, cli.ExitOK, cli.Run(cli.Tool{Name: "t"}, &envCLI{}, []string{"env"}, nil, &out, &errb), errb.String())
	var env launch.Env
	require.NoError(t, json.Unmarshal(out.Bytes(), &env))
	assert.Equal(t, 2, env.Rank)
	assert.Equal(t, 4, env.World)
	assert.Equal(t, "torchrun", env.Source)
	assert.Equal(t, 29501, env.MasterPort)

	out.Reset()
	require.Equal(t, cli.ExitOK, cli.Run(cli.Tool{Name: "t"}, &envCLI{}, []string{"env", "--rank", "3"}, nil, &out, &errb))
	require.NoError(t, json.Unmarshal(out.Bytes(), &env))
	assert.Equal(t, 3, env.Rank)
	assert.Equal(t, "flags", env.Source)
}

func TestEnvBadRankIsUsageError(t *testing.T) {
	var out, errb bytes.Buffer
	code := cli.Run(cli.Tool{Name: "t"}, &envCLI{}, []string{"env", "--rank", "5", "--world", "2"}, nil, &out, &errb)
	assert.Equal(t, cli.ExitUsage, code)
	assert.Contains(t, errb.String(), "rank")
}
