package plugin

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/yaml"

	troupev1 "github.com/troupe-dev/troupe/apis/troupe/v1alpha1"
	"github.com/troupe-dev/troupe/kinds"
	"github.com/troupe-dev/troupe/pkg/engine"
	testutil "github.com/troupe-dev/troupe/pkg/testing"
)

// loadExample reads one of examples/ strictly into an object of its registered kind.
func loadExample(t *testing.T, path string) (kinds.Kind, engine.Object) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var typ metav1.TypeMeta
	if err := yaml.Unmarshal(data, &typ); err != nil {
		t.Fatal(err)
	}
	for _, k := range kinds.All() {
		if k.Name == typ.Kind {
			obj := k.NewObject()
			if err := yaml.UnmarshalStrict(data, obj); err != nil {
				t.Fatalf("%s: %v", path, err)
			}
			return k, obj
		}
	}
	t.Fatalf("%s: kind %q is not registered", path, typ.Kind)
	return kinds.Kind{}, nil
}

func createIn(t *testing.T, ns string, obj engine.Object) {
	t.Helper()
	obj.SetNamespace(ns)
	if err := k8s.Create(context.Background(), obj); err != nil {
		t.Fatalf("create %s: %v", obj.GetName(), err)
	}
}

// waitJob waits until the job satisfies pred, as read from the API server into obj.
func waitJob(t *testing.T, obj engine.Object, what string, pred func(engine.Object) bool) {
	t.Helper()
	eventually(t, obj.GetName()+" "+what, func(ctx context.Context) (bool, error) {
		err := k8s.Get(ctx, client.ObjectKeyFromObject(obj), obj)
		return err == nil && pred(obj), err
	})
}

func hasPhase(o engine.Object) bool { return o.JobStatus().Phase != "" }

// tableRows splits a table's rows into their cells, keyed by the header's names; an empty cell
// is told apart by the header's column offsets (kubectl's tabwriter aligns them).
func tableRows(t *testing.T, out string) []map[string]string {
	t.Helper()
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	header := lines[0]
	var starts []int
	var names []string
	for _, m := range regexp.MustCompile(`\S+`).FindAllStringIndex(header, -1) {
		starts, names = append(starts, m[0]), append(names, header[m[0]:m[1]])
	}
	var rows []map[string]string
	for _, l := range lines[1:] {
		row := map[string]string{}
		for i, s := range starts {
			end := len(l)
			if i+1 < len(starts) {
				end = min(starts[i+1], len(l))
			}
			if s < len(l) {
				row[names[i]] = strings.TrimSpace(l[s:end])
			}
		}
		rows = append(rows, row)
	}
	return rows
}

