// Package launch works out who this process is in a distributed job: its
// rank, the world size, its place on its node and where rank 0 listens for
// the rendezvous. It reads the variables of the launcher the user already
// has; trainwire never launches processes itself. docs/launch.md is the
// user's page; this comment is the reference.
//
// # Precedence
//
// From strongest to weakest:
//
//  1. Flags (Flags.Resolve): each flag that is set overrides one field.
//  2. TRAINWIRE_* variables: TRAINWIRE_RANK, TRAINWIRE_WORLD,
//     TRAINWIRE_LOCAL_RANK, TRAINWIRE_LOCAL_WORLD, TRAINWIRE_NODE_RANK,
//     TRAINWIRE_NUM_NODES, TRAINWIRE_MASTER_ADDR, TRAINWIRE_MASTER_PORT,
//     TRAINWIRE_RUN_ID. With both TRAINWIRE_RANK and TRAINWIRE_WORLD set
//     they are the whole source and no launcher variable is read; otherwise
//     each one set overrides one field of the launcher's answer (the usual
//     case: mpirun -x TRAINWIRE_MASTER_ADDR=host0).
//  3. The first launcher, in this order, whose variables are present.
//  4. Otherwise a single process: rank 0 of 1.
//
// Env.Source names where the rank came from: "flags" when any flag is set,
// "trainwire" when TRAINWIRE_RANK is, else the launcher, else "single".
//
// # Launchers
//
// Each launcher applies only when its own variables are present, so that
// nested launchers resolve to the innermost one: torchrun or mpirun started
// inside a Slurm allocation is torchrun or OpenMPI, not Slurm.
//
//   - torchrun ("torchrun"): applies when RANK, WORLD_SIZE, LOCAL_RANK,
//     LOCAL_WORLD_SIZE and GROUP_RANK are all set (Lightning's rule).
//     Node: GROUP_RANK of GROUP_WORLD_SIZE; master MASTER_ADDR; run id
//     TORCHELASTIC_RUN_ID. Start a Go tool with `torchrun --no-python`.
//   - Kubeflow ("kubeflow"): a PyTorchJob pod (KUBERNETES_SERVICE_HOST or
//     KUBERNETES_PORT set; RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT set;
//     LOCAL_RANK, GROUP_RANK, LOCAL_WORLD_SIZE unset: Lightning's rule), or
//     Trainer v2's PET_NNODES and PET_NODE_RANK, with PET_MASTER_ADDR and
//     PET_MASTER_PORT. One process per pod: PET_NPROC_PER_NODE > 1 is an
//     error (use torchrun --no-python, which reads PET_*).
//   - OpenMPI ("openmpi"): OMPI_COMM_WORLD_RANK, OMPI_COMM_WORLD_SIZE,
//     OMPI_COMM_WORLD_LOCAL_RANK, OMPI_COMM_WORLD_LOCAL_SIZE; run id
//     OMPI_MCA_ess_base_jobid. OMPI_COMM_WORLD_NODE_RANK is not the node's
//     index (it counts processes on the node across jobs), so NodeRank and
//     NumNodes are -1 when the ranks span several nodes.
//   - PMI ("pmi"): PMI_RANK and PMI_SIZE (MPICH and Intel MPI Hydra,
//     srun --mpi=pmi2); local ranks from MPI_LOCALRANKID and
//     MPI_LOCALNRANKS, else from the Slurm step; run id PMI_JOBID.
//   - PMIx ("pmix"): PMIX_RANK (prterun, srun --mpi=pmix). PMIx exports
//     no job size and no local rank in the environment (they are behind
//     the PMIx client library), so they come from the Slurm step when there
//     is one, else from TRAINWIRE_WORLD / TRAINWIRE_LOCAL_* or flags.
//     OpenMPI sets PMIX_RANK as well, but is matched first.
//   - Slurm ("slurm"): an srun task: SLURM_PROCID and SLURM_STEP_ID (or
//     SLURM_STEPID) below Slurm's pseudo-step ids. World
//     SLURM_STEP_NUM_TASKS (else SLURM_NTASKS), local rank SLURM_LOCALID,
//     node SLURM_NODEID of SLURM_STEP_NUM_NODES (else SLURM_NNODES), local
//     world this node's entry of SLURM_STEP_TASKS_PER_NODE (else
//     SLURM_TASKS_PER_NODE, e.g. "4(x2),8"), master the first host of
//     SLURM_STEP_NODELIST (else SLURM_JOB_NODELIST), run id SLURM_JOB_ID.
//     An sbatch script has SLURM_PROCID=0 but no step id: a tool started
//     there directly is a single process.
//   - JobSet ("jobset"): JOBSET_NAME, with JOB_GLOBAL_INDEX and
//     GLOBAL_REPLICAS (or JOB_INDEX and REPLICATED_JOB_REPLICAS with one
//     replicatedJob) mapped from the pod's annotations, and
//     JOB_COMPLETION_INDEX. One pod per Job unless TRAINWIRE_WORLD says
//     otherwise; master <jobset>-<replicatedJob>-0-0.<jobset> when there is
//     one replicatedJob (REPLICATED_JOB_NAME) and the default subdomain.
//   - Kubernetes Indexed Job ("k8s-job"): JOB_COMPLETION_INDEX is the rank;
//     the world is TRAINWIRE_WORLD (the Job's completions, which Kubernetes
//     does not export) and, with more than one pod, the master is
//     TRAINWIRE_MASTER_ADDR (<job>-0.<subdomain>).
//
// The MPI launchers and Slurm also honour MASTER_ADDR and MASTER_PORT when
// the user exports them (torch's env:// convention).
//
// # Rendezvous address and port
//
// A launcher's MASTER_PORT (torchrun, Kubeflow, or exported by the user)
// belongs to torch's TCPStore, so our port is MASTER_PORT+1. With no port
// anywhere it is DefaultPort (29511). TRAINWIRE_MASTER_PORT and --master
// set it exactly. Without a master address: when all ranks are on one node
// (local world == world) it is 127.0.0.1; else the first host of the Slurm
// nodelist; else Detect fails with ErrNoMaster, asking for
// TRAINWIRE_MASTER_ADDR.
//
// # Errors
//
// Values that are not integers, negative, larger than MaxWorld, or that
// contradict each other (rank >= world, local rank >= local world, …) are
// errors that name the variable or flag and its value, wrapping ErrInvalid,
// ErrInconsistent, ErrIncomplete or ErrNoMaster.
package launch
