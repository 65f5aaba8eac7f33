package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	kueuev1 "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	troupev1 "github.com/troupe-dev/troupe/apis/troupe/v1alpha1"
	testutil "github.com/troupe-dev/troupe/pkg/testing"
)

// TestKueueAdmission runs troupe jobs through the cluster's Kueue (hack/controlplane/cluster-up.sh
// starts its manager): a ClusterQueue of 8 CPUs, jobs of 6 (a master and two workers of 2 CPUs)
// queued in its LocalQueue with the kueue.x-k8s.io/queue-name label. The jobs name no node; the
// queue's ResourceFlavor puts them on the test's pool of two 4-CPU tainted nodes, its node label
// as a nodeSelector and its toleration, so a pod on the pool shows that Kueue's placement reached
// the master and the workers.
func TestKueueAdmission(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ns := newNamespace(t)
	pool := "kueue-" + ns
	gangPool(t, pool)
	kc := kueueClient(t)
	low, high := kueueQueue(t, kc, ns, pool)

	// One job runs; the other waits, suspended, with a condition that names the queue.
	first := queuedChainerJob("first", ns, low, "12s")
	createJob(t, first)
	waitPhase(t, first, troupev1.JobRunning)
	expectPlacedOnPool(t, first, pool)
	expectWorkload(t, kc, first)

	second := queuedChainerJob("second", ns, low, "3s")
	createJob(t, second)
	eventually(t, "second waits in LocalQueue lq", func(ctx context.Context) (bool, error) {
		c, job, err := admittedCondition(ctx, second)
		if err != nil || c == nil {
			return false, err
		}
		return c.Status == metav1.ConditionFalse && strings.Contains(c.Message, "LocalQueue lq") &&
			strings.Contains(c.Message, "insufficient") && job.Status.Phase == troupev1.JobSuspended, nil
	})
	expectSuspendedWithoutPods(t, second)
	if job := getJob(t, first); job.Status.Phase != troupev1.JobRunning {
		t.Fatalf("first is %s while second waits, want Running", job.Status.Phase)
	}
	waitPhase(t, first, troupev1.JobSucceeded)
	waitPhase(t, second, troupev1.JobSucceeded)

	// A job of higher priority preempts a running one, which resumes after it and succeeds.
	// Kueue's preemption suspends it, which is no failure: a job with no restart to spend
	// runs again.
	victim := queuedChainerJob("victim", ns, low, "10s")
	victim.Spec.RunPolicy.FailurePolicy = &troupev1.FailurePolicy{MaxRestarts: 0}
	createJob(t, victim)
	waitPhase(t, victim, troupev1.JobRunning)
	expectPlacedOnPool(t, victim, pool)
	urgent := queuedChainerJob("urgent", ns, high, "3s")
	createJob(t, urgent)
	eventually(t, "victim preempted: suspended, Admitted False with reason Preempted", func(ctx context.Context) (bool, error) {
		c, job, err := admittedCondition(ctx, victim)
		if err != nil || c == nil {
			return false, err
		}
		return c.Reason == kueuev1.WorkloadEvictedByPreemption && strings.Contains(c.Message, "LocalQueue lq") &&
			ptr.Deref(job.Spec.RunPolicy.Suspend, false), nil
	})
	expectSuspendedWithoutPods(t, victim)
	waitPhase(t, urgent, troupev1.JobSucceeded)
	waitPhase(t, victim, troupev1.JobSucceeded)
	if c, _, err := admittedCondition(ctx, victim); err != nil || c == nil || c.Status != metav1.ConditionTrue {
		t.Errorf("victim's Admitted condition after its second run: %+v (%v), want True", c, err)
	}
	if job := getJob(t, victim); job.Status.Restarts != 0 {
		t.Errorf("the preempted victim spent %d restarts of its budget of 0", job.Status.Restarts)
	}
}

