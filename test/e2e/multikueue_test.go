package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	kueuev1 "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	troupev1 "github.com/troupe-dev/troupe/apis/troupe/v1alpha1"
	testutil "github.com/troupe-dev/troupe/pkg/testing"
)

// mkQueue is the LocalQueue TestMultiKueue's jobs name, in the manager and the worker.
const mkQueue = "mk"

// workerCluster is a second local cluster beside the suite's, with Kueue and a troupe-operator
// of its own: a MultiKueue worker of the suite's cluster, the manager.
type workerCluster struct {
	name       string
	kubeconfig string
	c          client.Client
	dir        string
}

// TestMultiKueue runs troupe beyond one cluster: the suite's cluster is a Kueue MultiKueue
// manager (hack/controlplane/multikueue-up.sh) dispatching LocalQueue mk to a worker cluster
// started here, each with its own API server, Kueue and troupe-operator. Jobs of every kind,
// created in the manager with spec.managedBy kueue.x-k8s.io/multikueue, run in the worker under
// the Workload MultiKueue made (no Workload of troupe's own there) and their status comes back;
// a job deleted or suspended in the manager leaves nothing in the worker; a worker that stops
// answering keeps its one copy of the job, which goes on when it answers again (a long test:
// make test-long).
func TestMultiKueue(t *testing.T) {
	// Not parallel: starts a second cluster, with a Kueue and an operator of its own (both cores'
	// worth while it starts), and makes the manager's cluster-wide MultiKueue objects of fixed names.
	w := startWorkerCluster(t)
	ns := newNamespace(t)
	if err := w.c.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	setup := exec.Command(filepath.Join(repoRoot, "hack", "controlplane", "multikueue-up.sh"), kubeconfig, w.name+"="+w.kubeconfig)
	setup.Env = append(os.Environ(), "QUEUE="+mkQueue, "NAMESPACES="+ns)
	if out, err := setup.CombinedOutput(); err != nil {
		t.Fatalf("multikueue-up.sh: %v\n%s", err, out)
	}
	t.Cleanup(func() {
		// The suite's other Kueue tests share the manager: its MultiKueue objects go.
		for _, obj := range []string{"clusterqueue/troupe-multikueue", "admissioncheck/troupe-multikueue",
			"multikueueconfig/troupe-multikueue", "multikueuecluster/" + w.name, "-n kueue-system secret/" + w.name + "-kubeconfig"} {
			if out, err := kubectl(append([]string{"delete", "--ignore-not-found", "--wait=false"}, strings.Fields(obj)...)...); err != nil {
				t.Logf("delete %s: %v\n%s", obj, err, out)
			}
		}
	})
	kc := kueueClient(t)

	t.Run("every kind runs in the worker", func(t *testing.T) { multiKueueEveryKind(t, w, kc, ns) })
	t.Run("deleted in the manager", func(t *testing.T) { multiKueueDeleted(t, w, kc, ns) })
	t.Run("suspended in the manager", func(t *testing.T) { multiKueueSuspended(t, w, kc, ns) })
	t.Run("worker lost", func(t *testing.T) {
		testutil.LongOnly(t) // about 100 s, a worker cluster stopped and started again
		multiKueueWorkerLost(t, w, kc, ns)
	})
}

// dispatched marks a job for MultiKueue: queued in LocalQueue mk, spec.managedBy MultiKueue's.
func dispatched[T queuedJob](job T) T {
	job.SetLabels(map[string]string{troupev1.LabelQueueName: mkQueue})
	any(job).(troupev1.QueuedJob).SetJobManagedBy(ptr.To(troupev1.ManagedByMultiKueue))
	return job
}

