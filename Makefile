# troupe: build, generate, lint, test. Tool and test-infrastructure versions: hack/versions.mk.
include hack/versions.mk

SHELL := /usr/bin/env bash -o pipefail
.SHELLFLAGS := -ec
.DEFAULT_GOAL := build

TOOLS_DIR := $(TROUPE_CACHE)/tools
CONTROLLER_GEN := $(TOOLS_DIR)/controller-gen-$(CONTROLLER_GEN_VERSION)
GOLANGCI_LINT := $(TOOLS_DIR)/golangci-lint-$(GOLANGCI_LINT_VERSION)
HELM := $(TOOLS_DIR)/helm-$(HELM_VERSION)
GOVULNCHECK := $(TOOLS_DIR)/govulncheck-$(GOVULNCHECK_VERSION)
VULNDB := $(TROUPE_CACHE)/vulndb-$(VULNDB_VERSION)
# envtest wants kube-apiserver and etcd side by side in one directory.
ENVTEST_ASSETS := $(TROUPE_CACHE)/envtest-$(KUBE_VERSION)-$(ETCD_VERSION)
# kube-apiserver, kube-controller-manager, kube-scheduler and a kubectl of the same version.
KUBE_BIN := $(TROUPE_CACHE)/kube-$(KUBE_VERSION)/bin
# Prometheus's server, which the e2e suite scrapes the operator with (test/e2e/prometheus_test.go).
PROMETHEUS_BIN := $(TROUPE_CACHE)/prometheus-$(PROMETHEUS_VERSION)/bin
# The same of the oldest Kubernetes troupe supports (make test-integration-oldest).
ENVTEST_OLDEST_ASSETS := $(TROUPE_CACHE)/envtest-$(KUBE_OLDEST_VERSION)-$(ETCD_VERSION)
KUBE_OLDEST_BIN := $(TROUPE_CACHE)/kube-$(KUBE_OLDEST_VERSION)/bin
INTEGRATION_SUITES := ./test/integration/... ./test/admission/... ./test/webhookcerts/...

GO_TEST_FLAGS ?=
# Every fuzz target of the repository, as <package dir>:<target>, found by its declaration: a
# new kind's target runs without a list to edit.
FUZZ_TARGETS = $(shell grep -r --include='*_test.go' -o '^func Fuzz[A-Za-z0-9_]*' . | sed -E 's|^(.*)/[^/]*_test\.go:func |\1:|' | sort)
# Fuzz budgets are execution counts, not durations: Go 1.26's fuzz coordinator can report a
# duration's expiry as "context deadline exceeded" and fail with no crasher (go.dev/issue/75804),
# which a loaded 2-core machine hits; a count has no deadline to race.
FUZZ_TIME ?= 3000x

##@ Build

# The version and git revision stamped into the binaries (pkg/version, --version).
VERSION_LDFLAGS = $(shell hack/version-ldflags.sh $(VERSION))

.PHONY: build
build: ## Build troupe-operator, troupe-agent and kubectl-troupe into bin/, stamped with VERSION and the git revision.
	go build -ldflags "$(VERSION_LDFLAGS)" -o bin/ ./cmd/...

.PHONY: run
run: build ## Run the operator against the cluster in $$KUBECONFIG, its webhooks served here when the API server is on this machine (hack/run-local.sh).
	hack/run-local.sh

# make release VERSION=vX.Y.Z: what a release publishes, into DIST (hack/release.sh lists it).
DIST ?= dist

.PHONY: release
release: $(HELM) ## Build release VERSION (default: hack/versions.mk's) into dist/: installs, chart, image archives (amd64, arm64), the kubectl plugin, checksums.
	hack/container-deps.sh
	hack/controlplane/build.sh kubectl
	HELM=$(HELM) GO_RELEASE_MIN=$(GO_RELEASE_MIN) hack/release.sh $(VERSION) $(DIST)

##@ Generated code and manifests

.PHONY: generate
generate: $(CONTROLLER_GEN) ## Generate deepcopy functions.
	$(CONTROLLER_GEN) object:headerFile=hack/boilerplate.go.txt paths=./apis/...

