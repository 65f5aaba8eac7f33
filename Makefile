# troupe: build, generate, lint, test. Tool and test-infrastructure versions: hack/versions.mk.
include hack/versions.mk

SHELL := /usr/bin/env bash -o pipefail
.SHELLFLAGS := -ec
.DEFAULT_GOAL := build

TOOLS_DIR := $(TROUPE_CACHE)/tools
CONTROLLER_GEN := $(TOOLS_DIR)/controller-gen-$(CONTROLLER_GEN_VERSION)
GOLANGCI_LINT := $(TOOLS_DIR)/golangci-lint-$(GOLANGCI_LINT_VERSION)
# envtest wants kube-apiserver and etcd side by side in one directory.
ENVTEST_ASSETS := $(TROUPE_CACHE)/envtest-$(KUBE_VERSION)-$(ETCD_VERSION)
# kube-apiserver, kube-controller-manager, kube-scheduler and a kubectl of the same version.
KUBE_BIN := $(TROUPE_CACHE)/kube-$(KUBE_VERSION)/bin

GO_TEST_FLAGS ?=
# Every fuzz target of the repository, as <package dir>:<target>, found by its declaration: a
# new kind's target runs without a list to edit.
FUZZ_TARGETS = $(shell grep -r --include='*_test.go' -o '^func Fuzz[A-Za-z0-9_]*' . | sed -E 's|^(.*)/[^/]*_test\.go:func |\1:|' | sort)
# Fuzz budgets are execution counts, not durations: Go 1.26's fuzz coordinator can report a
# duration's expiry as "context deadline exceeded" and fail with no crasher (go.dev/issue/75804),
# which a loaded 2-core machine hits; a count has no deadline to race.
FUZZ_TIME ?= 3000x

##@ Build

.PHONY: build
build: ## Build troupe-operator into bin/.
	go build -o bin/ ./cmd/...

.PHONY: run
run: build ## Run the operator against the cluster in $$KUBECONFIG.
	./bin/troupe-operator

##@ Generated code and manifests

.PHONY: generate
generate: $(CONTROLLER_GEN) ## Generate deepcopy functions.
	$(CONTROLLER_GEN) object:headerFile=hack/boilerplate.go.txt paths=./apis/...

# RBAC comes in two parts (docs/security.md): what the engine needs where jobs run
# (deploy/rbac/jobs), and what the operator needs for itself (deploy/rbac/operator: its
# namespace and its webhook configurations, by name).
.PHONY: manifests
manifests: $(CONTROLLER_GEN) ## Generate CRDs and RBAC from kubebuilder markers.
	$(CONTROLLER_GEN) crd:generateEmbeddedObjectMeta=true paths=./apis/... output:crd:dir=deploy/crds
	hack/kustomize-crds.sh
	$(CONTROLLER_GEN) rbac:roleName=troupe-operator paths=./pkg/... paths=./controllers/... paths=./kinds/... output:rbac:dir=deploy/rbac/jobs
	$(CONTROLLER_GEN) rbac:roleName=troupe-operator-system paths=./cmd/... output:rbac:dir=deploy/rbac/operator
	$(CONTROLLER_GEN) webhook paths=./webhooks/... output:webhook:dir=deploy/webhook

.PHONY: fmt
fmt: ## Format the Go code.
	gofmt -s -w $$(git ls-files '*.go')

##@ Checks

.PHONY: lint
lint: $(GOLANGCI_LINT) ## Run golangci-lint.
	$(GOLANGCI_LINT) run --allow-serial-runners ./...

