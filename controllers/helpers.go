package controllers

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
)

// requireMainContainer checks that a template has the kind's main container. The CRD refuses
// such specs already; this guards objects stored before the rule existed.
func requireMainContainer(path string, tmpl *corev1.PodTemplateSpec, name string) error {
	for _, c := range tmpl.Spec.Containers {
		if c.Name == name {
			return nil
		}
	}
	return fmt.Errorf("%s.spec.containers: must contain a container named %q", path, name)
}

// firstSet returns the first non-nil value, else def.
func firstSet[T any](def T, vals ...*T) T {
	for _, v := range vals {
		if v != nil {
			return *v
		}
	}
	return def
}

// firstNonNil returns the first non-nil pointer, or nil.
func firstNonNil[T any](vals ...*T) *T {
	for _, v := range vals {
		if v != nil {
			return v
		}
	}
	return nil
}