// kueueClient is a client that knows Kueue's types.
func kueueClient(t *testing.T) client.Client {
	t.Helper()
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, troupev1.AddToScheme, kueuev1.AddToScheme} {
		if err := add(scheme); err != nil {
			t.Fatal(err)
		}
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// kueueQueue makes the test's queue: a ResourceFlavor of the pool's nodes, a ClusterQueue of 8
// CPUs of it for the namespace (preempting lower priorities), the LocalQueue lq, and a low and a
// high WorkloadPriorityClass, whose names it returns.
func kueueQueue(t *testing.T, kc client.Client, ns, pool string) (low, high string) {
	t.Helper()
	flavor, cq, lq := poolQueue(ns, pool, "8", "64Gi")
	cq.Spec.Preemption = &kueuev1.ClusterQueuePreemption{WithinClusterQueue: kueuev1.PreemptionPolicyLowerPriority}
	low, high = pool+"-low", pool+"-high"
	createQueueObjects(t, kc, flavor, cq, lq,
		&kueuev1.WorkloadPriorityClass{ObjectMeta: metav1.ObjectMeta{Name: low}, Value: 100},
		&kueuev1.WorkloadPriorityClass{ObjectMeta: metav1.ObjectMeta{Name: high}, Value: 1000})
	waitClusterQueueActive(t, kc, cq)
	return low, high
}

// poolQueue is a queue of the pool's nodes for the namespace, for a test to adjust and create:
// a ResourceFlavor of the nodes (their label and taint), a ClusterQueue of cpu and memory of it
// and the LocalQueue lq. Memory is covered too, with room to spare: a generated launcher and the
// launcher's wait request some, and Kueue admits no Workload that requests a resource its
// ClusterQueue does not cover.
func poolQueue(ns, pool, cpu, memory string) (*kueuev1.ResourceFlavor, *kueuev1.ClusterQueue, *kueuev1.LocalQueue) {
	flavor := &kueuev1.ResourceFlavor{
		ObjectMeta: metav1.ObjectMeta{Name: pool},
		Spec: kueuev1.ResourceFlavorSpec{
			NodeLabels:  map[string]string{gangPoolLabel: pool},
			Tolerations: []corev1.Toleration{{Key: gangPoolLabel, Operator: corev1.TolerationOpEqual, Value: pool, Effect: corev1.TaintEffectNoSchedule}},
		},
	}
	cq := &kueuev1.ClusterQueue{
		ObjectMeta: metav1.ObjectMeta{Name: pool},
		Spec: kueuev1.ClusterQueueSpec{
			NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{corev1.LabelMetadataName: ns}},
			ResourceGroups: []kueuev1.ResourceGroup{{
				CoveredResources: []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory},
				Flavors: []kueuev1.FlavorQuotas{{
					Name: kueuev1.ResourceFlavorReference(pool),
					Resources: []kueuev1.ResourceQuota{
						{Name: corev1.ResourceCPU, NominalQuota: resource.MustParse(cpu)},
						{Name: corev1.ResourceMemory, NominalQuota: resource.MustParse(memory)},
					},
				}},
			}},
		},
	}
	lq := &kueuev1.LocalQueue{
		ObjectMeta: metav1.ObjectMeta{Name: "lq", Namespace: ns},
		Spec:       kueuev1.LocalQueueSpec{ClusterQueue: kueuev1.ClusterQueueReference(pool)},
	}
	return flavor, cq, lq
}

// createQueueObjects creates Kueue's objects of a test's queue, deleted when the test ends.
func createQueueObjects(t *testing.T, kc client.Client, objs ...client.Object) {
	t.Helper()
	for _, o := range objs {
		if err := kc.Create(context.Background(), o); err != nil {
			t.Fatalf("create %T %s: %v", o, o.GetName(), err)
		}
		t.Cleanup(func() { _ = kc.Delete(context.Background(), o) })
	}
}

// waitClusterQueueActive waits until Kueue reports the ClusterQueue active.
func waitClusterQueueActive(t *testing.T, kc client.Client, cq *kueuev1.ClusterQueue) {
	t.Helper()
	eventually(t, "ClusterQueue "+cq.Name+" active", func(ctx context.Context) (bool, error) {
		got := &kueuev1.ClusterQueue{}
		if err := kc.Get(ctx, client.ObjectKeyFromObject(cq), got); err != nil {
			return false, err
		}
		return meta.IsStatusConditionTrue(got.Status.Conditions, kueuev1.ClusterQueueActive), nil
	})
}

