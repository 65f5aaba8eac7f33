// Package torch is the PyTorch backend: it gives every pod of a job the environment
// torch.distributed (init_process_group with env://) and torchrun read, as kubeflow's
// training-operator does, so that its PyTorchJobs run unchanged (docs/pytorch.md). The peers
// find each other by the job's headless Service; its one object is an elastic job's
// HorizontalPodAutoscaler (elasticPolicy.metrics).
package torch

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/troupe-dev/troupe/pkg/engine"
)

// The environment a pod gets. MASTER_* and WORLD_SIZE/RANK are torch.distributed's (env://);
// PET_* are torchrun's options by environment.
const (
	EnvMasterAddr      = "MASTER_ADDR"
	EnvMasterPort      = "MASTER_PORT"
	EnvWorldSize       = "WORLD_SIZE"
	EnvRank            = "RANK"
	EnvPETMasterAddr   = "PET_MASTER_ADDR"
	EnvPETMasterPort   = "PET_MASTER_PORT"
	EnvPETNodeRank     = "PET_NODE_RANK"
	EnvPETNNodes       = "PET_NNODES"
	EnvPETNprocPerNode = "PET_NPROC_PER_NODE"
	EnvPETRDZVBackend  = "PET_RDZV_BACKEND"
	EnvPETRDZVEndpoint = "PET_RDZV_ENDPOINT"
	EnvPETRDZVID       = "PET_RDZV_ID"
	EnvPETRDZVConf     = "PET_RDZV_CONF"
	EnvPETStandalone   = "PET_STANDALONE"
	EnvPETMaxRestarts  = "PET_MAX_RESTARTS"
)

// kubeflow's labels on every pod of a PyTorchJob, which tools written for training-operator
// select by.
const (
	LabelJobName      = "training.kubeflow.org/job-name"
	LabelReplicaType  = "training.kubeflow.org/replica-type"
	LabelReplicaIndex = "training.kubeflow.org/replica-index"
)

// PortName is the name of rank 0's (and the rendezvous') port, on the pytorch container and the
// Service; MainContainer is the container that gets it.
const (
	PortName      = "pytorchjob-port"
	MainContainer = "pytorch"
)

// Backend wires a job's torch processes together: rank 0 is the master's pod (the Spec's
// master), else the first worker's; the workers' ranks follow.
type Backend struct {
	// Port is rank 0's port (its pytorch container's pytorchjob-port).
	Port int32
	// NprocPerNode is torchrun's processes per pod: auto, cpu, gpu or a number ("" sets none).
	NprocPerNode string
	// Elastic, when set, runs torch elastic with a rendezvous; WORLD_SIZE and the ranks are
	// then torchrun's to give.
	Elastic *Elastic
}

// Elastic is a job's torch elastic settings.
type Elastic struct {
	MinReplicas, MaxReplicas int32
	// RDZVBackend is c10d, etcd or etcd-v2.
	RDZVBackend string
	// RDZVHost is the rendezvous host ("": the first worker's) and RDZVPort its port (0: the
	// backend's Port).
	RDZVHost string
	RDZVPort int32
	RDZVID   string
	// RDZVConf is key=value,... ("": none).
	RDZVConf    string
	Standalone  bool
	MaxRestarts *int32
	// Metrics, when given, scale the workers with a HorizontalPodAutoscaler (Objects).
	Metrics []autoscalingv2.MetricSpec
}

var (
	_ engine.Backend          = Backend{}
	_ engine.IndexedDecorator = Backend{}
	_ engine.ServicePorter    = Backend{}
)

// Objects are the job's HorizontalPodAutoscaler when its elastic policy names metrics: a torch
// job otherwise needs only the headless Service the engine makes.
func (b Backend) Objects(s *engine.Spec) []client.Object {
	if b.Elastic == nil || len(b.Elastic.Metrics) == 0 {
		return nil
	}
	return []client.Object{b.autoscaler(s)}
}

// autoscaler is the HorizontalPodAutoscaler of an elastic job with metrics, as kubeflow's
// training-operator makes it: named like the job, on the job's scale subresource (its
// workers), between the elastic bounds.
func (b Backend) autoscaler(s *engine.Spec) *autoscalingv2.HorizontalPodAutoscaler {
	return &autoscalingv2.HorizontalPodAutoscaler{
		TypeMeta:   metav1.TypeMeta{APIVersion: "autoscaling/v2", Kind: "HorizontalPodAutoscaler"},
		ObjectMeta: metav1.ObjectMeta{Name: s.Name},
		Spec: autoscalingv2.HorizontalPodAutoscalerSpec{
			ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: s.Owner.APIVersion, Kind: s.Owner.Kind, Name: s.Owner.Name},
			MinReplicas:    ptr.To(b.Elastic.MinReplicas),
			MaxReplicas:    b.Elastic.MaxReplicas,
			Metrics:        slices.Clone(b.Elastic.Metrics),
		},
	}
}

