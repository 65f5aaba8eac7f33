package mpi

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"io"
	"slices"

	"golang.org/x/crypto/ssh"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	troupev1 "github.com/troupe-dev/troupe/apis/troupe/v1alpha1"
	"github.com/troupe-dev/troupe/pkg/engine"
)

// kubeflow's runtime contract (an MPIJob in kubeflow's form): the pods of kubeflow's images
// find one key pair in ~/.ssh (the private key also serves as sshd's host key, with strict
// host key checking off in their ssh_config), start their own sshd, read the hostfile at
// /etc/mpi/hostfile and their role in K_MPI_JOB_ROLE. It is weaker than troupe's SSH transport
// (one key for client and host everywhere, no pinned host key, workers able to log into each
// other): docs/security.md says so.
const (
	// KubeflowConfigMountPath is where kubeflow's images read the hostfile and
	// discover_hosts.sh.
	KubeflowConfigMountPath = "/etc/mpi"
	// KubeflowHostfilePath is the hostfile's path in kubeflow's layout.
	KubeflowHostfilePath = KubeflowConfigMountPath + "/" + HostfileKey
	// EnvKubeflowRole is the pod's role, launcher or worker, for kubeflow's entrypoints.
	EnvKubeflowRole = "K_MPI_JOB_ROLE"
	// KubeflowSSHPublicKey is the public key's key in the job's Secret (beside the Secret
	// type's ssh-privatekey).
	KubeflowSSHPublicKey = "ssh-publickey"

	// The files of the key pair in sshAuthMountPath.
	kubeflowPrivateKeyFile     = "id_rsa"
	kubeflowPublicKeyFile      = "id_rsa.pub"
	kubeflowAuthorizedKeysFile = "authorized_keys"
	kubeflowSSHVolume          = "ssh-auth"
	kubeflowConfigVolume       = "mpi-job-config"
	// kubeflowDefaultSSHD is the worker's command when its template gives neither command nor
	// args: the image's sshd in the foreground, logging to stderr.
	kubeflowDefaultSSHD = "/usr/sbin/sshd"
	// kubeflowConnectionAttempts makes the launcher's ssh retry while a worker's sshd starts.
	kubeflowConnectionAttempts = "-o ConnectionAttempts=10"
)

// KubeflowSSH is the transport of kubeflow's form: the workers' own sshd, the job's key pair at
// MountPath (sshAuthMountPath).
type KubeflowSSH struct {
	MountPath string
}

var _ Transport = KubeflowSSH{}

// ConfigFiles adds nothing: the hostfile and discover_hosts.sh are the backend's.
func (KubeflowSSH) ConfigFiles(*engine.Spec) map[string]string { return nil }

// Objects is the job's key pair Secret, without its data (Generate fills it once).
func (KubeflowSSH) Objects(s *engine.Spec) []client.Object {
	return []client.Object{&corev1.Secret{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
		ObjectMeta: metav1.ObjectMeta{Name: SSHSecretName(s)},
		Type:       corev1.SecretTypeSSHAuth,
	}}
}

// Generate fills the job's Secret with a fresh key pair just before it is created.
func (KubeflowSSH) Generate(s *engine.Spec, obj client.Object) error {
	secret, ok := obj.(*corev1.Secret)
	if !ok || secret.Name != SSHSecretName(s) {
		return nil
	}
	data, err := NewKubeflowKeyPair(rand.Reader)
	if err != nil {
		return fmt.Errorf("generate the SSH key pair: %w", err)
	}
	secret.Data = data
	return nil
}

// NewKubeflowKeyPair generates the key pair of a job in kubeflow's form: an ECDSA P-521 key in
// PEM (which OpenSSH's client and sshd, as a host key, both load, under the name id_rsa kubeflow's
// images expect) and its authorized_keys line.
func NewKubeflowKeyPair(rand io.Reader) (map[string][]byte, error) {
	key, err := ecdsa.GenerateKey(elliptic.P521(), rand)
	if err != nil {
		return nil, err
	}
	der, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, err
	}
	pub, err := ssh.NewPublicKey(&key.PublicKey)
	if err != nil {
		return nil, err
	}
	return map[string][]byte{
		corev1.SSHAuthPrivateKey: pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der}),
		KubeflowSSHPublicKey:     ssh.MarshalAuthorizedKey(pub),
	}, nil
}