// Every example of every kind, applied through the API server, is listed by `get -A` with its
// namespace, kind, name and what its status says; `get -n` lists one namespace's, without the
// NAMESPACE column; `-o name` prints them as kubectl names objects.
func TestGetListsEveryKind(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(repoRoot, "examples", "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no examples: %v", err)
	}
	type want struct{ ns, kind, name string }
	var wants []want
	var jobs []engine.Object
	kindsSeen := map[string]bool{}
	for _, f := range files {
		k, obj := loadExample(t, f)
		// Two examples may share a name (a variant of another): each has a namespace.
		ns := newNamespace(t)
		createIn(t, ns, obj)
		wants = append(wants, want{ns, k.Name, obj.GetName()})
		jobs = append(jobs, obj)
		kindsSeen[k.Name] = true
	}
	for _, k := range kinds.All() {
		if !kindsSeen[k.Name] {
			t.Errorf("no example of %s", k.Name)
		}
	}
	for _, j := range jobs {
		waitJob(t, j, "has a phase", hasPhase)
	}

	all := mustTroupe(t, "get", "-A")
	t.Logf("kubectl troupe get -A:\n%s", all)
	rows := tableRows(t, all)
	if got := slices.Sorted(func(yield func(string) bool) {
		for k := range rows[0] {
			if !yield(k) {
				return
			}
		}
	}); !slices.Equal(got, []string{"AGE", "ETA", "KIND", "NAME", "NAMESPACE", "PHASE", "PROGRESS", "RESTARTS", "WORKERS"}) {
		t.Errorf("get -A columns = %v", got)
	}
	for wi, w := range wants {
		i := slices.IndexFunc(rows, func(r map[string]string) bool {
			return r["NAMESPACE"] == w.ns && r["KIND"] == w.kind && r["NAME"] == w.name
		})
		if i < 0 {
			t.Errorf("get -A does not list %s %s/%s", w.kind, w.ns, w.name)
			continue
		}
		st := jobs[wi].JobStatus()
		if r := rows[i]; r["PHASE"] != string(st.Phase) || r["WORKERS"] != st.Workers || r["RESTARTS"] != "0" || r["AGE"] == "" || r["PROGRESS"] != "-" || r["ETA"] != "-" {
			t.Errorf("get -A shows %s %s/%s as %v, its status says phase %q workers %q", w.kind, w.ns, w.name, r, st.Phase, st.Workers)
		}
	}

	one := wants[0]
	out := mustTroupe(t, "get", "-n", one.ns)
	if rows := tableRows(t, out); len(rows) != 1 || rows[0]["NAME"] != one.name || rows[0]["KIND"] != one.kind || strings.Contains(out, "NAMESPACE") {
		t.Errorf("get -n %s:\n%s", one.ns, out)
	}
	if out := mustTroupe(t, "get", "-n", one.ns, "-o", "name"); out != strings.ToLower(one.kind)+".troupe.dev/"+one.name+"\n" {
		t.Errorf("get -o name = %q", out)
	}
	if out := mustTroupe(t, "get", "-n", one.ns, strings.ToLower(one.kind)+"/"+one.name); !strings.Contains(out, one.name) {
		t.Errorf("get KIND/NAME:\n%s", out)
	}
	empty := newNamespace(t)
	if r := troupe(t, "get", "-n", empty); r.err != nil || r.stdout != "" || r.stderr != "No troupe jobs found in "+empty+" namespace.\n" {
		t.Errorf("get in an empty namespace: %v, stdout %q, stderr %q", r.err, r.stdout, r.stderr)
	}
}

// runningMPIJob creates examples/mpijob.yaml and plays the Job and StatefulSet controllers and
// the scheduler until the operator reports it Running: its launcher pod and five worker pods
// exist (made from the templates the operator wrote), on nodes, ready.
func runningMPIJob(t *testing.T, ns string) *troupev1.MPIJob {
	t.Helper()
	_, obj := loadExample(t, filepath.Join(repoRoot, "examples", "mpijob.yaml"))
	job := obj.(*troupev1.MPIJob)
	createIn(t, ns, job)
	ctx := context.Background()

	var sts appsv1.StatefulSet
	eventually(t, "the worker StatefulSet", func(ctx context.Context) (bool, error) {
		err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: job.Name + "-worker"}, &sts)
		return err == nil, err
	})
	replicas := ptr.Deref(sts.Spec.Replicas, 1)
	for i := range replicas {
		pod := podFrom(ns, fmt.Sprintf("%s-%d", sts.Name, i), sts.Spec.Template, fmt.Sprintf("node-%d", i%2))
		createRunningPod(t, pod)
	}
	sts.Status.Replicas, sts.Status.ReadyReplicas, sts.Status.AvailableReplicas = replicas, replicas, replicas
	if err := k8s.Status().Update(ctx, &sts); err != nil {
		t.Fatal(err)
	}

	var launcher batchv1.Job
	eventually(t, "the launcher Job", func(ctx context.Context) (bool, error) {
		err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: job.Name + "-launcher"}, &launcher)
		return err == nil, err
	})
	createRunningPod(t, podFrom(ns, launcher.Name+"-x7k2p", launcher.Spec.Template, "node-0"))
	launcher.Status.Active, launcher.Status.Ready = 1, ptr.To[int32](1)
	launcher.Status.StartTime = ptr.To(metav1.Now())
	if err := k8s.Status().Update(ctx, &launcher); err != nil {
		t.Fatal(err)
	}
	waitJob(t, job, "Running", func(o engine.Object) bool { return o.JobStatus().Phase == troupev1.JobRunning })
	return job
}

// podFrom is the pod a controller makes from a template.
func podFrom(ns, name string, tmpl corev1.PodTemplateSpec, node string) *corev1.Pod {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: tmpl.Labels, Annotations: tmpl.Annotations},
		Spec:       *tmpl.Spec.DeepCopy(),
	}
	pod.Spec.NodeName = node
	return pod
}

