package verbs

import (
	"encoding/json"
	"fmt"
	"os"
	"trainwire.dev/lib/cli"

	"trainwire.dev/lib/launch"
)

// EnvCmd prints who this process is in its job, as the networked verbs
// would see it: rank, world, node, master address and which launcher said
// so. It is how a user checks a torchrun, mpirun, srun or Kubernetes set-up
// before running the real thing.
type EnvCmd struct {
	launch.Flags `embed:""`
	Format       string `help:"Output format: json or table." enum:"json,table" default:"json"`
}

// Run prints the resolved launch.Env to stdout.
func (c *EnvCmd) Run(rio *cli.IO) error {
	env, err := c.Flags.Resolve(os.Environ())
	if err != nil {
		return cli.WithCode(cli.ExitUsage, err)
	}
	if c.Format == "table" {
		_, err = fmt.Fprintf(rio.Stdout,
			"source       %s\nrank         %d of %d\nlocal rank   %d of %d\nnode         %d of %d\nmaster       %s:%d\nrun id       %s\n",
			env.Source, env.Rank, env.World, env.LocalRank, env.LocalWorld, env.NodeRank, env.NumNodes,
			env.MasterAddr, env.MasterPort, env.RunID)
		return err
	}
	return json.NewEncoder(rio.Stdout).Encode(env)
}