// ServicePorts names rank 0's port on the job's headless Service.
func (b Backend) ServicePorts(*engine.Spec) []corev1.ServicePort {
	return []corev1.ServicePort{{Name: PortName, Port: b.Port, Protocol: corev1.ProtocolTCP}}
}

// rankZeroHost is the host name of rank 0: the master's pod, else the first worker's.
func rankZeroHost(s *engine.Spec) string {
	if s.HasMaster() || len(s.WorkerSets) == 0 {
		return s.HostName(s.MasterHostname())
	}
	return s.HostName(s.WorkerSets[0].ChildName + "-0")
}

// nodes is the number of pods of the job: the master and every worker.
func nodes(s *engine.Spec) int32 { return s.MasterPods() + s.TotalWorkers() }

// DecoratePod gives every container of a pod of the job (the master's: ws nil) the environment
// that does not depend on the pod's index, and kubeflow's labels; the master is rank 0.
func (b Backend) DecoratePod(s *engine.Spec, ws *engine.WorkerSet, tmpl *corev1.PodTemplateSpec) {
	port := strconv.Itoa(int(b.Port))
	env := []corev1.EnvVar{
		{Name: "PYTHONUNBUFFERED", Value: "1"},
		{Name: EnvMasterAddr, Value: rankZeroHost(s)},
		{Name: EnvMasterPort, Value: port},
		{Name: EnvPETMasterAddr, Value: rankZeroHost(s)},
		{Name: EnvPETMasterPort, Value: port},
	}
	if b.NprocPerNode != "" {
		env = append(env, corev1.EnvVar{Name: EnvPETNprocPerNode, Value: b.NprocPerNode})
	}
	if e := b.Elastic; e != nil {
		env = append(env, b.elasticEnv(s, ws, e)...)
	} else {
		perNode := int32(1)
		if n, err := strconv.Atoi(b.NprocPerNode); err == nil && n > 0 {
			perNode = int32(n)
		}
		env = append(env,
			corev1.EnvVar{Name: EnvWorldSize, Value: strconv.Itoa(int(nodes(s) * perNode))},
			corev1.EnvVar{Name: EnvPETNNodes, Value: strconv.Itoa(int(nodes(s)))})
		if ws == nil {
			env = append(env, corev1.EnvVar{Name: EnvRank, Value: "0"}, corev1.EnvVar{Name: EnvPETNodeRank, Value: "0"})
		}
	}
	addEnv(tmpl, env)
	b.addPort(tmpl)
	if tmpl.Labels == nil {
		tmpl.Labels = map[string]string{}
	}
	tmpl.Labels[LabelJobName] = s.Name
	if ws == nil {
		tmpl.Labels[LabelReplicaType], tmpl.Labels[LabelReplicaIndex] = "master", "0"
	} else {
		tmpl.Labels[LabelReplicaType] = strings.ToLower(ws.Name)
	}
}

// PodIndexLabel is the label that numbers a worker's pod (its index, rank minus the master's):
// Kueue's topology-aware scheduling places consecutive indexes, so consecutive ranks, side by side.
func (Backend) PodIndexLabel() string { return LabelReplicaIndex }

// DecorateIndexedPod gives worker index its rank, after the master's (rank 0) when there is
// one, and kubeflow's replica-index label. An elastic job's ranks are torchrun's to give; with
// the c10d rendezvous troupe places (the first worker, rdzvHost unset), each worker is told
// whether its agent hosts the rendezvous store (rdzvConf).
func (b Backend) DecorateIndexedPod(s *engine.Spec, _ *engine.WorkerSet, index int32, tmpl *corev1.PodTemplateSpec) {
	tmpl.Labels[LabelReplicaIndex] = strconv.Itoa(int(index))
	if b.Elastic != nil {
		if b.placesRendezvous() {
			addEnv(tmpl, []corev1.EnvVar{{Name: EnvPETRDZVConf, Value: b.rdzvConf(index == 0)}})
		}
		return
	}
	rank := strconv.Itoa(int(s.MasterPods() + index))
	addEnv(tmpl, []corev1.EnvVar{{Name: EnvRank, Value: rank}, {Name: EnvPETNodeRank, Value: rank}})
}

