// Package mpi is the MPI backend of the job engine: it writes the hostfile (one line per host
// with its slots), delivers it to every pod in a ConfigMap, and sets the environment the MPI
// implementation reads to find it. Transports (SSH keys, kubectl exec) plug in through the
// Transport interface.
package mpi

import (
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
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

	configVolumeName = "troupe-mpi-config"
	configMapSuffix  = "-mpi"
)

// Transport lets the launcher start processes on the other hosts (SSH keys, kubectl exec). It
// adds its own children and pod wiring beside the hostfile's, and names the rsh-compatible
// agent the MPI launcher runs to start a remote process.
type Transport interface {
	// ConfigFiles are files (name to content) the transport adds to the job's MPI ConfigMap.
	ConfigFiles(s *engine.Spec) map[string]string
	// Objects are the transport's own children (credentials, RBAC).
	Objects(s *engine.Spec) []client.Object
	DecoratePod(s *engine.Spec, ws *engine.WorkerSet, tmpl *corev1.PodTemplateSpec)
	// Agent is the path, inside the pods, of the command the launcher starts remote
	// processes with.
	Agent() string
}

// Backend is the MPI backend. The zero value writes and mounts an Open MPI 4 hostfile and adds
// no transport.
type Backend struct {
	Dialect   Dialect
	Transport Transport
	// AgentImage is the troupe-agent image of the launcher's wait init container; empty adds
	// no wait.
	AgentImage string
	// WaitTimeoutSeconds bounds the launcher's wait for its workers; 0 is the default.
	WaitTimeoutSeconds int32
}

func (b Backend) dialect() Dialect {
	if b.Dialect.HostLine == nil {
		return openMPI4
	}
	return b.Dialect
}

var _ engine.Backend = Backend{}

// ConfigMapName is the name of the job's MPI ConfigMap.
func ConfigMapName(s *engine.Spec) string { return s.Name + configMapSuffix }

// Hosts lists every host of the job with its slots: the master first when it computes too (it
// is rank 0), then each worker set's pods in ordinal order.
func Hosts(s *engine.Spec) []Host {
	var hosts []Host
	if s.Master.IsHost {
		hosts = append(hosts, Host{Name: s.HostName(s.MasterHostname()), Slots: s.Master.Slots})
	}
	for i := range s.WorkerSets {
		ws := &s.WorkerSets[i]
		for _, h := range ws.WorkerHostnames() {
			hosts = append(hosts, Host{Name: s.HostName(h), Slots: ws.Slots})
		}
	}
	return hosts
}

// Host is one line of a hostfile.
type Host struct {
	Name  string
	Slots int32
}

// Hostfile writes hosts in the dialect's format, one per line.
func (d Dialect) Hostfile(hosts []Host) string {
	var b strings.Builder
	for _, h := range hosts {
		b.WriteString(d.HostLine(h.Name, h.Slots))
		b.WriteByte('\n')
	}
	return b.String()
}

// Hostfile is the job's hostfile in the backend's dialect.
func (b Backend) Hostfile(s *engine.Spec) string { return b.dialect().Hostfile(Hosts(s)) }

// Objects returns the hostfile ConfigMap and the transport's objects.
func (b Backend) Objects(s *engine.Spec) []client.Object {
	cm := &corev1.ConfigMap{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: metav1.ObjectMeta{Name: ConfigMapName(s)},
		Data:       map[string]string{HostfileKey: b.Hostfile(s)},
	}
	if b.Transport != nil {
		for k, v := range b.Transport.ConfigFiles(s) {
			cm.Data[k] = v
		}
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
			// Readable by any user the pod runs as; the transport's agent script is executable.
			DefaultMode: ptr.To[int32](0o555),
		}},
	})
	agent := ""
	if b.Transport != nil {
		agent = b.Transport.Agent()
	}
	env := []corev1.EnvVar{{Name: EnvHostfile, Value: HostfilePath}}
	for _, e := range b.dialect().Env(HostfilePath, agent) {
		if e.Value != "" { // no transport: leave the launcher's own agent setting alone
			env = append(env, e)
		}
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
	if ws == nil && b.AgentImage != "" {
		b.decorateLauncher(s, tmpl)
	}
}

// Generate fills the data a transport generates once, when its child is created.
func (b Backend) Generate(s *engine.Spec, obj client.Object) error {
	if g, ok := b.Transport.(engine.Generator); ok {
		return g.Generate(s, obj)
	}
	return nil
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