.PHONY: verify
verify: generate manifests ## Fail when a generated file is stale, code is unformatted, deploy/'s RBAC is too wide or lint finds anything.
	@test -z "$$(gofmt -s -l $$(git ls-files '*.go'))" || { echo "gofmt needed:"; gofmt -s -l $$(git ls-files '*.go'); exit 1; }
	@git diff --exit-code -- apis deploy || { echo "generated files are stale: run 'make generate manifests' and commit"; exit 1; }
	@untracked=$$(git ls-files --others --exclude-standard -- apis deploy); \
	  test -z "$$untracked" || { echo "generated files not committed: $$untracked"; exit 1; }
	@go mod tidy -diff || { echo "go.mod/go.sum are not tidy: run 'go mod tidy'"; exit 1; }
	go run ./hack/rbaccheck deploy
	go vet ./...
	$(MAKE) lint

##@ Tests

.PHONY: test
test: test-unit test-fuzz test-integration test-dataplane test-e2e test-bench-smoke test-realnode ## Run every test suite (what CI runs).

.PHONY: test-unit
test-unit: ## Unit tests of builders, status functions and adapters.
	go test $(GO_TEST_FLAGS) ./apis/... ./pkg/... ./controllers/... ./kinds/... ./cmd/... ./webhooks/... ./hack/rbaccheck/...

.PHONY: test-integration
test-integration: envtest-assets ## Integration and admission-webhook tests on a real kube-apiserver and etcd.
	KUBEBUILDER_ASSETS=$(ENVTEST_ASSETS) go test $(GO_TEST_FLAGS) -count=1 ./test/integration/... ./test/admission/...

.PHONY: test-dataplane
test-dataplane: ## Real sshd and mpirun (Open MPI, MPICH) over the operator's SSH files, in network namespaces (root).
	hack/dataplane-deps.sh
	go test $(GO_TEST_FLAGS) -count=1 -v -timeout 15m ./test/dataplane/...

.PHONY: test-fuzz
test-fuzz: ## A short run of every fuzz target (make fuzz runs them longer).
	@for t in $(FUZZ_TARGETS); do go test $${t%%:*}/ -run '^$$' -fuzz "^$${t##*:}$$" -fuzztime $(FUZZ_TIME) || exit 1; done

.PHONY: fuzz
fuzz: FUZZ_TIME = 200000x
fuzz: test-fuzz ## Fuzz defaulting and validation of every kind, 200,000 inputs per target (a few minutes).

# make bench: the three sides of docs/performance.md on the bench's own simulated cluster
# (BENCH_CLUSTER), which it stops at the end. BENCH_FLAGS go to the harness (-jobs, -workers, -qps,
# -burst, -sides, -rate, -profile-seconds, -keep: go run ./test/bench/controllers -h).
BENCH_CLUSTER ?= troupe-bench
BENCH_FLAGS ?=
MPI_OPERATOR_DIR := $(TROUPE_CACHE)/mpi-operator-$(MPI_OPERATOR_VERSION)
BENCH_GO = PATH=$(KUBE_BIN):$$PATH MPI_OPERATOR_BIN=$(MPI_OPERATOR_DIR)/bin/mpi-operator \
	MPI_OPERATOR_CRD=$(MPI_OPERATOR_DIR)/crds/kubeflow.org_mpijobs.yaml \
	go run ./test/bench/controllers -cluster $(BENCH_CLUSTER)
BENCH_RUN = hack/controlplane/build.sh mpi-operator && $(BENCH_GO)

.PHONY: bench
bench: cluster-assets ## MPI jobs on a simulated cluster: the control-plane limit, troupe and kubeflow mpi-operator (200 x 9 pods; results in bench-results/).
	$(BENCH_RUN) -profile-seconds 120 $(BENCH_FLAGS)

.PHONY: bench-scale
bench-scale: cluster-assets ## 1,000 MPI jobs x 9 pods created at 5 jobs/s: peak RSS and CPU of troupe and mpi-operator.
	$(BENCH_RUN) -jobs 1000 -rate 5 -sides troupe,mpi-operator -timeout 40m $(BENCH_FLAGS)