func multiKueueEveryKind(t *testing.T, w *workerCluster, kc client.Client, ns string) {
	const run = "10s" // long enough to look at the worker while the job runs there
	chainer := testutil.MakeChainerJob("mk-chainer", ns).WorkerSet("ws0", 2).Obj()
	chainer.Spec.Master.Template.Annotations = map[string]string{simDurationAnnot: run}
	mpiJob := loadMPIJob(t, ns)
	mpiJob.Name = "mk-mpi"
	mpiJob.Spec.Worker.Replicas = ptr.To[int32](2)
	mpiJob.Spec.Worker.Template.Annotations = map[string]string{simDurationAnnot: run}
	horovod := testutil.Load[*troupev1.HorovodJob](t, "../../examples/horovodjob.yaml", ns)
	horovod.Name = "mk-horovod"
	horovod.Spec.Worker.Template.Annotations = map[string]string{simDurationAnnot: run}
	pytorch := pytorchExample(t, ns)
	pytorch.Name = "mk-pytorch"
	pytorch.Spec.PyTorchReplicaSpecs.Master.Template.Annotations = map[string]string{simDurationAnnot: run}
	// kubeflow's form names the controller in runPolicy.managedBy, as kubeflow's MPIJob does:
	// it is stored as spec.managedBy, where MultiKueue reads it.
	kubeflow := kubeflowJob(ns, "mk-kubeflow", 1)
	kubeflow.Spec.MPIReplicaSpecs.Launcher.Template.Annotations = map[string]string{simDurationAnnot: run}
	kubeflow.Labels = map[string]string{troupev1.LabelQueueName: mkQueue}
	kubeflow.Spec.RunPolicy.ManagedBy = ptr.To(troupev1.ManagedByMultiKueue)

	jobs := []queuedJob{dispatched(chainer), dispatched(mpiJob), dispatched(horovod), dispatched(pytorch), kubeflow}
	for _, job := range jobs {
		if err := k8s.Create(context.Background(), job); err != nil {
			t.Fatalf("create %s: %v", job.GetName(), err)
		}
		q := job.(troupev1.QueuedJob)
		if got := ptr.Deref(q.JobManagedBy(), ""); got != troupev1.ManagedByMultiKueue || q.JobRunPolicy().ManagedBy != nil {
			t.Errorf("%s stored with spec.managedBy %q, runPolicy.managedBy %v: want MultiKueue's in spec.managedBy only",
				job.GetName(), got, ptr.Deref(q.JobRunPolicy().ManagedBy, "<unset>"))
		}
	}
	for _, job := range jobs {
		expectRunningInWorker(t, w, kc, job)
	}
	pluginSaysWhereItRuns(t, w, ns, chainer.Name)
	for _, job := range jobs {
		waitPhase(t, job, troupev1.JobSucceeded)
		got := job.DeepCopyObject().(queuedJob)
		if err := k8s.Get(context.Background(), client.ObjectKeyFromObject(job), got); err != nil {
			t.Fatal(err)
		}
		// Written by the worker's troupe, admitted by the worker's ClusterQueue: the status is
		// the worker's, copied.
		if c := meta.FindStatusCondition(got.JobStatus().Conditions, troupev1.ConditionAdmitted); c == nil || !strings.Contains(c.Message, "troupe-worker") {
			t.Errorf("%s in the manager: Admitted %+v, want the worker's (ClusterQueue troupe-worker)", job.GetName(), c)
		}
		if c := meta.FindStatusCondition(got.JobStatus().Conditions, troupev1.ConditionSucceeded); c == nil || c.Status != metav1.ConditionTrue {
			t.Errorf("%s in the manager: Succeeded %+v", job.GetName(), c)
		}
		eventually(t, job.GetName()+"'s Workload Finished in the manager, where it ran", func(ctx context.Context) (bool, error) {
			wl, err := jobWorkload(ctx, kc, job)
			if wl == nil || err != nil {
				return false, err
			}
			if ptr.Deref(wl.Status.ClusterName, "") != w.name {
				return false, fmt.Errorf("clusterName %v, want %s", ptr.Deref(wl.Status.ClusterName, "<unset>"), w.name)
			}
			return meta.IsStatusConditionTrue(wl.Status.Conditions, kueuev1.WorkloadFinished), nil
		})
		expectGoneFromWorker(t, w, job)
	}
}

