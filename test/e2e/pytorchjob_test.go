package e2e

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	troupev1 "github.com/troupe-dev/troupe/apis/troupe/v1alpha1"
	"github.com/troupe-dev/troupe/pkg/backend/torch"
)

// trainingOperatorManifest reads one of training-operator's published PyTorchJobs
// (test/manifests/training-operator) with only its apiVersion changed, into namespace ns.
func trainingOperatorManifest(t *testing.T, file, ns string) *troupev1.PyTorchJob {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var obj map[string]any
	if err := yaml.Unmarshal(data, &obj); err != nil {
		t.Fatal(err)
	}
	if obj["apiVersion"] != "kubeflow.org/v1" || obj["kind"] != "PyTorchJob" {
		t.Fatalf("%s is not training-operator's kubeflow.org/v1 PyTorchJob", file)
	}
	obj["apiVersion"] = troupev1.GroupVersion.String()
	data, _ = yaml.Marshal(obj)
	job := &troupev1.PyTorchJob{}
	if err := yaml.UnmarshalStrict(data, job); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	job.Namespace = ns
	return job
}

// Every PyTorchJob training-operator publishes, with only apiVersion changed, runs to Succeeded
// on the simulated cluster (its master's success, or every worker's without a master): a Job per
// pod, each pod with torch's environment naming rank 0's host and its own rank.
func TestTrainingOperatorExamples(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob(filepath.Join("..", "manifests", "training-operator", "*.yaml"))
	if err != nil || len(files) < 8 {
		t.Fatalf("found %d of training-operator's manifests (%v), want the 8 published", len(files), err)
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			ns := newNamespace(t)
			job := trainingOperatorManifest(t, f, ns)
			published := job.DeepCopy()
			if err := k8s.Create(ctx, job); err != nil {
				t.Fatalf("create: %v", err)
			}
			r := published.Spec.PyTorchReplicaSpecs
			rankZero := job.Name + "-master"
			if r.Master == nil {
				rankZero = job.Name + "-worker-0"
			}
			workers := int(ptr.Deref(ptr.Deref(r.Worker, troupev1.ReplicaSpec{}).Replicas, 1))
			if r.Worker == nil {
				workers = 0
			}
			var jobs batchv1.JobList
			eventually(t, "the Jobs of "+job.Name, func(ctx context.Context) (bool, error) {
				err := k8s.List(ctx, &jobs, client.InNamespace(ns))
				return err == nil && len(jobs.Items) == workers+int(ptrBool(r.Master != nil)), err
			})
			if e := published.Spec.ElasticPolicy; e != nil && len(e.Metrics) > 0 {
				expectAutoscaler(t, job, e)
			}
			// On a network plugin that enforces NetworkPolicies, ranks reach each other only if
			// the job's policy selects every pod and lets them in from each other.
			var np networkingv1.NetworkPolicy
			eventually(t, "the NetworkPolicy of "+job.Name, func(ctx context.Context) (bool, error) {
				err := k8s.Get(ctx, client.ObjectKeyFromObject(job), &np)
				return err == nil, client.IgnoreNotFound(err)
			})
			selector, err := metav1.LabelSelectorAsSelector(&np.Spec.PodSelector)
			if err != nil || len(np.Spec.Ingress) != 1 || len(np.Spec.Ingress[0].From) != 1 || np.Spec.Ingress[0].From[0].PodSelector == nil ||
				!equality.Semantic.DeepEqual(*np.Spec.Ingress[0].From[0].PodSelector, np.Spec.PodSelector) {
				t.Errorf("NetworkPolicy %s: selector %v (%v), ingress %+v: want the job's pods let in from each other", np.Name, np.Spec.PodSelector, err, np.Spec.Ingress)
			}
			for _, j := range jobs.Items {
				if selector == nil || !selector.Matches(labels.Set(j.Spec.Template.Labels)) {
					t.Errorf("Job %s: its pods (labels %v) are outside the job's NetworkPolicy %v", j.Name, j.Spec.Template.Labels, np.Spec.PodSelector)
				}
				var main *corev1.Container
				for i := range j.Spec.Template.Spec.Containers {
					if c := &j.Spec.Template.Spec.Containers[i]; c.Name == troupev1.PyTorchMainContainer {
						main = c
					}
				}
				env := map[string]string{}
				for _, e := range main.Env {
					env[e.Name] = e.Value
				}
				wantAddr := rankZero + "." + job.Name + "." + ns + ".svc"
				if env[torch.EnvMasterAddr] != wantAddr || env[torch.EnvMasterPort] == "" || env[torch.EnvPETMasterAddr] != wantAddr {
					t.Errorf("Job %s: MASTER_ADDR %q, PET_MASTER_ADDR %q, MASTER_PORT %q; want rank 0's %s", j.Name,
						env[torch.EnvMasterAddr], env[torch.EnvPETMasterAddr], env[torch.EnvMasterPort], wantAddr)
				}
				if published.Spec.ElasticPolicy != nil {
					if !strings.HasPrefix(env[torch.EnvPETRDZVEndpoint], job.Name+"-worker-0."+job.Name+"."+ns+".svc:") {
						t.Errorf("Job %s: PET_RDZV_ENDPOINT %q, want the first worker's", j.Name, env[torch.EnvPETRDZVEndpoint])
					}
				} else if env[torch.EnvRank] == "" || env[torch.EnvWorldSize] == "" {
					t.Errorf("Job %s: RANK %q, WORLD_SIZE %q", j.Name, env[torch.EnvRank], env[torch.EnvWorldSize])
				}
				if j.Spec.Template.Spec.Hostname != j.Name || j.Spec.Template.Spec.Subdomain != job.Name {
					t.Errorf("Job %s: pod hostname %q, subdomain %q", j.Name, j.Spec.Template.Spec.Hostname, j.Spec.Template.Spec.Subdomain)
				}
			}
			waitForPyTorchJob(t, ns, job.Name, "Succeeded", func(j *troupev1.PyTorchJob) bool { return j.Status.Phase == troupev1.JobSucceeded })
		})
	}
}