// queuedChainerJob is a ChainerJob of 6 CPUs (a master and two workers of 2 CPUs each, no
// node named) queued in LocalQueue lq with a WorkloadPriorityClass, whose master runs for
// duration.
func queuedChainerJob(name, ns, priority, duration string) *troupev1.ChainerJob {
	job := testutil.MakeChainerJob(name, ns).WorkerSet("ws0", 2).Obj()
	job.Labels = map[string]string{troupev1.LabelQueueName: "lq", troupev1.LabelWorkloadPriorityClass: priority}
	requestCPU(&job.Spec.Master.Template, "2")
	testutil.EditWorkerSet(job, "ws0", func(ws *troupev1.ChainerWorkerSet) { requestCPU(&ws.Template, "2") })
	job.Spec.Master.Template.Annotations = map[string]string{simDurationAnnot: duration}
	return job
}

// queuedMPIJob is the example MPIJob with 2 workers of cpu CPUs each (its generated launcher
// copies their metadata, so it runs for duration), queued in LocalQueue lq with a
// WorkloadPriorityClass.
func queuedMPIJob(t *testing.T, ns, priority, cpu, duration string) *troupev1.MPIJob {
	t.Helper()
	job := loadMPIJob(t, ns)
	job.Spec.Worker.Replicas = ptr.To[int32](2)
	requestCPU(&job.Spec.Worker.Template, cpu)
	job.Spec.Worker.Template.Annotations = map[string]string{simDurationAnnot: duration}
	job.SetLabels(map[string]string{troupev1.LabelQueueName: "lq", troupev1.LabelWorkloadPriorityClass: priority})
	return job
}

func requestCPU(tmpl *corev1.PodTemplateSpec, cpu string) {
	for i := range tmpl.Spec.Containers {
		c := &tmpl.Spec.Containers[i]
		c.Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu)}
		c.Resources.Limits = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu)}
	}
}

// queuedJob is a troupe job of any kind.
type queuedJob interface {
	client.Object
	JobRunPolicy() *troupev1.RunPolicy
	JobStatus() *troupev1.JobStatus
}

// createJob creates a queued job and checks that admission stored it suspended.
func createJob(t *testing.T, job queuedJob) {
	t.Helper()
	if err := k8s.Create(context.Background(), job); err != nil {
		t.Fatalf("create %s: %v", job.GetName(), err)
	}
	if suspend := job.JobRunPolicy().Suspend; !ptr.Deref(suspend, false) {
		t.Fatalf("%s was stored with runPolicy.suspend %v, want true: a queued job waits for Kueue", job.GetName(), suspend)
	}
}

func getJob(t *testing.T, job *troupev1.ChainerJob) *troupev1.ChainerJob {
	t.Helper()
	got := &troupev1.ChainerJob{}
	if err := k8s.Get(context.Background(), client.ObjectKeyFromObject(job), got); err != nil {
		t.Fatalf("get %s: %v", job.Name, err)
	}
	return got
}

func waitPhase(t *testing.T, job queuedJob, phase troupev1.JobPhase) {
	t.Helper()
	eventually(t, fmt.Sprintf("%s %s", job.GetName(), phase), func(ctx context.Context) (bool, error) {
		got := job.DeepCopyObject().(queuedJob)
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(job), got); err != nil {
			return false, err
		}
		return got.JobStatus().Phase == phase, nil
	})
}

func admittedCondition(ctx context.Context, job *troupev1.ChainerJob) (*metav1.Condition, *troupev1.ChainerJob, error) {
	got := &troupev1.ChainerJob{}
	if err := k8s.Get(ctx, client.ObjectKeyFromObject(job), got); err != nil {
		return nil, nil, err
	}
	return meta.FindStatusCondition(got.Status.Conditions, troupev1.ConditionAdmitted), got, nil
}

// jobKind is the job's kind, from the client's scheme.
func jobKind(job queuedJob) string {
	gvk, err := apiutil.GVKForObject(job, k8s.Scheme())
	if err != nil {
		panic(err)
	}
	return gvk.Kind
}

// queuedJobPods lists the pods of a job that are not going away; every pod of a job carries
// the label <kind>.troupe.dev/name.
func queuedJobPods(ctx context.Context, job queuedJob) ([]corev1.Pod, error) {
	pods := &corev1.PodList{}
	nameLabel := strings.ToLower(jobKind(job)) + ".troupe.dev/name"
	if err := k8s.List(ctx, pods, client.InNamespace(job.GetNamespace()), client.MatchingLabels{nameLabel: job.GetName()}); err != nil {
		return nil, err
	}
	var live []corev1.Pod
	for _, p := range pods.Items {
		if p.DeletionTimestamp.IsZero() && p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed {
			live = append(live, p)
		}
	}
	return live, nil
}

