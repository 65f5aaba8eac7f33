package integration

import (
	"context"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	troupev1 "github.com/troupe-dev/troupe/apis/troupe/v1alpha1"
	testutil "github.com/troupe-dev/troupe/pkg/testing"
)

// restrictedNamespace is a namespace whose Pod Security admission enforces "restricted".
func restrictedNamespace(t *testing.T) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "it-restricted-", Labels: map[string]string{
		"pod-security.kubernetes.io/enforce": "restricted",
	}}}
	if err := k8s.Create(context.Background(), ns); err != nil {
		t.Fatalf("create namespace: %v", err)
	}
	return ns.Name
}

// restrictedTemplate makes a user's pod template pass "restricted" the way that leaves the
// most to troupe: every setting per container, none for the pod but the user.
func restrictedTemplate(tmpl *corev1.PodTemplateSpec) {
	tmpl.Spec.SecurityContext = &corev1.PodSecurityContext{RunAsUser: ptr.To[int64](1000)}
	for i := range tmpl.Spec.Containers {
		tmpl.Spec.Containers[i].SecurityContext = &corev1.SecurityContext{
			RunAsNonRoot:             ptr.To(true),
			AllowPrivilegeEscalation: ptr.To(false),
			Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
			SeccompProfile:           &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
		}
	}
}

// podFrom asks the API server, in a dry run, to admit a pod made from a child's template, as
// the Job or StatefulSet controller would create it: Pod Security admission judges it.
func podFrom(t *testing.T, ns, name string, tmpl *corev1.PodTemplateSpec) error {
	t.Helper()
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: tmpl.Labels}, Spec: tmpl.Spec}
	return k8s.Create(context.Background(), pod, client.DryRunAll)
}

// When the user's templates pass the Pod Security Standard "restricted", so does every pod
// troupe makes of them in a namespace that enforces it: the launcher with its troupe-wait init
// container, a generated launcher, the git clones, the SSH workers with their sshd, and the
// volume claims of the job's storage.
func TestPodsPassRestrictedPodSecurity(t *testing.T) {
	ns := restrictedNamespace(t)
	job := smallMPIJob(t, ns)
	restrictedTemplate(&job.Spec.Worker.Template)
	job.Spec.AppCodesToSync = []troupev1.AppCode{{Name: "app", GitRepo: "https://git.example.com/app.git", MountPath: "/code"}}
	// Claims of the job's storage: persistentVolumeClaim volumes, which "restricted" allows.
	job.Spec.RunPolicy.Storage = &troupev1.Storage{
		ClaimTemplates: []troupev1.WorkerClaimTemplate{{Name: "ckpt", Spec: testClaimSpec("1Gi")}},
		SharedClaims:   []troupev1.SharedClaim{{Name: "data", Spec: testClaimSpec("1Gi")}},
	}
	createMPIJob(t, job)
	sts := waitFor(t, &appsv1.StatefulSet{}, ns, "mpi-example-worker")
	for _, c := range sts.Spec.VolumeClaimTemplates { // as the StatefulSet controller mounts them
		sts.Spec.Template.Spec.Volumes = append(sts.Spec.Template.Spec.Volumes, corev1.Volume{Name: c.Name,
			VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: c.Name + "-mpi-example-worker-0"}}})
	}
	if volumeClaim(&sts.Spec.Template, "ckpt") == "" || volumeClaim(&sts.Spec.Template, "data") == "" {
		t.Fatalf("the worker pod would mount no claim: %v", sts.Spec.Template.Spec.Volumes)
	}
	launcher := waitFor(t, &batchv1.Job{}, ns, "mpi-example-launcher")
	if len(launcher.Spec.Template.Spec.InitContainers) == 0 || len(sts.Spec.Template.Spec.InitContainers) == 0 {
		t.Fatalf("no init containers to judge: launcher %v, workers %v", launcher.Spec.Template.Spec.InitContainers, sts.Spec.Template.Spec.InitContainers)
	}
	if err := podFrom(t, ns, "mpi-example-worker-0", &sts.Spec.Template); err != nil {
		t.Errorf("a worker pod is refused: %v", err)
	}
	if err := podFrom(t, ns, "mpi-example-launcher-x", &launcher.Spec.Template); err != nil {
		t.Errorf("the generated launcher's pod is refused: %v", err)
	}

	// A ChainerJob: the user's master template, the KubeExec transport.
	w, err := testutil.LoadChainerJob(exampleMN, ns)
	if err != nil {
		t.Fatal(err)
	}
	chainer := w.Obj()
	restrictedTemplate(&chainer.Spec.Master.Template)
	for name, ws := range chainer.Spec.WorkerSets {
		restrictedTemplate(&ws.Template)
		chainer.Spec.WorkerSets[name] = ws
	}
	if err := k8s.Create(context.Background(), chainer); err != nil {
		t.Fatal(err)
	}
	master := waitFor(t, &batchv1.Job{}, ns, chainer.Name+"-master")
	if err := podFrom(t, ns, chainer.Name+"-master-x", &master.Spec.Template); err != nil {
		t.Errorf("the ChainerJob's master pod is refused: %v", err)
	}
}
