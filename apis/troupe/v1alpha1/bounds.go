package v1alpha1

import (
	"encoding/json"

	corev1 "k8s.io/api/core/v1"
)

// Bounds on a job's size. The operator builds objects that list every pod of a job (the
// hostfile, the exec Role's resourceNames, the PodGroup's member count); these bounds keep each
// such object far inside the API server's limits and the operator's memory bounded by what it
// runs, whatever a tenant writes or `kubectl scale` asks for. docs/admission.md gives the
// arithmetic. The CRDs carry the same numbers as markers (literal there: keep them in step).
const (
	// MaxJobBytes bounds a job object as the API server sends it to admission (JSON, the
	// last-applied-configuration annotation of kubectl apply included; webhooks refuse a larger
	// one). The operator keeps every job of its namespaces in memory, and the engine copies its
	// templates into StatefulSets, Jobs and Workloads: without a bound, a few tenants' jobs near
	// etcd's 1.5 MiB limit could make the operator run out of memory for every tenant
	// (docs/security.md). A spec of 256 KiB, applied with kubectl, fits.
	MaxJobBytes = 512 << 10
	// MaxChildTemplateBytes bounds the pod-template bytes a job's children carry altogether: a
	// set that runs to completion (a PyTorchJob's workers) is one batch Job per worker, each with
	// the whole template, so 4,095 workers of a template near MaxJobBytes would write about
	// 2 GiB to etcd (its default quota), cached whole by every operator replica and by
	// kube-controller-manager. Counted as the template's JSON times its copies (replicas for a
	// set that runs to completion, 1 for the master and a StatefulSet). 500 workers of a
	// 100 KiB template fit.
	MaxChildTemplateBytes = 64 << 20
	// MaxPodsPerJob bounds the master plus every worker pod of one job.
	MaxPodsPerJob = 4096
	// MaxWorkerReplicas bounds the worker pods of one job (and so of one set): every pod of the
	// job but the master.
	MaxWorkerReplicas = MaxPodsPerJob - 1
	// MaxSlotsPerPod bounds the MPI processes of one pod; with MaxPodsPerJob, a job's total
	// stays below 2^23 and never overflows an int32.
	MaxSlotsPerPod = 1024
	// MaxMasterTaskPods bounds the master's pods status.tasks lists (one lives at a time; the
	// rest are ended attempts); the worker task lists up to MaxPodsPerJob, so every live worker
	// is listed (the engine finds lost workers by their listed UIDs). Pods beyond are counted in
	// the task's unlisted. With a job of MaxJobBytes and condition messages of
	// ConditionMessageLimit the whole object stays under etcd's 1.5 MiB request limit.
	MaxMasterTaskPods = 64
	// ConditionMessageLimit bounds the message of every condition the operator writes (the
	// CRD allows 32768 bytes; a message quoting a termination message of the kubelet's 4096
	// fits).
	ConditionMessageLimit = 8 << 10
)

// CopiedTemplateBytes is what copies of a pod template weigh, the bound MaxChildTemplateBytes
// is counted in: the template's JSON size, and that times copies. The webhook and the engine
// both count with it.
func CopiedTemplateBytes(tmpl *corev1.PodTemplateSpec, copies int32) (size int, total int64, err error) {
	raw, err := json.Marshal(tmpl)
	if err != nil {
		return 0, 0, err
	}
	return len(raw), int64(len(raw)) * int64(copies), nil
}
