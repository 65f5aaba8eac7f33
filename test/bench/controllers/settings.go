package main

import (
	"fmt"
	"strconv"
	"strings"
)

// clusterProfile is how the simulated cluster's own controllers reach the API server. Every
// ratio is reported per profile: troupe's worker pods are created by kube-controller-manager's
// StatefulSet controller, in its budget, where mpi-operator creates its pods in its own.
type clusterProfile struct {
	name string
	// disableQPSLimits starts the cluster with kwokctl's --disable-qps-limits
	// (cluster-up.sh's DISABLE_QPS_LIMITS=1).
	disableQPSLimits bool
	// settings says what the cluster's components run with, for the results.
	settings string
}

var clusterProfiles = map[string]clusterProfile{
	// kwokctl --disable-qps-limits: kube-controller-manager and kube-scheduler at QPS 5000 /
	// burst 10000, kube-apiserver without priority and fairness and without in-flight limits.
	"unthrottled": {name: "unthrottled", disableQPSLimits: true,
		settings: "kube-controller-manager and kube-scheduler QPS 5000 burst 10000, kube-apiserver without flow control (kwokctl --disable-qps-limits)"},
	// Kubernetes v1.35's defaults: kube-controller-manager --kube-api-qps 20 --kube-api-burst
	// 30 (its own defaults), kube-scheduler 50 / 100, kube-apiserver with priority and
	// fairness and 400 / 200 requests in flight.
	"defaults": {name: "defaults",
		settings: "kube-controller-manager QPS 20 burst 30, kube-scheduler QPS 50 burst 100, kube-apiserver with flow control (Kubernetes v1.35 defaults)"},
}

// profileNames are the profiles in the order a run without -profiles measures them.
var profileNames = []string{"unthrottled", "defaults"}

// sideSettings says with which client and work-queue settings the side's requests were made,
// for the line beside every ratio and the results' files.
func (o *options) sideSettings(side string) string {
	client := fmt.Sprintf("client QPS %s burst %d", formatQPS(o.qps), o.burst)
	switch {
	case side == "limit":
		return client + " (the bench's own client: no operator, no work queue)"
	case isTroupe(side):
		s := client + ", work queue controller-runtime's default (watch events enqueued at once; " +
			"only retries pass its limiter, 10/s burst 100)"
		if !strings.Contains(o.troupeArgs, "--max-concurrent-reconciles") {
			s += ", --max-concurrent-reconciles 8 (default)"
		}
		if o.troupeArgs != "" {
			s += ", flags " + o.troupeArgs
		}
		if len(o.troupeEnv) > 0 {
			s += ", env " + strings.Join(o.troupeEnv, " ")
		}
		if ref := o.troupeRefs[side]; ref != "" {
			s += ", binary " + ref
		}
		return s
	case side == "mpi-operator":
		return fmt.Sprintf("%s, work queue --controller-queue-rate-limit %d --controller-queue-burst %d "+
			"(every watch event passes it; its defaults 10 / 100), --threadiness 2 (default)", client, o.mpiQueueQPS, o.mpiQueueBurst)
	}
	return client
}

func formatQPS(q float64) string { return strconv.FormatFloat(q, 'g', -1, 64) }

// isTroupe: the side runs troupe-operator (troupe, or troupe-a and troupe-b of an A/B run).
func isTroupe(side string) bool { return side == "troupe" || side == "troupe-a" || side == "troupe-b" }