# RBAC comes in two parts (docs/security.md): what the engine needs where jobs run
# (config/rbac/jobs), and what the operator needs for itself (config/rbac/operator: its
# namespace and its webhook configurations, by name).
.PHONY: manifests
manifests: $(CONTROLLER_GEN) ## Generate CRDs, RBAC and webhooks from kubebuilder markers, the local Kueue's external frameworks and the users' roles from the kinds; render deploy/ (one file per CRD, one for the rest) and the chart's generated parts.
	$(CONTROLLER_GEN) crd:generateEmbeddedObjectMeta=true paths=./apis/... output:crd:dir=config/crds
	go run ./hack/crdtrim config/crds/*.yaml
	hack/kustomize-crds.sh
	$(CONTROLLER_GEN) rbac:roleName=troupe-operator paths=./pkg/... paths=./controllers/... paths=./kinds/... output:rbac:dir=config/rbac/jobs
	$(CONTROLLER_GEN) rbac:roleName=troupe-operator-system paths=./cmd/... output:rbac:dir=config/rbac/operator
	$(CONTROLLER_GEN) webhook paths=./webhooks/... output:webhook:dir=config/webhook
	# Kueue's external frameworks on the local cluster: every kind of the registry.
	go run ./hack/kueueframeworks hack/controlplane/kueue-config.yaml
	# The users' view, edit and admin roles: every kind's resources, from its CRD.
	go run ./hack/userroles config/crds config/rbac/users/roles.yaml
	# Every webhook calls the operator's Service (controller-gen writes a placeholder): so for
	# any number of kinds, with no per-webhook patch.
	sed -i -e 's/^\( *name: \)webhook-service$$/\1troupe-webhook-service/' \
	  -e 's/^\( *namespace: \)system$$/\1troupe-system/' config/webhook/manifests.yaml
	# The release's version (hack/versions.mk) in the install and the chart.
	sed -i -E 's#^( *image: ghcr.io/troupe-dev/troupe-operator:).*#\1$(VERSION)#' config/install/operator.yaml
	sed -i -E 's/^version: .*/version: $(VERSION:v%=%)/; s/^appVersion: .*/appVersion: $(VERSION)/' charts/troupe/Chart.yaml
	hack/controlplane/build.sh kubectl
	hack/render-deploy.sh $(KUBE_BIN)/kubectl
	hack/chart-manifests.sh

.PHONY: chart-check
chart-check: $(HELM) ## helm lint and helm template the chart (default values and every value set).
	$(HELM) lint --strict charts/troupe
	$(HELM) template troupe charts/troupe --namespace troupe-system >/dev/null
	$(HELM) template troupe charts/troupe --namespace troupe-system --set metrics.serviceMonitor.enabled=true \
	  --set metrics.serviceMonitor.labels.release=prometheus >/dev/null
	$(HELM) template troupe charts/troupe --namespace ops --set replicaCount=1,leaderElection.enabled=false \
	  --set defaultGang=Volcano,webhook.failurePolicy=Ignore,metrics.service.enabled=false \
	  --set podDisruptionBudget.enabled=false,networkPolicy.enabled=false,watchNamespaces='{a,b}',agentImage=registry.example/agent:v1 \
	  --set userRoles.enabled=false,storage.allowClaimVolumeSources=true,gitSync.requireKnownHosts=true \
	  --set image.repository=registry.example/troupe-operator,image.tag=v9 >/dev/null
	$(HELM) template troupe charts/troupe --namespace ops --set certManager.enabled=true,metrics.secure=false \
	  --set logging.level=debug,logging.format=console,kubeAPI.qps=-1,kubeAPI.burst=10,maxConcurrentReconciles=16 \
	  --set lostNodes.timeout=90s,lostNodes.forceDelete=true,progress.enabled=false \
	  --set priorityClassName=system-cluster-critical,imagePullSecrets[0].name=regcred,podLabels.team=ml,podAnnotations.note=x \
	  --set topologySpreadConstraints[0].maxSkew=1,topologySpreadConstraints[0].topologyKey=zone \
	  --set topologySpreadConstraints[0].whenUnsatisfiable=ScheduleAnyway,metrics.serviceMonitor.enabled=true >/dev/null
	@! $(HELM) template troupe charts/troupe --set replicaCount=2,leaderElection.enabled=false >/dev/null 2>&1 || \
	  { echo "the chart renders two replicas without leader election"; exit 1; }
	@! $(HELM) template troupe charts/troupe --set logging.formt=json >/dev/null 2>&1 || \
	  { echo "values.schema.json lets an unknown value through"; exit 1; }
	@! $(HELM) template troupe charts/troupe --set webhook.failurePolicy=Sometimes >/dev/null 2>&1 || \
	  { echo "values.schema.json lets a bad failurePolicy through"; exit 1; }
	@$(HELM) template troupe charts/troupe --set replicaCount=1 | grep -q 'kind: PodDisruptionBudget' && \
	  { echo "the chart renders a PodDisruptionBudget for one replica"; exit 1; } || true
	@test "$$($(HELM) template troupe charts/troupe | grep -cE '^    rbac.authorization.k8s.io/aggregate-to-(admin|edit|view): "true"$$')" = 3 || \
	  { echo "the chart does not render the three users' roles, each with its aggregation label among its labels"; exit 1; }
	@! $(HELM) template troupe charts/troupe --set userRoles.enabled=false | grep -q 'aggregate-to-' || \
	  { echo "the chart renders the users' roles with userRoles.enabled=false"; exit 1; }

