package e2e

import (
	"context"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	troupev1 "github.com/troupe-dev/troupe/apis/troupe/v1alpha1"
)

// simExitCodeAnnot and simExitReasonAnnot tell a failing simulated pod
// (troupe.dev/sim-outcome=fail) its containers' exit code and termination reason.
const (
	simExitCodeAnnot   = "troupe.dev/sim-exit-code"
	simExitReasonAnnot = "troupe.dev/sim-exit-reason"
)

// A launcher that exits 3, under a rule that fails the job on exit code 3: the job fails at
// once, with restarts and launcher retries left (maxRestarts 2, backoffLimit 6): one launcher
// pod, no restart, and the Failed condition names the rule.
func TestLauncherExitCodeRuleFailsAtOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ns := newNamespace(t)
	job := loadMPIJob(t, ns)
	// The generated launcher takes the worker template's metadata; simulated workers (a
	// StatefulSet's pods) do not exit.
	job.Spec.Worker.Template.Labels = map[string]string{simOutcomeLabel: simOutcomeFail}
	job.Spec.Worker.Template.Annotations = map[string]string{simDurationAnnot: "2s", simExitCodeAnnot: "3"}
	job.Spec.RunPolicy.FailurePolicy = &troupev1.FailurePolicy{MaxRestarts: 2, Rules: []troupev1.FailureRule{{
		Name: "bug", Action: troupev1.FailJobAction, OnExitCodes: &troupev1.ExitCodeMatch{Values: []int32{3}},
	}}}
	if err := k8s.Create(ctx, job); err != nil {
		t.Fatal(err)
	}
	var got troupev1.MPIJob
	waitForExampleMPIJob(t, ns, "Failed", func(j *troupev1.MPIJob) bool {
		j.DeepCopyInto(&got)
		return j.Status.Phase == troupev1.JobFailed
	})
	c := meta.FindStatusCondition(got.Status.Conditions, troupev1.ConditionFailed)
	if c == nil || c.Reason != troupev1.ReasonFailJobRule ||
		!strings.HasPrefix(c.Message, `rule "bug" (FailJob): launcher Job mpi-example-launcher failed (PodFailurePolicy`) ||
		!strings.Contains(c.Message, "exited 3") {
		t.Errorf("Failed condition %+v, want reason %s naming rule bug and the exit 3", c, troupev1.ReasonFailJobRule)
	}
	if got.Status.Restarts != 0 {
		t.Errorf("status.restarts = %d, want 0: the rule fails the job at once", got.Status.Restarts)
	}
	launchers, err := podsOf(ctx, ns, troupev1.RoleMaster)
	if err != nil || len(launchers) != 1 {
		t.Errorf("%d launcher pods (%v), want 1: the exit fails the launcher Job without a retry", len(launchers), err)
	}
}

