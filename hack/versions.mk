# The one place where every pinned tool and test-infrastructure version lives.
# The Makefile and every script under hack/ read these; change a version here only.

# Kubernetes control plane built from Go modules for envtest and the local cluster.
KUBE_VERSION ?= v1.35.6
# Published staging modules (k8s.io/api, k8s.io/client-go, ...) matching KUBE_VERSION.
KUBE_STAGING_VERSION ?= v0.35.6
# The oldest Kubernetes troupe supports (docs/operations.md, "Supported Kubernetes versions"): its
# kube-apiserver runs the integration and admission suites in make test-integration-oldest.
KUBE_OLDEST_VERSION ?= v1.30.14
KUBE_OLDEST_STAGING_VERSION ?= v0.30.14
ETCD_VERSION ?= v3.6.5
KWOK_VERSION ?= v0.7.0
# Gang schedulers run beside kube-scheduler on the local cluster. scheduler-plugins (coscheduling)
# is built against the Kubernetes libraries below: every k8s.io/* module of its replace list at
# SCHEDULER_PLUGINS_KUBE_STAGING_VERSION (the proxy refuses some of the v0.34.7 ones it names).
SCHEDULER_PLUGINS_VERSION ?= v0.34.7
SCHEDULER_PLUGINS_KUBE_VERSION ?= v1.34.3
SCHEDULER_PLUGINS_KUBE_STAGING_VERSION ?= v0.34.3
# The newest volcano.sh/volcano the proxy serves; built with its own replace list.
VOLCANO_VERSION ?= v1.10.0
# kubeflow's MPI operator, the other side of `make bench` (test/bench/controllers), built from its
# module with its own replace list; its MPIJob CRD comes from the same module.
MPI_OPERATOR_VERSION ?= v0.8.2
# Kueue's manager runs beside the gang schedulers on the local cluster (docs/kueue.md): built from
# its module (cmd/kueue), its CRDs and webhook manifests from the same module.
KUEUE_VERSION ?= v0.17.0
# Prometheus (cmd/prometheus of its module; module version v0.3XX.Y is release 3.XX.Y, here
# 3.16.0): the e2e suite scrapes the operator with it as the shipped ServiceMonitor has it
# scraped and runs the Grafana dashboard's queries on it (test/e2e/prometheus_test.go).
PROMETHEUS_VERSION ?= v0.316.0
# metrics-server (cmd/metrics-server of its module), the resource metrics API the local cluster
# serves with CLUSTER_ADDONS=metrics (kwokctl runs it and registers its APIService): the HPA of an
# elastic PyTorchJob reads its pods' CPU from it (test/realnode/autoscale_test.go).
METRICS_SERVER_VERSION ?= v0.8.0

# The local cluster's real node (REAL_NODE=1): CoreDNS, for the pods' DNS, built from its module;
# the OCI registry its containerd pulls docker.io images through (test/tools/registry, on
# go-containerregistry's registry package).
COREDNS_VERSION ?= v1.15.0
REGISTRY_VERSION ?= v0.22.1

# Code generation and lint.
CONTROLLER_GEN_VERSION ?= v0.20.0
GOLANGCI_LINT_VERSION ?= v2.7.2
# Helm, for the chart's lint and template (make verify) and the real-node install test.
HELM_VERSION ?= v3.22.0
# govulncheck (make vuln, part of make verify) and the Go vulnerability database it reads,
# taken from the golang.org/x/vulndb module on the Go module proxy (vuln.go.dev is not reachable
# here): a pinned snapshot, so a new advisory changes the result only when this line moves.
GOVULNCHECK_VERSION ?= v1.9.0
VULNDB_VERSION ?= v0.0.0-20261105234957-e22db6528018

# Built binaries live outside the checkout, keyed by version, so a clean clone reuses them.
TROUPE_CACHE ?= $(HOME)/.cache/troupe

# troupe's own version: the release this source becomes, stamped into the binaries (with the git
# revision) and the tag of their images; pkg/version's default, which a unit test keeps equal.
# make release VERSION=vX.Y.Z builds another.
VERSION ?= v0.2.0
# The oldest Go a release may be built with: the first with fixes for every standard-library
# advisory the code calls (hack/vuln-accepted.txt). hack/release.sh refuses an older one unless
# ALLOW_UNPATCHED_GO=1 (the real-node suite's test release, built with the machine's Go).
GO_RELEASE_MIN ?= 1.26.10
# The release before it, which the upgrade test (test/realnode/upgrade_test.go) installs, runs
# jobs under and upgrades from: built from this repository at its pinned commit.
PREVIOUS_RELEASE ?= v0.1.0
PREVIOUS_RELEASE_REVISION ?= e36e8ee0942550b35f936cda7174316b962b1f73

# Images (make images, hack/images/build.sh): names are $(IMAGE_REGISTRY)/<image>:<tag>. The
# release's images, troupe-operator and troupe-agent (the operator's defaults: --agent-image,
# config/, deploy/, the chart), are tagged IMAGE_TAG, the release's version. The data plane's
# and the examples' images (troupe-mpi, troupe-train, troupe-debian, pause), which the examples
# name and which change with their own content rather than with each release, are tagged
# DATAPLANE_IMAGE_TAG. The Debian images are made from this suite of the machine's apt sources.
IMAGE_REGISTRY ?= ghcr.io/troupe-dev
IMAGE_TAG ?= $(VERSION)
DATAPLANE_IMAGE_TAG ?= v0.1.0
DEBIAN_SUITE ?= bookworm
