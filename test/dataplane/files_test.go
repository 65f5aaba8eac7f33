package dataplane

import (
	"crypto/rand"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	troupev1 "github.com/troupe-dev/troupe/apis/troupe/v1alpha1"
	"github.com/troupe-dev/troupe/controllers"
	"github.com/troupe-dev/troupe/pkg/backend/mpi"
	"github.com/troupe-dev/troupe/pkg/engine"
)

// operatorJob is one job's children exactly as the operator builds them, with the SSH
// Secret's data generated as the operator generates it when it creates the Secret.
type operatorJob struct {
	spec *engine.Spec
	// launcherContainer is the container of the master's pod that runs the launcher: the
	// kind's main container when the master is a host of the hostfile too (ChainerJob), the
	// generated "mpi-launcher" when it only launches (MPIJob).
	launcherContainer string
	services          []*corev1.Service
	configMap         *corev1.ConfigMap
	secret            *corev1.Secret
	// userSecret is the user's SSH Secret (ssh.secretName), with a key pair of its own; nil
	// when the job uses the generated keys.
	userSecret *corev1.Secret
	workers    *appsv1.StatefulSet
	master     *batchv1.Job
}

// jobName and jobNamespace are every test job's: its headless Service is dp.default.svc.
const jobName, jobNamespace = "dp", "default"

// podTemplate is a pod running container as user u; a nil command leaves the image's (on a
// worker, the SSH transport makes it run sshd).
func podTemplate(u testUser, container string, command []string) corev1.PodTemplateSpec {
	return corev1.PodTemplateSpec{Spec: corev1.PodSpec{
		SecurityContext: &corev1.PodSecurityContext{RunAsUser: ptr.To(u.uid), RunAsGroup: ptr.To(u.gid)},
		Containers: []corev1.Container{{
			Name: container, Image: "troupe/dataplane-test", Command: command,
		}},
	}}
}

// sshLaunch is every test job's transport: SSH on a port other than 22.
var sshLaunch = troupev1.MPILaunch{
	Transport: troupev1.MPITransportSSH,
	SSH:       &troupev1.SSHConfig{Port: ptr.To[int32](2222)},
}

// buildChainerJob describes a ChainerJob through the operator's own adapter and builders: a
// master with masterSlots and one worker set of two pods with workerSlots each, every pod
// running as user u. The master's "chainer" container runs masterCommand; the workers' has no
// command, so the transport makes it run sshd.
func buildChainerJob(t *testing.T, impl mpi.Implementation, u testUser, masterCommand []string, masterSlots, workerSlots int32) *operatorJob {
	t.Helper()
	job := &troupev1.ChainerJob{
		ObjectMeta: metav1.ObjectMeta{Name: jobName, Namespace: jobNamespace, UID: "uid-1"},
		Spec: troupev1.ChainerJobSpec{
			MPILaunch: sshLaunch,
			Master: troupev1.ChainerMaster{
				Template:  podTemplate(u, troupev1.ChainerMainContainer, masterCommand),
				MPIConfig: &troupev1.MPIConfig{Slots: ptr.To(masterSlots)},
			},
			WorkerSets: map[string]troupev1.ChainerWorkerSet{"ws0": {
				Replicas:  ptr.To[int32](2),
				MPIConfig: &troupev1.MPIConfig{Slots: ptr.To(workerSlots)},
				Template:  podTemplate(u, troupev1.ChainerMainContainer, nil),
			}},
		},
	}
	s := &engine.Spec{
		Name:      job.Name,
		Namespace: job.Namespace,
		Owner:     *metav1.NewControllerRef(job, troupev1.GroupVersion.WithKind("ChainerJob")),
		NameLabel: controllers.ChainerJobNameLabel,
	}
	if err := (controllers.ChainerJob{}).Describe(job, s); err != nil {
		t.Fatalf("describe the ChainerJob: %v", err)
	}
	// ChainerJob has no implementation field; other MPI kinds choose the dialect like this.
	b, ok := s.Backend.(mpi.Backend)
	if !ok {
		t.Fatalf("the ChainerJob's backend is %T, want mpi.Backend", s.Backend)
	}
	d, err := mpi.DialectFor(impl)
	if err != nil {
		t.Fatal(err)
	}
	b.Dialect = d
	s.Backend = b
	return newOperatorJob(t, s, troupev1.ChainerMainContainer)
}

