// Command watchfloor is the cost of troupe-operator's watches alone, for make bench's
// -watch-floor (docs/performance.md): a manager with the operator's scheme, cache options
// (engine.CacheOptions: the same label selectors and trims) and indexes, and an informer for
// every type the operator watches, with no controller, no webhook and no request of its own
// beyond its lists and watches. Its CPU and peak RSS over a run are what any design that caches
// what troupe caches pays before it reconciles anything.
package main

import (
	"errors"
	"flag"
	"fmt"
	"os"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	toolscache "k8s.io/client-go/tools/cache"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	troupev1 "github.com/troupe-dev/troupe/apis/troupe/v1alpha1"
	"github.com/troupe-dev/troupe/pkg/engine"
)

func main() {
	ready := flag.String("ready-file", "", "written once every informer has synced")
	flag.Parse()
	if err := run(*ready); err != nil {
		fmt.Fprintln(os.Stderr, "watchfloor:", err)
		os.Exit(1)
	}
}

func run(readyFile string) error {
	scheme := runtime.NewScheme()
	if err := errors.Join(clientgoscheme.AddToScheme(scheme), troupev1.AddToScheme(scheme)); err != nil {
		return err
	}
	cacheOpts, err := engine.CacheOptions(nil)
	if err != nil {
		return err
	}
	ctx := ctrl.SetupSignalHandler()
	mgr, err := ctrl.NewManager(ctrl.GetConfigOrDie(), ctrl.Options{
		Scheme:  scheme,
		Cache:   cacheOpts,
		Metrics: metricsserver.Options{BindAddress: "0"},
	})
	if err != nil {
		return err
	}
	if err := engine.SetupIndexes(ctx, mgr.GetFieldIndexer()); err != nil {
		return err
	}
	// What the operator's controllers watch: the jobs of every kind, their children, the pods.
	watched := []client.Object{
		&troupev1.ChainerJob{}, &troupev1.HorovodJob{}, &troupev1.MPIJob{}, &troupev1.PyTorchJob{},
		&corev1.Pod{}, &batchv1.Job{}, &appsv1.StatefulSet{}, &corev1.Service{}, &corev1.ConfigMap{},
		engine.OwnedSecret(), &corev1.ServiceAccount{}, &rbacv1.Role{}, &rbacv1.RoleBinding{},
		&policyv1.PodDisruptionBudget{}, &networkingv1.NetworkPolicy{},
	}
	go func() {
		for _, o := range watched {
			inf, err := mgr.GetCache().GetInformer(ctx, o)
			if err != nil {
				fmt.Fprintln(os.Stderr, "watchfloor: informer:", err)
				os.Exit(1)
			}
			// A handler like a controller's: it sees every event and does nothing with it.
			if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{}); err != nil {
				fmt.Fprintln(os.Stderr, "watchfloor: handler:", err)
				os.Exit(1)
			}
		}
		if mgr.GetCache().WaitForCacheSync(ctx) && readyFile != "" {
			_ = os.WriteFile(readyFile, []byte("synced\n"), 0o600)
		}
	}()
	return mgr.Start(ctx)
}
