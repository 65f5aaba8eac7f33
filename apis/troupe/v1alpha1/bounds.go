package v1alpha1

// Bounds on a job's size. The operator builds objects that list every pod of a job (the
// hostfile, the exec Role's resourceNames, the PodGroup's member count); these bounds keep each
// such object far inside the API server's limits and the operator's memory bounded by what it
// runs, whatever a tenant writes or `kubectl scale` asks for. docs/admission.md gives the
// arithmetic. The CRDs carry the same numbers as markers (literal there: keep them in step).
const (
	// MaxPodsPerJob bounds the master plus every worker pod of one job.
	MaxPodsPerJob = 4096
	// MaxWorkerReplicas bounds the worker pods of one job (and so of one set): every pod of the
	// job but the master.
	MaxWorkerReplicas = MaxPodsPerJob - 1
	// MaxSlotsPerPod bounds the MPI processes of one pod; with MaxPodsPerJob, a job's total
	// stays below 2^23 and never overflows an int32.
	MaxSlotsPerPod = 1024
)
