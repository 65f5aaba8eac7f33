package engine

import (
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	troupev1 "github.com/troupe-dev/troupe/apis/troupe/v1alpha1"
)

// Every pod of a job with appCodesToSync clones each repository in an init container that runs
// before any other, as the main container's user, and mounts it in every container.
func TestCodeSyncWiring(t *testing.T) {
	s := testSpec()
	s.MainContainer = "main"
	s.Master.Template.Spec.InitContainers = []corev1.Container{{Name: "user-init", Image: "init:1"}}
	s.Master.Template.Spec.Containers = append(s.Master.Template.Spec.Containers, corev1.Container{Name: "sidecar", Image: "log:1"})
	s.Master.Template.Spec.Containers[0].SecurityContext = &corev1.SecurityContext{RunAsUser: ptr.To[int64](1000), RunAsGroup: ptr.To[int64](100)}
	s.CodeSync = CodeSync{Image: "agent:1", Repos: []troupev1.AppCode{
		{Name: "app", GitRepo: "https://git.example.com/app.git", MountPath: "/app"},
		{Name: "data", GitRepo: "git@git.example.com:org/data.git", GitBranch: "v2", MountPath: "/data", SubPath: "sets", GitSecretName: "key"},
	}}
	pod := BuildMasterJob(s).Spec.Template.Spec

	var inits []string
	for _, c := range pod.InitContainers {
		inits = append(inits, c.Name)
	}
	if diff := cmp.Diff([]string{"git-app", "git-data", "user-init"}, inits); diff != "" {
		t.Errorf("init containers: the clones come first (-want +got):\n%s", diff)
	}
	sec := &corev1.SecurityContext{
		RunAsUser: ptr.To[int64](1000), RunAsGroup: ptr.To[int64](100), RunAsNonRoot: ptr.To(true),
		AllowPrivilegeEscalation: ptr.To(false), ReadOnlyRootFilesystem: ptr.To(true),
		Capabilities:   &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
		SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
	}
	want := corev1.Container{
		Name: "git-data", Image: "agent:1", Command: []string{"/troupe-agent"},
		Args: []string{"git-sync", "--repo=git@git.example.com:org/data.git", "--dest=/troupe/code", "--branch=v2", "--ssh-dir=/etc/troupe/git-ssh"},
		VolumeMounts: []corev1.VolumeMount{
			{Name: "code-data", MountPath: "/troupe/code"},
			{Name: "git-ssh-data", MountPath: "/etc/troupe/git-ssh", ReadOnly: true},
		},
		TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
		Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("50m"), corev1.ResourceMemory: resource.MustParse("64Mi")},
			Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("1Gi")},
		},
		SecurityContext: sec,
	}
	if diff := cmp.Diff(want, pod.InitContainers[1]); diff != "" {
		t.Errorf("git init container (-want +got):\n%s", diff)
	}
	// The user's own init container runs after the clones and sees the code too.
	userInit := pod.InitContainers[2].VolumeMounts
	if !slices.ContainsFunc(userInit, func(m corev1.VolumeMount) bool { return m.Name == "code-app" && m.MountPath == "/app" }) {
		t.Errorf("user init container mounts %v, want the code of app at /app", userInit)
	}
	for _, c := range pod.Containers {
		var mounts []corev1.VolumeMount
		for _, m := range c.VolumeMounts {
			if m.Name == "code-app" || m.Name == "code-data" {
				mounts = append(mounts, m)
			}
		}
		wantMounts := []corev1.VolumeMount{{Name: "code-app", MountPath: "/app"}, {Name: "code-data", MountPath: "/data", SubPath: "sets"}}
		if diff := cmp.Diff(wantMounts, mounts); diff != "" {
			t.Errorf("container %s mounts (-want +got):\n%s", c.Name, diff)
		}
	}
	wantVolumes := map[string]corev1.VolumeSource{
		"code-app":     {EmptyDir: &corev1.EmptyDirVolumeSource{}},
		"code-data":    {EmptyDir: &corev1.EmptyDirVolumeSource{}},
		"git-ssh-data": {Secret: &corev1.SecretVolumeSource{SecretName: "key", DefaultMode: ptr.To[int32](0o444)}},
	}
	for _, v := range pod.Volumes {
		if w, ok := wantVolumes[v.Name]; ok {
			if diff := cmp.Diff(w, v.VolumeSource); diff != "" {
				t.Errorf("volume %s (-want +got):\n%s", v.Name, diff)
			}
			delete(wantVolumes, v.Name)
		}
	}
	if len(wantVolumes) > 0 {
		t.Errorf("volumes missing: %v", wantVolumes)
	}
	// Workers are wired the same way; a job without repositories is left as it was.
	if w := BuildWorkerStatefulSet(s, &s.WorkerSets[0], false).Spec.Template.Spec; len(w.InitContainers) != 2 {
		t.Errorf("worker init containers = %v, want the two clones", w.InitContainers)
	}
	// A pod that names no user: the clone runs as the agent's non-root user; a pod of root:
	// as root (the pod's), not refused by runAsNonRoot.
	w := BuildWorkerStatefulSet(s, &s.WorkerSets[0], false).Spec.Template.Spec.InitContainers[0].SecurityContext
	if *w.RunAsUser != 65532 || !*w.RunAsNonRoot {
		t.Errorf("worker clone runs as %v (non-root %v), want 65532, non-root", *w.RunAsUser, *w.RunAsNonRoot)
	}
	s.WorkerSets[0].Template.Spec.SecurityContext = &corev1.PodSecurityContext{RunAsUser: ptr.To[int64](0)}
	w = BuildWorkerStatefulSet(s, &s.WorkerSets[0], false).Spec.Template.Spec.InitContainers[0].SecurityContext
	if w.RunAsUser != nil || *w.RunAsNonRoot {
		t.Errorf("clone in a root pod: user %v, non-root %v; want the pod's user, runAsNonRoot false", w.RunAsUser, *w.RunAsNonRoot)
	}
	plain := testSpec()
	if pod := BuildMasterJob(plain).Spec.Template.Spec; len(pod.InitContainers) != 0 || len(pod.Volumes) != 0 {
		t.Errorf("a job without appCodesToSync got %v and %v", pod.InitContainers, pod.Volumes)
	}
}