// elasticEnv is torchrun's rendezvous: the endpoint (the first worker's host and the job's port
// unless the spec names others), the backend, the bounds of the node count and the options.
func (b Backend) elasticEnv(s *engine.Spec, ws *engine.WorkerSet, e *Elastic) []corev1.EnvVar {
	host, port := e.RDZVHost, e.RDZVPort
	if host == "" && len(s.WorkerSets) > 0 {
		host = s.HostName(s.WorkerSets[0].ChildName + "-0")
	}
	if port == 0 {
		port = b.Port
	}
	env := []corev1.EnvVar{
		{Name: EnvPETRDZVEndpoint, Value: fmt.Sprintf("%s:%d", host, port)},
		{Name: EnvPETRDZVBackend, Value: e.RDZVBackend},
		{Name: EnvPETNNodes, Value: fmt.Sprintf("%d:%d", e.MinReplicas, e.MaxReplicas)},
	}
	if e.MaxRestarts != nil {
		env = append(env, corev1.EnvVar{Name: EnvPETMaxRestarts, Value: strconv.Itoa(int(*e.MaxRestarts))})
	}
	if e.RDZVID != "" {
		env = append(env, corev1.EnvVar{Name: EnvPETRDZVID, Value: e.RDZVID})
	}
	switch {
	case b.placesRendezvous() && ws == nil:
		// A master's agent joins the first worker's rendezvous (each worker is told whether
		// it hosts it: DecorateIndexedPod).
		env = append(env, corev1.EnvVar{Name: EnvPETRDZVConf, Value: b.rdzvConf(false)})
	case !b.placesRendezvous() && e.RDZVConf != "":
		env = append(env, corev1.EnvVar{Name: EnvPETRDZVConf, Value: e.RDZVConf})
	}
	if e.Standalone {
		env = append(env, corev1.EnvVar{Name: EnvPETStandalone, Value: ""})
	}
	return env
}

// addPort gives the pytorch container the job's port by kubeflow's name, unless it names a
// port so: the port rank 0 (and an elastic job's rendezvous) listens on.
func (b Backend) addPort(tmpl *corev1.PodTemplateSpec) {
	for i := range tmpl.Spec.Containers {
		c := &tmpl.Spec.Containers[i]
		if c.Name != MainContainer {
			continue
		}
		for _, p := range c.Ports {
			if p.Name == PortName {
				return
			}
		}
		c.Ports = append(c.Ports, corev1.ContainerPort{Name: PortName, ContainerPort: b.Port, Protocol: corev1.ProtocolTCP})
	}
}

// placesRendezvous says troupe chose where an elastic job's c10d rendezvous is (the first
// worker's agent hosts its store), rather than the spec (rdzvHost) or another backend (etcd).
func (b Backend) placesRendezvous() bool {
	return b.Elastic != nil && b.Elastic.RDZVHost == "" && b.Elastic.RDZVBackend == string(rdzvC10D)
}

// rdzvC10D is torch's c10d rendezvous backend.
const rdzvC10D = "c10d"

// rdzvConf is the rendezvous configuration of a pod whose agent hosts the store or not: the
// spec's, and is_host. torch would otherwise decide by resolving the endpoint's name as the agent
// starts, which a pod whose DNS record is not out yet gets wrong, and then no agent hosts it.
func (b Backend) rdzvConf(isHost bool) string {
	conf := []string{"is_host=" + strconv.FormatBool(isHost)}
	if b.Elastic.RDZVConf != "" {
		conf = append([]string{b.Elastic.RDZVConf}, conf...)
	}
	return strings.Join(conf, ",")
}

// addEnv sets env in every container of tmpl: a variable the container sets itself is kept
// (the user's word wins), as kubeflow's containers see theirs.
func addEnv(tmpl *corev1.PodTemplateSpec, env []corev1.EnvVar) {
	for i := range tmpl.Spec.Containers {
		c := &tmpl.Spec.Containers[i]
		for _, e := range env {
			if !hasEnv(c.Env, e.Name) {
				c.Env = append(c.Env, e)
			}
		}
	}
}

func hasEnv(env []corev1.EnvVar, name string) bool {
	for _, e := range env {
		if e.Name == name {
			return true
		}
	}
	return false
}