// createRunningPod creates pod on node and writes the status a kubelet would: init containers
// done, containers running and ready.
func createRunningPod(t *testing.T, pod *corev1.Pod) {
	t.Helper()
	if err := k8s.Create(context.Background(), pod); err != nil {
		t.Fatalf("create pod %s: %v", pod.Name, err)
	}
	now := metav1.Now()
	pod.Status.Phase = corev1.PodRunning
	pod.Status.StartTime = &now
	pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: now}}
	for _, c := range pod.Spec.InitContainers {
		pod.Status.InitContainerStatuses = append(pod.Status.InitContainerStatuses, corev1.ContainerStatus{Name: c.Name, Image: c.Image,
			State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 0, Reason: "Completed", StartedAt: now, FinishedAt: now}}})
	}
	for _, c := range pod.Spec.Containers {
		pod.Status.ContainerStatuses = append(pod.Status.ContainerStatuses, corev1.ContainerStatus{Name: c.Name, Image: c.Image, Ready: true,
			State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: now}}})
	}
	if err := k8s.Status().Update(context.Background(), pod); err != nil {
		t.Fatalf("pod %s status: %v", pod.Name, err)
	}
}

// describe of a running MPIJob tells its story: phase, every condition as the API server holds
// it, the replicas, the children and pods with their nodes, and its events in time order, the
// operator's and one written by someone else.
func TestDescribeRunningMPIJob(t *testing.T) {
	ns := newNamespace(t)
	job := runningMPIJob(t, ns)
	var out string
	// The operator's events are written asynchronously, after the status that tells of them.
	eventually(t, "describe shows the operator's events", func(context.Context) (bool, error) {
		out = mustTroupe(t, "describe", "-n", ns, job.Name)
		return strings.Contains(out, troupev1.EventWorkersReady) && strings.Contains(out, " "+troupev1.EventRunning+" "), nil
	})
	// Then another component's event about the job (events.k8s.io/v1, seen twice).
	now := metav1.NowMicro()
	ev := &eventsv1.Event{
		ObjectMeta: metav1.ObjectMeta{Name: job.Name + ".checkpoint", Namespace: ns},
		Regarding:  corev1.ObjectReference{Kind: "MPIJob", APIVersion: troupev1.GroupVersion.String(), Name: job.Name, Namespace: ns, UID: job.UID},
		Type:       corev1.EventTypeWarning, Reason: "CheckpointSlow", Note: "the last checkpoint took 95s", Action: "Checkpoint",
		ReportingController: "checkpointer", ReportingInstance: "checkpointer-1", EventTime: now,
		Series: &eventsv1.EventSeries{Count: 2, LastObservedTime: now},
	}
	if err := k8s.Create(context.Background(), ev); err != nil {
		t.Fatal(err)
	}
	out = mustTroupe(t, "describe", "-n", ns, job.Name)
	t.Logf("kubectl troupe describe %s:\n%s", job.Name, out)

	if err := k8s.Get(context.Background(), client.ObjectKeyFromObject(job), job); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Kind:", "MPIJob", "Phase:", "Running", "Workers:", "5/5", "Suspend:", "false"} {
		if !strings.Contains(out, want) {
			t.Errorf("describe lacks %q", want)
		}
	}
	section := func(title string) []map[string]string {
		_, rest, ok := strings.Cut(out, "\n"+title+":\n")
		if !ok {
			t.Fatalf("describe has no %s section:\n%s", title, out)
		}
		var lines []string
		for _, l := range strings.Split(rest, "\n") {
			if !strings.HasPrefix(l, "  ") {
				break
			}
			if !strings.HasPrefix(strings.TrimSpace(l), "--") {
				lines = append(lines, strings.TrimPrefix(l, "  "))
			}
		}
		return tableRows(t, strings.Join(lines, "\n"))
	}
	conds := section("Conditions")
	for _, c := range job.Status.Conditions {
		i := slices.IndexFunc(conds, func(r map[string]string) bool { return r["Type"] == c.Type })
		if i < 0 || conds[i]["Status"] != string(c.Status) || conds[i]["Reason"] != c.Reason || !strings.HasPrefix(c.Message, strings.TrimSuffix(conds[i]["Message"], "...")) {
			t.Errorf("condition %s %s %s %q: describe shows %v", c.Type, c.Status, c.Reason, c.Message, conds)
		}
	}
	if len(conds) != len(job.Status.Conditions) {
		t.Errorf("describe shows %d conditions, the job has %d", len(conds), len(job.Status.Conditions))
	}
	children := section("Children")
	for _, want := range [][2]string{{"Job", job.Name + "-launcher"}, {"StatefulSet", job.Name + "-worker"}, {"ConfigMap", job.Name + "-mpi"}, {"Service", job.Name}} {
		if !slices.ContainsFunc(children, func(r map[string]string) bool { return r["Kind"] == want[0] && r["Name"] == want[1] }) {
			t.Errorf("describe's children lack %s %s: %v", want[0], want[1], children)
		}
	}
	pods := section("Pods")
	var podNames []string
	for _, p := range pods {
		podNames = append(podNames, p["Name"])
		if p["Phase"] != "Running" || !strings.HasPrefix(p["Node"], "node-") {
			t.Errorf("pod %v: want Running on a node", p)
		}
	}
	wantPods := []string{job.Name + "-launcher-x7k2p"}
	for i := range 5 {
		wantPods = append(wantPods, fmt.Sprintf("%s-worker-%d", job.Name, i))
	}
	if !slices.Equal(podNames, wantPods) {
		t.Errorf("describe's pods = %v, want the launcher first, then the workers in order: %v", podNames, wantPods)
	}
	events := section("Events")
	var reasons []string
	for _, e := range events {
		reasons = append(reasons, e["Reason"])
	}
	// In time order: the operator's story, then the event written after it.
	for _, want := range [][2]string{{troupev1.EventCreated, troupev1.EventRunning}, {troupev1.EventRunning, "CheckpointSlow"}} {
		a, b := slices.Index(reasons, want[0]), slices.Index(reasons, want[1])
		if a < 0 || b < 0 || a > b {
			t.Errorf("events %v: want %s before %s", reasons, want[0], want[1])
		}
	}
	if i := slices.Index(reasons, "CheckpointSlow"); i >= 0 && (events[i]["Type"] != "Warning" || !strings.Contains(events[i]["Age"], "(x2 over") || events[i]["From"] != "checkpointer") {
		t.Errorf("the checkpointer's event shows as %v", events[i])
	}
}

