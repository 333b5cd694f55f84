package launch

import (
	"fmt"
	"strconv"
	"strings"
)

// detector returns what one launcher says, or nil when its variables are
// absent. An error means its variables are present but wrong.
type detector func(envMap) (*partial, error)

// detectors in priority order. JobSet comes before the plain Indexed Job
// because JobSet pods are Indexed Job pods too.
var detectors = []detector{
	detectTorchrun,
	detectKubeflow,
	detectOpenMPI,
	detectPMI,
	detectPMIx,
	detectSlurm,
	detectJobSet,
	detectIndexedJob,
}

// detectLauncher returns the first launcher's view, else a single process.
func detectLauncher(e envMap) (*partial, error) {
	for _, d := range detectors {
		p, err := d(e)
		if err != nil || p != nil {
			return p, err
		}
	}
	if name := e.firstSet("RANK", "WORLD_SIZE", "LOCAL_RANK"); name != "" {
		return nil, fmt.Errorf("launch: %s=%s is set, but not with the other variables of torchrun "+
			"(RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, GROUP_RANK) nor of a Kubeflow PyTorchJob "+
			"(RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT in a pod): set TRAINWIRE_RANK and TRAINWIRE_WORLD, "+
			"or pass --rank and --world: %w", name, e[name], ErrIncomplete)
	}
	return singleBase("single"), nil
}

// readMasterEnv reads the MASTER_ADDR/MASTER_PORT convention of torch's
// env:// initialisation, which users also export under MPI and Slurm.
func (p *partial) readMasterEnv(e envMap, addrVar, portVar string) error {
	if v, ok := e.get(addrVar); ok {
		p.addr = sval{v: v, ok: true, src: addrVar + "=" + v}
	}
	if v, ok := e.get(portVar); ok {
		port, err := parsePort(portVar, v)
		if err != nil {
			return err
		}
		p.port, p.portPlusOne = port, true
	}
	return nil
}

// detectTorchrun reads torchrun (torch.distributed.elastic). It applies
// when RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE and GROUP_RANK are all
// set; Lightning's TorchElasticEnvironment asks for the same.
func detectTorchrun(e envMap) (*partial, error) {
	if !e.hasAll("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "GROUP_RANK") {
		return nil, nil
	}
	p := &partial{source: "torchrun"}
	err := e.readInts(&p.rank, "RANK", &p.world, "WORLD_SIZE",
		&p.local, "LOCAL_RANK", &p.lworld, "LOCAL_WORLD_SIZE",
		&p.node, "GROUP_RANK", &p.nodes, "GROUP_WORLD_SIZE")
	if err != nil {
		return nil, err
	}
	p.runID = e["TORCHELASTIC_RUN_ID"]
	return p, p.readMasterEnv(e, "MASTER_ADDR", "MASTER_PORT")
}

// detectKubeflow reads a Kubeflow PyTorchJob (training-operator v1) or the
// PET_* variables of Kubeflow Trainer v2, both running one process per pod.
func detectKubeflow(e envMap) (*partial, error) {
	inPod := e.has("KUBERNETES_SERVICE_HOST") || e.has("KUBERNETES_PORT")
	torchVars := e.firstSet("LOCAL_RANK", "GROUP_RANK", "LOCAL_WORLD_SIZE") != ""
	switch {
	case inPod && !torchVars && e.hasAll("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"):
		return detectPyTorchJob(e)
	case e.hasAll("PET_NNODES", "PET_NODE_RANK"):
		return detectPET(e)
	}
	return nil, nil
}

// checkOneProcPerPod refuses PET_NPROC_PER_NODE > 1: then a pod holds
// several ranks and only torchrun can tell them apart.
func checkOneProcPerPod(e envMap) error {
	v, ok := e.get("PET_NPROC_PER_NODE")
	if n, err := strconv.Atoi(v); ok && err == nil && n > 1 {
		return fmt.Errorf("launch: kubeflow: PET_NPROC_PER_NODE=%s: the pod runs several ranks; "+
			"start the tool with `torchrun --no-python` (it reads PET_*): %w", v, ErrIncomplete)
	}
	return nil
}

// detectPyTorchJob: RANK and WORLD_SIZE count pods; MASTER_ADDR is
// "<job>-master-0".
func detectPyTorchJob(e envMap) (*partial, error) {
	if err := checkOneProcPerPod(e); err != nil {
		return nil, err
	}
	p := &partial{source: "kubeflow", perPod: true}
	if err := e.readInts(&p.rank, "RANK", &p.world, "WORLD_SIZE"); err != nil {
		return nil, err
	}
	p.runID = strings.TrimSuffix(e["MASTER_ADDR"], "-master-0")
	if p.runID == e["MASTER_ADDR"] {
		p.runID = ""
	}
	return p, p.readMasterEnv(e, "MASTER_ADDR", "MASTER_PORT")
}

// detectPET: PET_NODE_RANK of PET_NNODES pods, master PET_MASTER_ADDR.
func detectPET(e envMap) (*partial, error) {
	if err := checkOneProcPerPod(e); err != nil {
		return nil, err
	}
	if v := e["PET_NNODES"]; strings.Contains(v, ":") {
		return nil, fmt.Errorf("launch: kubeflow: PET_NNODES=%s is an elastic range; start the tool with "+
			"`torchrun --no-python`: %w", v, ErrIncomplete)
	}
	p := &partial{source: "kubeflow", perPod: true}
	if err := e.readInts(&p.rank, "PET_NODE_RANK", &p.world, "PET_NNODES"); err != nil {
		return nil, err
	}
	return p, p.readMasterEnv(e, "PET_MASTER_ADDR", "PET_MASTER_PORT")
}

