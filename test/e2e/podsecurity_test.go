package e2e

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	troupev1 "github.com/troupe-dev/troupe/apis/troupe/v1alpha1"
	testutil "github.com/troupe-dev/troupe/pkg/testing"
)

// restrictedNamespace is a namespace whose Pod Security admission enforces "restricted".
func restrictedNamespace(t *testing.T) string {
	t.Helper()
	ns := newNamespace(t)
	if out, err := kubectl("label", "namespace", ns, "pod-security.kubernetes.io/enforce=restricted"); err != nil {
		t.Fatalf("label namespace: %v: %s", err, out)
	}
	return ns
}

// restrictedTemplate makes a user's template pass "restricted" with every setting per
// container, leaving troupe's containers to say theirs.
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

// In a namespace that enforces "restricted", the real Job and StatefulSet controllers create
// every pod of a job whose templates pass it, and the job succeeds; a job whose templates do
// not pass reports the API server's refusal on itself (ReplicaFailure, reason FailedCreate).
func TestRestrictedNamespace(t *testing.T) {
	t.Parallel()
	ns := restrictedNamespace(t)
	w, err := testutil.LoadChainerJob(exampleMN, ns)
	if err != nil {
		t.Fatal(err)
	}
	good := w.Obj()
	restrictedTemplate(&good.Spec.Master.Template)
	for name, ws := range good.Spec.WorkerSets {
		restrictedTemplate(&ws.Template)
		good.Spec.WorkerSets[name] = ws
	}
	create(t, good)
	waitForJob(t, ns, exampleName, "Succeeded", func(j *troupev1.ChainerJob) bool { return j.Status.Phase == troupev1.JobSucceeded })

	bad := &troupev1.ChainerJob{}
	w.Obj().DeepCopyInto(bad)
	bad.ObjectMeta = metav1.ObjectMeta{Name: "not-restricted", Namespace: ns}
	create(t, bad)
	job := waitForJob(t, ns, "not-restricted", "ReplicaFailure FailedCreate", func(j *troupev1.ChainerJob) bool {
		c := meta.FindStatusCondition(j.Status.Conditions, troupev1.ConditionReplicaFailure)
		return c != nil && c.Reason == troupev1.ReasonFailedCreate
	})
	c := meta.FindStatusCondition(job.Status.Conditions, troupev1.ConditionReplicaFailure)
	t.Logf("ReplicaFailure: %s", c.Message)
	if c.Status != metav1.ConditionTrue || !strings.Contains(c.Message, `violates PodSecurity "restricted`) {
		t.Errorf("ReplicaFailure = %s %q, want True with Pod Security's refusal", c.Status, c.Message)
	}
}
