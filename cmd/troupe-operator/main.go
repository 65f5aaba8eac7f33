// Command troupe-operator runs the troupe controllers: one shared job engine driving each
// registered kind.
package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	goruntime "runtime"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/discovery"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	kueuev1 "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	schedv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"
	volcanov1beta1 "volcano.sh/apis/pkg/apis/scheduling/v1beta1"

	troupev1 "github.com/troupe-dev/troupe/apis/troupe/v1alpha1"
	"github.com/troupe-dev/troupe/controllers"
	"github.com/troupe-dev/troupe/kinds"
	"github.com/troupe-dev/troupe/pkg/engine"
	"github.com/troupe-dev/troupe/pkg/kubeversion"
	"github.com/troupe-dev/troupe/pkg/metrics"
	"github.com/troupe-dev/troupe/pkg/queue/kueue"
	"github.com/troupe-dev/troupe/pkg/version"
)

// defaultAgentImage is the troupe-agent image released with this operator: its version's.
var defaultAgentImage = "ghcr.io/troupe-dev/troupe-agent:" + version.Version

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "troupe-operator:", err)
		os.Exit(1)
	}
}

func run() error {
	// Before the caches fill the heap.
	memoryLimit, err := setMemoryLimit(os.Getenv)
	if err != nil {
		return err
	}
	var (
		metricsAddr    string
		metricsSecure  bool
		probeAddr      string
		leaderElect    bool
		leaderElectNS  string
		maxConcurrency int
		watchNS        namespaceList
		apiQPS         float64
		apiBurst       int
		pprofAddr      string
		skipKubeCheck  bool
		opts           controllers.Options
		hooks          webhookFlags
		progressOpts   progressFlags
	)
	flag.StringVar(&metricsAddr, "metrics-bind-address", ":8443", "Address the Prometheus metrics endpoint binds to; 0 disables it.")
	flag.BoolVar(&metricsSecure, "metrics-secure", true,
		"Serve the metrics over HTTPS to authenticated and authorized clients only (a bearer token allowed to get /metrics); false: plain HTTP for anyone.")
	flag.StringVar(&probeAddr, "health-probe-bind-address", ":8081", "Address the /healthz and /readyz endpoints bind to.")
	flag.BoolVar(&leaderElect, "leader-elect", false, "Elect a leader so that only one of several replicas reconciles.")
	flag.StringVar(&leaderElectNS, "leader-election-namespace", "", "Namespace of the leader election Lease (default: the operator's own).")
	flag.Var(&watchNS, "watch-namespaces",
		"Comma-separated namespaces whose jobs the operator runs; empty: every namespace. The namespace-scoped install (config/namespaced) gives it rights in these only.")
	// A pass mostly waits for the API server; when many jobs change at once (200 launchers
	// ending together) the passes in flight bound how soon each status is written: at 4 the
	// last of 200 was written 7.7 s after its launcher ended, at 8 1.4 s (docs/performance.md).
	flag.IntVar(&maxConcurrency, "max-concurrent-reconciles", 8, "Jobs of one kind reconciled in parallel.")
	flag.StringVar(&opts.AgentImage, "agent-image", defaultAgentImage, "troupe-agent image of MPI launchers' wait init container.")
	flag.BoolVar(&opts.RequireGitKnownHosts, "git-require-known-hosts", false,
		"Require the key known_hosts in every appCodesToSync[].gitSecretName Secret: a job whose Secret lacks it waits, saying so. "+
			"Off: a Secret without known_hosts accepts any host key of the git server, as kube-openmpi's documented Secret (key ssh alone) does.")
	// Off by default: the operator creates runPolicy.storage's claims with its own rights, so a
	// claim naming its volume or data source would let a tenant claim what it could not itself
	// (docs/security.md). Refusals name it as troupev1.AllowClaimVolumeSourcesFlag.
	flag.BoolVar(&opts.AllowClaimVolumeSources, "allow-claim-volume-sources", false,
		"Let the claims of runPolicy.storage set spec.volumeName, spec.dataSource and spec.dataSourceRef (bind a named PersistentVolume, "+
			"fill the claim from a snapshot or another claim). Off: admission and the engine refuse such a job, naming the field.")
	flag.DurationVar(&opts.LostNodes.Timeout, "lost-node-timeout", 2*time.Minute,
		"How long a node may be not Ready before the pods of troupe's jobs on it count as lost (NodeLost) and their jobs recover; 0 turns it off.")
	flag.BoolVar(&opts.LostNodes.ForceDelete, "lost-node-force-delete", false,
		"Delete the pods of a lost node at once even while the node may still run them (a network partition); off, only those of a node gone or marked out of service (docs/failure-handling.md).")
	restartRules := flag.String("container-restart-rules", "auto",
		"Whether a master whose exit codes failure rules act on restarts in place for the other codes, by container restart rules (KEP-5307; docs/failure-handling.md): "+
			"true, false, or auto (true when the API server runs Kubernetes 1.35 or newer, where they are on by default).")
	defaultGang := flag.String("default-gang", string(troupev1.GangNone), "Gang provider of jobs that name none: Volcano, Coscheduling or None.")
	flag.StringVar(&opts.VolcanoScheduler, "volcano-scheduler-name", "volcano", "Scheduler name given to the pods of jobs gang-scheduled by Volcano.")
	flag.StringVar(&opts.CoschedulingScheduler, "coscheduling-scheduler-name", "scheduler-plugins-scheduler",
		"Scheduler name given to the pods of jobs gang-scheduled by the scheduler-plugins coscheduling plugin.")
	// Client-side throttling of the operator's API requests (docs/performance.md): a burst
	// sets up a few dozen jobs at once, the rate keeps a flood of new jobs from taking more
	// than its share of the API server. A negative QPS turns the limit off and leaves it to the
	// server's API Priority and Fairness (controller-runtime's default).
	flag.Float64Var(&apiQPS, "kube-api-qps", 50, "Sustained requests per second to the API server, for the whole process; negative: no client-side limit; 0: client-go's default (5).")
	flag.IntVar(&apiBurst, "kube-api-burst", 100, "Requests to the API server allowed at once above --kube-api-qps.")
	kueueInterval := flag.Duration("kueue-discovery-interval", time.Minute,
		"While Kueue's API is not served: how often to ask for it again (and to look again at jobs held for want of it).")
	flag.StringVar(&pprofAddr, "pprof-bind-address", "", "Address the net/http/pprof endpoints bind to (e.g. 127.0.0.1:6060); empty disables them.")
	flag.BoolVar(&skipKubeCheck, "skip-kube-version-check", false,
		"Start even when the API server's Kubernetes is older than the oldest troupe supports (docs/operations.md, \"Supported Kubernetes versions\").")
	hooks.bindFlags(flag.CommandLine)
	progressOpts.bindFlags(flag.CommandLine)
	printVersion := flag.Bool("version", false, "Print the version and the git revision, and exit.")
	logOpts := zap.Options{}
	logOpts.BindFlags(flag.CommandLine)
	flag.Parse()
	if *printVersion {
		fmt.Println(version.String("troupe-operator"))
		return nil
	}
	setupLogging(&logOpts)

	scheme := runtime.NewScheme()
	if err := errors.Join(clientgoscheme.AddToScheme(scheme), troupev1.AddToScheme(scheme),
		volcanov1beta1.AddToScheme(scheme), schedv1alpha1.AddToScheme(scheme), kueuev1.AddToScheme(scheme)); err != nil {
		return fmt.Errorf("build scheme: %w", err)
	}
	if apiQPS > 0 && apiBurst < 1 {
		return fmt.Errorf("--kube-api-burst must be at least 1 when --kube-api-qps is positive, got %d", apiBurst)
	}
	// Done on SIGTERM or SIGINT: the manager stops, and events stop waiting behind other
	// requests (clientrate.go).
	if err := checkPprofAddress(pprofAddr); err != nil {
		return err
	}
	stopping := ctrl.SetupSignalHandler()
	cfg := ctrl.GetConfigOrDie()
	leaderCfg := leaderElectionConfig(cfg)
	reviewCfg := metrics.ReviewConfig(cfg) // the metrics callers' reviews: a budget of their own
	cfg.QPS, cfg.Burst = float32(apiQPS), apiBurst
	if apiQPS > 0 {
		// One bucket for the whole process: controller-runtime gives each resource type a
		// client of its own, each with its own limiter from QPS/Burst, which would make the
		// flags a per-type budget. Events come last in it (clientrate.go).
		limitRequests(cfg, apiQPS, apiBurst, stopping)
	}
	serverVersion := ""
	if skipKubeCheck {
		ctrl.Log.Info("not checking the API server's Kubernetes version (--skip-kube-version-check)")
	} else {
		dc, err := discovery.NewDiscoveryClientForConfig(cfg)
		if err != nil {
			return fmt.Errorf("discovery client: %w", err)
		}
		found, err := kubeversion.Check(dc)
		if err != nil {
			return err
		}
		ctrl.Log.Info("the API server's Kubernetes is supported", "version", found, "oldestSupported", "v"+kubeversion.Min.String())
		serverVersion = found
	}
	if opts.ContainerRestartRules, err = kubeversion.ContainerRestartRules(*restartRules, serverVersion); err != nil {
		return err
	}
	ctrl.Log.Info("masters restart in place by container restart rules", "enabled", opts.ContainerRestartRules, "flag", *restartRules)
	opts.DefaultGang = troupev1.GangProvider(*defaultGang)
	hooks.defaultGang = opts.DefaultGang
	hooks.allowClaimVolumeSources = opts.AllowClaimVolumeSources
	if opts.AvailableGangs, err = controllers.DiscoverGangs(cfg); err != nil {
		return err
	}
	ctrl.Log.Info("gang providers whose PodGroup CRD the cluster serves", "available", opts.AvailableGangs)
	if len(watchNS) > 0 {
		ctrl.Log.Info("running the jobs of these namespaces only", "namespaces", []string(watchNS))
	}
	// Kueue (docs/kueue.md): on when its API is served, found again if it is installed later.
	kueueIntegration, err := kueue.NewIntegration(cfg, *kueueInterval)
	if err != nil {
		return err
	}
	owned := controllers.GangTypes(opts.AvailableGangs)
	if kueueIntegration.Served() {
		ctrl.Log.Info("Kueue's Workload API is served: jobs labelled " + troupev1.LabelQueueName + " are admitted by Kueue")
		owned = append(owned, &kueuev1.Workload{})
	} else {
		ctrl.Log.Info("Kueue's API is not served: jobs labelled "+troupev1.LabelQueueName+" are held suspended until it is",
			"askingEvery", kueueIntegration.Interval().String())
	}
	cacheOpts, err := engine.CacheOptions(watchNS, owned...)
	if err != nil {
		return err
	}
	webhookServer, err := hooks.server()
	if err != nil {
		return err
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		WebhookServer:           webhookServer,
		Scheme:                  scheme,
		Cache:                   cacheOpts,
		Metrics:                 metrics.ServerOptions(metricsAddr, metricsSecure, reviewCfg),
		HealthProbeBindAddress:  probeAddr,
		PprofBindAddress:        pprofAddr,
		LeaderElection:          leaderElect,
		LeaderElectionID:        "troupe-operator.troupe.dev",
		LeaderElectionNamespace: leaderElectNS,
		LeaderElectionConfig:    leaderCfg,
		Controller:              config.Controller{MaxConcurrentReconciles: maxConcurrency},

		// Hand the lease over at once on a rolling update instead of after its 15 s: the
		// process ends right after the manager stops, so nothing reconciles after the release.
		LeaderElectionReleaseOnCancel: true,
	})
	if err != nil {
		return fmt.Errorf("create manager: %w", err)
	}
	// troupe's job metrics, served with controller-runtime's on the metrics endpoint.
	if err := metrics.Register(ctrlmetrics.Registry); err != nil {
		return fmt.Errorf("register metrics: %w", err)
	}
	// The progress endpoint (progress.go), served with the webhooks.
	if opts.Progress, err = setupProgress(progressOpts, &hooks, mgr, reviewCfg); err != nil {
		return fmt.Errorf("progress endpoint: %w", err)
	}
	// Every kind of the registry: each registers itself from its own file of package kinds.
	if err := kinds.SetupControllers(mgr, opts); err != nil {
		return err
	}
	for _, k := range kinds.All() {
		if err := kueue.Setup(mgr, k.Adapter(opts), kueueIntegration); err != nil {
			return fmt.Errorf("set up Kueue admission of %s: %w", k.Name, err)
		}
	}
	if err := mgr.Add(kueueIntegration); err != nil {
		return fmt.Errorf("add Kueue discovery: %w", err)
	}
	if err := hooks.setup(mgr); err != nil {
		return err
	}
	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		return fmt.Errorf("add health check: %w", err)
	}
	// Readiness is the webhooks' (webhook.go), not leadership: a replica that does not lead
	// still serves admission.
	if err := mgr.AddReadyzCheck("readyz", healthz.Ping); err != nil {
		return fmt.Errorf("add ready check: %w", err)
	}
	v, revision := version.Get()
	// The memory limit the Go runtime collects against (setMemoryLimit; math.MaxInt64: none).
	ctrl.Log.Info("starting troupe-operator", "version", v, "revision", revision, "go", goruntime.Version(),
		"memoryLimit", memoryLimit)
	return mgr.Start(stopping)
}
