package mpi

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/troupe-dev/troupe/pkg/engine"
)

func chainerSpec() *engine.Spec {
	s := spec()
	s.MainContainer = "chainer"
	return s
}

func envValue(c *corev1.Container, name string) string {
	for _, e := range c.Env {
		if e.Name == name {
			return e.Value
		}
	}
	return ""
}

func TestSSHWorkerPod(t *testing.T) {
	s := chainerSpec()
	b := Backend{Transport: SSH{Port: 2022}}
	tmpl := template("chainer", "sidecar")
	tmpl.Spec.SecurityContext = &corev1.PodSecurityContext{RunAsUser: ptr.To[int64](1000), RunAsGroup: ptr.To[int64](1001)}
	b.DecoratePod(s, &s.WorkerSets[0], &tmpl)

	main := &tmpl.Spec.Containers[0]
	if diff := cmp.Diff([]string{"/usr/sbin/sshd", "-D", "-e", "-f", "/etc/troupe/mpi/sshd_config"}, main.Command); diff != "" {
		t.Errorf("worker command (-want +got):\n%s", diff)
	}
	wantProbe := &corev1.Probe{ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(2022)}}, PeriodSeconds: 5, FailureThreshold: 1}
	if diff := cmp.Diff(wantProbe, main.ReadinessProbe); diff != "" {
		t.Errorf("readiness probe (-want +got):\n%s", diff)
	}
	if tmpl.Spec.Containers[1].Command != nil || tmpl.Spec.Containers[1].ReadinessProbe != nil {
		t.Errorf("a sidecar was turned into sshd: %+v", tmpl.Spec.Containers[1])
	}
	if got := *tmpl.Spec.SecurityContext.FSGroup; got != 1001 {
		t.Errorf("fsGroup = %d, want the run-as group 1001 so the non-root user reads the keys", got)
	}
	wantVol := corev1.Volume{Name: "troupe-ssh", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
		SecretName: "mn-ssh", DefaultMode: ptr.To[int32](0o440),
		Items: []corev1.KeyToPath{{Key: SSHHostKey, Path: SSHHostKey}, {Key: SSHAuthorizedKey, Path: SSHAuthorizedKey}}}}}
	if diff := cmp.Diff(wantVol, tmpl.Spec.Volumes[1]); diff != "" {
		t.Errorf("SSH volume: a worker gets its host key and authorized_keys only (-want +got):\n%s", diff)
	}
	if !cmp.Equal(main.VolumeMounts[1], corev1.VolumeMount{Name: "troupe-ssh", MountPath: "/etc/troupe/ssh", ReadOnly: true}) {
		t.Errorf("the main container lacks the SSH mount: %v", main.VolumeMounts)
	}
	for _, m := range tmpl.Spec.Containers[1].VolumeMounts {
		if m.Name == "troupe-ssh" {
			t.Errorf("the sidecar mounts the SSH keys: %v", tmpl.Spec.Containers[1].VolumeMounts)
		}
	}
}

// The launcher gets the client key and known_hosts only, in its main container only, and
// starts every Open MPI daemon itself: workers hold no client key to spawn daemons with.
func TestSSHLauncherPod(t *testing.T) {
	s := chainerSpec()
	tmpl := template("sidecar", "chainer")
	Backend{Transport: SSH{}}.DecoratePod(s, nil, &tmpl)
	var vol *corev1.Volume
	for i := range tmpl.Spec.Volumes {
		if tmpl.Spec.Volumes[i].Name == sshVolumeName {
			vol = &tmpl.Spec.Volumes[i]
		}
	}
	want := []corev1.KeyToPath{{Key: SSHKnownHosts, Path: SSHKnownHosts}, {Key: SSHClientKey, Path: SSHClientKey}}
	if vol == nil || vol.Secret == nil || !cmp.Equal(want, vol.Secret.Items) {
		t.Fatalf("launcher SSH volume = %+v, want the items %v", vol, want)
	}
	mounts := func(c *corev1.Container) bool {
		for _, m := range c.VolumeMounts {
			if m.Name == sshVolumeName {
				return true
			}
		}
		return false
	}
	if mounts(&tmpl.Spec.Containers[0]) || !mounts(&tmpl.Spec.Containers[1]) {
		t.Errorf("the keys must be mounted in container chainer only: %+v", tmpl.Spec.Containers)
	}
	if got := envValue(&tmpl.Spec.Containers[1], "OMPI_MCA_plm_rsh_no_tree_spawn"); got != "1" {
		t.Errorf("OMPI_MCA_plm_rsh_no_tree_spawn = %q, want 1", got)
	}
}