// buildMPIJob describes an MPIJob of spec, with the SSH transport, through the operator's own
// adapter and builders. Without a launcher template the operator generates the launcher: the
// worker's image, environment and user running mpirun with spec's mpiHome, mca,
// worker.extraMPIArgs and worker.cmd.
func buildMPIJob(t *testing.T, spec troupev1.MPIProgramSpec) *operatorJob {
	t.Helper()
	launch := sshLaunch
	if spec.SSH != nil && spec.SSH.SecretName != "" {
		ssh := *launch.SSH
		ssh.SecretName = spec.SSH.SecretName
		launch.SSH = &ssh
	}
	spec.MPILaunch = launch
	job := &troupev1.MPIJob{
		ObjectMeta: metav1.ObjectMeta{Name: jobName, Namespace: jobNamespace, UID: "uid-2"},
		Spec:       troupev1.MPIJobSpec{MPIProgramSpec: spec},
	}
	s := &engine.Spec{
		Name:      job.Name,
		Namespace: job.Namespace,
		Owner:     *metav1.NewControllerRef(job, troupev1.GroupVersion.WithKind("MPIJob")),
		NameLabel: controllers.MPIJobNameLabel,
	}
	if err := (controllers.MPIJob{}).Describe(job, s); err != nil {
		t.Fatalf("describe the MPIJob: %v", err)
	}
	return newOperatorJob(t, s, troupev1.MPILauncherContainer)
}

// newOperatorJob builds the children of s as the engine does and generates the SSH Secret's
// data. No AgentImage: the master gets no wait init container; the test waits for the
// workers' sshd itself, as the readiness probe would.
func newOperatorJob(t *testing.T, s *engine.Spec, launcherContainer string) *operatorJob {
	t.Helper()
	j := &operatorJob{spec: s, launcherContainer: launcherContainer}
	for _, obj := range engine.Children(s, false) {
		switch o := obj.(type) {
		case *corev1.Service:
			j.services = append(j.services, o)
		case *corev1.ConfigMap:
			j.configMap = o
		case *corev1.Secret:
			j.secret = o
		case *appsv1.StatefulSet:
			j.workers = o
		case *batchv1.Job:
			j.master = o
		}
	}
	if j.configMap == nil || j.secret == nil || j.workers == nil || j.master == nil {
		t.Fatalf("the operator's children lack a ConfigMap, Secret, StatefulSet or Job: %+v", j)
	}
	gen, ok := s.Backend.(engine.Generator)
	if !ok {
		t.Fatalf("backend %T generates no data", s.Backend)
	}
	if err := gen.Generate(s, j.secret); err != nil {
		t.Fatalf("generate the SSH Secret: %v", err)
	}
	if ssh, ok := s.Backend.(mpi.Backend).Transport.(mpi.SSH); ok && ssh.SecretName != "" {
		j.userSecret = userSSHSecret(t, ssh.SecretName)
	}
	return j
}

// hostfileEntry is one line of the job's hostfile.
type hostfileEntry struct {
	name  string
	slots int
}

// hostfile parses the ConfigMap's hostfile, in either dialect ("host slots=N", "host:N").
func (j *operatorJob) hostfile(t *testing.T) []hostfileEntry {
	t.Helper()
	var out []hostfileEntry
	for _, line := range strings.Split(strings.TrimSpace(j.configMap.Data[mpi.HostfileKey]), "\n") {
		name, slots, ok := strings.Cut(line, " slots=")
		if !ok {
			name, slots, ok = strings.Cut(line, ":")
		}
		n, err := strconv.Atoi(slots)
		if !ok || err != nil {
			t.Fatalf("hostfile line %q: want \"host slots=N\" or \"host:N\"", line)
		}
		out = append(out, hostfileEntry{name: name, slots: n})
	}
	return out
}

// pod is one pod of the job as the kubelet would run it.
type pod struct {
	// hostname is the pod's hostname; dnsName the name the headless Service gives it.
	hostname, dnsName string
	// serviceNames are the names of the other headless Services of the job that select the
	// pod: cluster DNS resolves them (and, through the pod's search path, their bare names) to
	// the pod's address.
	serviceNames []string
	spec         corev1.PodSpec
	// container is the one the test runs: the launcher's on the master, the main one on
	// workers.
	container corev1.Container
}