.PHONY: fmt
fmt: ## Format the Go code.
	gofmt -s -w $$(git ls-files '*.go')

##@ Checks

.PHONY: lint
lint: $(GOLANGCI_LINT) ## Run golangci-lint.
	$(GOLANGCI_LINT) run --allow-serial-runners ./...

.PHONY: vuln
vuln: $(GOVULNCHECK) $(VULNDB) ## govulncheck over every package: fail on a vulnerable function the code calls that hack/vuln-accepted.txt does not accept.
	$(GOVULNCHECK) -db file://$(VULNDB) -format json ./... | go run ./hack/vulncheck hack/vuln-accepted.txt

.PHONY: verify
verify: generate manifests ## Fail when a generated file is stale, a build output or a file over 1 MiB is tracked, a doc cites a missing target, path, test or flag, code is unformatted, config/'s RBAC is too wide, lint or govulncheck finds anything.
	@test -z "$$(gofmt -s -l $$(git ls-files '*.go'))" || { echo "gofmt needed:"; gofmt -s -l $$(git ls-files '*.go'); exit 1; }
	@git diff --exit-code -- apis config deploy charts hack/controlplane/kueue-config.yaml || { echo "generated files are stale: run 'make generate manifests' and commit"; exit 1; }
	@untracked=$$(git ls-files --others --exclude-standard -- apis config deploy charts); \
	  test -z "$$untracked" || { echo "generated files not committed: $$untracked"; exit 1; }
	@go mod tidy -diff || { echo "go.mod/go.sum are not tidy: run 'go mod tidy'"; exit 1; }
	hack/check-tracked-files.sh
	go run ./hack/docrefs
	go run ./hack/filerefs -check -order docs/architecture.md ./pkg/engine
	go run ./hack/rbaccheck config
	go vet ./...
	$(MAKE) lint
	$(MAKE) chart-check
	$(MAKE) vuln

##@ Tests

.PHONY: test
test: ## Run every test suite (what CI runs), the later suites' builds started ahead beside the earlier suites (hack/build-ahead.sh).
	hack/build-ahead.sh $(MAKE) test-suites

.PHONY: test-suites
test-suites: test-unit test-integration test-dataplane test-e2e test-demo test-bench-smoke test-chaos-smoke test-realnode ## Every test suite, one after another, without the builds ahead.

.PHONY: test-unit
test-unit: ## Unit tests of builders, status functions and adapters.
	go test $(GO_TEST_FLAGS) ./apis/... ./pkg/... ./controllers/... ./kinds/... ./cmd/... ./webhooks/... ./hack/rbaccheck/... ./hack/crdtrim/... ./hack/docrefs/... ./hack/kueueframeworks/... ./hack/userroles/... ./test/chaos/... ./test/doccommands/... ./test/bench/...

