// Command webhook measures troupe's admission webhooks behind a real kube-apiserver (envtest):
// it creates ChainerJobs at a steady rate and prints the latency percentiles of the webhook
// requests as the webhook server handles them, and of the creates as a client sees them.
//
//	KUBEBUILDER_ASSETS=... go run ./test/bench/webhook -rate 50 -duration 60s
package main

import (
	"context"
	"flag"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/webhook"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	troupev1 "github.com/troupe-dev/troupe/apis/troupe/v1alpha1"
	"github.com/troupe-dev/troupe/webhooks"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "webhook bench:", err)
		os.Exit(1)
	}
}

// recorder keeps every duration it is given.
type recorder struct {
	mu   sync.Mutex
	durs []time.Duration
}

func (r *recorder) add(d time.Duration) {
	r.mu.Lock()
	r.durs = append(r.durs, d)
	r.mu.Unlock()
}

func (r *recorder) percentiles() (n int, p50, p99, maxDur time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	d := slices.Clone(r.durs)
	slices.Sort(d)
	if len(d) == 0 {
		return 0, 0, 0, 0
	}
	at := func(p float64) time.Duration { return d[min(len(d)-1, int(p*float64(len(d))))] }
	return len(d), at(0.50), at(0.99), d[len(d)-1]
}

// timed wraps a webhook handler and records how long each request takes to answer.
func timed(h http.Handler, r *recorder) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		start := time.Now()
		h.ServeHTTP(w, req)
		r.add(time.Since(start))
	})
}

func run() error {
	rate := flag.Int("rate", 50, "creates per second")
	duration := flag.Duration("duration", 60*time.Second, "how long to create")
	flag.Parse()
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		return fmt.Errorf("KUBEBUILDER_ASSETS is not set: run it with `make bench`")
	}
	ctrllog.SetLogger(logr.Discard())
	root := "."
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return err
	}
	if err := troupev1.AddToScheme(scheme); err != nil {
		return err
	}
	env := &envtest.Environment{
		CRDDirectoryPaths:     []string{filepath.Join(root, "config", "crds")},
		ErrorIfCRDPathMissing: true,
		WebhookInstallOptions: envtest.WebhookInstallOptions{Paths: []string{filepath.Join(root, "config", "webhook")}},
	}
	cfg, err := env.Start()
	if err != nil {
		return err
	}
	defer func() { _ = env.Stop() }()

	wo := &env.WebhookInstallOptions
	server := webhook.NewServer(webhook.Options{Host: wo.LocalServingHost, Port: wo.LocalServingPort, CertDir: wo.LocalServingCertDir})
	mutate, validate := &recorder{}, &recorder{}
	opts := webhooks.Options{DefaultGang: troupev1.GangNone}
	server.Register("/mutate-troupe-dev-v1alpha1-chainerjob", timed(admission.WithDefaulter(scheme, webhooks.ChainerJob{Options: opts}), mutate))
	server.Register("/validate-troupe-dev-v1alpha1-chainerjob", timed(admission.WithValidator(scheme, webhooks.ChainerJob{Options: opts}), validate))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = server.Start(ctx) }()
	for server.StartedChecker()(nil) != nil {
		time.Sleep(50 * time.Millisecond)
	}

	cfg.QPS, cfg.Burst = float32(*rate*4), *rate*4
	k8s, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return err
	}
	creates := &recorder{}
	var failures int
	var wg sync.WaitGroup
	var mu sync.Mutex
	tick := time.NewTicker(time.Second / time.Duration(*rate))
	defer tick.Stop()
	deadline := time.Now().Add(*duration)
	fmt.Printf("creating %d ChainerJobs per second for %s against a real kube-apiserver...\n", *rate, *duration)
	for i := 0; time.Now().Before(deadline); i++ {
		<-tick.C
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			start := time.Now()
			err := k8s.Create(ctx, job(i))
			creates.add(time.Since(start))
			if err != nil {
				mu.Lock()
				failures++
				mu.Unlock()
			}
		}(i)
	}
	wg.Wait()
	for _, r := range []struct {
		name string
		rec  *recorder
	}{{"mutating webhook (server side)", mutate}, {"validating webhook (server side)", validate}, {"create, client side", creates}} {
		n, p50, p99, maxDur := r.rec.percentiles()
		fmt.Printf("%-34s n=%-5d p50=%-10s p99=%-10s max=%s\n", r.name, n, p50.Round(time.Microsecond), p99.Round(time.Microsecond), maxDur.Round(time.Microsecond))
	}
	fmt.Printf("failed creates: %d\n", failures)
	if failures > 0 {
		return fmt.Errorf("%d creates failed", failures)
	}
	return nil
}

// job is the seed ChainerMN shape: a master and two workers.
func job(i int) *troupev1.ChainerJob {
	tmpl := corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{
		Name: troupev1.ChainerMainContainer, Image: "chainer:1", Command: []string{"mpiexec", "python", "train.py"},
	}}}}
	return &troupev1.ChainerJob{
		ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("bench-%d", i), Namespace: "default"},
		Spec: troupev1.ChainerJobSpec{
			Master:     troupev1.ChainerMaster{Template: tmpl},
			WorkerSets: map[string]troupev1.ChainerWorkerSet{"ws0": {Replicas: ptr.To[int32](2), Template: tmpl}},
		},
	}
}
