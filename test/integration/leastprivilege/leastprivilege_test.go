package leastprivilege

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/open-policy-agent/cert-controller/pkg/rotator"
	admissionv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	troupev1 "github.com/troupe-dev/troupe/apis/troupe/v1alpha1"
	"github.com/troupe-dev/troupe/controllers"
	"github.com/troupe-dev/troupe/kinds"
	"github.com/troupe-dev/troupe/pkg/certscope"
	"github.com/troupe-dev/troupe/pkg/engine"
	testutil "github.com/troupe-dev/troupe/pkg/testing"
	"github.com/troupe-dev/troupe/webhooks"
)

// The operator, holding only the namespace-scoped install's Roles and its ClusterRole on the two
// webhook configurations, wins its Lease, keeps its webhook certificate, runs jobs of both
// transports and a user's SSH Secret in the watched namespace, and never asks for anything it
// was not granted nor reaches another namespace. Its cache holds troupe's generated Secrets
// only, metadata only: a tenant's Secret, even one carrying troupe's job UID label key, stays
// out (on the code before this test, selected by the presence of that label and cached whole,
// it was in).
func TestNamespaceScopedInstall(t *testing.T) {
	ctx := context.Background()
	// A tenant's Secrets: plain, one carrying troupe's job label key with a value of its own
	// choosing, and one labelled exactly like troupe's own in a namespace that is not watched.
	tenant := map[string]map[string]string{
		"tenant-plain":  nil,
		"tenant-forged": {troupev1.LabelJobUID: "forged"},
	}
	for name, labels := range tenant {
		createSecret(t, watched, name, labels, 64<<10)
	}
	createSecret(t, unwatched, "lookalike", map[string]string{
		troupev1.LabelJobUID: "forged", troupev1.LabelManagedBy: troupev1.ManagedByTroupe,
	}, 64<<10)
	elsewhere := testutil.MakeChainerJob("elsewhere", unwatched).WorkerSet("ws0", 1).Obj()
	if err := k8s.Create(ctx, elsewhere); err != nil {
		t.Fatal(err)
	}

	rec := &recorder{}
	mgr, certReady, certObjects := startOperator(t, rec)

	t.Run("leader election and the webhook certificate, by name", func(t *testing.T) {
		waitClosed(t, mgr.Elected(), "the operator to win its Lease")
		waitClosed(t, certReady, "the webhook certificate and CA injection")
		var m admissionv1.MutatingWebhookConfiguration
		if err := k8s.Get(ctx, client.ObjectKey{Name: webhooks.MutatingConfigurationName}, &m); err != nil {
			t.Fatal(err)
		}
		if len(m.Webhooks) == 0 || len(m.Webhooks[0].ClientConfig.CABundle) == 0 {
			t.Errorf("the mutating webhook configuration got no CA bundle")
		}
		// What the operator copies into its certificate directory and checks its readiness
		// against, from its watch of the three objects (certscope.Cache), as its ServiceAccount.
		eventually(t, "the certificate in the operator's watch of its Secret", func(ctx context.Context) (bool, error) {
			var cert corev1.Secret
			err := certObjects.Get(ctx, client.ObjectKey{Namespace: operatorNS, Name: "troupe-webhook-cert"}, &cert)
			return err == nil && len(cert.Data[corev1.TLSCertKey]) > 0, err
		})
		for name, cfg := range map[string]client.Object{
			webhooks.MutatingConfigurationName:   &admissionv1.MutatingWebhookConfiguration{},
			webhooks.ValidatingConfigurationName: &admissionv1.ValidatingWebhookConfiguration{},
		} {
			if err := certObjects.Get(ctx, client.ObjectKey{Name: name}, cfg); err != nil {
				t.Errorf("%s from the operator's watch: %v", name, err)
			}
		}
	})

	t.Run("jobs run in the watched namespace", func(t *testing.T) {
		mpiJob := testutil.Load[*troupev1.MPIJob](t, "../../../examples/mpijob.yaml", watched)
		mpiJob.Spec.Worker.Replicas = ptr.To[int32](2)
		mpiJob.Spec.Transport = troupev1.MPITransportSSH
		if err := k8s.Create(ctx, mpiJob); err != nil {
			t.Fatal(err)
		}
		// KubeExec: the operator grants exec into the job's pods, which it may only as it
		// holds pods/exec in this namespace itself.
		kx := testutil.MakeChainerJob("kx", watched).WorkerSet("ws0", 2).Obj()
		kx.Spec.Transport = troupev1.MPITransportKubeExec
		if err := k8s.Create(ctx, kx); err != nil {
			t.Fatal(err)
		}
		// A user's SSH Secret, named in the spec: read with an uncached GET.
		createSecret(t, watched, "my-keys", nil, 0, corev1.SSHAuthPrivateKey, troupev1.SSHSecretAuthorizedKeys)
		byo := testutil.MakeChainerJob("byo", watched).WorkerSet("ws0", 1).Obj()
		byo.Spec.Transport = troupev1.MPITransportSSH
		byo.Spec.SSH = &troupev1.SSHConfig{SecretName: "my-keys"}
		if err := k8s.Create(ctx, byo); err != nil {
			t.Fatal(err)
		}

		waitFor(t, &appsv1.StatefulSet{}, watched, "mpi-example-worker")
		waitFor(t, &batchv1.Job{}, watched, "mpi-example-launcher")
		waitFor(t, &rbacv1.Role{}, watched, "kx-exec")
		waitFor(t, &batchv1.Job{}, watched, "kx-master")
		waitFor(t, &batchv1.Job{}, watched, "byo-master")
		secret := waitFor(t, &corev1.Secret{}, watched, "mpi-example-ssh")
		if got := secret.Labels[troupev1.LabelManagedBy]; got != troupev1.ManagedByTroupe {
			t.Errorf("the generated Secret's %s = %q, want %q", troupev1.LabelManagedBy, got, troupev1.ManagedByTroupe)
		}

		// The generated Secret's labels are restored through its metadata alone.
		delete(secret.Labels, troupev1.LabelManagedBy)
		if err := k8s.Update(ctx, secret); err != nil {
			t.Fatal(err)
		}
		eventually(t, "the Secret's managed-by label restored", func(ctx context.Context) (bool, error) {
			err := k8s.Get(ctx, client.ObjectKeyFromObject(secret), secret)
			return err == nil && secret.Labels[troupev1.LabelManagedBy] == troupev1.ManagedByTroupe, err
		})

		// So is a StatefulSet's (as on the children of a job an older release created), in a
		// write that leaves its spec, and so the running workers, alone.
		sts := waitFor(t, &appsv1.StatefulSet{}, watched, "mpi-example-worker")
		generation := sts.Generation
		delete(sts.Labels, troupev1.LabelManagedBy)
		if err := k8s.Update(ctx, sts); err != nil {
			t.Fatal(err)
		}
		eventually(t, "the StatefulSet's managed-by label restored", func(ctx context.Context) (bool, error) {
			err := k8s.Get(ctx, client.ObjectKeyFromObject(sts), sts)
			return err == nil && sts.Labels[troupev1.LabelManagedBy] == troupev1.ManagedByTroupe, err
		})
		if sts.Generation != generation {
			t.Errorf("restoring the label changed the StatefulSet's spec (generation %d -> %d)", generation, sts.Generation)
		}

		finishLauncher(t, watched, "mpi-example-launcher")
		eventually(t, "the MPIJob Succeeded", func(ctx context.Context) (bool, error) {
			var j troupev1.MPIJob
			err := k8s.Get(ctx, client.ObjectKey{Namespace: watched, Name: "mpi-example"}, &j)
			return err == nil && j.Status.Phase == troupev1.JobSucceeded, err
		})
	})

	t.Run("the cache holds troupe's Secrets only, metadata only", func(t *testing.T) {
		var cached metav1.PartialObjectMetadataList
		cached.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("SecretList"))
		if err := mgr.GetCache().List(ctx, &cached, client.InNamespace(watched)); err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, s := range cached.Items {
			names = append(names, s.Name)
		}
		slices.Sort(names)
		if want := []string{"byo-ssh", "mpi-example-ssh"}; !slices.Equal(names, want) {
			t.Errorf("cached Secrets of %s = %q, want troupe's own %q", watched, names, want)
		}
		watches := 0
		for _, r := range rec.all() {
			if !r.isListOrWatch("secrets") {
				continue
			}
			if r.path == "/api/v1/namespaces/"+watched+"/secrets" {
				watches++
			}
			switch {
			case r.path == "/api/v1/namespaces/"+operatorNS+"/secrets":
				if !strings.Contains(r.query, "fieldSelector=metadata.name%3Dtroupe-webhook-cert") {
					t.Errorf("the certificate rotator lists Secrets beyond its own: %s", r)
				}
			case !strings.Contains(r.accept, "as=PartialObjectMetadata"):
				t.Errorf("Secrets read whole, not metadata only: %s", r)
			case !strings.Contains(r.query, "labelSelector=app.kubernetes.io%2Fmanaged-by%3Dtroupe"):
				t.Errorf("Secrets listed without the managed-by value: %s", r)
			}
		}
		if watches == 0 {
			t.Errorf("no list or watch of the Secrets of %s recorded", watched)
		}
	})

	t.Run("nothing refused, no other namespace", func(t *testing.T) {
		requests := rec.all()
		if len(requests) == 0 {
			t.Fatal("no request recorded")
		}
		for _, r := range requests {
			if r.status == 403 {
				t.Errorf("refused by RBAC: %s", r)
			}
			if outside(r.path) {
				t.Errorf("outside the watched namespace and its own: %s", r)
			}
		}
		var svc corev1.Service
		if err := k8s.Get(ctx, client.ObjectKey{Namespace: unwatched, Name: "elsewhere"}, &svc); err == nil {
			t.Errorf("a job in the unwatched namespace %s got children", unwatched)
		}
	})
}

