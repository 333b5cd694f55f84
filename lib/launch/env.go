// Package launch works out who this process is in a distributed job: its
// rank, the world size, its place on its node and where rank 0 listens. It
// reads, in order, explicit flags, TRAINWIRE_* variables, and the variables
// set by the launcher the user already has (torchrun, Kubeflow, OpenMPI,
// PMI/PMIx, Slurm, Kubernetes Indexed Job and JobSet); failing all of them,
// the process is rank 0 of a world of 1.
package launch

// Env is the identity of one process in a job.
type Env struct {
	// Rank is the global rank, 0 <= Rank < World.
	Rank int `json:"rank"`
	// World is the number of processes (ranks) in the job.
	World int `json:"world"`
	// LocalRank is the rank among the processes on this node.
	LocalRank int `json:"local_rank"`
	// LocalWorld is the number of processes on this node.
	LocalWorld int `json:"local_world"`
	// NodeRank is the index of this node; NumNodes the number of nodes.
	NodeRank int `json:"node_rank"`
	NumNodes int `json:"num_nodes"`
	// MasterAddr is the host where rank 0 runs its rendezvous listener and
	// MasterPort the port it listens on (0: not known).
	MasterAddr string `json:"master_addr"`
	MasterPort int    `json:"master_port"`
	// RunID names the job (TORCHELASTIC_RUN_ID, SLURM_JOB_ID, …); empty if
	// the launcher gives none.
	RunID string `json:"run_id,omitempty"`
	// Source says where the values came from: "flags", "trainwire",
	// "torchrun", "kubeflow", "openmpi", "pmi", "pmix", "slurm", "k8s-job",
	// "jobset" or "single".
	Source string `json:"source"`
}