// hostfile prints the operator's hostfile ConfigMap as the API server holds it; a job without
// one says why.
func TestHostfile(t *testing.T) {
	ns := newNamespace(t)
	job := runningMPIJob(t, ns)
	var cm corev1.ConfigMap
	if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: job.Name + "-mpi"}, &cm); err != nil {
		t.Fatal(err)
	}
	out := mustTroupe(t, "hostfile", "-n", ns, "mpijob/"+job.Name)
	t.Logf("kubectl troupe hostfile mpijob/%s:\n%s", job.Name, out)
	if out != cm.Data["hostfile"] || !strings.Contains(out, job.Name+"-worker-4") {
		t.Errorf("hostfile printed %q, the ConfigMap holds %q", out, cm.Data["hostfile"])
	}

	_, torch := loadExample(t, filepath.Join(repoRoot, "examples", "pytorchjob.yaml"))
	createIn(t, ns, torch)
	waitJob(t, torch, "has a phase", hasPhase)
	alone := testutil.MakeChainerJob("alone", ns).Obj()
	alone.Spec.Backend = troupev1.ChainerBackendNone
	createIn(t, ns, alone)
	waitJob(t, alone, "has a phase", hasPhase)
	for name, want := range map[string]string{
		"pytorchjob/" + torch.GetName(): "error: pytorchjob.troupe.dev/" + torch.GetName() + " has no hostfile: it runs PyTorch, whose processes find each other through torch's rendezvous",
		"chainerjob/alone":              "error: chainerjob.troupe.dev/alone has no hostfile: it has no MPI backend (spec.backend none): its master runs alone",
	} {
		r := troupe(t, "hostfile", "-n", ns, name)
		if r.err == nil || r.stdout != "" || !strings.HasPrefix(r.stderr, want) {
			t.Errorf("hostfile %s: %v, stdout %q, stderr %q; want stderr %q", name, r.err, r.stdout, r.stderr, want)
		}
	}
}