// startOperator runs the operator's manager in-process as cmd/troupe-operator sets it up with
// --watch-namespaces=troupe-jobs --leader-elect: its cache options, its reconcilers, leader
// election, the certificate rotator and the watch of its Secret and the webhook configurations,
// as the operator's ServiceAccount. The channel closes once the certificate is written and the
// CA injected.
func startOperator(t *testing.T, rec *recorder) (ctrl.Manager, <-chan struct{}, cache.Cache) {
	t.Helper()
	cfg := asOperator(rec)
	gangs, err := controllers.DiscoverGangs(cfg)
	if err != nil {
		t.Fatal(err)
	}
	cacheOpts, err := engine.CacheOptions([]string{watched}, controllers.GangTypes(gangs)...)
	if err != nil {
		t.Fatal(err)
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                        scheme,
		Cache:                         cacheOpts,
		Metrics:                       metricsserver.Options{BindAddress: "0"},
		LeaderElection:                true,
		LeaderElectionNamespace:       operatorNS,
		LeaderElectionID:              "troupe-operator.troupe.dev",
		LeaderElectionReleaseOnCancel: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	opts := controllers.Options{
		AgentImage: "troupe-agent:test", AvailableGangs: gangs,
		VolcanoScheduler: "volcano", CoschedulingScheduler: "coscheduler-test",
	}
	if err := kinds.SetupControllers(mgr, opts); err != nil {
		t.Fatal(err)
	}
	// Outside a pod nothing mounts the Secret; the rotator only checks that a file is there.
	certDir := t.TempDir()
	if err := os.WriteFile(filepath.Join(certDir, "tls.crt"), []byte("placeholder"), 0o600); err != nil {
		t.Fatal(err)
	}
	certReady := make(chan struct{})
	key := types.NamespacedName{Namespace: operatorNS, Name: "troupe-webhook-cert"}
	if err := rotator.AddRotator(certscope.Manager(mgr, key, webhooks.MutatingConfigurationName, webhooks.ValidatingConfigurationName),
		&rotator.CertRotator{
			SecretKey: key, CertDir: certDir, CAName: "troupe-webhook-ca", CAOrganization: "troupe",
			DNSName: "troupe-webhook-service.troupe-system.svc", IsReady: certReady,
			Webhooks: []rotator.WebhookInfo{
				{Name: webhooks.MutatingConfigurationName, Type: rotator.Mutating},
				{Name: webhooks.ValidatingConfigurationName, Type: rotator.Validating},
			},
		}); err != nil {
		t.Fatal(err)
	}
	certObjects, err := certscope.Cache(mgr, key, webhooks.MutatingConfigurationName, webhooks.ValidatingConfigurationName)
	if err != nil {
		t.Fatal(err)
	}
	if err := mgr.Add(certObjects); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		if err := mgr.Start(ctx); err != nil {
			t.Errorf("operator stopped: %v", err)
		}
	}()
	t.Cleanup(func() { cancel(); <-stopped })
	return mgr, certReady, certObjects
}

