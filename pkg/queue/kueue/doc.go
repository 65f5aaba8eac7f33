// Package kueue admits troupe's jobs through Kueue (docs/kueue.md). A job labelled
// kueue.x-k8s.io/queue-name is created suspended; this package gives it a Kueue Workload with
// one pod set per part of the job (the master or launcher, each worker set: counts and pod
// templates, so Kueue charges their requests to a ClusterQueue's quota), and follows Kueue's
// verdict: once the Workload is admitted it puts the node labels and tolerations of the assigned
// ResourceFlavors into the job's templates and resumes the job; when Kueue evicts it (a
// preemption), it suspends the job, puts the templates back and hands the quota back; when the
// job ends it marks the Workload Finished. An elastic job that opted in grows through Kueue's
// Workload slices (slices.go, grow.go) without a stop.
//
// It speaks Kueue's Workload API only (sigs.k8s.io/kueue/apis), as an external framework of
// Kueue's: Kueue's own job library (jobframework) would bring Kueue's scheduler cache, metrics
// and feature gates into the operator (and before v0.17 did not build against the
// controller-runtime troupe uses).
package kueue
