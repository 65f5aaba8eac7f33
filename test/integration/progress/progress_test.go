// Package progress runs the progress endpoint (pkg/progress) as the operator serves it, in front
// of the operator's reconcilers and a real kube-apiserver, which issues the pods' tokens and
// reviews them: a report reaches the job's status; another job's pod, a token for another
// audience, an oversized or too frequent report are refused; a flood of reports from one pod
// leaves another job's reconciles as fast as without it.
package progress

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	troupev1 "github.com/troupe-dev/troupe/apis/troupe/v1alpha1"
	"github.com/troupe-dev/troupe/controllers"
	"github.com/troupe-dev/troupe/kinds"
	"github.com/troupe-dev/troupe/pkg/engine"
	"github.com/troupe-dev/troupe/pkg/metrics"
	"github.com/troupe-dev/troupe/pkg/progress"
	testutil "github.com/troupe-dev/troupe/pkg/testing"
	"github.com/troupe-dev/troupe/webhooks"
)

var (
	k8s      client.Client
	cs       *kubernetes.Clientset
	endpoint *httptest.Server
	scheme   = runtime.NewScheme()
	mpiJob   kinds.Kind
)

// testCA stands for the webhook CA the operator gives the pods.
const testCA = "-----BEGIN CERTIFICATE-----\ntest\n-----END CERTIFICATE-----\n"

func TestMain(m *testing.M) { os.Exit(run(m)) }

func run(m *testing.M) int {
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		fmt.Fprintln(os.Stderr, "KUBEBUILDER_ASSETS is not set: run these tests with `make test-integration`")
		return 1
	}
	ctrl.SetLogger(zap.New(zap.UseDevMode(true), zap.Level(zap.Options{}.Level)))
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, troupev1.AddToScheme} {
		if err := add(scheme); err != nil {
			panic(err)
		}
	}
	for _, k := range kinds.All() {
		if k.Name == "MPIJob" {
			mpiJob = k
		}
	}
	env := &envtest.Environment{CRDDirectoryPaths: []string{filepath.Join("..", "..", "..", "config", "crds")}, ErrorIfCRDPathMissing: true}
	cfg, err := env.Start()
	if err != nil {
		fmt.Fprintln(os.Stderr, "start envtest:", err)
		_ = env.Stop()
		return 1
	}
	defer func() { _ = env.Stop() }()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	cacheOpts, err := engine.CacheOptions(nil)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{Scheme: scheme, Cache: cacheOpts, Metrics: metricsserver.Options{BindAddress: "0"}})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	// As cmd/troupe-operator sets it up: reviews through their own budget, the manager's cache.
	reviews, err := kubernetes.NewForConfig(metrics.ReviewConfig(cfg))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	srv := progress.NewServer(mgr.GetCache(), progress.NewReviewer(reviews.AuthenticationV1().TokenReviews()), mgr.Elected(), kinds.ProgressKinds()...)
	mux := http.NewServeMux()
	mux.Handle(progress.Path, srv)
	endpoint = httptest.NewUnstartedServer(mux)
	endpoint.StartTLS()
	defer endpoint.Close()
	e := srv.Endpoint(endpoint.URL, func() []byte { return []byte(testCA) })
	if err := kinds.SetupControllers(mgr, controllers.Options{AgentImage: "troupe-agent:test", Progress: &e}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		if err := mgr.Start(ctx); err != nil {
			fmt.Fprintln(os.Stderr, "operator stopped:", err)
		}
	}()
	defer func() { cancel(); <-stopped }()
	if !mgr.GetCache().WaitForCacheSync(ctx) {
		fmt.Fprintln(os.Stderr, "caches did not sync")
		return 1
	}
	if k8s, err = client.New(cfg, client.Options{Scheme: scheme}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if cs, err = kubernetes.NewForConfig(cfg); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return m.Run()
}

// newJob creates an MPIJob with one worker, admitted as the webhooks admit it.
func newJob(t *testing.T, ns, name string) engine.Object {
	t.Helper()
	job := mpiJob.Sample(kinds.Sample{Name: name, Namespace: ns, Image: "trainer", WorkerSets: []int32{1}})
	if errs := mpiJob.Admit(job, webhooks.Options{}); len(errs) > 0 {
		t.Fatalf("admit %s: %v", name, errs)
	}
	if err := k8s.Create(context.Background(), job); err != nil {
		t.Fatalf("create %s: %v", name, err)
	}
	return job
}