func TestSSHKeepsWhatTheUserSet(t *testing.T) {
	s := chainerSpec()
	tmpl := template("chainer")
	main := &tmpl.Spec.Containers[0]
	main.Command = []string{"/start.sh"}
	main.ReadinessProbe = &corev1.Probe{PeriodSeconds: 9}
	tmpl.Spec.SecurityContext = &corev1.PodSecurityContext{RunAsUser: ptr.To[int64](1000), FSGroup: ptr.To[int64](7)}
	Backend{Transport: SSH{}}.DecoratePod(s, &s.WorkerSets[0], &tmpl)
	if main.Command[0] != "/start.sh" || main.ReadinessProbe.PeriodSeconds != 9 || *tmpl.Spec.SecurityContext.FSGroup != 7 {
		t.Errorf("the user's command, probe or fsGroup was changed: %+v %+v", main, tmpl.Spec.SecurityContext)
	}
	if got := envValue(main, EnvSSHDConfig); got != "/etc/troupe/mpi/sshd_config" {
		t.Errorf("%s = %q, want the sshd_config path for the user's own start script", EnvSSHDConfig, got)
	}
}

func TestSSHRootPodReadsKeysAt0400(t *testing.T) {
	s := chainerSpec()
	tmpl := template("chainer")
	Backend{Transport: SSH{}}.DecoratePod(s, nil, &tmpl)
	if got := *tmpl.Spec.Volumes[1].Secret.DefaultMode; got != 0o400 {
		t.Errorf("mode = %o, want 0400 for a pod running as root", got)
	}
	if tmpl.Spec.SecurityContext != nil {
		t.Errorf("a root pod got a security context: %+v", tmpl.Spec.SecurityContext)
	}
	if tmpl.Spec.Containers[0].Command != nil {
		t.Errorf("the launcher was turned into sshd")
	}
	if got := envValue(&tmpl.Spec.Containers[0], "OMPI_MCA_plm_rsh_agent"); got != "/etc/troupe/mpi/rsh-ssh" {
		t.Errorf("OMPI_MCA_plm_rsh_agent = %q, want the SSH agent script", got)
	}
}

func TestSSHObjectsAndFiles(t *testing.T) {
	s := chainerSpec()
	b := Backend{Transport: SSH{}}
	objs := b.Objects(s)
	cm := objs[0].(*corev1.ConfigMap)
	for _, k := range []string{HostfileKey, SSHDConfigKey, SSHClientConfigKey, SSHAgentKey} {
		if cm.Data[k] == "" {
			t.Errorf("ConfigMap lacks %s", k)
		}
	}
	if !strings.Contains(cm.Data[SSHDConfigKey], "Port 2222\n") {
		t.Errorf("default port is not 2222:\n%s", cm.Data[SSHDConfigKey])
	}
	secret := objs[1].(*corev1.Secret)
	if secret.Name != "mn-ssh" || secret.Data != nil {
		t.Fatalf("Objects gave %s with data %v, want mn-ssh without data (keys are generated at creation)", secret.Name, secret.Data)
	}
	if err := b.Generate(s, secret); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(secret.Data[SSHKnownHosts]), "*.mn.ml.svc,") {
		t.Errorf("known_hosts does not pin the job's domain: %q", secret.Data[SSHKnownHosts])
	}
	other := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "someone-else"}}
	if err := b.Generate(s, other); err != nil || other.Data != nil {
		t.Errorf("Generate filled a Secret that is not the job's")
	}
}