// pods lists the job's pods as Kubernetes runs them: the master Job's pod with the hostname
// and subdomain of its template, the StatefulSet's pods <name>-<ordinal> with its serviceName
// as subdomain. Each gets the DNS name cluster DNS gives a pod: <hostname>.<subdomain>.<ns>.svc
// when a headless Service named like the subdomain selects it, else none.
func (j *operatorJob) pods(t *testing.T) (master pod, workers []pod) {
	t.Helper()
	newPod := func(hostname, subdomain string, tmpl corev1.PodTemplateSpec, container string) pod {
		p := pod{hostname: hostname, spec: tmpl.Spec}
		for _, c := range tmpl.Spec.Containers {
			if c.Name == container {
				p.container = c
			}
		}
		if p.container.Name == "" {
			t.Fatalf("pod %s has no container %q", hostname, container)
		}
		for _, svc := range j.services {
			selected := len(svc.Spec.Selector) > 0
			for k, v := range svc.Spec.Selector {
				selected = selected && tmpl.Labels[k] == v
			}
			switch {
			case svc.Name == subdomain && svc.Spec.ClusterIP == corev1.ClusterIPNone && selected:
				p.dnsName = hostname + "." + subdomain + "." + svc.Namespace + ".svc"
			case svc.Spec.ClusterIP == corev1.ClusterIPNone && selected:
				p.serviceNames = append(p.serviceNames, svc.Name+"."+svc.Namespace+".svc", svc.Name)
			}
		}
		if p.dnsName == "" {
			t.Fatalf("pod %s (subdomain %q) gets no DNS name: no headless Service %q of the job selects it", hostname, subdomain, subdomain)
		}
		return p
	}
	mt := j.master.Spec.Template
	master = newPod(mt.Spec.Hostname, mt.Spec.Subdomain, mt, j.launcherContainer)
	for i := range ptr.Deref(j.workers.Spec.Replicas, 1) {
		workers = append(workers, newPod(fmt.Sprintf("%s-%d", j.workers.Name, i), j.workers.Spec.ServiceName, j.workers.Spec.Template, j.spec.MainContainer))
	}
	return master, workers
}

// bindMount is one volume mount of a container: the kubelet's volume directory src mounted at
// dst.
type bindMount struct {
	src, dst string
	readOnly bool
}

// materialise writes the pod's ConfigMap and Secret volumes under dir the way the kubelet does
// and returns the container's mounts of them. Like the kubelet's atomic writer, each
// volume is a directory holding a timestamped directory with the files (mode: the volume's
// defaultMode), a "..data" link to it and one link per key; with an fsGroup, the kubelet then
// gives every file that group and adds read permission for it (SetVolumeOwnership, read-only
// volumes), and makes directories setgid. Everything is owned by root.
func (j *operatorJob) materialise(t *testing.T, dir string, p pod) []bindMount {
	t.Helper()
	volumes := map[string]string{}
	for _, v := range p.spec.Volumes {
		var data map[string][]byte
		var mode *int32
		switch {
		case v.ConfigMap != nil:
			if v.ConfigMap.Name != j.configMap.Name || len(v.ConfigMap.Items) > 0 {
				t.Fatalf("volume %s: ConfigMap %s with items %v: the test knows only %s, whole", v.Name, v.ConfigMap.Name, v.ConfigMap.Items, j.configMap.Name)
			}
			data = map[string][]byte{}
			for k, s := range j.configMap.Data {
				data[k] = []byte(s)
			}
			mode = v.ConfigMap.DefaultMode
		case v.Projected != nil:
			data = j.projected(t, v.Projected)
			mode = v.Projected.DefaultMode
		case v.Secret != nil:
			if v.Secret.SecretName != j.secret.Name {
				t.Fatalf("volume %s: Secret %s: the test knows only %s", v.Name, v.Secret.SecretName, j.secret.Name)
			}
			// The items a pod's role needs, or the whole Secret.
			data = j.secret.Data
			if len(v.Secret.Items) > 0 {
				data = map[string][]byte{}
				for _, item := range v.Secret.Items {
					value, ok := j.secret.Data[item.Key]
					if !ok {
						t.Fatalf("Secret %s has no key %s", j.secret.Name, item.Key)
					}
					data[item.Path] = value
				}
			}
			mode = v.Secret.DefaultMode
		default:
			t.Fatalf("volume %s: only ConfigMap and Secret volumes are emulated", v.Name)
		}
		vdir := filepath.Join(dir, p.hostname, v.Name)
		writeVolume(t, vdir, data, os.FileMode(ptr.Deref(mode, corev1.ConfigMapVolumeSourceDefaultMode)))
		if sc := p.spec.SecurityContext; sc != nil && sc.FSGroup != nil {
			setVolumeOwnership(t, vdir, int(*sc.FSGroup))
		}
		volumes[v.Name] = vdir
	}
	var mounts []bindMount
	for _, m := range p.container.VolumeMounts {
		src, ok := volumes[m.Name]
		if !ok || m.SubPath != "" {
			t.Fatalf("container %s mounts %s (subPath %q): not a whole emulated volume", p.container.Name, m.Name, m.SubPath)
		}
		mounts = append(mounts, bindMount{src: src, dst: m.MountPath, readOnly: m.ReadOnly})
	}
	return mounts
}