// expectRunningInWorker waits for MultiKueue's copy of the job to run in the worker, and checks
// that it runs under the Workload MultiKueue made (named as the manager's, controlled by the
// copy), the only Workload of the job there, and that no pod of the job runs in the manager. It
// returns the copy's UID.
func expectRunningInWorker(t *testing.T, w *workerCluster, kc client.Client, job queuedJob) types.UID {
	t.Helper()
	var uid types.UID
	eventually(t, job.GetName()+" running in the worker under MultiKueue's Workload", func(ctx context.Context) (bool, error) {
		manager, err := jobWorkload(ctx, kc, job)
		if manager == nil || err != nil {
			return false, err
		}
		copied := job.DeepCopyObject().(queuedJob)
		if err := w.c.Get(ctx, client.ObjectKeyFromObject(job), copied); err != nil {
			return false, client.IgnoreNotFound(err)
		}
		if copied.JobStatus().Phase != troupev1.JobRunning {
			return false, fmt.Errorf("phase %q in the worker", copied.JobStatus().Phase)
		}
		wls := &kueuev1.WorkloadList{}
		if err := w.c.List(ctx, wls, client.InNamespace(job.GetNamespace())); err != nil {
			return false, err
		}
		var names []string
		for _, wl := range wls.Items {
			if owner := metav1.GetControllerOf(&wl); owner != nil && owner.UID == copied.GetUID() {
				names = append(names, wl.Name)
			}
			if strings.HasPrefix(wl.Name, strings.ToLower(jobKind(job))+"-"+job.GetName()+"-") && wl.Name != manager.Name {
				return false, fmt.Errorf("a second Workload %s of the job in the worker, beside MultiKueue's %s", wl.Name, manager.Name)
			}
		}
		if len(names) != 1 || names[0] != manager.Name {
			return false, fmt.Errorf("the copy controls Workloads %v in the worker, want MultiKueue's %s alone", names, manager.Name)
		}
		uid = copied.GetUID()
		return true, nil
	})
	pods, err := queuedJobPods(context.Background(), job)
	if err != nil {
		t.Fatal(err)
	}
	if len(pods) > 0 {
		t.Errorf("%s has %d pods in the manager, want none: it runs in the worker", job.GetName(), len(pods))
	}
	return uid
}

// expectGoneFromWorker waits until nothing of the job is left in the worker: no copy, no pod,
// no child, no Workload.
func expectGoneFromWorker(t *testing.T, w *workerCluster, job queuedJob) {
	t.Helper()
	nameLabel := client.MatchingLabels{strings.ToLower(jobKind(job)) + ".troupe.dev/name": job.GetName()}
	eventually(t, job.GetName()+": nothing left in the worker", func(ctx context.Context) (bool, error) {
		err := w.c.Get(ctx, client.ObjectKeyFromObject(job), job.DeepCopyObject().(client.Object))
		if !apierrors.IsNotFound(err) {
			return false, fmt.Errorf("the copy: %w", err)
		}
		for _, list := range []client.ObjectList{&corev1.PodList{}, &corev1.ServiceList{}, &corev1.ConfigMapList{}} {
			if err := w.c.List(ctx, list, client.InNamespace(job.GetNamespace()), nameLabel); err != nil {
				return false, err
			}
			if n := meta.LenList(list); n > 0 {
				return false, fmt.Errorf("%d %T left", n, list)
			}
		}
		wls := &kueuev1.WorkloadList{}
		if err := w.c.List(ctx, wls, client.InNamespace(job.GetNamespace())); err != nil {
			return false, err
		}
		for _, wl := range wls.Items {
			if strings.HasPrefix(wl.Name, strings.ToLower(jobKind(job))+"-"+job.GetName()+"-") {
				return false, fmt.Errorf("Workload %s left", wl.Name)
			}
		}
		return true, nil
	})
}