func TestKubeExecObjects(t *testing.T) {
	s := chainerSpec()
	objs := Backend{Transport: KubeExec{}}.Objects(s)[1:]
	pods := []string{"mn-workerset-ws0-0", "mn-workerset-ws0-1", "mn-workerset-gpu-0"}
	want := []client.Object{
		&corev1.ServiceAccount{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ServiceAccount"}, ObjectMeta: metav1.ObjectMeta{Name: "mn-exec"}},
		&rbacv1.Role{
			TypeMeta:   metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "Role"},
			ObjectMeta: metav1.ObjectMeta{Name: "mn-exec"},
			Rules: []rbacv1.PolicyRule{
				{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get"}, ResourceNames: pods},
				{APIGroups: []string{""}, Resources: []string{"pods/exec"}, Verbs: []string{"get", "create"}, ResourceNames: pods},
			},
		},
		&rbacv1.RoleBinding{
			TypeMeta:   metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "RoleBinding"},
			ObjectMeta: metav1.ObjectMeta{Name: "mn-exec"},
			RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: "mn-exec"},
			Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: "mn-exec", Namespace: "ml"}},
		},
	}
	if diff := cmp.Diff(want, objs); diff != "" {
		t.Errorf("KubeExec objects (-want +got):\n%s", diff)
	}

	s.WorkerSets = nil
	role := Backend{Transport: KubeExec{}}.Objects(s)[2].(*rbacv1.Role)
	if len(role.Rules) != 0 {
		t.Errorf("a job without workers got rules %v; an empty resourceNames list would allow every pod", role.Rules)
	}
}

func TestKubeExecLauncherPod(t *testing.T) {
	s := chainerSpec()
	s.Owner.UID = "job-uid-1"
	tmpl := template("chainer")
	Backend{Transport: KubeExec{}}.DecoratePod(s, nil, &tmpl)
	if tmpl.Spec.ServiceAccountName != "mn-exec" {
		t.Errorf("launcher runs as %q, want the job's own ServiceAccount mn-exec", tmpl.Spec.ServiceAccountName)
	}
	c := &tmpl.Spec.Containers[0]
	// troupe-agent first; /bin/false for the workers' orted, which checks the list too.
	if envValue(c, "OMPI_MCA_plm_rsh_agent") != KubeExecAgent+" : /bin/false" || envValue(c, EnvExecContainer) != "chainer" {
		t.Errorf("launcher env = %v, want troupe-agent (then /bin/false) as rsh agent into container chainer", c.Env)
	}
	if got := envValue(c, EnvJobUID); got == "" || got != string(s.Owner.UID) {
		t.Errorf("launcher env %s = %q, want the job's UID %q (the agent execs only into its pods)", EnvJobUID, got, s.Owner.UID)
	}

	own := template("chainer")
	own.Spec.ServiceAccountName = "mine"
	Backend{Transport: KubeExec{}}.DecoratePod(s, nil, &own)
	if own.Spec.ServiceAccountName != "mine" {
		t.Errorf("the template's own ServiceAccount was replaced")
	}
	worker := template("chainer")
	Backend{Transport: KubeExec{}}.DecoratePod(s, &s.WorkerSets[0], &worker)
	if worker.Spec.ServiceAccountName != "" {
		t.Errorf("a worker got the exec ServiceAccount: workers exec nowhere")
	}
}