.PHONY: test-integration
# Run verbose into a log: shown are each package's result and how many
# manifests and kubectl flows TestKubectlFlowsOverEveryManifest covered; the whole log when a
# test fails.
test-integration: envtest-assets ## Integration and admission-webhook tests on a real kube-apiserver and etcd.
	$(call integration,$(ENVTEST_ASSETS))

.PHONY: test-integration-oldest
# Not part of make test: a cold build of the old kube-apiserver and kubectl takes minutes
# (docs/testing.md). Tests that need a newer Kubernetes skip, naming the version they need.
# Its admission suite took 740 s on a machine loaded by other builds, past go test's default 10 min.
test-integration-oldest: envtest-assets-oldest ## The same suites on the oldest supported Kubernetes (KUBE_OLDEST_VERSION).
	$(call integration,$(ENVTEST_OLDEST_ASSETS),-timeout 30m)

# integration ASSETS[,FLAGS]: run the integration suites on the kube-apiserver, etcd and kubectl
# in ASSETS, verbose into a log, with go test FLAGS.
define integration
	log=$$(mktemp); trap 'rm -f "$$log"' EXIT; \
	KUBEBUILDER_ASSETS=$(1) go test $(2) $(GO_TEST_FLAGS) -count=1 -timeout 25m -v $(INTEGRATION_SUITES) >"$$log" 2>&1 \
	  || { cat "$$log"; exit 1; }; \
	grep -E '^(ok |FAIL)|kubectl flows|^\s+--- SKIP' "$$log"
endef

.PHONY: test-dataplane
test-dataplane: ## sshd and mpirun (Open MPI, MPICH) of the troupe-mpi image over the operator's SSH files, containers in network namespaces (root).
	hack/container-deps.sh
	hack/images/build.sh troupe-mpi
	hack/dataplane-deps.sh
	go test $(GO_TEST_FLAGS) -count=1 -v -timeout 15m ./test/dataplane/...

.PHONY: test-dockerfile
test-dockerfile: ## The Dockerfile's troupe-operator and troupe-agent, built with buildah bud: they run, print their version, are static, non-root and laid out as make images' (root).
	hack/container-deps.sh
	hack/images/dockerfile-test.sh

# make test runs each fuzz target's seeds and regression inputs with the unit tests (go test runs
# them without -fuzz); fuzzing itself builds every package again with coverage instrumentation
# (8.5 minutes of a cold CI run, 2026-11-29), so it is make test-long's.
.PHONY: test-fuzz
test-fuzz: ## A short run of every fuzz target, 3,000 inputs each (make test-long; make fuzz runs them longer).
	@for t in $(FUZZ_TARGETS); do go test $${t%%:*}/ -run '^$$' -fuzz "^$${t##*:}$$" -fuzztime $(FUZZ_TIME) || exit 1; done

.PHONY: fuzz
fuzz: FUZZ_TIME = 200000x
fuzz: test-fuzz ## Fuzz defaulting and validation of every kind, 200,000 inputs per target (a few minutes).

# make bench: the three sides of docs/performance.md on the bench's own simulated cluster
# (BENCH_CLUSTER), interleaved, 3 rounds on each cluster profile (the cluster's controllers
# unthrottled, then at Kubernetes' defaults; a cluster each, deleted at the end): every figure's
# median and range, every ratio beside both sides' settings. BENCH_FLAGS go to the harness
# (-jobs, -workers, -qps, -burst, -mpi-queue-qps, -mpi-queue-burst, -repeats, -profiles, -sides,
# -rate, -profile-seconds, -keep, -limit-like, -watch-floor: go run ./test/bench/controllers -h).
BENCH_CLUSTER ?= troupe-bench
BENCH_FLAGS ?=
MPI_OPERATOR_DIR := $(TROUPE_CACHE)/mpi-operator-$(MPI_OPERATOR_VERSION)
BENCH_GO = PATH=$(KUBE_BIN):$$PATH MPI_OPERATOR_BIN=$(MPI_OPERATOR_DIR)/bin/mpi-operator \
	MPI_OPERATOR_CRD=$(MPI_OPERATOR_DIR)/crds/kubeflow.org_mpijobs.yaml \
	go run ./test/bench/controllers -cluster $(BENCH_CLUSTER)
