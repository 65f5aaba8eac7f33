// Command troupe-operator runs the troupe controllers: one shared job engine driving each
// registered kind.
package main

import (
	"errors"
	"flag"
	"fmt"
	"os"

	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	schedv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"
	volcanov1beta1 "volcano.sh/apis/pkg/apis/scheduling/v1beta1"

	troupev1 "github.com/troupe-dev/troupe/apis/troupe/v1alpha1"
	"github.com/troupe-dev/troupe/controllers"
	"github.com/troupe-dev/troupe/pkg/engine"
)

// kinds lists every kind the operator runs, each registered explicitly.
var kinds = []struct {
	name  string
	setup func(ctrl.Manager, controllers.Options) error
}{
	{"ChainerJob", controllers.SetupChainerJob},
	{"MPIJob", controllers.SetupMPIJob},
	{"HorovodJob", controllers.SetupHorovodJob},
}

// defaultAgentImage is the troupe-agent image released with this operator.
const defaultAgentImage = "ghcr.io/troupe-dev/troupe-agent:v0.1.0"

// Leader election keeps a Lease; its events go through the events API.
// +kubebuilder:rbac:groups=coordination.k8s.io,resources=leases,verbs=get;list;watch;create;update;patch;delete

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "troupe-operator:", err)
		os.Exit(1)
	}
}

func run() error {
	var err error
	var (
		metricsAddr    string
		probeAddr      string
		leaderElect    bool
		leaderElectNS  string
		maxConcurrency int
		opts           controllers.Options
		hooks          webhookFlags
	)
	flag.StringVar(&metricsAddr, "metrics-bind-address", ":8080", "Address the Prometheus metrics endpoint binds to; 0 disables it.")
	flag.StringVar(&probeAddr, "health-probe-bind-address", ":8081", "Address the /healthz and /readyz endpoints bind to.")
	flag.BoolVar(&leaderElect, "leader-elect", false, "Elect a leader so that only one of several replicas reconciles.")
	flag.StringVar(&leaderElectNS, "leader-election-namespace", "", "Namespace of the leader election Lease (default: the operator's own).")
	flag.IntVar(&maxConcurrency, "max-concurrent-reconciles", 4, "Jobs of one kind reconciled in parallel.")
	flag.StringVar(&opts.AgentImage, "agent-image", defaultAgentImage, "troupe-agent image of MPI launchers' wait init container.")
	defaultGang := flag.String("default-gang", string(troupev1.GangNone), "Gang provider of jobs that name none: Volcano, Coscheduling or None.")
	flag.StringVar(&opts.VolcanoScheduler, "volcano-scheduler-name", "volcano", "Scheduler name given to the pods of jobs gang-scheduled by Volcano.")
	flag.StringVar(&opts.CoschedulingScheduler, "coscheduling-scheduler-name", "scheduler-plugins-scheduler",
		"Scheduler name given to the pods of jobs gang-scheduled by the scheduler-plugins coscheduling plugin.")
	hooks.bindFlags(flag.CommandLine)
	logOpts := zap.Options{}
	logOpts.BindFlags(flag.CommandLine)
	flag.Parse()
	// JSON logs through zapr; --zap-devel switches to human-readable console output.
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&logOpts)))

	scheme := runtime.NewScheme()
	if err := errors.Join(clientgoscheme.AddToScheme(scheme), troupev1.AddToScheme(scheme),
		volcanov1beta1.AddToScheme(scheme), schedv1alpha1.AddToScheme(scheme)); err != nil {
		return fmt.Errorf("build scheme: %w", err)
	}
	cfg := ctrl.GetConfigOrDie()
	opts.DefaultGang = troupev1.GangProvider(*defaultGang)
	hooks.defaultGang = opts.DefaultGang
	if opts.AvailableGangs, err = controllers.DiscoverGangs(cfg); err != nil {
		return err
	}
	ctrl.Log.Info("gang providers whose PodGroup CRD the cluster serves", "available", opts.AvailableGangs)
	cacheOpts, err := engine.CacheOptions(controllers.GangTypes(opts.AvailableGangs)...)
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
		Metrics:                 metricsserver.Options{BindAddress: metricsAddr},
		HealthProbeBindAddress:  probeAddr,
		LeaderElection:          leaderElect,
		LeaderElectionID:        "troupe-operator.troupe.dev",
		LeaderElectionNamespace: leaderElectNS,
		Controller:              config.Controller{MaxConcurrentReconciles: maxConcurrency},

		// Hand the lease over at once on a rolling update instead of after its 15 s: the
		// process ends right after the manager stops, so nothing reconciles after the release.
		LeaderElectionReleaseOnCancel: true,
	})
	if err != nil {
		return fmt.Errorf("create manager: %w", err)
	}
	for _, k := range kinds {
		if err := k.setup(mgr, opts); err != nil {
			return fmt.Errorf("set up %s: %w", k.name, err)
		}
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
	ctrl.Log.Info("starting troupe-operator")
	return mgr.Start(ctrl.SetupSignalHandler())
}