func TestLauncherWait(t *testing.T) {
	s := chainerSpec()
	tmpl := template("chainer")
	Backend{Transport: SSH{Port: 2022}, AgentImage: "agent:1", WaitTimeoutSeconds: 90}.DecoratePod(s, nil, &tmpl)
	if len(tmpl.Spec.InitContainers) != 1 {
		t.Fatalf("init containers = %v, want the wait container", tmpl.Spec.InitContainers)
	}
	w := tmpl.Spec.InitContainers[0]
	wantArgs := []string{"wait", "--hostfile=/etc/troupe/mpi/hostfile", "--timeout=90s", "--transport=SSH", "--install-to=/opt/troupe/bin", "--port=2022"}
	if w.Name != WaitContainerName || w.Image != "agent:1" || !cmp.Equal(w.Args, wantArgs) {
		t.Errorf("wait container = %s %s %v, want %s agent:1 %v", w.Name, w.Image, w.Args, WaitContainerName, wantArgs)
	}
	if w.TerminationMessagePolicy != corev1.TerminationMessageFallbackToLogsOnError {
		t.Errorf("the wait's message would not reach the pod status")
	}
	if !*w.SecurityContext.RunAsNonRoot || *w.SecurityContext.AllowPrivilegeEscalation {
		t.Errorf("the wait container may run as root or escalate: %+v", w.SecurityContext)
	}
	mounts := tmpl.Spec.Containers[0].VolumeMounts
	if last := mounts[len(mounts)-1]; last.MountPath != AgentBinDir || !last.ReadOnly {
		t.Errorf("the launcher does not see the installed agent: %v", mounts)
	}

	worker := template("chainer")
	Backend{Transport: SSH{}, AgentImage: "agent:1"}.DecoratePod(s, &s.WorkerSets[0], &worker)
	if len(worker.Spec.InitContainers) != 0 {
		t.Errorf("a worker got the launcher's wait")
	}
	noWait := template("chainer")
	Backend{Transport: KubeExec{}}.DecoratePod(s, nil, &noWait)
	if len(noWait.Spec.InitContainers) != 0 {
		t.Errorf("a backend without an agent image added a wait")
	}
}

func TestWaitFailurePolicy(t *testing.T) {
	never := template("chainer")
	p := WaitFailurePolicy(&never)
	want := &batchv1.PodFailurePolicy{Rules: []batchv1.PodFailurePolicyRule{{
		Action: batchv1.PodFailurePolicyActionFailJob,
		OnExitCodes: &batchv1.PodFailurePolicyOnExitCodesRequirement{
			ContainerName: ptr.To("troupe-wait"), Operator: batchv1.PodFailurePolicyOnExitCodesOpIn, Values: []int32{3},
		},
	}}}
	if diff := cmp.Diff(want, p); diff != "" {
		t.Errorf("policy (-want +got):\n%s", diff)
	}
	onFailure := template("chainer")
	onFailure.Spec.RestartPolicy = corev1.RestartPolicyOnFailure
	if WaitFailurePolicy(&onFailure) != nil {
		t.Errorf("a policy for restartPolicy OnFailure would be refused by the Job API")
	}
}

// Hydra finds its own host by hostname only: the master's line is its bare hostname, and a
// Service of that name makes the name resolve for the proxies that connect back to it.
func TestHydraLauncherIdentity(t *testing.T) {
	s := chainerSpec()
	s.Owner.UID = "u1"
	s.NameLabel = "chainerjob.troupe.dev/name"
	d, err := DialectFor(MPICH)
	if err != nil {
		t.Fatal(err)
	}
	b := Backend{Dialect: d, Transport: SSH{}}
	want := "mn-master:1\nmn-workerset-ws0-0.mn.ml.svc:1\nmn-workerset-ws0-1.mn.ml.svc:1\nmn-workerset-gpu-0.mn.ml.svc:4\n"
	if got := b.Hostfile(s); got != want {
		t.Errorf("MPICH hostfile:\n%s\nwant:\n%s", got, want)
	}
	svc, ok := b.Objects(s)[1].(*corev1.Service)
	if !ok {
		t.Fatalf("objects = %v, want the launcher Service after the ConfigMap", b.Objects(s))
	}
	wantSvc := &corev1.Service{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
		ObjectMeta: metav1.ObjectMeta{Name: "mn-master"},
		Spec: corev1.ServiceSpec{
			ClusterIP:                corev1.ClusterIPNone,
			Selector:                 map[string]string{"troupe.dev/job-uid": "u1", "troupe.dev/role": "master"},
			PublishNotReadyAddresses: true,
		},
	}
	if diff := cmp.Diff(wantSvc, svc); diff != "" {
		t.Errorf("launcher Service (-want +got):\n%s", diff)
	}

	openMPI := Backend{Transport: SSH{}}
	if got := openMPI.Hostfile(s); !strings.HasPrefix(got, "mn-master.mn.ml.svc slots=1\n") {
		t.Errorf("Open MPI resolves names; its master line = %q, want the DNS name", got)
	}
	for _, o := range openMPI.Objects(s) {
		if _, isSvc := o.(*corev1.Service); isSvc {
			t.Errorf("Open MPI got a launcher Service it does not need")
		}
	}
}