BENCH_RUN = hack/controlplane/build.sh mpi-operator && $(BENCH_GO)

.PHONY: bench
bench: cluster-assets ## MPI jobs on a simulated cluster: the control-plane limit, troupe and kubeflow mpi-operator, 3 interleaved rounds on two cluster profiles (200 x 9 pods; results in bench-results/).
	$(BENCH_RUN) -profile-seconds 120 $(BENCH_FLAGS)

# make bench-ab A=<revision or binary> [B=<revision or binary>]: two troupe-operators, A and B
# (B: this checkout by default), interleaved on the Kubernetes-defaults profile, 3 rounds each,
# trading places every round; per figure, whether the effect exceeds the spread.
A ?=
B ?=

.PHONY: bench-ab
bench-ab: cluster-assets ## A/B of two troupe-operators (A=rev-or-binary, B= default this checkout): 200 x 9 pods, 3 interleaved rounds each, effect against spread.
	@[ -n "$(A)" ] || { echo "make bench-ab needs A=<git revision or troupe-operator binary>"; exit 2; }
	$(BENCH_GO) -troupe-a $(A) $(if $(B),-troupe-b $(B)) -profiles defaults $(BENCH_FLAGS)

# make bench-scale: 1,000 jobs on troupe and mpi-operator, then 3,000 on troupe alone (its cost
# per job as jobs grow; mpi-operator's status at 3,000 jobs would take hours), once each on the
# unthrottled profile. BENCH_SCALE_FLAGS go to both runs.
BENCH_SCALE_FLAGS ?=

.PHONY: bench-scale
bench-scale: cluster-assets ## 1,000 MPI jobs x 9 pods at 5 jobs/s on troupe and mpi-operator, then 3,000 on troupe: peak RSS and CPU as jobs grow (1.5 to 2 h).
	$(BENCH_RUN) -jobs 1000 -rate 5 -sides troupe,mpi-operator -repeats 1 -profiles unthrottled -timeout 40m $(BENCH_SCALE_FLAGS)
	$(BENCH_GO) -jobs 3000 -rate 5 -sides troupe -repeats 1 -profiles unthrottled -timeout 60m $(BENCH_SCALE_FLAGS)

# make bench-scale-ratio: troupe alone at 1,000 and 3,000 jobs with the watch floor beside,
# three runs each in the order 1,000 3,000 3,000 1,000 1,000 3,000 (a drift of the machine
# favours neither count), then each per-job figure's median and range and the 3,000/1,000 ratio,
# and each back-to-back pair's ratio with their median (test/bench/scaleratio; into
# bench-results/scale-<time>/ratio.txt). 2 to 4.5 h on this machine, as fast as its cluster runs
# that day; SCALE_RATIO_ORDER="3000 1000" is one pair (1.5 h on a slow day).
SCALE_RATIO_ORDER ?= 1000 3000 3000 1000 1000 3000

