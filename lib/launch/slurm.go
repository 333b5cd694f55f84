package launch

import (
	"fmt"
	"strconv"
)

// slurmPseudoStep is the lowest of Slurm's pseudo step ids (interactive,
// batch script, extern, pending: 0xfffffffa..0xfffffffd). Processes in
// those steps are not srun tasks, whatever SLURM_PROCID says.
const slurmPseudoStep = 0xfffffffa

// isSrunTask reports whether the environment is that of a task started by
// srun: SLURM_PROCID and a real step id are set. Inside an sbatch script
// SLURM_PROCID is 0 and SLURM_NTASKS the job's task count, but no step id
// is set (srun sets SLURM_STEP_ID for every step), so a tool started
// directly from the batch script runs alone instead of waiting for peers
// that never start.
func isSrunTask(e envMap) (bool, error) {
	name := e.firstSet("SLURM_STEP_ID", "SLURM_STEPID")
	if name == "" || !e.has("SLURM_PROCID") {
		return false, nil
	}
	id, err := strconv.ParseUint(e[name], 10, 32)
	if err != nil {
		return false, fmt.Errorf("launch: slurm: %s=%q is not a step id: %w", name, e[name], ErrInvalid)
	}
	return id < slurmPseudoStep, nil
}

// detectSlurm reads an srun task's environment. The step's own variables
// (SLURM_STEP_NUM_TASKS, SLURM_STEP_NUM_NODES, SLURM_STEP_TASKS_PER_NODE,
// SLURM_STEP_NODELIST) win over the job's, which srun --preserve-env (-E)
// leaves at the allocation's values.
func detectSlurm(e envMap) (*partial, error) {
	if ok, err := isSrunTask(e); !ok || err != nil {
		return nil, err
	}
	worldVar := e.firstSet("SLURM_STEP_NUM_TASKS", "SLURM_NTASKS", "SLURM_NPROCS")
	if worldVar == "" {
		return nil, fmt.Errorf("launch: slurm: SLURM_STEP_NUM_TASKS is not set: %w", ErrIncomplete)
	}
	if err := e.require("slurm", "SLURM_LOCALID", "SLURM_NODEID"); err != nil {
		return nil, err
	}
	p := &partial{source: "slurm", masterHint: " (e.g. srun --export=ALL,TRAINWIRE_MASTER_ADDR=<host>)"}
	err := e.readInts(&p.rank, "SLURM_PROCID", &p.world, worldVar,
		&p.local, "SLURM_LOCALID", &p.node, "SLURM_NODEID")
	if err == nil {
		err = e.readInt(&p.nodes, "SLURM_STEP_NUM_NODES", "SLURM_NNODES", "SLURM_JOB_NUM_NODES")
	}
	if err == nil {
		err = p.slurmLocalWorld(e)
	}
	if err != nil {
		return nil, err
	}
	p.readSlurmNodelist(e, "SLURM_STEP_NODELIST", "SLURM_JOB_NODELIST", "SLURM_NODELIST")
	p.runID = e[e.firstSet("SLURM_JOB_ID", "SLURM_JOBID")]
	return p, p.readMasterEnv(e, "MASTER_ADDR", "MASTER_PORT")
}

// slurmLocalWorld sets the local world size to this node's entry of the
// tasks-per-node list, after checking the list against the node count and
// the world size.
func (p *partial) slurmLocalWorld(e envMap) error {
	name := e.firstSet("SLURM_STEP_TASKS_PER_NODE", "SLURM_TASKS_PER_NODE")
	if name == "" {
		return nil
	}
	src := name + "=" + e[name]
	counts, err := expandTasksPerNode(e[name], MaxNodelistHosts)
	if err != nil {
		return fmt.Errorf("launch: slurm: %s: %w: %w", name, err, ErrInvalid)
	}
	if p.nodes.ok && p.nodes.v != len(counts) {
		return fmt.Errorf("launch: slurm: %s lists %d nodes but %s: %w", src, len(counts), p.nodes.src, ErrInconsistent)
	}
	p.nodes = known(len(counts), fmt.Sprintf("%d nodes (%s)", len(counts), src))
	if p.node.v >= len(counts) {
		return fmt.Errorf("launch: slurm: %s must be less than the %d nodes of %s: %w", p.node.src, len(counts), src, ErrInconsistent)
	}
	sum := 0
	for _, c := range counts {
		sum += c
	}
	if sum != p.world.v {
		return fmt.Errorf("launch: slurm: %s adds up to %d tasks but %s: %w", src, sum, p.world.src, ErrInconsistent)
	}
	n := counts[p.node.v]
	p.lworld = known(n, fmt.Sprintf("local world %d (%s, node %d)", n, src, p.node.v))
	return nil
}