func TestPodDisruptionBudget(t *testing.T) {
	s := testSpec()
	if buildPodDisruptionBudget(s, false) != nil {
		t.Fatal("a budget for a job that asked for none")
	}
	s.SchedulingPolicy.PodDisruptionBudget = &troupev1.PodDisruptionBudgetPolicy{Enabled: true}
	want := &policyv1.PodDisruptionBudget{
		TypeMeta: metav1.TypeMeta{APIVersion: "policy/v1", Kind: "PodDisruptionBudget"},
		ObjectMeta: metav1.ObjectMeta{
			Name: "train", Namespace: "ml", OwnerReferences: []metav1.OwnerReference{testOwner},
			Labels: map[string]string{testNameLabel: "train", troupev1.LabelJobName: "train", troupev1.LabelJobUID: "uid-1"},
		},
		Spec: policyv1.PodDisruptionBudgetSpec{
			MinAvailable: ptr.To(intstr.FromInt32(3)),
			Selector:     &metav1.LabelSelector{MatchLabels: map[string]string{troupev1.LabelJobUID: "uid-1", troupev1.LabelRole: "worker"}},
		},
	}
	if diff := cmp.Diff(want, noHash(buildPodDisruptionBudget(s, false))); diff != "" {
		t.Errorf("budget (-want +got):\n%s", diff)
	}
	if got := buildPodDisruptionBudget(s, true).Spec.MinAvailable.IntValue(); got != 0 {
		t.Errorf("minAvailable of released workers = %d, want 0", got)
	}
	// Workers kept after the job ended (cleanPodPolicy None, or a failure with
	// cleanPodPolicyOn Succeeded) are not released, but a drain must not wait for them.
	ended := *s
	ended.Plan.Verdict = troupev1.JobSucceeded
	if got := buildPodDisruptionBudget(&ended, false).Spec.MinAvailable.IntValue(); got != 0 {
		t.Errorf("minAvailable of the kept workers of an ended job = %d, want 0", got)
	}
	var kinds []string
	for _, o := range Children(s, false) {
		kinds = append(kinds, keyOf(o).Kind)
	}
	if diff := cmp.Diff([]string{"Service", "PodDisruptionBudget", "NetworkPolicy", "StatefulSet", "StatefulSet", "Job"}, kinds); diff != "" {
		t.Errorf("children (-want +got):\n%s", diff)
	}
}