.PHONY: bench-scale-ratio
bench-scale-ratio: cluster-assets ## troupe at 1,000 and 3,000 jobs x 9 pods, 3 interleaved runs each: per-job CPU, RSS and passes, medians and the 3,000/1,000 ratio (2 to 4.5 h).
	@out=bench-results/scale-$$(date -u +%Y%m%d-%H%M%S); \
	for n in $(SCALE_RATIO_ORDER); do \
		$(BENCH_GO) -out $$out -jobs $$n -rate 5 -sides troupe -repeats 1 -profiles unthrottled \
			-timeout 150m -profile-seconds 60 -watch-floor $(BENCH_SCALE_FLAGS) || exit 1; \
	done; \
	go run ./test/bench/scaleratio $$out/*/summary.csv | tee $$out/ratio.txt

# make bench-restart: what a whole-job restart costs against a fresh start (issue 51), on the
# simulated cluster at Kubernetes' default client rates. BENCH_RESTART_FLAGS go to the program
# (-workers, -repeats).
.PHONY: bench-restart
bench-restart: cluster-assets ## A 1+64 MPIJob on the simulated cluster: every pod Running after the create, again after a worker fails (a whole-job restart), again after the launcher fails (its workers kept), 3 rounds.
	go run ./test/bench/restart $(BENCH_RESTART_FLAGS)

.PHONY: bench-smoke
bench-smoke: cluster-assets ## make bench at 3 jobs x (1+2) pods, all three sides, 2 rounds on both profiles: the harness works end to end.
	$(BENCH_RUN) -jobs 3 -workers 2 -repeats 2 -cluster $(BENCH_CLUSTER)-smoke -out $$(mktemp -d) $(BENCH_FLAGS)

.PHONY: test-bench-smoke
test-bench-smoke: cluster-assets ## The bench harness at 3 jobs x (1+2) pods, limit and troupe with -watch-floor, 2 rounds on the Kubernetes-defaults profile (no mpi-operator build).
	out=$$(mktemp -d) && \
	  $(BENCH_GO) -jobs 3 -workers 2 -sides limit,troupe -watch-floor -repeats 2 -profiles defaults -cluster $(BENCH_CLUSTER)-smoke -out "$$out" && rm -rf "$$out"

# make chaos: troupe jobs of every kind run twice on the harness's own simulated cluster
# (CHAOS_CLUSTER), undisturbed and then under faults (operator SIGKILLs, kube-apiserver and
# etcd restarts, webhooks down, tampering), and the counts of docs/reliability.md checked; the
# cluster is deleted at the end. CHAOS_FLAGS go to the harness (-jobs, -kills, -seed, -timeout,
# -keep...: go run ./test/chaos -h).
CHAOS_CLUSTER ?= troupe-chaos
CHAOS_FLAGS ?=
CHAOS_GO = PATH=$(KUBE_BIN):$$PATH KWOKCTL=$(TROUPE_CACHE)/kwok-$(KWOK_VERSION)/bin/kwokctl go run ./test/chaos

.PHONY: chaos
chaos: cluster-assets ## 100 jobs, 50 operator SIGKILLs, kube-apiserver and etcd restarts: nothing lost, orphaned or duplicated (about 12 min).
	$(CHAOS_GO) -cluster $(CHAOS_CLUSTER) $(CHAOS_FLAGS)

.PHONY: test-chaos-smoke
test-chaos-smoke: cluster-assets ## make chaos at 12 jobs, 5 kills, one kube-apiserver restart: a couple of minutes.
	out=$$(mktemp -d) && \
	  $(CHAOS_GO) -cluster $(CHAOS_CLUSTER)-smoke -jobs 12 -kills 5 -apiserver-restarts 1 -etcd-restarts 0 \
	  -webhook-down 10s -window 20s -min-run 5s -max-run 15s -timeout 10m -out "$$out" $(CHAOS_FLAGS) && rm -rf "$$out"

.PHONY: bench-webhook
bench-webhook: envtest-assets ## Webhook latency at 50 creates/s for 60 s, behind a real kube-apiserver.
	KUBEBUILDER_ASSETS=$(ENVTEST_ASSETS) go run ./test/bench/webhook -rate 50 -duration 60s

# TestInstallFromRelease installs a release built here at a version no other image carries. Its
# images are of this machine's platform alone and so is the plugin, to keep make test short (a cold
# arm64 build of the operator is about 6 minutes of CI); make test-long builds make release's two.
RELEASE_TEST_VERSION = $(VERSION)-realnode
RELEASE_TEST_DIST = $(TROUPE_CACHE)/release-test
# This machine's platform, as Go names it.
HOST_PLATFORM = $(shell go env GOOS)/$(shell go env GOARCH)
RELEASE_TEST_PLATFORMS ?= $(HOST_PLATFORM)

# REALNODE_PARALLEL: how many real-node job tests run side by side (test/realnode/suite_test.go
# says which); their pods mostly wait on starts, the network and each other.
REALNODE_PARALLEL ?= 2

.PHONY: test-realnode
test-realnode: $(HELM) ## Real-node tests: troupe-mpi pods in containers, logs, exec, DNS, Services; troupe installed five ways, one from a release; an upgrade from the previous release under running jobs (root).
	hack/container-deps.sh
	hack/controlplane/build.sh kubectl
	HELM=$(HELM) GO_RELEASE_MIN=$(GO_RELEASE_MIN) ALLOW_UNPATCHED_GO=1 PLUGIN_PLATFORMS=$(HOST_PLATFORM) \
	  IMAGE_PLATFORMS="$(RELEASE_TEST_PLATFORMS)" hack/release.sh $(RELEASE_TEST_VERSION) $(RELEASE_TEST_DIST)
	prev=$$(hack/previous-release.sh $(TROUPE_CACHE)/previous-release); \
	HELM=$(HELM) TROUPE_RELEASE_DIST=$(RELEASE_TEST_DIST) TROUPE_RELEASE_VERSION=$(RELEASE_TEST_VERSION) \
	  TROUPE_RELEASE_PLATFORMS="$(RELEASE_TEST_PLATFORMS)" \
	  TROUPE_PREVIOUS_RELEASE=$(PREVIOUS_RELEASE) TROUPE_PREVIOUS_RELEASE_SRC=$$(sed -n 's/^SRC=//p' <<<"$$prev") \
	  TROUPE_PREVIOUS_RELEASE_IMAGES="$$(sed -n 's/^troupe-[a-z]*=//p' <<<"$$prev" | tr '\n' ' ')" \
	  PATH=$(KUBE_BIN):$$PATH go test -parallel $(REALNODE_PARALLEL) $(GO_TEST_FLAGS) -count=1 -v -timeout 50m ./test/realnode/...

# E2E_PARALLEL: how many e2e tests run side by side (test/e2e/suite_test.go says which do). The
# simulated cluster mostly waits, so more than the cores; a -parallel in GO_TEST_FLAGS wins.
E2E_PARALLEL ?= 6

.PHONY: test-e2e
test-e2e: cluster-assets ## End-to-end tests: the operator process on a local simulated cluster, scraped by Prometheus.
	hack/dataplane-deps.sh
	hack/controlplane/build.sh prometheus
	PATH=$(KUBE_BIN):$(PROMETHEUS_BIN):$$PATH go test -parallel $(E2E_PARALLEL) $(GO_TEST_FLAGS) -count=1 -timeout 30m ./test/e2e/...

# make test-autoscale: the real-node cluster with metrics-server (CLUSTER_ADDONS=metrics, built
# from Go modules: minutes, cold) and the HPA of an elastic PyTorchJob scaling it on real CPU
# readings. Not part of make test, which skips TestHPAScalesElasticPyTorch.
.PHONY: test-autoscale
test-autoscale: $(HELM) ## An elastic PyTorchJob's HPA scales it 1 -> 2 workers on the real node's CPU, read by metrics-server (root; about 5 min, plus metrics-server's build once).
	TROUPE_REALNODE_METRICS=1 $(MAKE) test-realnode GO_TEST_FLAGS="-v -run 'TestHPAScalesElasticPyTorch'"

# make test-long: what make test leaves out to keep a CI run within its time: the fuzz targets
# fuzzed, and the real-node and e2e suites whole, with their long tests (testutil.LongOnly;
# docs/testing.md lists them and what make test keeps of each path) and the test release of make
# release's two image platforms.
.PHONY: test-long
test-long: test-fuzz ## The fuzz targets, the real-node and e2e suites whole, with the long tests make test leaves out (docs/testing.md).
	TROUPE_LONG_TESTS=1 $(MAKE) test-realnode RELEASE_TEST_PLATFORMS="linux/amd64 linux/arm64"
	TROUPE_LONG_TESTS=1 $(MAKE) test-e2e

.PHONY: test-demo
test-demo: cluster-assets ## make demo twice at once (two clusters, two operators on ports of their own), then demo-down.
	PATH=$(KUBE_BIN):$$PATH go test $(GO_TEST_FLAGS) -count=1 -timeout 15m ./test/demo/...

.PHONY: cluster-assets
cluster-assets: ## Build (once, cached) every binary of the local simulated cluster.
	hack/controlplane/build.sh etcd kube-apiserver kube-controller-manager kube-scheduler kubectl kwok kwokctl coscheduler volcano-scheduler kueue

##@ Images

IMAGES := troupe-operator troupe-agent troupe-mpi troupe-train

.PHONY: images
images: ## Build the images of images/ with buildah, offline, cached by content hash (docs/images.md).
	hack/container-deps.sh
	hack/images/build.sh $(IMAGES)

##@ Demo

.PHONY: demo
demo: ## Start a local simulated cluster, run the operator and the ChainerMN example to Succeeded (EXAMPLE=examples/<file>.yaml: another example; REAL=1: install troupe on a real node, real training; MULTI=1: a manager and a worker cluster, the example dispatched by Kueue's MultiKueue).
ifeq ($(MULTI),1)
	EXAMPLE=$(EXAMPLE) hack/demo-multi.sh
else
	EXAMPLE=$(EXAMPLE) REAL=$(REAL) hack/demo.sh
endif

.PHONY: demo-down
demo-down: ## Stop the demo's operator and cluster (MULTI=1: the manager's and the worker's).
ifeq ($(MULTI),1)
	CLUSTER_NAME=$${CLUSTER_NAME:-troupe-mk}-worker1 hack/demo-down.sh
	CLUSTER_NAME=$${CLUSTER_NAME:-troupe-mk} hack/demo-down.sh
else
	hack/demo-down.sh
endif

.PHONY: envtest-assets
envtest-assets: ## Build (once, cached) kube-apiserver and etcd for envtest.
	hack/controlplane/build.sh etcd kube-apiserver kubectl
	mkdir -p $(ENVTEST_ASSETS)
	ln -sf $(KUBE_BIN)/kube-apiserver $(ENVTEST_ASSETS)/kube-apiserver
	ln -sf $(TROUPE_CACHE)/etcd-$(ETCD_VERSION)/bin/etcd $(ENVTEST_ASSETS)/etcd
	ln -sf $(KUBE_BIN)/kubectl $(ENVTEST_ASSETS)/kubectl

.PHONY: envtest-assets-oldest
envtest-assets-oldest: ## Build (once, cached) the oldest supported kube-apiserver and kubectl, and etcd, for envtest.
	hack/controlplane/build.sh etcd oldest-kube-apiserver oldest-kubectl
	mkdir -p $(ENVTEST_OLDEST_ASSETS)
	ln -sf $(KUBE_OLDEST_BIN)/kube-apiserver $(ENVTEST_OLDEST_ASSETS)/kube-apiserver
	ln -sf $(TROUPE_CACHE)/etcd-$(ETCD_VERSION)/bin/etcd $(ENVTEST_OLDEST_ASSETS)/etcd
	ln -sf $(KUBE_OLDEST_BIN)/kubectl $(ENVTEST_OLDEST_ASSETS)/kubectl

##@ Tools (pinned in hack/versions.mk, built once into $(TOOLS_DIR))

$(CONTROLLER_GEN):
	hack/install-tool.sh $@ sigs.k8s.io/controller-tools/cmd/controller-gen@$(CONTROLLER_GEN_VERSION)

$(GOLANGCI_LINT):
	hack/install-tool.sh $@ github.com/golangci/golangci-lint/v2/cmd/golangci-lint@$(GOLANGCI_LINT_VERSION)

$(GOVULNCHECK):
	hack/install-tool.sh $@ golang.org/x/vuln/cmd/govulncheck@$(GOVULNCHECK_VERSION)

$(VULNDB):
	hack/vulndb.sh $@ $(VULNDB_VERSION)

$(HELM):
	hack/install-tool.sh $@ helm.sh/helm/v3/cmd/helm@$(HELM_VERSION)

.PHONY: help
help: ## Show this help.
	@awk 'BEGIN {FS = ":.*##"} /^[a-zA-Z_-]+:.*?##/ { printf "  %-18s %s\n", $$1, $$2 } /^##@/ { printf "\n%s\n", substr($$0, 5) }' $(MAKEFILE_LIST)