// A job deleted in the manager while it runs in the worker: MultiKueue deletes the copy there,
// and the garbage collector its children and pods.
func multiKueueDeleted(t *testing.T, w *workerCluster, kc client.Client, ns string) {
	job := dispatched(testutil.MakeChainerJob("mk-deleted", ns).WorkerSet("ws0", 2).Obj())
	job.Spec.Master.Template.Annotations = map[string]string{simDurationAnnot: "10m"}
	if err := k8s.Create(context.Background(), job); err != nil {
		t.Fatal(err)
	}
	expectRunningInWorker(t, w, kc, job)
	if err := k8s.Delete(context.Background(), job); err != nil {
		t.Fatal(err)
	}
	expectGoneFromWorker(t, w, job)
}

// A job suspended in the manager: its Workload is made inactive, Kueue evicts it and MultiKueue
// deletes the copy in the worker, its pods with it; resumed, it is dispatched afresh, a new copy.
func multiKueueSuspended(t *testing.T, w *workerCluster, kc client.Client, ns string) {
	job := dispatched(testutil.MakeChainerJob("mk-suspended", ns).WorkerSet("ws0", 2).Obj())
	job.Spec.Master.Template.Annotations = map[string]string{simDurationAnnot: "10m"}
	if err := k8s.Create(context.Background(), job); err != nil {
		t.Fatal(err)
	}
	first := expectRunningInWorker(t, w, kc, job)
	setSuspend(t, job, true)
	eventually(t, "the Workload inactive in the manager", func(ctx context.Context) (bool, error) {
		wl, err := jobWorkload(ctx, kc, job)
		return wl != nil && !ptr.Deref(wl.Spec.Active, true) && !meta.IsStatusConditionTrue(wl.Status.Conditions, kueuev1.WorkloadQuotaReserved), err
	})
	expectGoneFromWorker(t, w, job)
	setSuspend(t, job, false)
	if again := expectRunningInWorker(t, w, kc, job); again == first {
		t.Errorf("resumed, the job runs as the same copy %s, want a new one", first)
	}
	if err := k8s.Delete(context.Background(), job); err != nil {
		t.Fatal(err)
	}
	expectGoneFromWorker(t, w, job)
}

func setSuspend(t *testing.T, job *troupev1.ChainerJob, suspend bool) {
	t.Helper()
	patch := fmt.Appendf(nil, `{"spec":{"runPolicy":{"suspend":%t}}}`, suspend)
	if err := k8s.Patch(context.Background(), job.DeepCopy(), client.RawPatch(types.MergePatchType, patch)); err != nil {
		t.Fatalf("suspend %v: %v", suspend, err)
	}
}

