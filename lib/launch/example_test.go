package launch_test

import (
	"fmt"

	"trainwire.dev/lib/launch"
)

func ExampleDetect() {
	// What torchrun --no-python gives the fourth worker of two nodes.
	environ := []string{
		"RANK=3", "WORLD_SIZE=4", "LOCAL_RANK=1", "LOCAL_WORLD_SIZE=2",
		"GROUP_RANK=1", "GROUP_WORLD_SIZE=2",
		"MASTER_ADDR=gpu01", "MASTER_PORT=29500", "TORCHELASTIC_RUN_ID=job42",
	}
	env, err := launch.Detect(environ)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("%s: rank %d of %d, local %d of %d, node %d of %d, master %s, run %s\n",
		env.Source, env.Rank, env.World, env.LocalRank, env.LocalWorld,
		env.NodeRank, env.NumNodes, env.Master(), env.RunID)
	// Output: torchrun: rank 3 of 4, local 1 of 2, node 1 of 2, master gpu01:29501, run job42
}

func ExampleDetect_openMPIAcrossNodes() {
	// mpirun names no master; across nodes the user passes one with
	// mpirun -x TRAINWIRE_MASTER_ADDR=node01.
	environ := []string{
		"OMPI_COMM_WORLD_RANK=5", "OMPI_COMM_WORLD_SIZE=8",
		"OMPI_COMM_WORLD_LOCAL_RANK=1", "OMPI_COMM_WORLD_LOCAL_SIZE=4",
	}
	_, err := launch.Detect(environ)
	fmt.Println(err != nil)
	env, _ := launch.Detect(append(environ, "TRAINWIRE_MASTER_ADDR=node01"))
	fmt.Println(env.Source, env.Rank, env.Master(), env.NodeRank)
	// Output:
	// true
	// openmpi 5 node01:29511 -1
}

func ExampleFlags_Resolve() {
	f := launch.NewFlags() // what kong leaves when no flag is given
	f.Rank, f.World = 1, 2
	env, err := f.Resolve(nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(env.Source, env.Rank, env.World, env.Master())
	// Output: flags 1 2 127.0.0.1:29511
}

func ExampleExpandNodelist() {
	hosts, err := launch.ExpandNodelist("node[01-03,07],gpu-[1-2]x[8-9]")
	fmt.Println(hosts, err)
	// Output: [node01 node02 node03 node07 gpu-1x8 gpu-1x9 gpu-2x8 gpu-2x9] <nil>
}

func ExampleExpandTasksPerNode() {
	counts, err := launch.ExpandTasksPerNode("4(x2),8")
	fmt.Println(counts, err)
	// Output: [4 4 8] <nil>
}
