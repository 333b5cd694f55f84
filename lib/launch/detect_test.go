package launch

import (
	"bufio"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// readEnv loads testdata/env/name: KEY=VALUE lines, # comments.
func readEnv(t *testing.T, name string) []string {
	t.Helper()
	f, err := os.Open(filepath.Join("testdata", "env", name))
	require.NoError(t, err)
	defer f.Close()
	var env []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		require.Contains(t, line, "=", "%s: %q", name, line)
		env = append(env, line)
	}
	require.NoError(t, sc.Err())
	return env
}

// with returns env with the KEY=VALUE pairs kv put first, so that they win
// (Detect keeps the first of duplicate keys); "KEY=" unsets KEY.
func with(env []string, kv ...string) []string {
	return append(append([]string{}, kv...), env...)
}

// cat joins environments; earlier ones win on duplicate keys.
func cat(envs ...[]string) []string {
	var out []string
	for _, e := range envs {
		out = append(out, e...)
	}
	return out
}

func TestDetectRealLaunchers(t *testing.T) {
	tests := []struct {
		name string
		env  func(t *testing.T) []string
		want Env
	}{
		{"torchrun 1.13 two nodes (captured)", file("torchrun-1.13-node1-rank3.env"), Env{
			Rank: 3, World: 4, LocalRank: 1, LocalWorld: 2, NodeRank: 1, NumNodes: 2,
			MasterAddr: "127.0.0.1", MasterPort: 29789, RunID: "none", Source: "torchrun"}},
		{"torchrun 2.x c10d", file("torchrun-2.x-c10d-rank6.env"), Env{
			Rank: 6, World: 8, LocalRank: 2, LocalWorld: 4, NodeRank: 1, NumNodes: 2,
			MasterAddr: "gpu01.cluster.local", MasterPort: 44124, RunID: "job42", Source: "torchrun"}},
		{"openmpi 4.1 one node (captured)", file("openmpi-4.1.4-rank1.env"), Env{
			Rank: 1, World: 2, LocalRank: 1, LocalWorld: 2, NodeRank: 0, NumNodes: 1,
			MasterAddr: "127.0.0.1", MasterPort: DefaultPort, RunID: "2011693057", Source: "openmpi"}},
		{"mpich hydra one node (captured)", file("mpich-4.0.2-hydra-rank1.env"), Env{
			Rank: 1, World: 2, LocalRank: 1, LocalWorld: 2, NodeRank: 0, NumNodes: 1,
			MasterAddr: "127.0.0.1", MasterPort: DefaultPort, Source: "pmi"}},
		{"slurm srun", file("slurm-srun-rank5.env"), Env{
			Rank: 5, World: 8, LocalRank: 1, LocalWorld: 4, NodeRank: 1, NumNodes: 2,
			MasterAddr: "node01", MasterPort: DefaultPort, RunID: "4242", Source: "slurm"}},
		{"slurm batch script is not a task", file("slurm-sbatch-script.env"), Env{
			Rank: 0, World: 1, LocalRank: 0, LocalWorld: 1, NodeRank: 0, NumNodes: 1,
			MasterAddr: "127.0.0.1", MasterPort: DefaultPort, Source: "single"}},
		{"kubeflow pytorchjob", file("kubeflow-pytorchjob-worker1.env"), Env{
			Rank: 2, World: 3, LocalRank: 0, LocalWorld: 1, NodeRank: 2, NumNodes: 3,
			MasterAddr: "mnist-master-0", MasterPort: 23457, RunID: "mnist", Source: "kubeflow"}},
		{"kubeflow trainer v2 PET", file("kubeflow-trainer-v2-node1.env"), Env{
			Rank: 1, World: 2, LocalRank: 0, LocalWorld: 1, NodeRank: 1, NumNodes: 2,
			MasterAddr: "llm-node-0-0.llm", MasterPort: 29401, Source: "kubeflow"}},
		{"kubernetes indexed job", file("k8s-indexed-job-2.env"), Env{
			Rank: 2, World: 4, LocalRank: 0, LocalWorld: 1, NodeRank: 2, NumNodes: 4,
			MasterAddr: "allreduce-0.allreduce-svc", MasterPort: DefaultPort, RunID: "allreduce", Source: "k8s-job"}},
		{"jobset", file("jobset-workers-1-1.env"), Env{
			Rank: 5, World: 8, LocalRank: 0, LocalWorld: 1, NodeRank: 5, NumNodes: 8,
			MasterAddr: "train-workers-0-0.train", MasterPort: DefaultPort, RunID: "train", Source: "jobset"}},
		{"empty environment", func(*testing.T) []string { return nil }, Env{
			Rank: 0, World: 1, LocalRank: 0, LocalWorld: 1, NodeRank: 0, NumNodes: 1,
			MasterAddr: "127.0.0.1", MasterPort: DefaultPort, Source: "single"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Detect(tt.env(t))
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
			assert.NoError(t, got.Validate())
		})
	}
}