.PHONY: bench-smoke
bench-smoke: cluster-assets ## make bench at 3 jobs x (1+2) pods, all three sides: the harness works end to end.
	$(BENCH_RUN) -jobs 3 -workers 2 -cluster $(BENCH_CLUSTER)-smoke -out $$(mktemp -d) $(BENCH_FLAGS)

.PHONY: test-bench-smoke
test-bench-smoke: cluster-assets ## The bench harness at 3 jobs x (1+2) pods, limit and troupe (no mpi-operator build): about a minute.
	$(BENCH_GO) -jobs 3 -workers 2 -sides limit,troupe -cluster $(BENCH_CLUSTER)-smoke -out $$(mktemp -d)

.PHONY: bench-webhook
bench-webhook: envtest-assets ## Webhook latency at 50 creates/s for 60 s, behind a real kube-apiserver.
	KUBEBUILDER_ASSETS=$(ENVTEST_ASSETS) go run ./test/bench/webhook -rate 50 -duration 60s

.PHONY: test-realnode
test-realnode: ## Smoke test of the local cluster's real node: troupe-mpi pods in containers, logs, exec, DNS, Services (root).
	hack/container-deps.sh
	hack/controlplane/build.sh kubectl
	PATH=$(KUBE_BIN):$$PATH go test $(GO_TEST_FLAGS) -count=1 -v -timeout 20m ./test/realnode/...

.PHONY: test-e2e
test-e2e: cluster-assets ## End-to-end tests: the operator process on a local simulated cluster.
	hack/dataplane-deps.sh
	PATH=$(KUBE_BIN):$$PATH go test $(GO_TEST_FLAGS) -count=1 -timeout 20m ./test/e2e/...

.PHONY: cluster-assets
cluster-assets: ## Build (once, cached) every binary of the local simulated cluster.
	hack/controlplane/build.sh etcd kube-apiserver kube-controller-manager kube-scheduler kubectl kwok kwokctl coscheduler volcano-scheduler

##@ Images

IMAGES := troupe-operator troupe-agent troupe-mpi troupe-train

.PHONY: images
images: ## Build the images of images/ with buildah, offline, cached by content hash (docs/images.md).
	hack/container-deps.sh
	hack/images/build.sh $(IMAGES)

##@ Demo

.PHONY: demo
demo: ## Start a local simulated cluster, run the operator and the ChainerMN example to Succeeded.
	hack/demo.sh

.PHONY: demo-down
demo-down: ## Stop the demo's operator and cluster.
	hack/demo-down.sh

.PHONY: envtest-assets
envtest-assets: ## Build (once, cached) kube-apiserver and etcd for envtest.
	hack/controlplane/build.sh etcd kube-apiserver kubectl
	mkdir -p $(ENVTEST_ASSETS)
	ln -sf $(KUBE_BIN)/kube-apiserver $(ENVTEST_ASSETS)/kube-apiserver
	ln -sf $(TROUPE_CACHE)/etcd-$(ETCD_VERSION)/bin/etcd $(ENVTEST_ASSETS)/etcd
	ln -sf $(KUBE_BIN)/kubectl $(ENVTEST_ASSETS)/kubectl

##@ Tools (pinned in hack/versions.mk, built once into $(TOOLS_DIR))

$(CONTROLLER_GEN):
	hack/install-tool.sh $@ sigs.k8s.io/controller-tools/cmd/controller-gen@$(CONTROLLER_GEN_VERSION)

$(GOLANGCI_LINT):
	hack/install-tool.sh $@ github.com/golangci/golangci-lint/v2/cmd/golangci-lint@$(GOLANGCI_LINT_VERSION)

.PHONY: help
help: ## Show this help.
	@awk 'BEGIN {FS = ":.*##"} /^[a-zA-Z_-]+:.*?##/ { printf "  %-18s %s\n", $$1, $$2 } /^##@/ { printf "\n%s\n", substr($$0, 5) }' $(MAKEFILE_LIST)