// A worker whose API server stops answering while a job runs there, for longer than MultiKueue's
// workerLostTimeout (20 s on the local clusters): with no other worker to dispatch to, Kueue
// (v0.15.2, v0.17.0) keeps the job where it is (MultiKueue reconciles no Workload of a MultiKueueConfig
// without a connected cluster, so the timeout never fires), the manager's Workload admitted in
// the worker. Once the worker answers again, the same single copy goes on there and succeeds.
func multiKueueWorkerLost(t *testing.T, w *workerCluster, kc client.Client, ns string) {
	job := dispatched(testutil.MakeChainerJob("mk-lost", ns).WorkerSet("ws0", 1).Obj())
	job.Spec.Master.Template.Annotations = map[string]string{simDurationAnnot: "45s"}
	if err := k8s.Create(context.Background(), job); err != nil {
		t.Fatal(err)
	}
	copyUID := expectRunningInWorker(t, w, kc, job)
	// Lost only once the manager knows it runs: its status copied back, its Workload's pods
	// ready. (Lost before that, the manager's Workload is evicted by Kueue's waitForPodsReady
	// timeout instead, the worker out of reach.)
	waitPhase(t, job, troupev1.JobRunning)
	eventually(t, "the manager's Workload PodsReady", func(ctx context.Context) (bool, error) {
		wl, err := jobWorkload(ctx, kc, job)
		return wl != nil && meta.IsStatusConditionTrue(wl.Status.Conditions, kueuev1.WorkloadPodsReady), err
	})

	w.stopAPIServer(t)
	eventually(t, "MultiKueueCluster "+w.name+" not Active in the manager", func(ctx context.Context) (bool, error) {
		mc := &kueuev1.MultiKueueCluster{}
		if err := kc.Get(ctx, client.ObjectKey{Name: w.name}, mc); err != nil {
			return false, err
		}
		return !meta.IsStatusConditionTrue(mc.Status.Conditions, "Active"), nil
	})
	// Past the workerLostTimeout, the manager's Workload still says the job is in the worker.
	lost := time.Now()
	for time.Since(lost) < 25*time.Second {
		wl, err := jobWorkload(context.Background(), kc, job)
		if err != nil {
			t.Fatal(err)
		}
		if wl == nil || !meta.IsStatusConditionTrue(wl.Status.Conditions, kueuev1.WorkloadAdmitted) || ptr.Deref(wl.Status.ClusterName, "") != w.name {
			t.Fatalf("%s after the worker was lost: its Workload %+v, want admitted in %s", time.Since(lost).Round(time.Second), wl, w.name)
		}
		time.Sleep(time.Second) // observing that nothing changes, not waiting for a change
	}
	w.restart(t)
	waitPhase(t, job, troupev1.JobSucceeded)
	// One copy ran all along: the same UID, and Kueue deletes it once the job is finished.
	copies := &troupev1.ChainerJobList{}
	if err := w.c.List(context.Background(), copies, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	for _, c := range copies.Items {
		if c.Name == job.Name && c.UID != copyUID {
			t.Errorf("a second copy %s of %s in the worker, the first was %s", c.UID, job.Name, copyUID)
		}
	}
	expectGoneFromWorker(t, w, job)
}

// startWorkerCluster starts the worker cluster ($TROUPE_E2E_CLUSTER-mkw, so that it never meets
// another's), installs troupe's CRDs and runs a troupe-operator against it; it goes at the end
// of the test (but with TROUPE_E2E_KEEP).
func startWorkerCluster(t *testing.T) *workerCluster {
	t.Helper()
	name := envOr("TROUPE_E2E_CLUSTER", "troupe-e2e") + "-mkw"
	out, err := script("hack/controlplane/cluster-up.sh", "CLUSTER_NAME="+name, "CLUSTER_ADDONS=kueue")
	if err != nil {
		t.Fatalf("cluster-up %s: %v\n%s", name, err, out)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	w := &workerCluster{name: name, kubeconfig: strings.TrimSpace(lines[len(lines)-1])}
	w.dir = filepath.Dir(w.kubeconfig)
	t.Cleanup(func() {
		if os.Getenv("TROUPE_E2E_KEEP") != "" {
			return
		}
		if out, err := script("hack/controlplane/cluster-down.sh", "CLUSTER_NAME="+name); err != nil {
			t.Logf("cluster-down %s: %v\n%s", name, err, out)
		}
	})
	if out, err := exec.Command("kubectl", "--kubeconfig", w.kubeconfig, "apply", "--server-side", "-f", filepath.Join(repoRoot, "config", "crds")).CombinedOutput(); err != nil {
		t.Fatalf("install CRDs in %s: %v\n%s", name, err, out)
	}
	op, err := testutil.StartOperator(repoRoot, w.kubeconfig, "", operatorArgs...)
	if err != nil {
		t.Fatalf("operator of %s: %v", name, err)
	}
	t.Cleanup(func() {
		op.Stop()
		t.Log("worker operator log:", op.LogPath)
	})
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, troupev1.AddToScheme, kueuev1.AddToScheme} {
		if err := add(scheme); err != nil {
			t.Fatal(err)
		}
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", w.kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	if w.c, err = client.New(cfg, client.Options{Scheme: scheme}); err != nil {
		t.Fatal(err)
	}
	return w
}

// stopAPIServer kills the worker's kube-apiserver: the cluster stops answering, its state (etcd)
// and its other processes stay.
func (w *workerCluster) stopAPIServer(t *testing.T) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(w.dir, "pids", "kube-apiserver.pid"))
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatalf("kill the worker's kube-apiserver: %v", err)
	}
}