func file(name string) func(t *testing.T) []string {
	return func(t *testing.T) []string { return readEnv(t, name) }
}

// ortedStepOnNode02 is what a rank that mpirun (or Hydra) starts on the
// second node of a Slurm job inherits from the daemon that the launcher
// started there with `srun --nodes=1 --ntasks=1`: a Slurm step whose single
// task is the daemon.
var ortedStepOnNode02 = []string{
	"SLURM_STEP_ID=0", "SLURM_STEPID=0", "SLURM_PROCID=0", "SLURM_LOCALID=0", "SLURM_NODEID=0",
	"SLURM_STEP_NUM_TASKS=1", "SLURM_STEP_NUM_NODES=1", "SLURM_STEP_TASKS_PER_NODE=1",
	"SLURM_STEP_NODELIST=node02", "SLURM_NTASKS=1", "SLURM_NNODES=1", "SLURM_NODELIST=node02",
}

func TestDetectPriority(t *testing.T) {
	sbatch := readEnv(t, "slurm-sbatch-script.env")
	srun := readEnv(t, "slurm-srun-rank5.env")
	tests := []struct {
		name string
		env  []string
		want Env
	}{
		{"torchrun inside srun", cat(readEnv(t, "torchrun-2.x-c10d-rank6.env"), srun), Env{
			Rank: 6, World: 8, LocalRank: 2, LocalWorld: 4, NodeRank: 1, NumNodes: 2,
			MasterAddr: "gpu01.cluster.local", MasterPort: 44124, RunID: "job42", Source: "torchrun"}},
		{"mpirun in an sbatch script, rank on node02", cat(
			[]string{"OMPI_COMM_WORLD_RANK=5", "OMPI_COMM_WORLD_SIZE=8", "OMPI_COMM_WORLD_LOCAL_RANK=1",
				"OMPI_COMM_WORLD_LOCAL_SIZE=4", "OMPI_COMM_WORLD_NODE_RANK=1", "OMPI_MCA_ess_base_jobid=77",
				"PMIX_RANK=5", "PMIX_NAMESPACE=77"},
			ortedStepOnNode02, sbatch), Env{
			Rank: 5, World: 8, LocalRank: 1, LocalWorld: 4, NodeRank: -1, NumNodes: -1,
			MasterAddr: "node01", MasterPort: DefaultPort, RunID: "77", Source: "openmpi"}},
		{"hydra in an sbatch script, rank on node02", cat(
			[]string{"PMI_RANK=6", "PMI_SIZE=8", "MPI_LOCALRANKID=2", "MPI_LOCALNRANKS=4", "PMI_FD=8"},
			ortedStepOnNode02, sbatch), Env{
			Rank: 6, World: 8, LocalRank: 2, LocalWorld: 4, NodeRank: -1, NumNodes: -1,
			MasterAddr: "node01", MasterPort: DefaultPort, RunID: "4242", Source: "pmi"}},
		{"srun --mpi=pmi2", cat([]string{"PMI_RANK=5", "PMI_SIZE=8", "PMI_FD=12", "PMI_JOBID=4242.0"}, srun), Env{
			Rank: 5, World: 8, LocalRank: 1, LocalWorld: 4, NodeRank: 1, NumNodes: 2,
			MasterAddr: "node01", MasterPort: DefaultPort, RunID: "4242.0", Source: "pmi"}},
		{"srun --mpi=pmix", cat([]string{"PMIX_RANK=5", "PMIX_NAMESPACE=slurm.pmix.4242.0"}, srun), Env{
			Rank: 5, World: 8, LocalRank: 1, LocalWorld: 4, NodeRank: 1, NumNodes: 2,
			MasterAddr: "node01", MasterPort: DefaultPort, RunID: "slurm.pmix.4242.0", Source: "pmix"}},
		{"pmix alone with TRAINWIRE_WORLD on one node", []string{"PMIX_RANK=2", "TRAINWIRE_WORLD=4", "TRAINWIRE_NUM_NODES=1",
			"PMIX_NAMESPACE=prterun-h-1@1"}, Env{
			Rank: 2, World: 4, LocalRank: 2, LocalWorld: 4, NodeRank: 0, NumNodes: 1,
			MasterAddr: "127.0.0.1", MasterPort: DefaultPort, RunID: "prterun-h-1@1", Source: "pmix"}},
		{"kubeflow needs a pod: the trainer v2 pod is not an indexed job", readEnv(t, "kubeflow-trainer-v2-node1.env"), Env{
			Rank: 1, World: 2, LocalRank: 0, LocalWorld: 1, NodeRank: 1, NumNodes: 2,
			MasterAddr: "llm-node-0-0.llm", MasterPort: 29401, Source: "kubeflow"}},
		{"TRAINWIRE rank and world replace torchrun", with(readEnv(t, "torchrun-2.x-c10d-rank6.env"),
			"TRAINWIRE_RANK=1", "TRAINWIRE_WORLD=2"), Env{
			Rank: 1, World: 2, LocalRank: 1, LocalWorld: 2, NodeRank: 0, NumNodes: 1,
			MasterAddr: "127.0.0.1", MasterPort: DefaultPort, Source: "trainwire"}},
		{"TRAINWIRE rank and world ignore broken launcher variables", with([]string{"RANK=x", "OMPI_COMM_WORLD_RANK=-3"},
			"TRAINWIRE_RANK=3", "TRAINWIRE_WORLD=4", "TRAINWIRE_RUN_ID=r1"), Env{
			Rank: 3, World: 4, LocalRank: 3, LocalWorld: 4, NodeRank: 0, NumNodes: 1,
			MasterAddr: "127.0.0.1", MasterPort: DefaultPort, RunID: "r1", Source: "trainwire"}},
		{"TRAINWIRE everything, two nodes", []string{"TRAINWIRE_RANK=5", "TRAINWIRE_WORLD=8", "TRAINWIRE_LOCAL_RANK=1",
			"TRAINWIRE_LOCAL_WORLD=4", "TRAINWIRE_NODE_RANK=1", "TRAINWIRE_NUM_NODES=2",
			"TRAINWIRE_MASTER_ADDR=10.0.0.1", "TRAINWIRE_MASTER_PORT=7000", "TRAINWIRE_RUN_ID=exp"}, Env{
			Rank: 5, World: 8, LocalRank: 1, LocalWorld: 4, NodeRank: 1, NumNodes: 2,
			MasterAddr: "10.0.0.1", MasterPort: 7000, RunID: "exp", Source: "trainwire"}},
		{"TRAINWIRE master overrides one field of openmpi", with(readEnv(t, "openmpi-4.1.4-rank1.env"),
			"TRAINWIRE_MASTER_ADDR=host0", "TRAINWIRE_MASTER_PORT=6000"), Env{
			Rank: 1, World: 2, LocalRank: 1, LocalWorld: 2, NodeRank: 0, NumNodes: 1,
			MasterAddr: "host0", MasterPort: 6000, RunID: "2011693057", Source: "openmpi"}},
		{"TRAINWIRE_MASTER_PORT wins over MASTER_PORT+1", with(readEnv(t, "torchrun-2.x-c10d-rank6.env"),
			"TRAINWIRE_MASTER_PORT=5000"), Env{
			Rank: 6, World: 8, LocalRank: 2, LocalWorld: 4, NodeRank: 1, NumNodes: 2,
			MasterAddr: "gpu01.cluster.local", MasterPort: 5000, RunID: "job42", Source: "torchrun"}},
		{"TRAINWIRE_RANK alone overrides the rank", with(readEnv(t, "openmpi-4.1.4-rank1.env"), "TRAINWIRE_RANK=0"), Env{
			Rank: 0, World: 2, LocalRank: 1, LocalWorld: 2, NodeRank: 0, NumNodes: 1,
			MasterAddr: "127.0.0.1", MasterPort: DefaultPort, RunID: "2011693057", Source: "trainwire"}},
		{"user-exported MASTER_ADDR under mpirun, two nodes", cat([]string{"OMPI_COMM_WORLD_RANK=5",
			"OMPI_COMM_WORLD_SIZE=8", "OMPI_COMM_WORLD_LOCAL_RANK=1", "OMPI_COMM_WORLD_LOCAL_SIZE=4",
			"MASTER_ADDR=h0", "MASTER_PORT=29500"}), Env{
			Rank: 5, World: 8, LocalRank: 1, LocalWorld: 4, NodeRank: -1, NumNodes: -1,
			MasterAddr: "h0", MasterPort: 29501, Source: "openmpi"}},
		{"legacy launch variables outside a pod with TRAINWIRE identity", with([]string{"RANK=1", "WORLD_SIZE=2",
			"MASTER_ADDR=x", "MASTER_PORT=1"}, "TRAINWIRE_RANK=1", "TRAINWIRE_WORLD=2"), Env{
			Rank: 1, World: 2, LocalRank: 1, LocalWorld: 2, NodeRank: 0, NumNodes: 1,
			MasterAddr: "127.0.0.1", MasterPort: DefaultPort, Source: "trainwire"}},
		{"empty values count as unset", []string{"RANK=", "OMPI_COMM_WORLD_RANK=", "TRAINWIRE_RANK="}, Env{
			Rank: 0, World: 1, LocalRank: 0, LocalWorld: 1, NodeRank: 0, NumNodes: 1,
			MasterAddr: "127.0.0.1", MasterPort: DefaultPort, Source: "single"}},
		{"first duplicate wins, junk entries ignored", []string{"TRAINWIRE_WORLD=2", "TRAINWIRE_WORLD=x", "TRAINWIRE_RANK=1",
			"NOEQUALS", "=C:=C:\\"}, Env{
			Rank: 1, World: 2, LocalRank: 1, LocalWorld: 2, NodeRank: 0, NumNodes: 1,
			MasterAddr: "127.0.0.1", MasterPort: DefaultPort, Source: "trainwire"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Detect(tt.env)
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
}

func TestDetectSlurmVariants(t *testing.T) {
	srun := readEnv(t, "slurm-srun-rank5.env")
	tests := []struct {
		name string
		env  []string
		want Env
	}{
		{"uneven tasks per node", with(srun, "SLURM_STEP_TASKS_PER_NODE=4,2(x2)", "SLURM_STEP_NUM_NODES=3",
			"SLURM_STEP_NODELIST=gpu-[7-9]", "SLURM_NODEID=2", "SLURM_PROCID=7", "SLURM_LOCALID=1"), Env{
			Rank: 7, World: 8, LocalRank: 1, LocalWorld: 2, NodeRank: 2, NumNodes: 3,
			MasterAddr: "gpu-7", MasterPort: DefaultPort, RunID: "4242", Source: "slurm"}},
		{"step smaller than the job (--preserve-env keeps the job's counts)", with(srun,
			"SLURM_STEP_NUM_TASKS=2", "SLURM_STEP_NUM_NODES=1", "SLURM_STEP_TASKS_PER_NODE=2",
			"SLURM_STEP_NODELIST=node02", "SLURM_STEP_ID=3", "SLURM_NODEID=0", "SLURM_PROCID=1"), Env{
			Rank: 1, World: 2, LocalRank: 1, LocalWorld: 2, NodeRank: 0, NumNodes: 1,
			MasterAddr: "127.0.0.1", MasterPort: DefaultPort, RunID: "4242", Source: "slurm"}},
		{"old-style variables only", []string{"SLURM_PROCID=3", "SLURM_STEPID=0", "SLURM_NTASKS=4",
			"SLURM_LOCALID=1", "SLURM_NODEID=1", "SLURM_NNODES=2", "SLURM_TASKS_PER_NODE=2(x2)",
			"SLURM_NODELIST=a[1-2]b", "SLURM_JOBID=9"}, Env{
			Rank: 3, World: 4, LocalRank: 1, LocalWorld: 2, NodeRank: 1, NumNodes: 2,
			MasterAddr: "a1b", MasterPort: DefaultPort, RunID: "9", Source: "slurm"}},
		{"user-exported MASTER_ADDR wins over the nodelist", with(srun, "MASTER_ADDR=login2", "MASTER_PORT=29500"), Env{
			Rank: 5, World: 8, LocalRank: 1, LocalWorld: 4, NodeRank: 1, NumNodes: 2,
			MasterAddr: "login2", MasterPort: 29501, RunID: "4242", Source: "slurm"}},
		{"batch step id", with(srun, "SLURM_STEP_ID=4294967291", "SLURM_STEPID=4294967291"), Env{
			Rank: 0, World: 1, LocalRank: 0, LocalWorld: 1, NodeRank: 0, NumNodes: 1,
			MasterAddr: "127.0.0.1", MasterPort: DefaultPort, Source: "single"}},
		{"extern step id", with(srun, "SLURM_STEP_ID=4294967292", "SLURM_STEPID="), Env{
			Rank: 0, World: 1, LocalRank: 0, LocalWorld: 1, NodeRank: 0, NumNodes: 1,
			MasterAddr: "127.0.0.1", MasterPort: DefaultPort, Source: "single"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Detect(tt.env)
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
}

func TestDetectKubernetesVariants(t *testing.T) {
	js := readEnv(t, "jobset-workers-1-1.env")
	tests := []struct {
		name string
		env  []string
		want Env
	}{
		{"jobset one pod per job, older variables", []string{"JOBSET_NAME=js", "REPLICATED_JOB_NAME=rj",
			"JOB_INDEX=2", "REPLICATED_JOB_REPLICAS=3", "JOB_COMPLETION_INDEX=0"}, Env{
			Rank: 2, World: 3, LocalRank: 0, LocalWorld: 1, NodeRank: 2, NumNodes: 3,
			MasterAddr: "js-rj-0-0.js", MasterPort: DefaultPort, RunID: "js", Source: "jobset"}},
		{"jobset several replicatedJobs: global index, master from TRAINWIRE", with(js,
			"GLOBAL_REPLICAS=3", "JOB_GLOBAL_INDEX=2", "TRAINWIRE_WORLD=12", "TRAINWIRE_MASTER_ADDR=train-driver-0-0.train"), Env{
			Rank: 9, World: 12, LocalRank: 0, LocalWorld: 1, NodeRank: 9, NumNodes: 12,
			MasterAddr: "train-driver-0-0.train", MasterPort: DefaultPort, RunID: "train", Source: "jobset"}},
		{"indexed job of one", []string{"JOB_COMPLETION_INDEX=0", "TRAINWIRE_WORLD=1", "HOSTNAME=solo-0"}, Env{
			Rank: 0, World: 1, LocalRank: 0, LocalWorld: 1, NodeRank: 0, NumNodes: 1,
			MasterAddr: "127.0.0.1", MasterPort: DefaultPort, RunID: "solo", Source: "k8s-job"}},
		{"pytorchjob master pod", with(readEnv(t, "kubeflow-pytorchjob-worker1.env"), "RANK=0", "HOSTNAME=mnist-master-0"), Env{
			Rank: 0, World: 3, LocalRank: 0, LocalWorld: 1, NodeRank: 0, NumNodes: 3,
			MasterAddr: "mnist-master-0", MasterPort: 23457, RunID: "mnist", Source: "kubeflow"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Detect(tt.env)
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
}

func TestDetectErrors(t *testing.T) {
	torch := readEnv(t, "torchrun-2.x-c10d-rank6.env")
	ompi := readEnv(t, "openmpi-4.1.4-rank1.env")
	srun := readEnv(t, "slurm-srun-rank5.env")
	pytorchjob := readEnv(t, "kubeflow-pytorchjob-worker1.env")
	js := readEnv(t, "jobset-workers-1-1.env")
	tests := []struct {
		name    string
		env     []string
		is      error
		mention []string // substrings the message must contain
	}{
		{"rank not an integer", with(torch, "RANK=six"), ErrInvalid, []string{`RANK="six"`, "not an integer"}},
		{"negative rank", with(ompi, "OMPI_COMM_WORLD_RANK=-1"), ErrInvalid, []string{"OMPI_COMM_WORLD_RANK=-1", "negative"}},
		{"world past MaxWorld", with(torch, "WORLD_SIZE=99999999"), ErrInvalid, []string{"WORLD_SIZE=99999999"}},
		{"rank >= world", with(torch, "RANK=8"), ErrInconsistent, []string{"RANK=8", "WORLD_SIZE=8"}},
		{"world 0", with(torch, "WORLD_SIZE=0", "RANK=0", "LOCAL_WORLD_SIZE=0", "LOCAL_RANK=0"), ErrInconsistent, []string{"WORLD_SIZE=0"}},
		{"local rank >= local world", with(ompi, "OMPI_COMM_WORLD_LOCAL_RANK=2"), ErrInconsistent,
			[]string{"OMPI_COMM_WORLD_LOCAL_RANK=2", "OMPI_COMM_WORLD_LOCAL_SIZE=2"}},
		{"local world > world", with(torch, "LOCAL_WORLD_SIZE=16"), ErrInconsistent, []string{"LOCAL_WORLD_SIZE=16", "WORLD_SIZE=8"}},
		{"group rank >= group world", with(torch, "GROUP_RANK=2"), ErrInconsistent, []string{"GROUP_RANK=2", "GROUP_WORLD_SIZE=2"}},
		{"torchrun master port 65535", with(torch, "MASTER_PORT=65535"), ErrInvalid, []string{"MASTER_PORT=65535"}},
		{"bad MASTER_PORT", with(torch, "MASTER_PORT=http"), ErrInvalid, []string{`MASTER_PORT="http"`}},
		{"bad TRAINWIRE_MASTER_PORT", with(torch, "TRAINWIRE_MASTER_PORT=0"), ErrInvalid, []string{`TRAINWIRE_MASTER_PORT="0"`}},
		{"bad TRAINWIRE_LOCAL_RANK", with(torch, "TRAINWIRE_LOCAL_RANK=1.5"), ErrInvalid, []string{`TRAINWIRE_LOCAL_RANK="1.5"`}},
		{"TRAINWIRE_RANK alone out of range", []string{"TRAINWIRE_RANK=1"}, ErrInconsistent, []string{"TRAINWIRE_RANK=1", "world 1"}},
		{"TRAINWIRE several nodes without local ranks", []string{"TRAINWIRE_RANK=1", "TRAINWIRE_WORLD=4", "TRAINWIRE_NUM_NODES=2"},
			ErrIncomplete, []string{"local rank", "TRAINWIRE_LOCAL_RANK"}},
		{"TRAINWIRE several nodes without master", []string{"TRAINWIRE_RANK=1", "TRAINWIRE_WORLD=4", "TRAINWIRE_NUM_NODES=2",
			"TRAINWIRE_LOCAL_RANK=1", "TRAINWIRE_LOCAL_WORLD=2"}, ErrNoMaster, []string{"TRAINWIRE_MASTER_ADDR"}},
		{"openmpi incomplete", []string{"OMPI_COMM_WORLD_RANK=0", "OMPI_COMM_WORLD_SIZE=2"}, ErrIncomplete,
			[]string{"OMPI_COMM_WORLD_LOCAL_RANK"}},
		{"openmpi two nodes without master", []string{"OMPI_COMM_WORLD_RANK=0", "OMPI_COMM_WORLD_SIZE=8",
			"OMPI_COMM_WORLD_LOCAL_RANK=0", "OMPI_COMM_WORLD_LOCAL_SIZE=4"}, ErrNoMaster,
			[]string{"TRAINWIRE_MASTER_ADDR", "mpirun -x"}},
		{"pmi incomplete", []string{"PMI_RANK=0"}, ErrIncomplete, []string{"PMI_SIZE"}},
		{"pmi half the local variables", []string{"PMI_RANK=0", "PMI_SIZE=2", "MPI_LOCALRANKID=0"}, ErrIncomplete,
			[]string{"MPI_LOCALNRANKS"}},
		{"pmi several nodes without local ranks", []string{"PMI_RANK=0", "PMI_SIZE=2"}, ErrIncomplete,
			[]string{"local rank", "TRAINWIRE_LOCAL_RANK"}},
		{"pmix without world", []string{"PMIX_RANK=1", "PMIX_NAMESPACE=ns"}, ErrIncomplete, []string{"TRAINWIRE_WORLD"}},
		{"pmix without local ranks", []string{"PMIX_RANK=1", "TRAINWIRE_WORLD=4"}, ErrIncomplete, []string{"TRAINWIRE_LOCAL_RANK"}},
		{"slurm bad step id", with(srun, "SLURM_STEP_ID=batch"), ErrInvalid, []string{`SLURM_STEP_ID="batch"`}},
		{"slurm tasks per node mismatch world", with(srun, "SLURM_STEP_NUM_TASKS=9"), ErrInconsistent,
			[]string{"SLURM_STEP_TASKS_PER_NODE=4(x2)", "SLURM_STEP_NUM_TASKS=9"}},
		{"slurm tasks per node mismatch nodes", with(srun, "SLURM_STEP_NUM_NODES=3"), ErrInconsistent,
			[]string{"SLURM_STEP_TASKS_PER_NODE=4(x2)", "SLURM_STEP_NUM_NODES=3"}},
		{"slurm node id past the list", with(srun, "SLURM_NODEID=2"), ErrInconsistent, []string{"SLURM_NODEID=2"}},
		{"slurm malformed tasks per node", with(srun, "SLURM_STEP_TASKS_PER_NODE=4(2)"), ErrInvalid,
			[]string{"SLURM_STEP_TASKS_PER_NODE", "byte 2"}},
		{"slurm malformed nodelist", with(srun, "SLURM_STEP_NODELIST=node[01-02"), ErrInvalid,
			[]string{"SLURM_STEP_NODELIST", "unclosed"}},
		{"slurm missing local id", with(srun, "SLURM_LOCALID="), ErrIncomplete, []string{"SLURM_LOCALID"}},
		{"slurm local id >= tasks on node", with(srun, "SLURM_LOCALID=4"), ErrInconsistent, []string{"SLURM_LOCALID=4"}},
		{"kubeflow several processes per pod", with(pytorchjob, "PET_NPROC_PER_NODE=4"), ErrIncomplete,
			[]string{"PET_NPROC_PER_NODE=4", "torchrun --no-python"}},
		{"pod with a partial torchrun set is not kubeflow", []string{"KUBERNETES_SERVICE_HOST=10.96.0.1", "RANK=2",
			"WORLD_SIZE=3", "MASTER_ADDR=m", "MASTER_PORT=1", "LOCAL_RANK=0"}, ErrIncomplete,
			[]string{"RANK=2", "torchrun"}},
		{"kubeflow elastic range", []string{"PET_NNODES=1:4", "PET_NODE_RANK=0"}, ErrIncomplete, []string{"PET_NNODES=1:4"}},
		{"indexed job without world", []string{"JOB_COMPLETION_INDEX=3", "HOSTNAME=allreduce-3"}, ErrIncomplete,
			[]string{"TRAINWIRE_WORLD", "completions"}},
		{"indexed job without master", []string{"JOB_COMPLETION_INDEX=3", "HOSTNAME=allreduce-3", "TRAINWIRE_WORLD=4"},
			ErrNoMaster, []string{"allreduce-0."}},
		{"indexed job index >= world", []string{"JOB_COMPLETION_INDEX=4", "TRAINWIRE_WORLD=4"}, ErrInconsistent,
			[]string{"JOB_COMPLETION_INDEX=4", "TRAINWIRE_WORLD=4"}},
		{"jobset without indices", []string{"JOBSET_NAME=js", "JOB_COMPLETION_INDEX=0"}, ErrIncomplete,
			[]string{"JOBSET_NAME=js", "JOB_GLOBAL_INDEX"}},
		{"jobset several pods per job without world", with(js, "TRAINWIRE_WORLD="), ErrIncomplete,
			[]string{"JOB_COMPLETION_INDEX=1", "TRAINWIRE_WORLD"}},
		{"jobset world not a multiple", with(js, "TRAINWIRE_WORLD=9"), ErrInconsistent,
			[]string{"TRAINWIRE_WORLD=9", "GLOBAL_REPLICAS=2"}},
		{"jobset pod index past pods per job", with(js, "TRAINWIRE_WORLD=2"), ErrInconsistent,
			[]string{"JOB_COMPLETION_INDEX=1"}},
		{"jobset job index past jobs", with(js, "JOB_GLOBAL_INDEX=2"), ErrInconsistent,
			[]string{"JOB_GLOBAL_INDEX=2", "GLOBAL_REPLICAS=2"}},
		{"jobset several replicatedJobs without master", with(js, "GLOBAL_REPLICAS=3", "TRAINWIRE_WORLD=12"), ErrNoMaster,
			[]string{"jobset.sigs.k8s.io/coordinator"}},
		{"incomplete torchrun set", []string{"RANK=1", "WORLD_SIZE=2", "LOCAL_RANK=1"}, ErrIncomplete,
			[]string{"RANK=1", "TRAINWIRE_RANK"}},
		{"torch env:// convention outside a pod", []string{"RANK=1", "WORLD_SIZE=2", "MASTER_ADDR=h", "MASTER_PORT=1"},
			ErrIncomplete, []string{"RANK=1"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Detect(tt.env)
			require.Error(t, err, "got %+v", got)
			assert.ErrorIs(t, err, tt.is)
			assert.True(t, strings.HasPrefix(err.Error(), "launch: "), err.Error())
			for _, m := range tt.mention {
				assert.Contains(t, err.Error(), m)
			}
			assert.Equal(t, Env{}, got)
		})
	}
}

func TestEnvMasterAndValidate(t *testing.T) {
	e := Env{World: 2, Rank: 1, LocalWorld: 2, LocalRank: 1, NodeRank: 0, NumNodes: 1, MasterAddr: "::1", MasterPort: 9}
	assert.Equal(t, "[::1]:9", e.Master())
	assert.NoError(t, e.Validate())
	for name, bad := range map[string]func(*Env){
		"rank":      func(e *Env) { e.Rank = 2 },
		"world":     func(e *Env) { e.World = 0 },
		"local":     func(e *Env) { e.LocalRank = 2 },
		"lworld":    func(e *Env) { e.LocalWorld = 3 },
		"nodes":     func(e *Env) { e.NumNodes = 3 },
		"node rank": func(e *Env) { e.NodeRank = 1 },
		"addr":      func(e *Env) { e.MasterAddr = "" },
		"port":      func(e *Env) { e.MasterPort = 0 },
	} {
		b := e
		bad(&b)
		assert.ErrorIs(t, b.Validate(), ErrInconsistent, name)
	}
	e.NodeRank, e.NumNodes = -1, -1
	assert.NoError(t, e.Validate())
}
