package launch

import (
	"fmt"
	"strings"
)

// detectJobSet reads a JobSet pod. JobSet puts its indices in pod
// annotations; the pod spec maps them to variables with the downward API
// (docs/launch.md has the YAML): JOBSET_NAME, REPLICATED_JOB_NAME,
// JOB_GLOBAL_INDEX and GLOBAL_REPLICAS (or, with one replicatedJob,
// JOB_INDEX and REPLICATED_JOB_REPLICAS); Kubernetes sets
// JOB_COMPLETION_INDEX. It applies when JOBSET_NAME is set. Each Job is
// taken to have TRAINWIRE_WORLD / GLOBAL_REPLICAS pods (1 when
// TRAINWIRE_WORLD is unset); rank = job index × pods per job + completion
// index.
func detectJobSet(e envMap) (*partial, error) {
	if !e.has("JOBSET_NAME") {
		return nil, nil
	}
	idxVar, countVar := "JOB_GLOBAL_INDEX", "GLOBAL_REPLICAS"
	if !e.hasAll(idxVar, countVar) {
		idxVar, countVar = "JOB_INDEX", "REPLICATED_JOB_REPLICAS"
	}
	if !e.hasAll(idxVar, countVar, "JOB_COMPLETION_INDEX") {
		return nil, fmt.Errorf("launch: jobset: JOBSET_NAME=%s is set but not JOB_COMPLETION_INDEX with JOB_GLOBAL_INDEX and "+
			"GLOBAL_REPLICAS (or JOB_INDEX and REPLICATED_JOB_REPLICAS): map them from the pod's "+
			"jobset.sigs.k8s.io/* annotations (docs/launch.md): %w", e["JOBSET_NAME"], ErrIncomplete)
	}
	var pod, job, jobs ival
	if err := e.readInts(&pod, "JOB_COMPLETION_INDEX", &job, idxVar, &jobs, countVar); err != nil {
		return nil, err
	}
	if jobs.v < 1 || job.v >= jobs.v {
		return nil, fmt.Errorf("launch: jobset: %s must be less than %s: %w", job.src, jobs.src, ErrInconsistent)
	}
	perJob, err := jobsetPodsPerJob(e, jobs, pod)
	if err != nil {
		return nil, err
	}
	js := e["JOBSET_NAME"]
	p := &partial{source: "jobset", perPod: true, runID: js,
		masterHint: " (e.g. from the pod label jobset.sigs.k8s.io/coordinator, or <jobset>-<first replicatedJob>-0-0.<subdomain>)"}
	rank := job.v*perJob + pod.v
	p.rank = known(rank, fmt.Sprintf("rank %d (%s × %d pods per job + %s)", rank, job.src, perJob, pod.src))
	p.world = known(jobs.v*perJob, fmt.Sprintf("world %d (%s × %d pods per job)", jobs.v*perJob, jobs.src, perJob))
	p.addr = jobsetMaster(e, js)
	return p, nil
}

// jobsetPodsPerJob returns the pods in each Job: TRAINWIRE_WORLD divided by
// the number of Jobs, or 1 when TRAINWIRE_WORLD is unset.
func jobsetPodsPerJob(e envMap, jobs, pod ival) (int, error) {
	v, ok := e.get("TRAINWIRE_WORLD")
	if !ok {
		if pod.v > 0 {
			return 0, fmt.Errorf("launch: jobset: %s: the Jobs have several pods each; set TRAINWIRE_WORLD "+
				"to the total number of pods: %w", pod.src, ErrIncomplete)
		}
		return 1, nil
	}
	w, err := parseCount("TRAINWIRE_WORLD", v)
	if err != nil {
		return 0, err
	}
	if w.v == 0 || w.v%jobs.v != 0 {
		return 0, fmt.Errorf("launch: jobset: %s is not a multiple of %s: %w", w.src, jobs.src, ErrInconsistent)
	}
	perJob := w.v / jobs.v
	if pod.v >= perJob {
		return 0, fmt.Errorf("launch: jobset: %s must be less than the %d pods per job (%s / %s): %w",
			pod.src, perJob, w.src, jobs.src, ErrInconsistent)
	}
	return perJob, nil
}

// jobsetMaster derives the DNS name of the first pod of the first Job,
// <jobset>-<replicatedJob>-0-0.<jobset>, when the JobSet has one
// replicatedJob (so that ours is the first) and the default subdomain.
func jobsetMaster(e envMap, js string) sval {
	rjob, ok := e.get("REPLICATED_JOB_NAME")
	if g, hasGlobal := e.get("GLOBAL_REPLICAS"); hasGlobal && g != e["REPLICATED_JOB_REPLICAS"] {
		ok = false // several replicatedJobs: the first may not be ours
	}
	if !ok {
		return sval{}
	}
	host := fmt.Sprintf("%s-%s-0-0.%s", js, rjob, js)
	return sval{v: host, ok: true, src: host + " (from JOBSET_NAME and REPLICATED_JOB_NAME)"}
}

// detectIndexedJob reads a pod of a Kubernetes Indexed Job: the rank is
// JOB_COMPLETION_INDEX. Kubernetes does not export the Job's completions,
// so the world size is TRAINWIRE_WORLD (or --world), and the master's DNS
// name (<job>-0.<subdomain>) depends on a headless Service of the user's,
// so it is TRAINWIRE_MASTER_ADDR (or --master). The pod's hostname is
// <job>-<index>; the job name becomes the run id.
func detectIndexedJob(e envMap) (*partial, error) {
	if !e.has("JOB_COMPLETION_INDEX") {
		return nil, nil
	}
	p := &partial{source: "k8s-job", perPod: true,
		worldHint: ": an Indexed Job does not export its completions; set TRAINWIRE_WORLD to .spec.completions"}
	if err := e.readInts(&p.rank, "JOB_COMPLETION_INDEX", &p.world, "TRAINWIRE_WORLD"); err != nil {
		return nil, err
	}
	job, ok := strings.CutSuffix(e["HOSTNAME"], "-"+e["JOB_COMPLETION_INDEX"])
	if !ok || job == "" {
		job = "<job>"
	} else {
		p.runID = job
	}
	p.masterHint = fmt.Sprintf(" (e.g. TRAINWIRE_MASTER_ADDR=%s-0.<the pods' subdomain>)", job)
	return p, nil
}