// podToken creates a pod of job (labelled with its UID, as the job's pods are; or of no job
// when job is nil) and returns a token bound to it for audience, as the kubelet projects it.
func podToken(t *testing.T, ns, name string, job engine.Object, audience string) string {
	t.Helper()
	ctx := context.Background()
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "trainer"}}
	if err := k8s.Create(ctx, sa); client.IgnoreAlreadyExists(err) != nil {
		t.Fatal(err)
	}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{}},
		Spec: corev1.PodSpec{ServiceAccountName: "trainer", Containers: []corev1.Container{{Name: "main", Image: "trainer"}}}}
	if job != nil {
		pod.Labels[troupev1.LabelJobUID] = string(job.GetUID())
		pod.Labels[troupev1.MPIJobNameLabel] = job.GetName()
	}
	if err := k8s.Create(ctx, pod); err != nil {
		t.Fatal(err)
	}
	req := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{
		BoundObjectRef: &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: pod.Name, UID: pod.UID},
	}}
	if audience != "" {
		req.Spec.Audiences = []string{audience}
	}
	tr, err := cs.CoreV1().ServiceAccounts(ns).CreateToken(ctx, sa.Name, req, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return tr.Status.Token
}

// post sends a report body to job's URL with token; it returns the answer's status code.
func post(t *testing.T, c *http.Client, job engine.Object, token string, body []byte) int {
	t.Helper()
	code, err := postErr(c, job, token, body)
	if err != nil {
		t.Fatal(err)
	}
	return code
}

func postErr(c *http.Client, job engine.Object, token string, body []byte) (int, error) {
	return postTo(c, endpoint.URL+progress.JobPath(job.GetNamespace(), "MPIJob", job.GetName()), token, body)
}

func postTo(c *http.Client, url, token string, body []byte) (int, error) {
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := c.Do(req)
	if err != nil {
		return 0, err
	}
	// Read to its end, so that the connection is kept alive for the next report.
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	return resp.StatusCode, nil
}

func report(current, total int64, metrics map[string]float64) []byte {
	b, _ := json.Marshal(progress.Report{Current: current, Total: total, Unit: "steps", Metrics: metrics})
	return b
}

// progressOf is the job's status.progress as the API server has it.
func progressOf(ctx context.Context, job engine.Object) (*troupev1.ProgressStatus, error) {
	fresh := mpiJob.NewObject()
	if err := k8s.Get(ctx, client.ObjectKeyFromObject(job), fresh); err != nil {
		return nil, err
	}
	return fresh.JobStatus().Progress, nil
}

// waitProgress waits until the job's status says current.
func waitProgress(t *testing.T, job engine.Object, current int64) *troupev1.ProgressStatus {
	t.Helper()
	var got *troupev1.ProgressStatus
	testutil.Eventually(t, fmt.Sprintf("%s's status.progress.current is %d", job.GetName(), current), 50*time.Millisecond, 30*time.Second,
		func(ctx context.Context) (bool, error) {
			p, err := progressOf(ctx, job)
			got = p
			return p != nil && p.Current == current, err
		})
	return got
}

func httpClient() *http.Client {
	c := endpoint.Client()
	c.Timeout = 10 * time.Second
	return c
}