// A generated MPIJob launcher carries the worker's user on its own container, not on the
// main container's name: the files must still be readable by it (found by the data-plane test).
func TestSSHFilesForANonRootLauncherContainer(t *testing.T) {
	s := chainerSpec()
	s.MainContainer = "mpi-worker"
	tmpl := template("mpi-launcher")
	tmpl.Spec.Containers[0].SecurityContext = &corev1.SecurityContext{RunAsUser: ptr.To[int64](1000), RunAsGroup: ptr.To[int64](1000)}
	Backend{Transport: SSH{}}.DecoratePod(s, nil, &tmpl)
	if got := *tmpl.Spec.Volumes[1].Secret.DefaultMode; got != 0o440 || tmpl.Spec.SecurityContext == nil || *tmpl.Spec.SecurityContext.FSGroup != 1000 {
		t.Errorf("mode %o, security context %+v; want 0440 and fsGroup 1000 for the non-root launcher", got, tmpl.Spec.SecurityContext)
	}
}

// The exec account's token reaches the launcher's main container and its wait only: not a
// sidecar, not a user's init container, and not through the kubelet's automount.
func TestKubeExecTokenOnlyWhereUsed(t *testing.T) {
	s := chainerSpec()
	tmpl := template("chainer")
	tmpl.Spec.Containers = append(tmpl.Spec.Containers, corev1.Container{Name: "sidecar", Image: "proxy:1"})
	tmpl.Spec.InitContainers = []corev1.Container{{Name: "setup", Image: "setup:1"}}
	Backend{Transport: KubeExec{}, AgentImage: "agent:1"}.DecoratePod(s, nil, &tmpl)
	if ptr.Deref(tmpl.Spec.AutomountServiceAccountToken, true) {
		t.Errorf("the kubelet still mounts the exec token into every container")
	}
	mounted := map[string]bool{}
	for _, c := range append(append([]corev1.Container{}, tmpl.Spec.InitContainers...), tmpl.Spec.Containers...) {
		for _, m := range c.VolumeMounts {
			if m.Name == execTokenVolume {
				mounted[c.Name] = m.MountPath == execTokenPath && m.ReadOnly
			}
		}
	}
	if want := map[string]bool{"chainer": true, WaitContainerName: true}; !cmp.Equal(mounted, want) {
		t.Errorf("containers with the exec token: %v, want %v", mounted, want)
	}
	var projected *corev1.ProjectedVolumeSource
	for _, v := range tmpl.Spec.Volumes {
		if v.Name == execTokenVolume {
			projected = v.Projected
		}
	}
	if projected == nil || projected.Sources[0].ServiceAccountToken == nil || *projected.Sources[0].ServiceAccountToken.ExpirationSeconds != execTokenSeconds {
		t.Errorf("the token volume is not a projected, expiring ServiceAccount token: %+v", projected)
	}

	own := template("chainer")
	own.Spec.ServiceAccountName = "mine"
	Backend{Transport: KubeExec{}}.DecoratePod(s, nil, &own)
	if own.Spec.AutomountServiceAccountToken != nil || hasExecToken(&own) {
		t.Errorf("a template's own ServiceAccount lost the kubelet's token mount")
	}
}