// Only a change of the replicas the engine did not make is taken for a scale outside the job.
func TestScaledOutside(t *testing.T) {
	s := testSpec()
	ws := &s.WorkerSets[0]
	written := BuildWorkerStatefulSet(s, ws, false)
	byUser := written.DeepCopy()
	byUser.Spec.Replicas = ptr.To[int32](5)
	if !scaledOutside(byUser, BuildWorkerStatefulSet(s, ws, false)) {
		t.Error("kubectl scale statefulset not noticed")
	}
	if scaledOutside(written, BuildWorkerStatefulSet(s, ws, false)) {
		t.Error("an untouched StatefulSet taken for a scale outside the job")
	}
	ws.Replicas = 4 // the job was scaled: the engine's own change
	if scaledOutside(written, BuildWorkerStatefulSet(s, ws, false)) {
		t.Error("scaling the job taken for a scale outside it")
	}
	if scaledOutside(written, BuildWorkerStatefulSet(s, &s.WorkerSets[0], true)) {
		t.Error("releasing the workers taken for a scale outside the job")
	}
}

// A missing Secret of the user's is the job's Initialized condition, after a name conflict
// and before children still being created.
func TestInitializedReportsMissingSecrets(t *testing.T) {
	s := testSpec()
	o := observe().master(nil).workers("cpu", 2).workers("gpu", 1).obj()
	o.SecretProblems = []string{`spec.ssh.secretName: Secret "k" not found; create it with the keys ssh-privatekey, authorized_keys`}
	o.Missing = []childRef{{Kind: "Job", Name: "train-master"}}
	st := computeStatus(s, o, &troupev1.JobStatus{}, 1, now)
	c := meta.FindStatusCondition(st.Conditions, troupev1.ConditionInitialized)
	if c == nil || c.Status != metav1.ConditionFalse || c.Reason != troupev1.ReasonSecretMissing || c.Message != o.SecretProblems[0] {
		t.Errorf("Initialized = %+v, want False, SecretMissing, %q", c, o.SecretProblems[0])
	}
}

// A run mode's skipInitContainer skips the job's init containers and the launcher's wait, but
// never the clones of appCodesToSync: debug and resumed pods still find their code.
func TestSkipInitContainerKeepsTheCode(t *testing.T) {
	s := testSpec()
	s.CodeSync = CodeSync{Image: "agent:1", Repos: []troupev1.AppCode{{Name: "app", GitRepo: "https://example.com/app.git", MountPath: "/app"}}}
	s.Master.Template.Spec.InitContainers = []corev1.Container{{Name: "prepare", Image: "busybox"}}
	s.RunMode.Debug = &ReplicaOverrides{Master: ReplicaOverride{SkipInitContainers: true}}
	var names []string
	for _, c := range BuildMasterJob(s).Spec.Template.Spec.InitContainers {
		names = append(names, c.Name)
	}
	if !slices.Equal(names, []string{GitContainerName("app")}) {
		t.Errorf("init containers with skipInitContainer = %v, want only the clone %s", names, GitContainerName("app"))
	}
}
