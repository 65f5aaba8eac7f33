package testing

import (
	"fmt"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/version"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
)

// KubeVersion is the Kubernetes version of the API server of cfg: a suite runs on the current
// one (make test-integration) and on the oldest troupe supports (make test-integration-oldest),
// and plays the controllers of that version.
func KubeVersion(cfg *rest.Config) (*version.Version, error) {
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return nil, err
	}
	info, err := dc.ServerVersion()
	if err != nil {
		return nil, err
	}
	v, err := version.ParseGeneric(info.GitVersion)
	if err != nil {
		return nil, fmt.Errorf("the API server's version %q: %w", info.GitVersion, err)
	}
	return v, nil
}

// JobSucceeded returns the conditions the Job controller of a server of version kube writes on
// a Job that succeeded, each with the times, reason and message of c. From 1.31 it writes
// SuccessCriteriaMet first, then Complete; a 1.30 API server refuses SuccessCriteriaMet on a Job
// without a successPolicy (its controller writes Complete alone).
func JobSucceeded(kube *version.Version, c batchv1.JobCondition) []batchv1.JobCondition {
	c.Status = corev1.ConditionTrue
	complete := c
	complete.Type = batchv1.JobComplete
	if kube.LessThan(version.MajorMinor(1, 31)) {
		return []batchv1.JobCondition{complete}
	}
	interim := c
	interim.Type = batchv1.JobSuccessCriteriaMet
	return []batchv1.JobCondition{interim, complete}
}