// The same rule in the forms users bring from kubeflow, whose launcher or master restarts
// OnFailure unless told otherwise (mpi-operator's MPIJob launcher by default, training-operator's
// PyTorchJob master as its manifests write it): the master Job runs it with restartPolicy Never,
// so its pod failure policy fails the job on the first exit 42: reason FailJobRule, one master
// pod, no restart.
func TestMasterExitCodeRuleFailsAtOnceInKubeflowForms(t *testing.T) {
	t.Parallel()
	rule := &troupev1.FailurePolicy{Rules: []troupev1.FailureRule{{
		Name: "bug", Action: troupev1.FailJobAction, OnExitCodes: &troupev1.ExitCodeMatch{Values: []int32{42}},
	}}}
	failing := func(tmpl *corev1.PodTemplateSpec) {
		tmpl.Labels = map[string]string{simOutcomeLabel: simOutcomeFail}
		tmpl.Annotations = map[string]string{simDurationAnnot: "2s", simExitCodeAnnot: "42"}
	}
	forms := map[string]func(t *testing.T, ns string) client.Object{
		"kubeflow MPIJob (pi.yaml)": func(t *testing.T, ns string) client.Object {
			job := kubeflowManifest(t, filepath.Join("..", "manifests", "kubeflow", "pi.yaml"), ns)
			r := rule.DeepCopy()
			r.Rules[0].OnReplicas = []string{string(troupev1.ReplicaLauncher)} // as the user wrote it
			job.Spec.RunPolicy.FailurePolicy = r
			failing(&job.Spec.MPIReplicaSpecs.Launcher.Template)
			return job
		},
		"training-operator PyTorchJob (simple.yaml)": func(t *testing.T, ns string) client.Object {
			job := trainingOperatorManifest(t, filepath.Join("..", "manifests", "training-operator", "simple.yaml"), ns)
			job.Spec.RunPolicy.FailurePolicy = rule.DeepCopy()
			failing(&job.Spec.PyTorchReplicaSpecs.Master.Template)
			return job
		},
	}
	for name, build := range forms {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			ns := newNamespace(t)
			job := build(t, ns)
			created := time.Now()
			if err := k8s.Create(ctx, job); err != nil {
				t.Fatal(err)
			}
			var st troupev1.JobStatus
			eventually(t, name+" Failed", func(ctx context.Context) (bool, error) {
				got := job.DeepCopyObject().(client.Object)
				err := k8s.Get(ctx, client.ObjectKeyFromObject(job), got)
				if err == nil {
					st = *got.(interface{ JobStatus() *troupev1.JobStatus }).JobStatus()
				}
				return err == nil && st.Phase == troupev1.JobFailed, err
			})
			t.Logf("Failed %.1f s after its create (the master exits 2 s after it starts)", time.Since(created).Seconds())
			c := meta.FindStatusCondition(st.Conditions, troupev1.ConditionFailed)
			if c == nil || c.Reason != troupev1.ReasonFailJobRule || !strings.Contains(c.Message, "exited 42") {
				t.Errorf("Failed condition %+v, want reason %s naming the exit 42", c, troupev1.ReasonFailJobRule)
			}
			if st.Restarts != 0 {
				t.Errorf("status.restarts = %d, want 0", st.Restarts)
			}
			masters, err := podsOf(ctx, ns, troupev1.RoleMaster)
			if err != nil || len(masters) != 1 {
				t.Fatalf("%d master pods (%v), want 1: the first exit fails the master Job", len(masters), err)
			}
			if p := masters[0].Spec.RestartPolicy; p != corev1.RestartPolicyNever {
				t.Errorf("the master pod restarts %s, want Never", p)
			}
			// The local cluster runs Kubernetes 1.35: the other exit codes restart the
			// container in place, as the template's OnFailure asked.
			main := masters[0].Spec.Containers[0]
			if rules := main.RestartPolicyRules; ptr.Deref(main.RestartPolicy, "") != corev1.ContainerRestartPolicyNever || len(rules) != 1 ||
				rules[0].Action != corev1.ContainerRestartRuleActionRestart || rules[0].ExitCodes == nil ||
				rules[0].ExitCodes.Operator != corev1.ContainerRestartRuleOnExitCodesOpNotIn || !slices.Equal(rules[0].ExitCodes.Values, []int32{0, 42}) {
				t.Errorf("the master's container %s: restartPolicy %v, rules %+v; want Never, Restart on exit codes NotIn [0 42]",
					main.Name, ptr.Deref(main.RestartPolicy, ""), rules)
			}
		})
	}
}

