// Package v1alpha1 holds the troupe.dev/v1alpha1 API: the distributed training kinds and the
// types they share.
// +kubebuilder:object:generate=true
// +groupName=troupe.dev
package v1alpha1

import (
	"reflect"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// GroupVersion is the group and version of every troupe kind.
var GroupVersion = schema.GroupVersion{Group: "troupe.dev", Version: "v1alpha1"}

// kindTypes are the objects of every troupe kind and their lists: each kind's types file adds
// its own (registerKind, from its init), so that a new kind touches no shared file here.
var kindTypes []runtime.Object

// registerKind records a kind's object and list type for AddToScheme, and its name label among
// the labels the operator reads (LabelsRead).
func registerKind(object, list runtime.Object) {
	kindTypes = append(kindTypes, object, list)
	LabelsRead = append(LabelsRead, NameLabel(reflect.TypeOf(object).Elem().Name()))
}

// NameLabel is the label that names a job of kind on each of its children and pods,
// "<kind in lower case>.troupe.dev/name" (MPIJobNameLabel).
func NameLabel(kind string) string { return strings.ToLower(kind) + "." + GroupVersion.Group + "/name" }

// AddToScheme adds every troupe kind to a scheme.
func AddToScheme(s *runtime.Scheme) error {
	s.AddKnownTypes(GroupVersion, kindTypes...)
	metav1.AddToGroupVersion(s, GroupVersion)
	return nil
}
