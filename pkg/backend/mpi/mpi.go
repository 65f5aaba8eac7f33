// Package mpi is the MPI backend of the job engine: it writes the hostfile (one line per host
// with its slots), delivers it to every pod in a ConfigMap, and sets the environment the MPI
// implementation reads to find it. Transports (SSH keys, kubectl exec) plug in through the
// Transport interface.
package mpi

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/troupe-dev/troupe/pkg/engine"
)

const (
	// HostfileKey is the hostfile's key in the ConfigMap and its file name in the pods.
	HostfileKey = "hostfile"
	// ConfigMountPath is where the ConfigMap is mounted in every container. The whole directory
	// is mounted (no subPath), so the kubelet updates the file in running pods when the hostfile
	// is rewritten.
	ConfigMountPath = "/etc/troupe/mpi"
	// HostfilePath is the hostfile's path inside every container.
	HostfilePath = ConfigMountPath + "/" + HostfileKey
	// EnvHostfile is set in every container to HostfilePath, for launch scripts of any MPI.
	EnvHostfile = "TROUPE_HOSTFILE"
	// envOpenMPIHostfile makes Open MPI's mpirun use the hostfile without a --hostfile flag.
	envOpenMPIHostfile = "OMPI_MCA_orte_default_hostfile"

	configVolumeName = "troupe-mpi-config"
	configMapSuffix  = "-mpi"
)

// Transport lets the launcher start processes on the other hosts (SSH keys, kubectl exec). It
// adds its own children and pod wiring beside the hostfile's.
type Transport interface {
	Objects(s *engine.Spec) []client.Object
	DecoratePod(s *engine.Spec, ws *engine.WorkerSet, tmpl *corev1.PodTemplateSpec)
}

// Backend is the MPI backend. The zero value writes and mounts the hostfile and adds no
// transport.
type Backend struct {
	Transport Transport
}

var _ engine.Backend = Backend{}

// ConfigMapName is the name of the job's MPI ConfigMap.
func ConfigMapName(s *engine.Spec) string { return s.Name + configMapSuffix }

// Hostfile lists every host of the job, one line each with its slots: the master first when
// it computes too (it is rank 0), then each worker set's pods in ordinal order.
func Hostfile(s *engine.Spec) string {
	var b strings.Builder
	if s.Master.IsHost {
		fmt.Fprintf(&b, "%s slots=%d\n", s.HostName(s.MasterHostname()), s.Master.Slots)
	}
	for i := range s.WorkerSets {
		ws := &s.WorkerSets[i]
		for _, host := range ws.WorkerHostnames() {
			fmt.Fprintf(&b, "%s slots=%d\n", s.HostName(host), ws.Slots)
		}
	}
	return b.String()
}

// Objects returns the hostfile ConfigMap and the transport's objects.
func (b Backend) Objects(s *engine.Spec) []client.Object {
	cm := &corev1.ConfigMap{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: metav1.ObjectMeta{Name: ConfigMapName(s)},
		Data:       map[string]string{HostfileKey: Hostfile(s)},
	}
	objs := []client.Object{cm}
	if b.Transport != nil {
		objs = append(objs, b.Transport.Objects(s)...)
	}
	return objs
}

// DecoratePod mounts the hostfile into every container of the pod and points the MPI
// environment at it.
func (b Backend) DecoratePod(s *engine.Spec, ws *engine.WorkerSet, tmpl *corev1.PodTemplateSpec) {
	tmpl.Spec.Volumes = append(tmpl.Spec.Volumes, corev1.Volume{
		Name: configVolumeName,
		VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
			LocalObjectReference: corev1.LocalObjectReference{Name: ConfigMapName(s)},
		}},
	})
	env := []corev1.EnvVar{
		{Name: EnvHostfile, Value: HostfilePath},
		{Name: envOpenMPIHostfile, Value: HostfilePath},
	}
	for i := range tmpl.Spec.Containers {
		c := &tmpl.Spec.Containers[i]
		c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{
			Name: configVolumeName, MountPath: ConfigMountPath, ReadOnly: true,
		})
		c.Env = append(c.Env, env...)
	}
	if b.Transport != nil {
		b.Transport.DecoratePod(s, ws, tmpl)
	}
}

// Slots returns the MPI slots of a pod: the override when set, else the nvidia.com/gpu limit of
// the main container, else 1.
func Slots(tmpl *corev1.PodTemplateSpec, mainContainer string, override *int32) int32 {
	if override != nil {
		return *override
	}
	for _, c := range tmpl.Spec.Containers {
		if c.Name != mainContainer {
			continue
		}
		if gpus, ok := c.Resources.Limits[ResourceGPU]; ok && gpus.Value() > 0 {
			return int32(gpus.Value())
		}
	}
	return 1
}

// ResourceGPU is the extended resource whose limit gives a pod's default slots.
const ResourceGPU corev1.ResourceName = "nvidia.com/gpu"