func TestReportsOfTheJobsOwnPodsOnly(t *testing.T) {
	ns := testutil.NewNamespace(t, k8s, "progress-")
	a, b := newJob(t, ns, "a"), newJob(t, ns, "b")
	tokenA := podToken(t, ns, "a-worker-0", a, troupev1.ProgressAudience)
	tokenB := podToken(t, ns, "b-worker-0", b, troupev1.ProgressAudience)
	c := httpClient()

	if code := post(t, c, a, tokenA, report(30, 100, map[string]float64{"loss": 0.5, "accuracy": 0.75})); code != http.StatusAccepted {
		t.Fatalf("a's own pod's report: %d, want 202", code)
	}
	p := waitProgress(t, a, 30)
	if p.Percent == nil || *p.Percent != 30 || p.Total != 100 || !slices.Equal(p.Metrics, []troupev1.ProgressMetric{{Name: "accuracy", Value: "0.75"}, {Name: "loss", Value: "0.5"}}) {
		t.Errorf("a's progress: %+v, want 30%% of 100 with accuracy 0.75 and loss 0.5", p)
	}
	for _, tc := range []struct {
		who   string
		token string
		want  int
	}{
		{"b's pod, on a's URL", tokenB, http.StatusForbidden},
		{"a pod of no job", podToken(t, ns, "stranger", nil, troupev1.ProgressAudience), http.StatusForbidden},
		{"a's pod with a token for the API server (another audience)", podToken(t, ns, "a-worker-1", a, ""), http.StatusUnauthorized},
		{"no token", "", http.StatusUnauthorized},
		{"a token that is no JWT", "secret", http.StatusUnauthorized},
		{"a made-up JWT", "eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJ4In0.c2ln", http.StatusUnauthorized},
	} {
		if code := post(t, c, a, tc.token, report(99, 100, nil)); code != tc.want {
			t.Errorf("%s: %d, want %d", tc.who, code, tc.want)
		}
	}
	// b's own report is b's.
	if code := post(t, c, b, tokenB, report(7, 10, nil)); code != http.StatusAccepted {
		t.Fatalf("b's own pod's report: %d, want 202", code)
	}
	waitProgress(t, b, 7)
	if p, err := progressOf(context.Background(), a); err != nil || p.Current != 30 {
		t.Errorf("a's progress after the refused reports: %+v (%v), want still 30", p, err)
	}
}

// The job's pods are given the endpoint's URL, the token file and the CA.
func TestPodsAreWired(t *testing.T) {
	ns := testutil.NewNamespace(t, k8s, "progress-")
	job := newJob(t, ns, "wired")
	var sts appsv1.StatefulSet
	testutil.Eventually(t, "the worker StatefulSet exists", 50*time.Millisecond, 30*time.Second, func(ctx context.Context) (bool, error) {
		err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "wired-worker"}, &sts)
		return err == nil, client.IgnoreNotFound(err)
	})
	env := sts.Spec.Template.Spec.Containers[0].Env
	want := map[string]string{
		troupev1.EnvProgressURL:       endpoint.URL + progress.JobPath(ns, "MPIJob", job.GetName()),
		troupev1.EnvProgressTokenFile: engine.ProgressTokenDir + "/token",
		troupev1.EnvProgressCA:        testCA,
	}
	for name, value := range want {
		i := slices.IndexFunc(env, func(e corev1.EnvVar) bool { return e.Name == name })
		if i < 0 || env[i].Value != value {
			t.Errorf("worker env %s: %+v, want %q", name, env, value)
		}
	}
	vols := sts.Spec.Template.Spec.Volumes
	if !slices.ContainsFunc(vols, func(v corev1.Volume) bool {
		return v.Projected != nil && v.Projected.Sources[0].ServiceAccountToken != nil &&
			v.Projected.Sources[0].ServiceAccountToken.Audience == troupev1.ProgressAudience
	}) {
		t.Errorf("worker volumes %+v: want a projected token for %s", vols, troupev1.ProgressAudience)
	}
}

