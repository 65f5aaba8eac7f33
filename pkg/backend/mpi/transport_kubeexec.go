package mpi

import (
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/troupe-dev/troupe/pkg/engine"
)

const (
	// AgentBinDir is where the launcher's init container installs troupe-agent, in an emptyDir
	// shared with the launcher's containers: worker images need nothing of troupe's.
	AgentBinDir = "/opt/troupe/bin"
	// KubeExecAgent is the rsh-compatible name troupe-agent answers to as the KubeExec agent.
	KubeExecAgent = AgentBinDir + "/troupe-rsh"

	// EnvExecContainer names the container of the worker pods the KubeExec agent execs into.
	EnvExecContainer = "TROUPE_EXEC_CONTAINER"
	// EnvJobUID is the launcher's job's UID: the KubeExec agent execs only into pods that carry
	// it in their troupe.dev/job-uid label, whatever else its token might allow.
	EnvJobUID = "TROUPE_JOB_UID"

	execSuffix = "-exec"
)

// KubeExec is the kubectl-exec transport: no sshd runs anywhere. The launcher runs troupe-agent
// as its rsh agent, which starts each remote process through the API server's pods/exec, with
// a ServiceAccount of the job's own whose Role allows exactly that on the job's worker pods.
type KubeExec struct{}

var _ Transport = KubeExec{}

// ExecAccountName is the name of the job's launcher ServiceAccount, Role and RoleBinding.
func ExecAccountName(s *engine.Spec) string { return s.Name + execSuffix }

// Agent is troupe-agent under its rsh name.
func (KubeExec) Agent() string { return KubeExecAgent }

// ConfigFiles adds nothing: the agent reads the hostfile and its token only.
func (KubeExec) ConfigFiles(*engine.Spec) map[string]string { return nil }

// WorkerPodNames lists the pod names of every worker of the job. Worker pods are named after
// their host names, so they are known before the pods exist.
func WorkerPodNames(s *engine.Spec) []string {
	var names []string
	for i := range s.WorkerSets {
		names = append(names, s.WorkerSets[i].WorkerHostnames()...)
	}
	return names
}

// Objects are the launcher's ServiceAccount, a Role that allows get on the job's worker pods and
// get and create on their exec subresource, by name and nothing else, and the RoleBinding
// between them.
// The Role follows the worker sets' replica counts.
func (KubeExec) Objects(s *engine.Spec) []client.Object {
	name := ExecAccountName(s)
	pods := WorkerPodNames(s)
	role := &rbacv1.Role{
		TypeMeta:   metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "Role"},
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get"}, ResourceNames: pods},
			// WebSocket exec is a GET (SPDY a POST): both, or clients fall back to SPDY.
			{APIGroups: []string{""}, Resources: []string{"pods/exec"}, Verbs: []string{"get", "create"}, ResourceNames: pods},
		},
	}
	if len(pods) == 0 {
		// An empty resourceNames list would allow every pod; a job without workers needs no rule.
		role.Rules = nil
	}
	return []client.Object{
		&corev1.ServiceAccount{
			TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ServiceAccount"},
			ObjectMeta: metav1.ObjectMeta{Name: name},
		},
		role,
		&rbacv1.RoleBinding{
			TypeMeta:   metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "RoleBinding"},
			ObjectMeta: metav1.ObjectMeta{Name: name},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: name},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: name, Namespace: s.Namespace}},
		},
	}
}

// DecoratePod runs the launcher under the job's ServiceAccount (unless the template names one
// of its own) and tells the agent which container of the workers to exec into.
func (KubeExec) DecoratePod(s *engine.Spec, ws *engine.WorkerSet, tmpl *corev1.PodTemplateSpec) {
	if ws != nil {
		return
	}
	if tmpl.Spec.ServiceAccountName == "" {
		tmpl.Spec.ServiceAccountName = ExecAccountName(s)
		projectExecToken(tmpl, s.MainContainer)
	}
	for i := range tmpl.Spec.Containers {
		c := &tmpl.Spec.Containers[i]
		c.Env = append(c.Env, corev1.EnvVar{Name: EnvExecContainer, Value: s.MainContainer},
			corev1.EnvVar{Name: EnvJobUID, Value: string(s.Owner.UID)})
		// Open MPI spawns daemons from daemons in large jobs (tree spawn); worker pods have
		// neither the agent nor the right to exec, so the launcher starts every daemon itself.
		c.Env = append(c.Env,
			corev1.EnvVar{Name: "OMPI_MCA_plm_rsh_no_tree_spawn", Value: "1"},
			corev1.EnvVar{Name: "PRTE_MCA_plm_ssh_no_tree_spawn", Value: "1"})
	}
}

// The exec account's token may exec into the job's workers: it is projected only into the
// containers that use it, the main container (mpirun starts the agent there) and the launcher's
// wait (which reads the workers' pods; decorateLauncher mounts it there), not into every
// container of the pod as the kubelet's automount would (a sidecar of the user's, say). It is
// the kubelet's own projection otherwise: the API server's audience, an hour's expiry that the
// kubelet renews, the cluster's CA and the namespace.
const (
	execTokenVolume = "troupe-exec-token"
	// execTokenPath is where client-go's in-cluster configuration reads the token and the CA.
	execTokenPath = "/var/run/secrets/kubernetes.io/serviceaccount"
	// execTokenSeconds is the kubelet's default for an automounted token (an hour and 7 s).
	execTokenSeconds int64 = 3607
)

func projectExecToken(tmpl *corev1.PodTemplateSpec, mainContainer string) {
	tmpl.Spec.AutomountServiceAccountToken = ptr.To(false)
	tmpl.Spec.Volumes = append(tmpl.Spec.Volumes, corev1.Volume{Name: execTokenVolume, VolumeSource: corev1.VolumeSource{
		Projected: &corev1.ProjectedVolumeSource{
			DefaultMode: ptr.To[int32](0o444),
			Sources: []corev1.VolumeProjection{
				{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Path: "token", ExpirationSeconds: ptr.To(execTokenSeconds)}},
				{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "kube-root-ca.crt"},
					Items: []corev1.KeyToPath{{Key: "ca.crt", Path: "ca.crt"}}}},
				{DownwardAPI: &corev1.DownwardAPIProjection{Items: []corev1.DownwardAPIVolumeFile{{Path: "namespace",
					FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "metadata.namespace"}}}}},
			},
		},
	}})
	if c := mainContainerOf(tmpl, mainContainer); c != nil {
		c.VolumeMounts = append(c.VolumeMounts, execTokenMount())
	}
}

func execTokenMount() corev1.VolumeMount {
	return corev1.VolumeMount{Name: execTokenVolume, MountPath: execTokenPath, ReadOnly: true}
}

// hasExecToken reports whether the pod projects the exec account's token (projectExecToken).
func hasExecToken(tmpl *corev1.PodTemplateSpec) bool {
	for _, v := range tmpl.Spec.Volumes {
		if v.Name == execTokenVolume {
			return true
		}
	}
	return false
}
