package webhooks

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metavalidation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// podRole says what runs a template's pods, which decides the restart policies they may have.
type podRole int

const (
	// launcherPod is run by a batch Job: it may not restart Always.
	launcherPod podRole = iota
	// workerPod is run by a StatefulSet: it restarts Always.
	workerPod
)

// validateTemplate checks a pod template the way the API server will check the pods made from
// it (what a job needs of them), so that no job is admitted whose pods can never be created.
// mainContainer, when set, must be one of its containers.
func validateTemplate(path *field.Path, tmpl *corev1.PodTemplateSpec, role podRole, mainContainer string) field.ErrorList {
	// The pods carry the template's labels and annotations: the API server checks them there.
	meta := path.Child("metadata")
	errs := metavalidation.ValidateLabels(tmpl.Labels, meta.Child("labels"))
	errs = append(errs, apivalidation.ValidateAnnotations(tmpl.Annotations, meta.Child("annotations"))...)
	errs = append(errs, validateTopologyAnnotations(meta.Child("annotations"), tmpl.Annotations)...)
	spec := path.Child("spec")
	if len(tmpl.Spec.Containers) == 0 {
		return append(errs, field.Required(spec.Child("containers"), "a pod needs at least one container"))
	}
	if mainContainer != "" && !hasContainer(tmpl, mainContainer) {
		errs = append(errs, field.Required(spec.Child("containers"),
			fmt.Sprintf("must contain a container named %q: it runs the job's processes", mainContainer)))
	}
	switch p := tmpl.Spec.RestartPolicy; {
	case role == launcherPod && p == corev1.RestartPolicyAlways:
		errs = append(errs, field.NotSupported(spec.Child("restartPolicy"), p,
			[]corev1.RestartPolicy{corev1.RestartPolicyNever, corev1.RestartPolicyOnFailure}))
	case role == workerPod && p != "" && p != corev1.RestartPolicyAlways:
		errs = append(errs, field.NotSupported(spec.Child("restartPolicy"), p, []corev1.RestartPolicy{corev1.RestartPolicyAlways}))
	}
	names := sets.New[string]()
	check := func(p *field.Path, c *corev1.Container) {
		for _, msg := range validation.IsDNS1123Label(c.Name) {
			errs = append(errs, field.Invalid(p.Child("name"), c.Name, msg))
		}
		if names.Has(c.Name) {
			errs = append(errs, field.Duplicate(p.Child("name"), c.Name))
		}
		names.Insert(c.Name)
		if strings.TrimSpace(c.Image) == "" {
			errs = append(errs, field.Required(p.Child("image"), "every container needs an image"))
		}
		errs = append(errs, validateResources(p.Child("resources"), &c.Resources)...)
		for i, port := range c.Ports {
			if port.ContainerPort < 1 || port.ContainerPort > 65535 {
				errs = append(errs, field.Invalid(p.Child("ports").Index(i).Child("containerPort"), port.ContainerPort, "must be between 1 and 65535"))
			}
		}
	}
	for i := range tmpl.Spec.InitContainers {
		check(spec.Child("initContainers").Index(i), &tmpl.Spec.InitContainers[i])
	}
	for i := range tmpl.Spec.Containers {
		check(spec.Child("containers").Index(i), &tmpl.Spec.Containers[i])
	}
	return errs
}

func hasContainer(tmpl *corev1.PodTemplateSpec, name string) bool {
	for _, c := range tmpl.Spec.Containers {
		if c.Name == name {
			return true
		}
	}
	return false
}

// validateResources refuses quantities the API server refuses in a pod: negative amounts,
// requests above limits, and extended resources (nvidia.com/gpu and the like) that are not
// whole numbers or whose request differs from their limit (they cannot be overcommitted).
func validateResources(path *field.Path, r *corev1.ResourceRequirements) field.ErrorList {
	var errs field.ErrorList
	for name, q := range r.Limits {
		p := path.Child("limits").Key(string(name))
		errs = append(errs, validateQuantity(p, name, q)...)
		if req, ok := r.Requests[name]; ok && req.Cmp(q) > 0 {
			errs = append(errs, field.Invalid(path.Child("requests").Key(string(name)), req.String(),
				fmt.Sprintf("must be less than or equal to the %s limit %s", name, q.String())))
		}
	}
	for name, q := range r.Requests {
		p := path.Child("requests").Key(string(name))
		errs = append(errs, validateQuantity(p, name, q)...)
		if isExtended(name) {
			if lim, ok := r.Limits[name]; !ok {
				errs = append(errs, field.Required(path.Child("limits").Key(string(name)),
					fmt.Sprintf("%s is an extended resource: set a limit equal to the request", name)))
			} else if lim.Cmp(q) != 0 {
				errs = append(errs, field.Invalid(p, q.String(),
					fmt.Sprintf("%s is an extended resource: its request must equal its limit %s", name, lim.String())))
			}
		}
	}
	return errs
}

func validateQuantity(p *field.Path, name corev1.ResourceName, q resource.Quantity) field.ErrorList {
	if q.Sign() < 0 {
		return field.ErrorList{field.Invalid(p, q.String(), "must not be negative")}
	}
	if isExtended(name) && q.MilliValue()%1000 != 0 {
		return field.ErrorList{field.Invalid(p, q.String(), fmt.Sprintf("%s is an extended resource: must be a whole number", name))}
	}
	return nil
}

// isExtended reports whether a resource is an extended resource: a domain-prefixed name outside
// kubernetes.io (for example nvidia.com/gpu), not hugepages.
func isExtended(name corev1.ResourceName) bool {
	s := string(name)
	return strings.Contains(s, "/") && !strings.Contains(s, "kubernetes.io/") && !strings.HasPrefix(s, corev1.ResourceHugePagesPrefix)
}