func TestReportsBoundedInSizeAndRate(t *testing.T) {
	ns := testutil.NewNamespace(t, k8s, "progress-")
	job := newJob(t, ns, "bounded")
	token := podToken(t, ns, "bounded-worker-0", job, troupev1.ProgressAudience)
	c := httpClient()
	many := map[string]float64{}
	for i := range troupev1.MaxProgressMetrics + 1 {
		many[fmt.Sprintf("m%d", i)] = float64(i)
	}
	// Each refusal from a pod of its own: a pod's every request counts toward its rate.
	for i, tc := range []struct {
		what string
		body []byte
		want int
	}{
		{"a report over 4 KiB", []byte(`{"current": 1, "message": "` + strings.Repeat("x", troupev1.MaxProgressReportBytes) + `"}`), http.StatusRequestEntityTooLarge},
		{"17 metrics", report(1, 10, many), http.StatusBadRequest},
		{"a metric name Prometheus cannot take", report(1, 10, map[string]float64{"Loss-Value": 1}), http.StatusBadRequest},
		{"a field no report has", []byte(`{"current": 1, "status": {"phase": "Succeeded"}}`), http.StatusBadRequest},
		{"not JSON", []byte(`current=1`), http.StatusBadRequest},
		{"a negative step", report(-1, 10, nil), http.StatusBadRequest},
	} {
		if code := post(t, c, job, podToken(t, ns, fmt.Sprintf("bounded-worker-%d", i+1), job, troupev1.ProgressAudience), tc.body); code != tc.want {
			t.Errorf("%s: %d, want %d", tc.what, code, tc.want)
		}
	}
	// Too frequent: a burst of 20 at once; the job's bucket takes ReportBurst (and what refills
	// meanwhile), the rest are answered 429 with Retry-After.
	var taken, refused, last int
	for i := range 20 {
		switch code := post(t, c, job, token, report(int64(i+1), 20, nil)); code {
		case http.StatusAccepted:
			taken, last = taken+1, i+1
		case http.StatusTooManyRequests:
			refused++
		default:
			t.Fatalf("report %d: %d", i, code)
		}
	}
	if taken < progress.ReportBurst || taken > progress.ReportBurst+2 || refused < 20-progress.ReportBurst-2 {
		t.Errorf("20 reports at once: %d taken, %d refused; want about %d taken", taken, refused, progress.ReportBurst)
	}
	// The last one taken is the job's progress.
	waitProgress(t, job, int64(last))
}

// startLatency creates a job and returns how long the operator took to set it up: from the
// create until its launcher Job exists, the last of the six children its first pass creates
// (its status, which says so too, waits up to 5 s for the next change: docs/architecture.md).
func startLatency(t *testing.T, ns, name string) time.Duration {
	t.Helper()
	start := time.Now()
	newJob(t, ns, name)
	testutil.Eventually(t, name+"'s launcher Job created", 5*time.Millisecond, 60*time.Second, func(ctx context.Context) (bool, error) {
		err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: name + "-launcher"}, &batchv1.Job{})
		return err == nil, client.IgnoreNotFound(err)
	})
	return time.Since(start)
}

func median(d []time.Duration) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[len(s)/2]
}

// floodStats counts what a flood's reports got.
type floodStats struct {
	sent, taken, refused, failed atomic.Int64
	took                         time.Duration
}

func (f *floodStats) String() string {
	return fmt.Sprintf("%d reports in %v (%.0f/s): %d taken, %d refused 429, %d failed", f.sent.Load(), f.took.Round(time.Millisecond),
		float64(f.sent.Load())/f.took.Seconds(), f.taken.Load(), f.refused.Load(), f.failed.Load())
}

// flood sends one job's reports with token to base's endpoint, up to 1,000 a second from 32
// senders over kept-alive connections, until the returned stop is called.
func flood(t *testing.T, base string, c *http.Client, job engine.Object, token string) (stop func() *floodStats) {
	t.Helper()
	f := &floodStats{}
	ctx, cancel := context.WithCancel(context.Background())
	var senders sync.WaitGroup
	ticks := make(chan int64, 1000)
	go func() {
		defer close(ticks)
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		for i := int64(1); ; i++ {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
				select {
				case ticks <- i:
				default: // the senders are behind: the flood is what they manage
				}
			}
		}
	}()
	url := base + progress.JobPath(job.GetNamespace(), "MPIJob", job.GetName())
	for range 32 {
		senders.Add(1)
		go func() {
			defer senders.Done()
			for i := range ticks {
				code, err := postTo(c, url, token, report(i, 1_000_000, map[string]float64{"loss": 1}))
				f.sent.Add(1)
				switch {
				case err != nil:
					f.failed.Add(1)
				case code == http.StatusAccepted:
					f.taken.Add(1)
				case code == http.StatusTooManyRequests:
					f.refused.Add(1)
				default:
					f.failed.Add(1)
				}
			}
		}()
	}
	start := time.Now()
	// Measure under the flood once it runs at its pace: 500 reports sent.
	testutil.Eventually(t, "the flood under way", 10*time.Millisecond, 30*time.Second, func(context.Context) (bool, error) {
		return f.sent.Load() >= 500, nil
	})
	return func() *floodStats {
		cancel()
		senders.Wait()
		f.took = time.Since(start)
		return f
	}
}