func ptrBool(b bool) int {
	if b {
		return 1
	}
	return 0
}

func waitForPyTorchJob(t *testing.T, ns, name, what string, pred func(*troupev1.PyTorchJob) bool) {
	t.Helper()
	job := &troupev1.PyTorchJob{}
	eventually(t, "PyTorchJob "+name+" "+what, func(ctx context.Context) (bool, error) {
		err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, job)
		return err == nil && pred(job), err
	})
}

// An elastic PyTorchJob scales with kubectl scale, within its bounds: scaled up, it gets the new
// worker's Job (the others keep theirs: their pods keep running); scaled down, the Job of the
// index gone is deleted; past its bounds the scale is refused naming them.
func TestPyTorchJobElasticScale(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ns := newNamespace(t)
	job := &troupev1.PyTorchJob{}
	data, err := os.ReadFile(filepath.Join("..", "..", "examples", "pytorchjob-elastic.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.UnmarshalStrict(data, job); err != nil {
		t.Fatal(err)
	}
	job.Namespace = ns
	// Long enough to scale it while its workers run.
	job.Spec.PyTorchReplicaSpecs.Worker.Template.Annotations = map[string]string{"troupe.dev/sim-duration": "60s"}
	if err := k8s.Create(ctx, job); err != nil {
		t.Fatal(err)
	}
	name := job.Name
	uids := func(want int) map[string]string {
		var jobs batchv1.JobList
		eventually(t, "the worker Jobs of "+name, func(ctx context.Context) (bool, error) {
			err := k8s.List(ctx, &jobs, client.InNamespace(ns))
			return err == nil && len(jobs.Items) == want, err
		})
		out := map[string]string{}
		for _, j := range jobs.Items {
			out[j.Name] = string(j.UID)
		}
		return out
	}
	waitForPyTorchJob(t, ns, name, "Running with 2 workers", func(j *troupev1.PyTorchJob) bool {
		return j.Status.Phase == troupev1.JobRunning && j.Status.Workers == "2/2"
	})
	before := uids(2)
	if out, err := kubectl("scale", "-n", ns, "pytorchjob/"+name, "--replicas=3"); err != nil {
		t.Fatalf("kubectl scale to 3: %v: %s", err, out)
	}
	after := uids(3)
	for n, uid := range before {
		if after[n] != uid {
			t.Errorf("scaling up replaced Job %s", n)
		}
	}
	if _, ok := after[name+"-worker-2"]; !ok {
		t.Errorf("scaled to 3: Jobs %v lack %s-worker-2", after, name)
	}
	waitForPyTorchJob(t, ns, name, "with 3 workers ready", func(j *troupev1.PyTorchJob) bool { return j.Status.Workers == "3/3" })
	out, err := kubectl("scale", "-n", ns, "pytorchjob/"+name, "--replicas=4")
	if err == nil || !strings.Contains(out, "elasticPolicy") {
		t.Errorf("kubectl scale past maxReplicas: %v: %s; want a refusal naming elasticPolicy", err, out)
	}
	if out, err := kubectl("scale", "-n", ns, "pytorchjob/"+name, "--replicas=2"); err != nil {
		t.Fatalf("kubectl scale to 2: %v: %s", err, out)
	}
	if after := uids(2); after[name+"-worker-2"] != "" {
		t.Errorf("scaled down to 2: Job %s-worker-2 remains", name)
	}
}

// pytorchExample is examples/pytorchjob.yaml (a Master and two Workers) in namespace ns.
func pytorchExample(t *testing.T, ns string) *troupev1.PyTorchJob {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "..", "examples", "pytorchjob.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	job := &troupev1.PyTorchJob{}
	if err := yaml.UnmarshalStrict(data, job); err != nil {
		t.Fatal(err)
	}
	job.Namespace = ns
	return job
}

// Two PyTorchJobs of a Master and 2 Workers x 3 CPU on a pool of two 4-CPU nodes, with each
// gang scheduler: one job is bound whole while none of the other's pods is, then both succeed
// (the workers' Jobs are the gang's members as a StatefulSet's pods are).
func TestGangPyTorchJobs(t *testing.T) {
	t.Parallel()
	for _, g := range []troupev1.GangProvider{troupev1.GangVolcano, troupev1.GangCoscheduling} {
		t.Run(string(g), func(t *testing.T) {
			t.Parallel() // each scheduler with a namespace (and a pool) of its own
			ns := newNamespace(t)
			gangPool(t, ns)
			jobs := [2]string{"ptj-a", "ptj-b"}
			for _, name := range jobs {
				job := pytorchExample(t, ns)
				job.Name = name
				job.Spec.SchedulingPolicy.Gang = ptr.To(g)
				r := job.Spec.PyTorchReplicaSpecs
				onPool(&r.Worker.Template, ns, "3")
				r.Worker.Template.Annotations = map[string]string{simDurationAnnot: "8s"}
				r.Master.Template.Annotations = map[string]string{simDurationAnnot: "8s"}
				if err := k8s.Create(context.Background(), job); err != nil {
					t.Fatal(err)
				}
			}
			first, second := watchGang(t, ns, "pytorchjob.troupe.dev/name", jobs)
			noneBound(t, ns, "pytorchjob.troupe.dev/name", second, first+" is bound whole")
			for _, name := range []string{first, second} {
				waitForPyTorchJob(t, ns, name, "Succeeded", func(j *troupev1.PyTorchJob) bool { return j.Status.Phase == troupev1.JobSucceeded })
			}
		})
	}
}

// A gang PyTorchJob whose workers finish first and whose master then fails, with a retry
// left (backoffLimit 1): the master's second pod must be scheduled though the workers are gone.
// The gang no longer counts the pods of completed worker Jobs (the coscheduling plugin counts
// only a group's pods that have not ended, and would refuse that pod forever), so the retry
// runs, fails too, and the job Fails.
func TestGangPyTorchJobMasterRetryAfterWorkersFinished(t *testing.T) {
	t.Parallel()
	for _, g := range []troupev1.GangProvider{troupev1.GangVolcano, troupev1.GangCoscheduling} {
		t.Run(string(g), func(t *testing.T) {
			t.Parallel() // each scheduler with a namespace of its own
			ns := newNamespace(t)
			history := watchPods(t, ns)
			job := pytorchExample(t, ns)
			job.Spec.SchedulingPolicy.Gang = ptr.To(g)
			job.Spec.RunPolicy.BackoffLimit = ptr.To[int32](1)
			r := job.Spec.PyTorchReplicaSpecs
			r.Master.RestartPolicy = troupev1.ReplicaRestartNever
			r.Master.Template.Labels = map[string]string{simOutcomeLabel: simOutcomeFail}
			r.Master.Template.Annotations = map[string]string{simDurationAnnot: "4s"}
			r.Worker.Template.Annotations = map[string]string{simDurationAnnot: "1s"}
			if err := k8s.Create(context.Background(), job); err != nil {
				t.Fatal(err)
			}
			waitForPyTorchJob(t, ns, job.Name, "Failed", func(j *troupev1.PyTorchJob) bool { return j.Status.Phase == troupev1.JobFailed })
			history.mu.Lock()
			masters := 0
			for _, e := range history.events {
				if f := strings.Fields(e); len(f) >= 2 && f[0] == string(watch.Added) && strings.HasPrefix(f[1], job.Name+"-master-") {
					masters++
				}
			}
			history.mu.Unlock()
			if masters != 2 {
				t.Errorf("%d master pods, want 2 (the first and its retry)", masters)
			}
		})
	}
}

// A PyTorchJob created suspended in a namespace that enforces Pod Security "restricted" has no
// pod (its master's and workers' Jobs suspended) until it is resumed; then the Job controller
// creates every pod, which passes "restricted", and the job succeeds.
func TestPyTorchJobSuspendedRestricted(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ns := restrictedNamespace(t)
	job := pytorchExample(t, ns)
	job.Spec.RunPolicy.Suspend = ptr.To(true)
	restrictedTemplate(&job.Spec.PyTorchReplicaSpecs.Master.Template)
	restrictedTemplate(&job.Spec.PyTorchReplicaSpecs.Worker.Template)
	if err := k8s.Create(ctx, job); err != nil {
		t.Fatal(err)
	}
	waitForPyTorchJob(t, ns, job.Name, "Suspended", func(j *troupev1.PyTorchJob) bool { return j.Status.Phase == troupev1.JobSuspended })
	var jobs batchv1.JobList
	eventually(t, "the three Jobs, suspended", func(ctx context.Context) (bool, error) {
		if err := k8s.List(ctx, &jobs, client.InNamespace(ns)); err != nil {
			return false, err
		}
		for _, j := range jobs.Items {
			if !ptr.Deref(j.Spec.Suspend, false) {
				return false, nil
			}
		}
		return len(jobs.Items) == 3, nil
	})
	var pods corev1.PodList
	if err := k8s.List(ctx, &pods, client.InNamespace(ns)); err != nil || len(pods.Items) > 0 {
		t.Errorf("a suspended job has %d pods (%v)", len(pods.Items), err)
	}
	if out, err := kubectl("patch", "-n", ns, "pytorchjob/"+job.Name, "--type=merge", "-p", `{"spec":{"runPolicy":{"suspend":false}}}`); err != nil {
		t.Fatalf("resume: %v: %s", err, out)
	}
	waitForPyTorchJob(t, ns, job.Name, "Succeeded", func(j *troupev1.PyTorchJob) bool { return j.Status.Phase == troupev1.JobSucceeded })
}

// A PyTorchJob whose workers fail in every attempt, under runPolicy.failurePolicy.maxRestarts 1:
// the first worker Job to fail restarts the job as a whole (the master's and the workers' Jobs
// made again, each pod of attempt 1 created only once no pod of attempt 0 is left), the second
// attempt fails the same way and the job Fails naming the worker Job and the attempt. The
// restart is counted on the operator's metrics under the kind PyTorchJob.
func TestPyTorchJobWorkerFailureRestartsTheJob(t *testing.T) {
	t.Parallel() // the metric it checks is its own namespace's series
	ns := newNamespace(t)
	history := watchPods(t, ns)
	job := pytorchExample(t, ns)
	r := job.Spec.PyTorchReplicaSpecs
	r.Master.Template.Annotations = map[string]string{simDurationAnnot: "3600s"}
	r.Worker.Template.Labels = map[string]string{simOutcomeLabel: simOutcomeFail}
	r.Worker.Template.Annotations = map[string]string{simDurationAnnot: "1s"}
	job.Spec.RunPolicy.BackoffLimit = ptr.To[int32](0)
	job.Spec.RunPolicy.FailurePolicy = &troupev1.FailurePolicy{MaxRestarts: 1}
	if err := k8s.Create(context.Background(), job); err != nil {
		t.Fatal(err)
	}
	got := &troupev1.PyTorchJob{}
	waitForPyTorchJob(t, ns, job.Name, "Failed", func(j *troupev1.PyTorchJob) bool {
		j.DeepCopyInto(got)
		return j.Status.Phase == troupev1.JobFailed
	})
	c := meta.FindStatusCondition(got.Status.Conditions, troupev1.ConditionFailed)
	if got.Status.Restarts != 1 || c == nil || !strings.Contains(c.Message, "worker Job "+job.Name+"-worker-") ||
		!strings.HasSuffix(c.Message, "in attempt 1; no restart left (runPolicy.failurePolicy.maxRestarts: 1)") {
		t.Errorf("restarts %d, Failed condition %+v", got.Status.Restarts, c)
	}
	waitForRestartingEvent(t, ns, "attempt 1 of 1: worker Job "+job.Name+"-worker-")
	waitForMetrics(t, []check{{name: "troupe_job_restarts_total", kind: "PyTorchJob", ns: ns, want: 1}})

	history.mu.Lock()
	created := map[string]int{}
	for _, e := range history.events {
		if f := strings.Fields(e); len(f) == 3 && f[0] == string(watch.Added) {
			// A Job's pod is named <job>-<5 random characters>: count per Job and attempt.
			created[f[1][:strings.LastIndex(f[1], "-")]+" "+f[2]]++
		}
	}
	history.mu.Unlock()
	for _, child := range []string{"master", "worker-0", "worker-1"} {
		for _, attempt := range []string{"0", "1"} {
			if n := created[job.Name+"-"+child+" "+attempt]; n != 1 {
				t.Errorf("%d pods of %s-%s in attempt %s, want 1 (all created: %v)", n, job.Name, child, attempt, created)
			}
		}
	}
	if why := history.overlapOfFirstRestart(); why != "" {
		t.Errorf("a rank of attempt 1 could meet one of attempt 0: %s", why)
	}
}

// expectAutoscaler waits for the HorizontalPodAutoscaler of an elastic job with metrics, as
// training-operator makes it: named like the job, on its scale subresource, between the elastic
// bounds, with the job's metrics.
func expectAutoscaler(t *testing.T, job *troupev1.PyTorchJob, e *troupev1.PyTorchElasticPolicy) {
	t.Helper()
	var hpa autoscalingv2.HorizontalPodAutoscaler
	eventually(t, "the HorizontalPodAutoscaler of "+job.Name, func(ctx context.Context) (bool, error) {
		err := k8s.Get(ctx, client.ObjectKeyFromObject(job), &hpa)
		return err == nil, client.IgnoreNotFound(err)
	})
	want := autoscalingv2.CrossVersionObjectReference{APIVersion: troupev1.GroupVersion.String(), Kind: "PyTorchJob", Name: job.Name}
	if hpa.Spec.ScaleTargetRef != want || !ptr.Equal(hpa.Spec.MinReplicas, e.MinReplicas) || hpa.Spec.MaxReplicas != ptr.Deref(e.MaxReplicas, 0) ||
		!equality.Semantic.DeepEqual(hpa.Spec.Metrics, e.Metrics) || !metav1.IsControlledBy(&hpa, job) {
		t.Errorf("HorizontalPodAutoscaler %s: target %+v, replicas %v-%d, metrics %+v, owners %v; want %+v, %v-%v, the job's metrics, controlled by the job",
			hpa.Name, hpa.Spec.ScaleTargetRef, ptr.Deref(hpa.Spec.MinReplicas, 0), hpa.Spec.MaxReplicas, hpa.Spec.Metrics, hpa.OwnerReferences,
			want, ptr.Deref(e.MinReplicas, 0), ptr.Deref(e.MaxReplicas, 0))
	}
}
