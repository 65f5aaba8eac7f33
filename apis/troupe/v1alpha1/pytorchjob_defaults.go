package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
)

// SetDefaults fills a PyTorchJob's defaults, kubeflow's where kubeflow has one: one pod per
// replica type restarting OnFailure, the clean-pod policy None, the elastic bounds from each other or the workers' count, nprocPerNode
// auto; then troupe's run and scheduling policy defaults and the pods' retries (6, a batch
// Job's). It is idempotent.
func (j *PyTorchJob) SetDefaults(o OperatorDefaults) {
	s := &j.Spec
	for _, r := range []*ReplicaSpec{s.PyTorchReplicaSpecs.Master, s.PyTorchReplicaSpecs.Worker} {
		if r == nil {
			continue
		}
		if r.Replicas == nil {
			r.Replicas = ptr.To[int32](1)
		}
		if r.RestartPolicy == "" {
			r.RestartPolicy = ReplicaRestartOnFailure
		}
		// kubeflow writes its pytorchjob-port into the container here; troupe leaves the
		// user's containers as written (a default inside a list would replace the list, and
		// with it the manager of every field in it) and the torch backend gives the pods the
		// port (PyTorchPort).
	}
	if e := s.ElasticPolicy; e != nil {
		switch {
		case e.MinReplicas == nil && e.MaxReplicas != nil:
			e.MinReplicas = ptr.To(*e.MaxReplicas)
		case e.MaxReplicas == nil && e.MinReplicas != nil:
			e.MaxReplicas = ptr.To(*e.MinReplicas)
		case e.MinReplicas == nil && s.PyTorchReplicaSpecs.Worker != nil:
			e.MinReplicas = ptr.To(*s.PyTorchReplicaSpecs.Worker.Replicas)
			e.MaxReplicas = ptr.To(*s.PyTorchReplicaSpecs.Worker.Replicas)
		}
	}
	if s.NprocPerNode == nil && (s.ElasticPolicy == nil || s.ElasticPolicy.NProcPerNode == nil) {
		s.NprocPerNode = ptr.To(PyTorchDefaultNprocPerNode)
	}
	if s.RunPolicy.CleanPodPolicy == nil && s.RunPolicy.CleanUpWorkers == nil {
		s.RunPolicy.CleanPodPolicy = ptr.To(CleanPodPolicyNone)
	}
	// runPolicy.schedulingPolicy is not copied into spec.schedulingPolicy: the adapter folds it
	// in, so that a later change of it is not shadowed by an earlier copy (as for MPIJob).
	setPolicyDefaults(&s.RunPolicy, &s.SchedulingPolicy, o)
	if s.RunPolicy.BackoffLimit == nil {
		s.RunPolicy.BackoffLimit = ptr.To(DefaultBackoffLimit)
	}
}

// PyTorchPort is the pytorchjob-port of a template's pytorch container, else kubeflow's default
// 23456.
func PyTorchPort(tmpl *corev1.PodTemplateSpec) int32 {
	for _, c := range tmpl.Spec.Containers {
		if c.Name != PyTorchMainContainer {
			continue
		}
		for _, p := range c.Ports {
			if p.Name == PyTorchPortName {
				return p.ContainerPort
			}
		}
	}
	return PyTorchDefaultPort
}