// expectPlacedOnPool: every pod of the running job (master or launcher, and 2 workers) is on
// the pool's nodes, where only the flavor's nodeSelector and toleration take it.
func expectPlacedOnPool(t *testing.T, job queuedJob, pool string) {
	t.Helper()
	eventually(t, job.GetName()+": master and 2 workers bound to the pool", func(ctx context.Context) (bool, error) {
		pods, err := queuedJobPods(ctx, job)
		if err != nil {
			return false, err
		}
		bound := 0
		for _, p := range pods {
			if p.Spec.NodeSelector[gangPoolLabel] != pool {
				return false, fmt.Errorf("pod %s has nodeSelector %v, want Kueue's flavor's %s=%s", p.Name, p.Spec.NodeSelector, gangPoolLabel, pool)
			}
			if !slices.ContainsFunc(p.Spec.Tolerations, func(tol corev1.Toleration) bool {
				return tol.Key == gangPoolLabel && tol.Value == pool && tol.Effect == corev1.TaintEffectNoSchedule
			}) {
				return false, fmt.Errorf("pod %s has tolerations %v, want Kueue's flavor's %s=%s:NoSchedule", p.Name, p.Spec.Tolerations, gangPoolLabel, pool)
			}
			if p.Spec.NodeName != "" {
				if !strings.HasPrefix(p.Spec.NodeName, pool) {
					return false, fmt.Errorf("pod %s on node %s, outside the pool", p.Name, p.Spec.NodeName)
				}
				bound++
			}
		}
		return bound == 3, nil
	})
}

// expectWorkload: the job's Workload has its pod sets, master 1 and ws0 2, in LocalQueue lq.
func expectWorkload(t *testing.T, kc client.Client, job *troupev1.ChainerJob) {
	t.Helper()
	expectWorkloadPodSets(t, kc, job, "master=1,ws0=2")
}

// expectWorkloadPodSets: the job's Workload is in LocalQueue lq with the pod sets want, written
// name=count in order, comma-separated.
func expectWorkloadPodSets(t *testing.T, kc client.Client, job queuedJob, want string) {
	t.Helper()
	wl, err := jobWorkload(context.Background(), kc, job)
	if err != nil || wl == nil {
		t.Fatalf("the Workload of %s %s: %v %v", jobKind(job), job.GetName(), wl, err)
	}
	var sets []string
	for _, ps := range wl.Spec.PodSets {
		sets = append(sets, fmt.Sprintf("%s=%d", ps.Name, ps.Count))
	}
	if got := strings.Join(sets, ","); got != want || wl.Spec.QueueName != "lq" {
		t.Errorf("Workload %s: pod sets %s in LocalQueue %s, want %s in lq", wl.Name, got, wl.Spec.QueueName, want)
	}
}

// jobWorkload is the Workload the job controls, or nil.
func jobWorkload(ctx context.Context, kc client.Client, job queuedJob) (*kueuev1.Workload, error) {
	list := &kueuev1.WorkloadList{}
	if err := kc.List(ctx, list, client.InNamespace(job.GetNamespace())); err != nil {
		return nil, err
	}
	for i := range list.Items {
		wl := &list.Items[i]
		if owner := metav1.GetControllerOf(wl); owner != nil && owner.UID == job.GetUID() && owner.Kind == jobKind(job) {
			return wl, nil
		}
	}
	return nil, nil
}

// expectSuspendedWithoutPods: the job is suspended and none of its pods is left.
func expectSuspendedWithoutPods(t *testing.T, job *troupev1.ChainerJob) {
	t.Helper()
	eventually(t, job.Name+" suspended, no pod left", func(ctx context.Context) (bool, error) {
		got := &troupev1.ChainerJob{}
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(job), got); err != nil {
			return false, err
		}
		pods, err := queuedJobPods(ctx, job)
		return err == nil && got.Status.Phase == troupev1.JobSuspended && len(pods) == 0, err
	})
}