// A pod that sends 1,000 reports a second to its job's endpoint leaves the reconciles of
// another job as fast as without it: its reports past the job's rate are answered 429 at once
// (a map lookup: the token's review is cached), and the job's pass runs only for those taken.
// The flood's own cost (HTTPS on the machine's cores, which the API server, etcd and the
// operator share here) is measured apart: the same flood against a bare endpoint that answers
// 429 and does nothing else.
func TestFloodLeavesOtherJobsAlone(t *testing.T) {
	ns := testutil.NewNamespace(t, k8s, "progress-")
	flooder := newJob(t, ns, "flooder")
	token := podToken(t, ns, "flooder-worker-0", flooder, troupev1.ProgressAudience)
	const runs = 25
	// Each phase's jobs are created one after the other, then left to settle (their status
	// written, up to 5 s after their start: countsWriteDelay), so that no phase pays for the
	// passes of the one before.
	starts := func(prefix string) []time.Duration {
		var d []time.Duration
		for i := range runs {
			d = append(d, startLatency(t, ns, fmt.Sprintf("%s-%d", prefix, i)))
		}
		return d
	}
	settle := func(prefix string) {
		testutil.Eventually(t, prefix+" jobs' status written", 100*time.Millisecond, 60*time.Second, func(ctx context.Context) (bool, error) {
			for i := range runs {
				fresh := mpiJob.NewObject()
				if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: fmt.Sprintf("%s-%d", prefix, i)}, fresh); err != nil {
					return false, err
				}
				if !meta.IsStatusConditionTrue(fresh.JobStatus().Conditions, troupev1.ConditionInitialized) {
					return false, nil
				}
			}
			return true, nil
		})
	}
	c := httpClient()
	c.Transport.(*http.Transport).MaxIdleConnsPerHost = 32
	bare := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Retry-After", "1")
		w.WriteHeader(http.StatusTooManyRequests)
	}))
	bare.StartTLS()
	defer bare.Close()
	bareClient := bare.Client()
	bareClient.Transport.(*http.Transport).MaxIdleConnsPerHost = 32

	quiet := starts("quiet")
	settle("quiet")
	stop := flood(t, bare.URL, bareClient, flooder, token)
	underBare := starts("bare")
	bareStats := stop()
	settle("bare")
	stop = flood(t, endpoint.URL, c, flooder, token)
	flooded := starts("flooded")
	stats := stop()

	t.Logf("the flood of the endpoint: %v", stats)
	t.Logf("the same flood of a bare 429 endpoint: %v", bareStats)
	t.Logf("another job's start (create to its launcher Job), median of %d: %v quiet, %v under the bare flood, %v under the endpoint's flood",
		runs, median(quiet).Round(time.Millisecond), median(underBare).Round(time.Millisecond), median(flooded).Round(time.Millisecond))
	t.Logf("quiet %v\nbare flood %v\nendpoint flood %v", quiet, underBare, flooded)
	if rate := float64(stats.sent.Load()) / stats.took.Seconds(); rate < 500 {
		t.Errorf("the flood reached %.0f reports/s, want about 1,000 (the machine is too slow to say anything)", rate)
	}
	if limit := float64(progress.ReportBurst) + stats.took.Seconds()*progress.ReportsPerSecond + 2; float64(stats.taken.Load()) > limit {
		t.Errorf("%d reports taken in %v, want at most %.0f (the job's rate)", stats.taken.Load(), stats.took, limit)
	}
	if stats.failed.Load() > 0 {
		t.Errorf("%d reports failed (neither taken nor 429)", stats.failed.Load())
	}
	// The endpoint's work adds nothing that a bare HTTPS answer does not cost already.
	if b, f := median(underBare), median(flooded); f > b*3/2+30*time.Millisecond {
		t.Errorf("another job's start took %v under the endpoint's flood, %v under the same flood of a bare endpoint (%v quiet): the endpoint slows the operator", f, b, median(quiet))
	}
}

