package mpi

import (
	"crypto/rand"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	troupev1 "github.com/troupe-dev/troupe/apis/troupe/v1alpha1"
	"github.com/troupe-dev/troupe/pkg/engine"
)

const (
	// DefaultSSHPort and DefaultSSHDPath are the job's defaults (apis), also used by an SSH
	// transport built without them.
	DefaultSSHPort  = troupev1.DefaultSSHPort
	DefaultSSHDPath = troupev1.DefaultSSHDPath
	// SSHMountPath is where the job's SSH Secret is mounted in every container.
	SSHMountPath = "/etc/troupe/ssh"

	// Files the SSH transport adds to the job's MPI ConfigMap.
	SSHDConfigKey      = "sshd_config"
	SSHClientConfigKey = "ssh_config"
	SSHAgentKey        = "rsh-ssh"

	// EnvSSHDConfig points at the job's sshd_config, for worker images that start sshd from a
	// script of their own.
	EnvSSHDConfig = "TROUPE_SSHD_CONFIG"

	sshVolumeName = "troupe-ssh"
	sshSecretSfx  = "-ssh"
	// The Secret's files are root-owned. Root may read them at 0400; a non-root user reads
	// them through its fsGroup at 0440. OpenSSH refuses a private key only when it is owned by
	// the user and readable by others, so both modes pass its checks.
	sshModeRoot    int32 = 0o400
	sshModeNonRoot int32 = 0o440
)

// SSH is the SSH transport: workers run sshd with a host key and an authorized key generated
// for the job alone; the launcher connects with the job's client key and a known_hosts pinning
// the host key.
type SSH struct {
	Port     int32
	SSHDPath string
	// SecretName is a Secret of the user's with the client identity and the authorized keys
	// (ssh.secretName); empty uses the generated ones.
	SecretName string
}

var (
	_ Transport        = SSH{}
	_ engine.Generator = Backend{}
)

// SSHPort is the port the workers' sshd listens on.
func (t SSH) SSHPort() int32 {
	if t.Port == 0 {
		return DefaultSSHPort
	}
	return t.Port
}

func (t SSH) sshdPath() string {
	if t.SSHDPath == "" {
		return DefaultSSHDPath
	}
	return t.SSHDPath
}

// SSHSecretName is the name of the job's SSH Secret.
func SSHSecretName(s *engine.Spec) string { return s.Name + sshSecretSfx }

// HostDomain is the DNS domain of the job's hosts: its headless Service's.
func HostDomain(s *engine.Spec) string {
	return s.ServiceName() + "." + s.Namespace + ".svc"
}

// IdentityFile is the launcher's private key inside the pods: the user's (ssh.secretName),
// else the generated one.
func (t SSH) IdentityFile() string {
	if t.SecretName != "" {
		return SSHMountPath + "/" + troupev1.SSHSecretPrivateKey
	}
	return SSHMountPath + "/" + SSHClientKey
}

// Agent is the rsh-compatible script MPI launchers start remote processes with.
func (t SSH) Agent() string { return ConfigMountPath + "/" + SSHAgentKey }

// ConfigFiles are the sshd and ssh client configurations and the agent script.
func (t SSH) ConfigFiles(s *engine.Spec) map[string]string {
	return map[string]string{
		SSHDConfigKey:      SSHDConfig(t.SSHPort(), SSHMountPath, workersMayRunAsRoot(s)),
		SSHClientConfigKey: SSHClientConfig(t.SSHPort(), t.IdentityFile(), SSHMountPath+"/"+SSHKnownHosts),
		SSHAgentKey:        SSHAgentScript(ConfigMountPath + "/" + SSHClientConfigKey),
	}
}

// Objects is the job's SSH Secret, without its data: the keys are generated once, when the
// Secret is created (Generate), and never rewritten.
func (t SSH) Objects(s *engine.Spec) []client.Object {
	return []client.Object{&corev1.Secret{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
		ObjectMeta: metav1.ObjectMeta{Name: SSHSecretName(s)},
		Type:       corev1.SecretTypeOpaque,
	}}
}

// Generate fills the job's SSH Secret with fresh keys just before it is created.
func (t SSH) Generate(s *engine.Spec, obj client.Object) error {
	secret, ok := obj.(*corev1.Secret)
	if !ok || secret.Name != SSHSecretName(s) {
		return nil
	}
	data, err := NewSSHKeyMaterial(rand.Reader, HostDomain(s))
	if err != nil {
		return fmt.Errorf("generate SSH keys: %w", err)
	}
	secret.Data = data
	return nil
}