// suspend and resume flip spec.runPolicy.suspend of a job of every kind, and of an MPIJob in
// kubeflow's form, as the API server then holds it; kubectl's words say what happened.
func TestSuspendResumeEveryKind(t *testing.T) {
	ns := newNamespace(t)
	var jobs []engine.Object
	for _, f := range []string{"chainerjob.yaml", "horovodjob.yaml", "mpijob.yaml", "pytorchjob.yaml"} {
		_, obj := loadExample(t, filepath.Join(repoRoot, "examples", f))
		jobs = append(jobs, obj)
	}
	kubeflow := &troupev1.MPIJob{}
	if err := yaml.UnmarshalStrict([]byte(kubeflowMPIJob), kubeflow); err != nil {
		t.Fatal(err)
	}
	jobs = append(jobs, kubeflow)
	for _, j := range jobs {
		createIn(t, ns, j)
	}
	suspend := func(o engine.Object) *bool { return o.(troupev1.QueuedJob).JobRunPolicy().Suspend }
	for _, j := range jobs {
		kind := strings.ToLower(j.GetObjectKind().GroupVersionKind().Kind)
		if kind == "" {
			gvk, err := apiutil.GVKForObject(j, scheme)
			if err != nil {
				t.Fatal(err)
			}
			kind = strings.ToLower(gvk.Kind)
		}
		ref := kind + "/" + j.GetName()
		if out := mustTroupe(t, "suspend", "-n", ns, ref); out != kind+".troupe.dev/"+j.GetName()+" suspended\n" {
			t.Errorf("suspend %s printed %q", ref, out)
		}
		waitJob(t, j, "suspended in the API", func(o engine.Object) bool { return ptr.Deref(suspend(o), false) })
		waitJob(t, j, "reported Suspended", func(o engine.Object) bool {
			return meta.IsStatusConditionTrue(o.JobStatus().Conditions, troupev1.ConditionSuspended)
		})
		if out := mustTroupe(t, "suspend", "-n", ns, ref); out != kind+".troupe.dev/"+j.GetName()+" suspended (no change)\n" {
			t.Errorf("suspend %s again printed %q", ref, out)
		}
		if out := mustTroupe(t, "resume", "-n", ns, ref); out != kind+".troupe.dev/"+j.GetName()+" resumed\n" {
			t.Errorf("resume %s printed %q", ref, out)
		}
		waitJob(t, j, "resumed in the API", func(o engine.Object) bool { s := suspend(o); return s != nil && !*s })
	}
}

// resume refuses a job that waits in a Kueue LocalQueue (Kueue resumes it once admitted) and
// leaves it suspended; with --force it resumes it.
func TestResumeOfAQueuedJob(t *testing.T) {
	ns := newNamespace(t)
	_, j := loadExample(t, filepath.Join(repoRoot, "examples", "mpijob.yaml"))
	j.SetLabels(map[string]string{"kueue.x-k8s.io/queue-name": "team-a"})
	j.(troupev1.QueuedJob).JobRunPolicy().Suspend = ptr.To(true)
	createIn(t, ns, j)
	ref := "mpijob/" + j.GetName()
	r := troupe(t, "resume", "-n", ns, ref)
	if r.err == nil || !strings.Contains(r.stderr, `waits in Kueue's LocalQueue "team-a"`) || !strings.Contains(r.stderr, "--force") {
		t.Errorf("resume of a queued job: %v, stderr %q; want refused, naming the queue and --force", r.err, r.stderr)
	}
	if err := k8s.Get(context.Background(), client.ObjectKeyFromObject(j), j); err != nil {
		t.Fatal(err)
	}
	if !ptr.Deref(j.(troupev1.QueuedJob).JobRunPolicy().Suspend, false) {
		t.Errorf("the refused resume resumed the job")
	}
	if out := mustTroupe(t, "resume", "--force", "-n", ns, ref); out != "mpijob.troupe.dev/"+j.GetName()+" resumed\n" {
		t.Errorf("resume --force printed %q", out)
	}
	waitJob(t, j, "resumed in the API", func(o engine.Object) bool {
		s := o.(troupev1.QueuedJob).JobRunPolicy().Suspend
		return s != nil && !*s
	})
}

// kubeflowMPIJob is an MPIJob in kubeflow mpi-operator's form (spec.mpiReplicaSpecs).
const kubeflowMPIJob = `
apiVersion: troupe.dev/v1alpha1
kind: MPIJob
metadata:
  name: pi-kubeflow
spec:
  slotsPerWorker: 1
  mpiReplicaSpecs:
    Launcher:
      replicas: 1
      template:
        spec:
          containers:
          - name: mpi-launcher
            image: mpioperator/mpi-pi:openmpi
            command: [mpirun, -n, "2", /home/mpiuser/pi]
    Worker:
      replicas: 2
      template:
        spec:
          containers:
          - name: mpi-worker
            image: mpioperator/mpi-pi:openmpi
`

