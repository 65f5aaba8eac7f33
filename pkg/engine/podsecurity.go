package engine

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"
)

// The containers troupe adds to a user's pods (the launcher's troupe-wait, the git clones, a
// generated launcher) must pass the Pod Security Standard "restricted" whenever the user's
// template does, since the namespace's admission judges the whole pod. A template may set
// seccomp and runAsNonRoot per container rather than for the pod, so each added container
// says everything restricted asks for itself. It must also pass a ResourceQuota that counts
// limits, so each has requests and limits.

// RestrictedSecurityContext completes sec (a copy; nil is empty) with what the restricted
// standard requires of every container: the runtime's default seccomp profile, no privilege
// escalation and every capability dropped. It leaves the user and runAsNonRoot to the caller,
// who knows whose files the container touches.
func RestrictedSecurityContext(sec *corev1.SecurityContext) *corev1.SecurityContext {
	out := &corev1.SecurityContext{}
	if sec != nil {
		out = sec.DeepCopy()
	}
	if out.SeccompProfile == nil {
		out.SeccompProfile = &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}
	}
	out.AllowPrivilegeEscalation = ptr.To(false)
	out.Capabilities = &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}
	return out
}

// InjectedResources are the requests and limits of a container troupe adds.
func InjectedResources(cpuRequest, memoryRequest, cpuLimit, memoryLimit string) corev1.ResourceRequirements {
	return corev1.ResourceRequirements{
		Requests: corev1.ResourceList{
			corev1.ResourceCPU:    resource.MustParse(cpuRequest),
			corev1.ResourceMemory: resource.MustParse(memoryRequest),
		},
		Limits: corev1.ResourceList{
			corev1.ResourceCPU:    resource.MustParse(cpuLimit),
			corev1.ResourceMemory: resource.MustParse(memoryLimit),
		},
	}
}