// DecoratePod mounts the SSH files a pod's role needs into its main container only: the
// launcher gets the client key and known_hosts (it connects), a worker gets the host key and
// authorized_keys (it accepts). No other container, and no pod of another role, holds a key it
// does not use: a worker cannot log into its peers, a sidecar reads no key at all. The main
// container is the one named s.MainContainer, else (a launcher written with other names) the
// first. On workers it also runs sshd in the main container when the template gives it no
// command, and makes the pod Ready only once sshd accepts connections.
func (t SSH) DecoratePod(s *engine.Spec, ws *engine.WorkerSet, tmpl *corev1.PodTemplateSpec) {
	c := mainContainerOf(tmpl, s.MainContainer)
	if c == nil {
		return
	}
	mode, fsGroup := sshFileAccess(&tmpl.Spec, c.Name)
	if fsGroup != nil && (tmpl.Spec.SecurityContext == nil || tmpl.Spec.SecurityContext.FSGroup == nil) {
		if tmpl.Spec.SecurityContext == nil {
			tmpl.Spec.SecurityContext = &corev1.PodSecurityContext{}
		}
		tmpl.Spec.SecurityContext.FSGroup = fsGroup
	}
	tmpl.Spec.Volumes = append(tmpl.Spec.Volumes, corev1.Volume{Name: sshVolumeName, VolumeSource: t.volume(s, ws != nil, mode)})
	c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: sshVolumeName, MountPath: SSHMountPath, ReadOnly: true})
	c.Env = append(c.Env, corev1.EnvVar{Name: EnvSSHDConfig, Value: ConfigMountPath + "/" + SSHDConfigKey})
	if ws == nil {
		// Open MPI spawns daemons from daemons in large jobs (tree spawn), which would need
		// the client key on workers: the launcher starts every daemon itself.
		c.Env = append(c.Env,
			corev1.EnvVar{Name: "OMPI_MCA_plm_rsh_no_tree_spawn", Value: "1"},
			corev1.EnvVar{Name: "PRTE_MCA_plm_ssh_no_tree_spawn", Value: "1"})
		return
	}
	if len(c.Command) == 0 && len(c.Args) == 0 {
		c.Command = []string{t.sshdPath(), "-D", "-e", "-f", ConfigMountPath + "/" + SSHDConfigKey}
	}
	if c.ReadinessProbe == nil {
		c.ReadinessProbe = &corev1.Probe{
			ProbeHandler:  corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(t.SSHPort())}},
			PeriodSeconds: 5, FailureThreshold: 1,
		}
	}
}

// mainContainerOf is the container named name, else the first.
func mainContainerOf(tmpl *corev1.PodTemplateSpec, name string) *corev1.Container {
	for i := range tmpl.Spec.Containers {
		if tmpl.Spec.Containers[i].Name == name {
			return &tmpl.Spec.Containers[i]
		}
	}
	if len(tmpl.Spec.Containers) > 0 {
		return &tmpl.Spec.Containers[0]
	}
	return nil
}

// volume is the SSH files of one role: for a worker the host key and authorized_keys, for the
// launcher the client key and known_hosts; from the generated Secret, or with a Secret of the
// user's (ssh.secretName) the user's key or authorized keys beside the job's generated host key
// or known_hosts, so sshd and ssh find every file at the same paths.
func (t SSH) volume(s *engine.Spec, worker bool, mode int32) corev1.VolumeSource {
	items := func(keys ...string) []corev1.KeyToPath {
		out := make([]corev1.KeyToPath, 0, len(keys))
		for _, k := range keys {
			out = append(out, corev1.KeyToPath{Key: k, Path: k})
		}
		return out
	}
	generated, users := []string{SSHKnownHosts}, []string{troupev1.SSHSecretPrivateKey}
	ownKey := SSHClientKey
	if worker {
		generated, users = []string{SSHHostKey}, []string{troupev1.SSHSecretAuthorizedKeys}
		ownKey = SSHAuthorizedKey
	}
	if t.SecretName == "" {
		return corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
			SecretName: SSHSecretName(s), DefaultMode: ptr.To(mode), Items: items(append(generated, ownKey)...),
		}}
	}
	return corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
		DefaultMode: ptr.To(mode),
		Sources: []corev1.VolumeProjection{
			{Secret: &corev1.SecretProjection{
				LocalObjectReference: corev1.LocalObjectReference{Name: SSHSecretName(s)},
				Items:                items(generated...),
			}},
			{Secret: &corev1.SecretProjection{
				LocalObjectReference: corev1.LocalObjectReference{Name: t.SecretName},
				Items:                items(users...),
			}},
		},
	}}
}

// sshFileAccess returns the mode of the SSH Secret's files and, for a pod whose container that
// mounts them (container) runs as a non-root user and no fsGroup is set, the fsGroup that lets
// that user read them; root reads a 0440 file too.
func sshFileAccess(pod *corev1.PodSpec, container string) (int32, *int64) {
	var podUser, podGroup *int64
	if sc := pod.SecurityContext; sc != nil {
		podUser, podGroup = sc.RunAsUser, sc.RunAsGroup
	}
	for i := range pod.Containers {
		if pod.Containers[i].Name != container {
			continue
		}
		user, group := podUser, podGroup
		if sc := pod.Containers[i].SecurityContext; sc != nil {
			if sc.RunAsUser != nil {
				user = sc.RunAsUser
			}
			if sc.RunAsGroup != nil {
				group = sc.RunAsGroup
			}
		}
		if user == nil || *user == 0 {
			continue
		}
		if pod.SecurityContext != nil && pod.SecurityContext.FSGroup != nil {
			return sshModeNonRoot, nil
		}
		if group != nil {
			return sshModeNonRoot, group
		}
		return sshModeNonRoot, user
	}
	return sshModeRoot, nil
}

// workersMayRunAsRoot reports whether the main container of any worker set may run as root:
// its user (the container's, else the pod's) is 0, or unset without runAsNonRoot (the image
// then chooses, and the seeds' images run as root).
func workersMayRunAsRoot(s *engine.Spec) bool {
	if s == nil {
		return true // no job to look at (a test of the files alone): the permissive default
	}
	for i := range s.WorkerSets {
		tmpl := &s.WorkerSets[i].Template
		c := mainContainerOf(tmpl, s.MainContainer)
		if c == nil {
			return true
		}
		var user *int64
		nonRoot := false
		if psc := tmpl.Spec.SecurityContext; psc != nil {
			user, nonRoot = psc.RunAsUser, ptr.Deref(psc.RunAsNonRoot, false)
		}
		if csc := c.SecurityContext; csc != nil {
			if csc.RunAsUser != nil {
				user = csc.RunAsUser
			}
			if csc.RunAsNonRoot != nil {
				nonRoot = *csc.RunAsNonRoot
			}
		}
		if user != nil && *user == 0 || user == nil && !nonRoot {
			return true
		}
	}
	return false
}