// A worker evicted by `kubectl drain` of its node restarts the job without spending its budget
// (maxRestarts 0): an eviction is a disruption. The status counts the restart as Evicted and
// not counted, and the job runs again on the node left and Succeeds.
func TestDrainedWorkerRestartsWithoutSpendingTheBudget(t *testing.T) {
	t.Parallel() // the node it drains is of its own pool
	ctx := context.Background()
	ns := newNamespace(t)
	pool := "drain-" + ns
	gangPool(t, pool)
	job := loadMPIJob(t, ns)
	job.Spec.Worker.Replicas = ptr.To[int32](2)
	onPool(&job.Spec.Worker.Template, pool, "1")
	job.Spec.Worker.Template.Annotations = map[string]string{simDurationAnnot: "8s"}
	job.Spec.RunPolicy.FailurePolicy = &troupev1.FailurePolicy{MaxRestarts: 0}
	if err := k8s.Create(ctx, job); err != nil {
		t.Fatal(err)
	}
	worker := &corev1.Pod{}
	waitForExampleMPIJob(t, ns, "Running with its workers bound", func(j *troupev1.MPIJob) bool {
		err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "mpi-example-worker-0"}, worker)
		return err == nil && worker.Spec.NodeName != "" && j.Status.Phase == troupev1.JobRunning
	})
	node := worker.Spec.NodeName
	if out, err := kubectl("drain", node, "--pod-selector", troupev1.LabelRole+"="+troupev1.RoleWorker, "--timeout", "60s"); err != nil {
		t.Fatalf("kubectl drain %s: %v\n%s", node, err, out)
	}
	var got troupev1.MPIJob
	waitForExampleMPIJob(t, ns, "Succeeded after the drain", func(j *troupev1.MPIJob) bool {
		j.DeepCopyInto(&got)
		return j.Status.Phase == troupev1.JobSucceeded || j.Status.Phase == troupev1.JobFailed
	})
	c := meta.FindStatusCondition(got.Status.Conditions, troupev1.ConditionRestarting)
	if got.Status.Phase != troupev1.JobSucceeded || got.Status.Restarts != 1 || got.Status.UncountedRestarts != 1 ||
		!slices.Equal(got.Status.RestartsByReason, []troupev1.RestartCount{{Reason: troupev1.FailureEvicted, Count: 1}}) ||
		c == nil || !strings.HasPrefix(c.Message, `restart 1, not counted toward maxRestarts (default rule "disruptions"): worker pod mpi-example-worker-`) {
		t.Errorf("phase %s, restarts %d (uncounted %d, by reason %v), Restarting %+v; want Succeeded after one eviction not counted",
			got.Status.Phase, got.Status.Restarts, got.Status.UncountedRestarts, got.Status.RestartsByReason, c)
	}
}

// A worker killed out of memory follows its rule: FailJob for OOMKilled workers fails the job
// at once though restarts are left, naming the rule and the pod.
func TestOOMKilledWorkerFollowsItsRule(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ns := newNamespace(t)
	restartJob(t, ns, "3600s", &troupev1.FailurePolicy{MaxRestarts: 3, Rules: []troupev1.FailureRule{{
		Name: "out-of-memory", Action: troupev1.FailJobAction,
		OnReasons: []troupev1.FailureReason{troupev1.FailureOOMKilled}, OnReplicas: []string{troupev1.MPIWorkerSetName},
	}}})
	pod := &corev1.Pod{}
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "mpi-example-worker-1"}, pod); err != nil {
		t.Fatal(err)
	}
	// As the kubelet reports a container killed for its memory limit.
	before := pod.DeepCopy()
	pod.Status.Phase = corev1.PodFailed
	for i := range pod.Status.ContainerStatuses {
		cs := &pod.Status.ContainerStatuses[i]
		cs.Ready, cs.State = false, corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 137, Reason: "OOMKilled"}}
	}
	if err := k8s.Status().Patch(ctx, pod, client.MergeFrom(before)); err != nil {
		t.Fatal(err)
	}
	var got troupev1.MPIJob
	waitForExampleMPIJob(t, ns, "Failed", func(j *troupev1.MPIJob) bool {
		j.DeepCopyInto(&got)
		return j.Status.Phase == troupev1.JobFailed
	})
	c := meta.FindStatusCondition(got.Status.Conditions, troupev1.ConditionFailed)
	if got.Status.Restarts != 0 || c == nil || c.Reason != troupev1.ReasonFailJobRule ||
		!strings.HasPrefix(c.Message, `rule "out-of-memory" (FailJob): worker pod mpi-example-worker-1 failed`) {
		t.Errorf("restarts %d, Failed condition %+v; want the rule out-of-memory naming the pod", got.Status.Restarts, c)
	}
}