// DecoratePod mounts the key pair at MountPath in the main container (the one named
// s.MainContainer, else the first), tells the container its role, and gives a worker whose
// template names no command kubeflow's: sshd in the foreground. The launcher gets the
// environment kubeflow's launchers read (the dialect's hostfile variables are the backend's).
func (t KubeflowSSH) DecoratePod(s *engine.Spec, ws *engine.WorkerSet, tmpl *corev1.PodTemplateSpec) {
	c := mainContainerOf(tmpl, s.MainContainer)
	if c == nil {
		return
	}
	var mode *int32
	if t.MountPath == troupev1.DefaultSSHAuthMountPath {
		mode = ptr.To[int32](0o600) // root's ~/.ssh: only root reads the key
	}
	tmpl.Spec.Volumes = append(tmpl.Spec.Volumes, corev1.Volume{Name: kubeflowSSHVolume, VolumeSource: corev1.VolumeSource{
		Secret: &corev1.SecretVolumeSource{SecretName: SSHSecretName(s), DefaultMode: mode, Items: []corev1.KeyToPath{
			{Key: corev1.SSHAuthPrivateKey, Path: kubeflowPrivateKeyFile},
			{Key: KubeflowSSHPublicKey, Path: kubeflowPublicKeyFile},
			{Key: KubeflowSSHPublicKey, Path: kubeflowAuthorizedKeysFile},
		}},
	}})
	c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: kubeflowSSHVolume, MountPath: t.MountPath})
	if ws != nil && len(c.Command) == 0 && len(c.Args) == 0 {
		c.Command = []string{kubeflowDefaultSSHD, "-De"}
	}
}

// Labels of kubeflow's pods that tools and schedulers select by.
const (
	KubeflowJobNameLabel      = "training.kubeflow.org/job-name"
	KubeflowJobRoleLabel      = "training.kubeflow.org/job-role"
	KubeflowReplicaIndexLabel = "training.kubeflow.org/replica-index"
)

// decorateKubeflowPod gives a pod of a job in kubeflow's form, whatever its transport, what
// kubeflow's images and tools read of it: its role in K_MPI_JOB_ROLE (main container) and
// kubeflow's job-name and job-role labels; a launcher that computes is replica 0.
func decorateKubeflowPod(s *engine.Spec, ws *engine.WorkerSet, tmpl *corev1.PodTemplateSpec) {
	role := "launcher"
	if ws != nil {
		role = "worker"
	}
	if tmpl.Labels == nil {
		tmpl.Labels = map[string]string{}
	}
	tmpl.Labels[KubeflowJobNameLabel] = s.Name
	tmpl.Labels[KubeflowJobRoleLabel] = role
	if ws == nil && s.Master.IsHost {
		tmpl.Labels[KubeflowReplicaIndexLabel] = "0"
	}
	if c := mainContainerOf(tmpl, s.MainContainer); c != nil {
		c.Env = append(c.Env, corev1.EnvVar{Name: EnvKubeflowRole, Value: role})
	}
}

// Agent is empty: the launcher's MPI starts its remote processes with its own ssh.
func (KubeflowSSH) Agent() string { return "" }

// kubeflowLauncherEnv is the environment kubeflow's launchers read beside the dialect's: ssh
// retries for every MPI, the slots for those that take them from the environment, Open MPI 5's
// spelling of the hostfile variables (kubeflow's images run Open MPI 5 under the name OpenMPI),
// and, for a launcher that only launches, no GPUs of the node's.
func kubeflowLauncherEnv(d Dialect, s *engine.Spec) []corev1.EnvVar {
	n := fmt.Sprint(max(s.Master.Slots, 1)) // the workers' slots (the adapter gives the master theirs)
	var out []corev1.EnvVar
	switch d.Implementation {
	case IntelMPI:
		out = env("I_MPI_HYDRA_BOOTSTRAP_EXEC_EXTRA_ARGS", kubeflowConnectionAttempts, "I_MPI_PERHOST", n)
	case MPICH:
		out = env("HYDRA_LAUNCH_EXTRA_ARGS", kubeflowConnectionAttempts)
	case OpenMPI:
		out = append(env(
			"OMPI_MCA_plm_rsh_args", kubeflowConnectionAttempts,
			"OMPI_MCA_orte_set_default_slots", n,
		), openMPI5.Env(KubeflowHostfilePath, "")...)
		out = append(out, env("PRTE_MCA_plm_ssh_args", kubeflowConnectionAttempts)...)
	case OpenMPI5:
		out = env("PRTE_MCA_plm_ssh_args", kubeflowConnectionAttempts)
	}
	out = slices.DeleteFunc(out, func(e corev1.EnvVar) bool { return e.Value == "" })
	if !s.Master.IsHost {
		// The launcher only launches: it must not use the GPUs of the node it runs on.
		out = append(out, corev1.EnvVar{Name: "NVIDIA_VISIBLE_DEVICES"}, corev1.EnvVar{Name: "NVIDIA_DRIVER_CAPABILITIES"})
	}
	return out
}