// A name two kinds share is refused with the KIND/NAME forms to write; each form then finds
// its job, by kind, plural, short name or group-qualified name, in any case.
func TestAmbiguousName(t *testing.T) {
	ns := newNamespace(t)
	createIn(t, ns, testutil.MakeChainerJob("twin", ns).Obj())
	_, mpi := loadExample(t, filepath.Join(repoRoot, "examples", "mpijob.yaml"))
	mpi.SetName("twin")
	createIn(t, ns, mpi)

	r := troupe(t, "describe", "-n", ns, "twin")
	want := fmt.Sprintf("error: \"twin\" names 2 jobs in namespace %q (chainerjob/twin, mpijob/twin): say which, as KIND/NAME, for example chainerjob/twin\n", ns)
	if r.err == nil || r.stderr != want {
		t.Errorf("describe twin: %v, stderr %q, want %q", r.err, r.stderr, want)
	}
	for _, ref := range []string{"mpijob/twin", "MPIJob/twin", "mpijobs/twin", "mpij/twin", "mpijobs.troupe.dev/twin"} {
		if out := mustTroupe(t, "describe", "-n", ns, ref); !strings.Contains(out, "MPIJob") || strings.Contains(out, "ChainerJob") {
			t.Errorf("describe %s does not describe the MPIJob:\n%s", ref, out)
		}
	}
	if out := mustTroupe(t, "get", "-n", ns, "chj/twin"); !strings.Contains(out, "ChainerJob") || strings.Contains(out, "MPIJob") {
		t.Errorf("get chj/twin:\n%s", out)
	}
	for args, want := range map[string]string{
		"describe nope":      fmt.Sprintf("error: no troupe job named \"nope\" in namespace %q\n", ns),
		"describe mpijob/no": fmt.Sprintf("error: mpijob \"no\" not found in namespace %q\n", ns),
		"describe job/twin":  "error: \"job\" is not a troupe kind: one of chainerjob, horovodjob, mpijob, pytorchjob (singular, plural or short name)\n",
	} {
		r := troupe(t, append(strings.Fields(args), "-n", ns)...)
		if r.err == nil || r.stderr != want {
			t.Errorf("%s: %v, stderr %q, want %q", args, r.err, r.stderr, want)
		}
	}
}

func TestVersion(t *testing.T) {
	if out := mustTroupe(t, "version"); !strings.HasPrefix(out, "kubectl-troupe v0.0.0-it (revision 0123abc, go") {
		t.Errorf("version printed %q", out)
	}
}

// lockedBuffer is the output of a command that runs while the test reads it.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// get -w prints the table, then a job's row again with its progress bar each time the
// training's progress moves, until interrupted.
func TestGetWatchDrawsProgress(t *testing.T) {
	ns := newNamespace(t)
	job := runningMPIJob(t, ns)
	var out lockedBuffer
	cmd := exec.Command(plugin, "get", "-w", "-n", ns, "--kubeconfig", kubeconfig, "--cache-dir", cacheDir)
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill() }()
	// The training's reports, as the operator folds them into the status.
	for _, pct := range []int32{30, 60} {
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			if err := k8s.Get(context.Background(), client.ObjectKeyFromObject(job), job); err != nil {
				return err
			}
			eta := metav1.NewTime(time.Now().Add(5 * time.Minute))
			job.Status.Progress = &troupev1.ProgressStatus{Current: int64(pct) * 10, Total: 1000, Percent: ptr.To(pct),
				LastReportTime: ptr.To(metav1.Now()), EstimatedCompletionTime: &eta, Remaining: "5m0s"}
			return k8s.Status().Update(context.Background(), job)
		})
		if err != nil {
			t.Fatal(err)
		}
		bar := fmt.Sprintf("%s%s] %3d%%", strings.Repeat("#", int(pct)/5), strings.Repeat("-", 20-int(pct)/5), pct)
		eventually(t, "get -w draws "+bar, func(context.Context) (bool, error) {
			return strings.Contains(out.String(), bar), nil
		})
	}
	if err := cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Errorf("get -w interrupted: %v\n%s", err, out.String())
	}
	t.Logf("kubectl troupe get -w:\n%s", out.String())
	if header := strings.Count(out.String(), "PROGRESS"); header != 1 {
		t.Errorf("the header printed %d times, want once:\n%s", header, out.String())
	}
}