// A running job with a progress deadline that reported, then stopped: Stalled (the condition
// says when it last moved), a Warning event, and its failure policy's rule on the reason
// Stalled restarts it. (The real node's TestStalledJobIsRestarted does it with a rank that
// sleeps.)
func TestStalledJobIsRestartedByItsRule(t *testing.T) {
	ns := testutil.NewNamespace(t, k8s, "progress-")
	ctx := context.Background()
	job := mpiJob.Sample(kinds.Sample{Name: "stalls", Namespace: ns, Image: "trainer", WorkerSets: []int32{1}, RunPolicy: troupev1.RunPolicy{
		ProgressDeadlineSeconds: ptr.To[int32](10),
		FailurePolicy: &troupev1.FailurePolicy{MaxRestarts: 1, Rules: []troupev1.FailureRule{
			{Name: "restart-stalled", Action: troupev1.RestartJobAction, OnReasons: []troupev1.FailureReason{troupev1.FailureStalled}},
		}},
	}})
	if errs := mpiJob.Admit(job, webhooks.Options{}); len(errs) > 0 {
		t.Fatal(errs)
	}
	if err := k8s.Create(ctx, job); err != nil {
		t.Fatal(err)
	}
	// The launcher runs: its Job says a pod is ready, as the Job controller would.
	launcher := &batchv1.Job{}
	testutil.Eventually(t, "the launcher Job exists", 50*time.Millisecond, 30*time.Second, func(ctx context.Context) (bool, error) {
		err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "stalls-launcher"}, launcher)
		return err == nil, client.IgnoreNotFound(err)
	})
	now := metav1.Now()
	launcher.Status.StartTime, launcher.Status.Active, launcher.Status.Ready = &now, 1, ptr.To[int32](1)
	if err := k8s.Status().Update(ctx, launcher); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, "the job runs", 50*time.Millisecond, 30*time.Second, func(ctx context.Context) (bool, error) {
		fresh := mpiJob.NewObject()
		err := k8s.Get(ctx, client.ObjectKeyFromObject(job), fresh)
		return err == nil && fresh.JobStatus().Phase == troupev1.JobRunning, err
	})
	// Never reported: not stalled, however long it runs (checked below, after the report).
	token := podToken(t, ns, "stalls-worker-0", job, troupev1.ProgressAudience)
	if code := post(t, httpClient(), job, token, report(5, 100, map[string]float64{"loss": 1.5})); code != http.StatusAccepted {
		t.Fatalf("report: %d", code)
	}
	moved := waitProgress(t, job, 5).LastProgressTime.Time

	var stalled *metav1.Condition
	testutil.Eventually(t, "the job is Stalled", 200*time.Millisecond, 60*time.Second, func(ctx context.Context) (bool, error) {
		fresh := mpiJob.NewObject()
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(job), fresh); err != nil {
			return false, err
		}
		stalled = meta.FindStatusCondition(fresh.JobStatus().Conditions, troupev1.ConditionStalled)
		return stalled != nil && stalled.Status == metav1.ConditionTrue, nil
	})
	after := time.Since(moved)
	if after < 10*time.Second || after > 20*time.Second {
		t.Errorf("Stalled %v after the last move, want 10 s (the deadline) and a pass", after.Round(100*time.Millisecond))
	}
	if !strings.Contains(stalled.Message, "no progress reported since "+moved.UTC().Format(time.RFC3339)+" (5/100 steps") {
		t.Errorf("Stalled says %q, want when it last moved and how far", stalled.Message)
	}
	t.Logf("Stalled %v after its last move: %s", after.Round(100*time.Millisecond), stalled.Message)

	testutil.Eventually(t, "the rule restarts the job for the stall", 200*time.Millisecond, 30*time.Second, func(ctx context.Context) (bool, error) {
		fresh := mpiJob.NewObject()
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(job), fresh); err != nil {
			return false, err
		}
		st := fresh.JobStatus()
		restarting := meta.FindStatusCondition(st.Conditions, troupev1.ConditionRestarting)
		byReason := slices.ContainsFunc(st.RestartsByReason, func(r troupev1.RestartCount) bool { return r.Reason == troupev1.FailureStalled && r.Count == 1 })
		return byReason && restarting != nil && strings.Contains(restarting.Message, "restart-stalled"), nil
	})
	var events corev1.EventList
	if err := k8s.List(ctx, &events, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(events.Items, func(e corev1.Event) bool {
		return e.Reason == troupev1.EventStalled && e.Type == corev1.EventTypeWarning
	}) {
		t.Errorf("no Warning event %s", troupev1.EventStalled)
	}
}