// restart starts again the worker's processes that exited (kwokctl starts the components without
// a live pid file), and waits until its API server answers.
func (w *workerCluster) restart(t *testing.T) {
	t.Helper()
	pids, err := filepath.Glob(filepath.Join(w.dir, "pids", "*.pid"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range pids {
		data, _ := os.ReadFile(f)
		pid, _ := strconv.Atoi(strings.TrimSpace(string(data)))
		if pid <= 0 || syscall.Kill(pid, 0) != nil || zombie(pid) {
			_ = os.Remove(f)
		}
	}
	cmd := exec.Command(kwokctlPath(t), "start", "cluster", "--name", w.name)
	cmd.Env = append(os.Environ(), "KWOK_WORKDIR="+filepath.Dir(filepath.Dir(w.dir)))
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("kwokctl start cluster %s: %v\n%s", w.name, err, out)
	}
	eventually(t, "the worker's API server answering", func(ctx context.Context) (bool, error) {
		return w.c.List(ctx, &corev1.NamespaceList{}) == nil, nil
	})
}

// zombie reports whether the process is a zombie (this machine's init may not reap kwokctl's
// orphans).
func zombie(pid int) bool {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	fields := strings.Fields(string(data))
	return len(fields) > 2 && fields[2] == "Z"
}

// kwokctlPath is the kwokctl of the local clusters (hack/controlplane/lib.sh's KWOK_BIN).
func kwokctlPath(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("bash", "-c", "source "+filepath.Join(repoRoot, "hack", "controlplane", "lib.sh")+" && echo $KWOK_BIN/kwokctl").Output()
	if err != nil {
		t.Fatalf("kwokctl's path: %v", err)
	}
	return strings.TrimSpace(string(out))
}

// pluginSaysWhereItRuns runs kubectl troupe against the manager, as a user there would, while
// the ChainerJob name runs in the worker: get's RUNS IN column and describe's Runs In line name
// the worker cluster, and logs, without a context for that cluster in the kubeconfig, says
// where the pods are and how to read them.
func pluginSaysWhereItRuns(t *testing.T, w *workerCluster, ns, name string) {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "kubectl-troupe")
	build := exec.Command("go", "build", "-o", bin, "./cmd/kubectl-troupe")
	build.Dir = repoRoot
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build kubectl-troupe: %v\n%s", err, out)
	}
	plugin := func(args ...string) (string, error) {
		out, err := exec.Command(bin, append([]string{"--kubeconfig", kubeconfig, "-n", ns}, args...)...).CombinedOutput()
		return string(out), err
	}
	out, err := plugin("get")
	if err != nil {
		t.Fatalf("kubectl troupe get: %v\n%s", err, out)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if !strings.HasSuffix(strings.TrimSpace(lines[0]), "RUNS IN") {
		t.Errorf("kubectl troupe get in the manager has no RUNS IN column:\n%s", out)
	}
	for _, l := range lines[1:] {
		if f := strings.Fields(l); len(f) > 0 && f[len(f)-1] != w.name {
			t.Errorf("kubectl troupe get: a dispatched job's row does not end with the worker %s: %q", w.name, l)
		}
	}
	if out, err = plugin("describe", "chainerjob/"+name); err != nil || !regexp.MustCompile(`Runs In:\s+worker cluster `+w.name+` `).MatchString(out) {
		t.Errorf("kubectl troupe describe: %v; want a Runs In line naming worker cluster %s:\n%s", err, w.name, out)
	}
	if out, err = plugin("logs", "chainerjob/"+name); err == nil || !strings.Contains(out, "runs in worker cluster "+w.name) ||
		!strings.Contains(out, "Add a context named "+w.name) {
		t.Errorf("kubectl troupe logs without a context for the worker: %v; want it to say where the pods are and how to read them:\n%s", err, out)
	}
	t.Logf("kubectl troupe get in the manager:\n%s", strings.Join(lines, "\n"))
}
