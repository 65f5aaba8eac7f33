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

	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	toolscache "k8s.io/client-go/tools/cache"
	ctrl "sigs.k8s.io/controller-runtime"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	troupev1 "github.com/troupe-dev/troupe/apis/troupe/v1alpha1"
	"github.com/troupe-dev/troupe/kinds"
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
	// What the operator's controllers watch: the jobs of every kind, their pods and children.
	watched := engine.WatchedChildren()
	for _, k := range kinds.All() {
		watched = append(watched, k.NewObject())
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
