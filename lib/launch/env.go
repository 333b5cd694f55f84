package launch

import (
	"fmt"
	"net"
	"strconv"
)

// DefaultPort is the rendezvous port rank 0 listens on when neither a flag,
// TRAINWIRE_MASTER_PORT nor a launcher's MASTER_PORT gives one.
const DefaultPort = 29511

// MaxWorld is the largest world size (and so the largest rank + 1) that
// Detect and Resolve accept; larger values are taken for typos.
const MaxWorld = 1 << 20

// Env is the identity of one process in a job.
type Env struct {
	// Rank is the global rank, 0 <= Rank < World.
	Rank int `json:"rank"`
	// World is the number of processes (ranks) in the job.
	World int `json:"world"`
	// LocalRank is the rank among the processes on this node,
	// 0 <= LocalRank < LocalWorld.
	LocalRank int `json:"local_rank"`
	// LocalWorld is the number of processes on this node.
	LocalWorld int `json:"local_world"`
	// NodeRank is the index of this node, 0 <= NodeRank < NumNodes;
	// NumNodes the number of nodes. Either is -1 when the launcher does not
	// say and it cannot be derived (OpenMPI and MPICH across several nodes:
	// OMPI_COMM_WORLD_NODE_RANK is not a node index). For Kubernetes
	// sources a pod counts as a node.
	NodeRank int `json:"node_rank"`
	NumNodes int `json:"num_nodes"`
	// MasterAddr is the host where rank 0 runs its rendezvous listener and
	// MasterPort the port it listens on. Detect and Resolve always fill
	// both (MasterPort is DefaultPort when nothing says otherwise).
	MasterAddr string `json:"master_addr"`
	MasterPort int    `json:"master_port"`
	// RunID names the job (TORCHELASTIC_RUN_ID, SLURM_JOB_ID, …); empty if
	// the launcher gives none.
	RunID string `json:"run_id,omitempty"`
	// Source says where the rank came from: "flags", "trainwire",
	// "torchrun", "kubeflow", "openmpi", "pmi", "pmix", "slurm", "k8s-job",
	// "jobset" or "single".
	Source string `json:"source"`
}

// Master returns MasterAddr and MasterPort as "host:port" ("[v6]:port" for
// IPv6 addresses), ready for net.Dial.
func (e Env) Master() string {
	return net.JoinHostPort(e.MasterAddr, strconv.Itoa(e.MasterPort))
}

// Validate checks the invariants documented on the fields; Detect and
// Resolve only return an Env that passes it. It is for an Env built by
// hand, e.g. in tests.
func (e Env) Validate() error {
	checks := []struct {
		ok  bool
		msg string
	}{
		{e.World >= 1 && e.World <= MaxWorld, fmt.Sprintf("world %d is not in 1..%d", e.World, MaxWorld)},
		{e.Rank >= 0 && e.Rank < e.World, fmt.Sprintf("rank %d is not in 0..world-1 (world %d)", e.Rank, e.World)},
		{e.LocalWorld >= 1 && e.LocalWorld <= e.World, fmt.Sprintf("local world %d is not in 1..world (world %d)", e.LocalWorld, e.World)},
		{e.LocalRank >= 0 && e.LocalRank < e.LocalWorld, fmt.Sprintf("local rank %d is not in 0..local world-1 (local world %d)", e.LocalRank, e.LocalWorld)},
		{e.NumNodes == -1 || (e.NumNodes >= 1 && e.NumNodes <= e.World), fmt.Sprintf("number of nodes %d is not -1 or in 1..world (world %d)", e.NumNodes, e.World)},
		{e.NodeRank >= -1 && (e.NumNodes == -1 || e.NodeRank < e.NumNodes), fmt.Sprintf("node rank %d is not -1 or in 0..nodes-1 (nodes %d)", e.NodeRank, e.NumNodes)},
		{e.MasterAddr != "", "master address is empty"},
		{e.MasterPort >= 1 && e.MasterPort <= 65535, fmt.Sprintf("master port %d is not in 1..65535", e.MasterPort)},
	}
	for _, c := range checks {
		if !c.ok {
			return fmt.Errorf("launch: %s: %w", c.msg, ErrInconsistent)
		}
	}
	return nil
}