// userSSHSecret is a Secret of the user's as ssh.secretName names it: a key pair the operator
// did not generate, the private key under ssh-privatekey and its public key in authorized_keys.
func userSSHSecret(t *testing.T, name string) *corev1.Secret {
	t.Helper()
	keys, err := mpi.NewSSHKeyMaterial(rand.Reader, "unused.svc")
	if err != nil {
		t.Fatalf("generate the user's key: %v", err)
	}
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: jobNamespace},
		Type:       corev1.SecretTypeSSHAuth,
		Data: map[string][]byte{
			troupev1.SSHSecretPrivateKey:     keys[mpi.SSHClientKey],
			troupev1.SSHSecretAuthorizedKeys: keys[mpi.SSHClientPubKey],
		},
	}
}

// projected gathers the files of a projected volume from the job's Secrets, as the kubelet
// does: each source's items under their paths.
func (j *operatorJob) projected(t *testing.T, v *corev1.ProjectedVolumeSource) map[string][]byte {
	t.Helper()
	data := map[string][]byte{}
	for _, src := range v.Sources {
		var from *corev1.Secret
		switch {
		case src.Secret == nil:
			t.Fatalf("projected source %+v: only Secrets are emulated", src)
		case src.Secret.Name == j.secret.Name:
			from = j.secret
		case j.userSecret != nil && src.Secret.Name == j.userSecret.Name:
			from = j.userSecret
		default:
			t.Fatalf("projected Secret %s: the test knows only %s and the user's", src.Secret.Name, j.secret.Name)
		}
		for _, item := range src.Secret.Items {
			value, ok := from.Data[item.Key]
			if !ok {
				t.Fatalf("Secret %s has no key %s", from.Name, item.Key)
			}
			data[item.Path] = value
		}
	}
	return data
}

// writeVolume lays out a volume like the kubelet's atomic writer: the volume directory (an
// emptyDir, mode 0777), a timestamped directory (0755) with the files, "..data" pointing at it,
// and each key a link to "..data/<key>".
func writeVolume(t *testing.T, vdir string, data map[string][]byte, mode os.FileMode) {
	t.Helper()
	ts := time.Now().UTC().Format("..2006_01_02_15_04_05.000000000")
	must(t, os.MkdirAll(filepath.Join(vdir, ts), 0o755))
	must(t, os.Chmod(vdir, 0o777))
	must(t, os.Chmod(filepath.Join(vdir, ts), 0o755))
	for k, v := range data {
		f := filepath.Join(vdir, ts, k)
		must(t, os.WriteFile(f, v, mode))
		must(t, os.Chmod(f, mode))
		must(t, os.Symlink(filepath.Join("..data", k), filepath.Join(vdir, k)))
	}
	must(t, os.Symlink(ts, filepath.Join(vdir, "..data")))
}

// setVolumeOwnership is the kubelet's SetVolumeOwnership for a read-only volume: group fsGroup
// on everything, group and owner read on files, and setgid plus search on directories.
func setVolumeOwnership(t *testing.T, vdir string, fsGroup int) {
	t.Helper()
	must(t, filepath.Walk(vdir, func(path string, info os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		if err := os.Lchown(path, -1, fsGroup); err != nil {
			return err
		}
		if info.Mode()&os.ModeSymlink != 0 {
			return nil
		}
		mask := os.FileMode(0o440)
		if info.IsDir() {
			mask |= os.ModeSetgid | 0o110
		}
		return os.Chmod(path, info.Mode()|mask)
	}))
}

// containerEnv is the container's own environment: the variables of the pod template. The
// runtime adds the image's (PATH, LD_PRELOAD, ...), HOSTNAME and the user's HOME, and the
// template's win, as under the kubelet.
func containerEnv(t *testing.T, p pod) []string {
	t.Helper()
	var env []string
	for _, e := range p.container.Env {
		if e.ValueFrom != nil {
			t.Fatalf("container %s: env %s comes from %v; the test emulates plain values only", p.container.Name, e.Name, e.ValueFrom)
		}
		env = append(env, e.Name+"="+e.Value)
	}
	return env
}

// credentials are the user, group and supplementary groups of the container's processes,
// from the pod's and the container's security contexts as the kubelet applies them.
func credentials(t *testing.T, p pod) (uid, gid int64, groups []int64) {
	t.Helper()
	var user, group *int64
	if sc := p.spec.SecurityContext; sc != nil {
		user, group = sc.RunAsUser, sc.RunAsGroup
		if sc.FSGroup != nil {
			groups = append(groups, *sc.FSGroup)
		}
		groups = append(groups, sc.SupplementalGroups...)
	}
	if sc := p.container.SecurityContext; sc != nil {
		if sc.RunAsUser != nil {
			user = sc.RunAsUser
		}
		if sc.RunAsGroup != nil {
			group = sc.RunAsGroup
		}
	}
	if user == nil || group == nil || *user == 0 {
		t.Fatalf("pod %s: want a non-root runAsUser and a runAsGroup, got %v, %v", p.hostname, user, group)
	}
	return *user, *group, groups
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
