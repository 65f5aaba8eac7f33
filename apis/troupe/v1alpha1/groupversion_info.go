// Package v1alpha1 holds the troupe.dev/v1alpha1 API: the distributed training kinds and the
// types they share.
// +kubebuilder:object:generate=true
// +groupName=troupe.dev
package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// GroupVersion is the group and version of every troupe kind.
var GroupVersion = schema.GroupVersion{Group: "troupe.dev", Version: "v1alpha1"}

// AddToScheme adds every troupe kind to a scheme. The list is explicit: a new kind is added
// here, next to its types file, rather than through init() side effects.
func AddToScheme(s *runtime.Scheme) error {
	s.AddKnownTypes(GroupVersion,
		&ChainerJob{}, &ChainerJobList{},
		&MPIJob{}, &MPIJobList{},
		&HorovodJob{}, &HorovodJobList{},
	)
	metav1.AddToGroupVersion(s, GroupVersion)
	return nil
}