// createSecret creates a Secret as a tenant would, with size bytes of data, or the given keys.
func createSecret(t *testing.T, ns, name string, labels map[string]string, size int, keys ...string) {
	t.Helper()
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: labels}, Data: map[string][]byte{}}
	if size > 0 {
		s.Data["payload"] = make([]byte, size)
	}
	for _, k := range keys {
		s.Data[k] = []byte("value of " + k)
	}
	if err := k8s.Create(context.Background(), s); err != nil {
		t.Fatal(err)
	}
}

// finishLauncher writes the status the Job controller writes on a launcher that succeeded.
func finishLauncher(t *testing.T, ns, name string) {
	t.Helper()
	job := waitFor(t, &batchv1.Job{}, ns, name)
	now := metav1.Now()
	job.Status.StartTime = &now
	job.Status.CompletionTime = &now
	job.Status.Succeeded = 1
	job.Status.Conditions = testutil.JobSucceeded(kubeVersion, batchv1.JobCondition{LastProbeTime: now, LastTransitionTime: now})
	if err := k8s.Status().Update(context.Background(), job); err != nil {
		t.Fatalf("update %s status: %v", name, err)
	}
}

func waitClosed(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(2 * waitTimeout):
		t.Fatalf("timed out waiting for %s", what)
	}
}

// outside reports a request for namespaced objects beyond the watched namespace and the
// operator's own: in another namespace, or in every namespace at once.
func outside(path string) bool {
	if _, rest, ok := strings.Cut(path, "/namespaces/"); ok {
		ns, _, _ := strings.Cut(rest, "/")
		return ns != watched && ns != operatorNS
	}
	for _, res := range []string{"secrets", "configmaps", "pods", "services", "serviceaccounts", "roles", "rolebindings",
		"statefulsets", "jobs", "leases", "events", "chainerjobs", "mpijobs", "horovodjobs", "poddisruptionbudgets"} {
		if strings.HasSuffix(path, "/"+res) {
			return true
		}
	}
	return false
}