// mpiHint is the advice for MPI launchers that name no master.
const mpiHint = " (e.g. mpirun -x TRAINWIRE_MASTER_ADDR=<host of rank 0>)"

// readSlurmNodelist remembers the allocation's nodelist (mpirun inside a
// Slurm job) as the fallback master, unless a Slurm step gave one.
func (p *partial) readSlurmNodelist(e envMap, names ...string) {
	if n := e.firstSet(names...); n != "" && p.nodelist == "" {
		p.nodelist, p.nodelistVar = e[n], n
	}
}

// detectOpenMPI reads OpenMPI's mpirun (ORTE in 4.x, PRRTE in 5.x). It
// applies when OMPI_COMM_WORLD_RANK or OMPI_COMM_WORLD_SIZE is set.
// OMPI_COMM_WORLD_NODE_RANK is not read: it is the process's rank among
// all processes on its node, not the node's index.
func detectOpenMPI(e envMap) (*partial, error) {
	if e.firstSet("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE") == "" {
		return nil, nil
	}
	err := e.require("openmpi", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE",
		"OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE")
	if err != nil {
		return nil, err
	}
	p := &partial{source: "openmpi", masterHint: mpiHint}
	err = e.readInts(&p.rank, "OMPI_COMM_WORLD_RANK", &p.world, "OMPI_COMM_WORLD_SIZE",
		&p.local, "OMPI_COMM_WORLD_LOCAL_RANK", &p.lworld, "OMPI_COMM_WORLD_LOCAL_SIZE")
	if err != nil {
		return nil, err
	}
	p.runID = e[e.firstSet("OMPI_MCA_ess_base_jobid", "SLURM_JOB_ID")]
	p.readSlurmNodelist(e, "SLURM_JOB_NODELIST", "SLURM_NODELIST")
	return p, p.readMasterEnv(e, "MASTER_ADDR", "MASTER_PORT")
}

// detectPMI reads a PMI-1/PMI-2 launcher: MPICH's and Intel MPI's Hydra
// (mpiexec), or srun --mpi=pmi2. It applies when PMI_RANK or PMI_SIZE is
// set. Local ranks come from MPI_LOCALRANKID/MPI_LOCALNRANKS (Hydra), else
// from the Slurm step the process runs in.
func detectPMI(e envMap) (*partial, error) {
	if e.firstSet("PMI_RANK", "PMI_SIZE") == "" {
		return nil, nil
	}
	if err := e.require("pmi", "PMI_RANK", "PMI_SIZE"); err != nil {
		return nil, err
	}
	p := &partial{source: "pmi", masterHint: " (e.g. mpiexec -genv TRAINWIRE_MASTER_ADDR <host of rank 0>)"}
	if err := e.readInts(&p.rank, "PMI_RANK", &p.world, "PMI_SIZE"); err != nil {
		return nil, err
	}
	if e.firstSet("MPI_LOCALRANKID", "MPI_LOCALNRANKS") != "" {
		if err := e.require("pmi", "MPI_LOCALRANKID", "MPI_LOCALNRANKS"); err != nil {
			return nil, err
		}
		if err := e.readInts(&p.local, "MPI_LOCALRANKID", &p.lworld, "MPI_LOCALNRANKS"); err != nil {
			return nil, err
		}
	} else if err := p.fromSlurmStep(e, false); err != nil {
		return nil, err
	}
	p.runID = e[e.firstSet("PMI_JOBID", "SLURM_JOB_ID")]
	p.readSlurmNodelist(e, "SLURM_JOB_NODELIST", "SLURM_NODELIST")
	return p, p.readMasterEnv(e, "MASTER_ADDR", "MASTER_PORT")
}

// detectPMIx reads a PMIx launcher that is neither OpenMPI (which sets
// OMPI_COMM_WORLD_* as well) nor PMI: prterun with MPICH, or srun
// --mpi=pmix. It applies when PMIX_RANK is set. PMIx puts only the rank in
// the environment (PMIX_RANK, PMIX_NAMESPACE); the job size and local ranks
// are behind the PMIx client library. They come from the Slurm step when
// there is one, else from TRAINWIRE_WORLD / TRAINWIRE_LOCAL_* or flags.
func detectPMIx(e envMap) (*partial, error) {
	if !e.has("PMIX_RANK") {
		return nil, nil
	}
	p := &partial{
		source:     "pmix",
		masterHint: mpiHint,
		worldHint:  ": PMIx exports no job size in the environment; set TRAINWIRE_WORLD or --world",
	}
	if err := e.readInts(&p.rank, "PMIX_RANK"); err != nil {
		return nil, err
	}
	if err := p.fromSlurmStep(e, true); err != nil {
		return nil, err
	}
	p.runID = e[e.firstSet("PMIX_NAMESPACE", "SLURM_JOB_ID")]
	p.readSlurmNodelist(e, "SLURM_JOB_NODELIST", "SLURM_NODELIST")
	return p, p.readMasterEnv(e, "MASTER_ADDR", "MASTER_PORT")
}

// fromSlurmStep copies the local and node placement (and the world size
// when withWorld) from the srun step this process runs in, if it is one
// and its SLURM_PROCID is our rank.
func (p *partial) fromSlurmStep(e envMap, withWorld bool) error {
	s, err := detectSlurm(e)
	if err != nil || s == nil || s.rank.v != p.rank.v {
		return err
	}
	p.local, p.lworld, p.node, p.nodes = s.local, s.lworld, s.node, s.nodes
	p.nodelist, p.nodelistVar = s.nodelist, s.nodelistVar
	if withWorld {
		p.world = s.world
	}
	return nil
}
