# Berth. `make demo` runs the main job on a local cluster; `make test` runs every test tier.
SHELL := /usr/bin/env bash
.SHELLFLAGS := -eu -o pipefail -c
ROOT := $(CURDIR)
BIN := $(ROOT)/bin
export BERTH_BIN_DIR := $(BIN)
GO ?= go

K8S_VERSION := v1.37.1
# Plain `go build` stamps k8s binaries as v0.0.0-master; helm's kubeVersion checks and node
# versions need the real one.
K8S_LDFLAGS := -s -w \
  -X k8s.io/component-base/version.gitVersion=$(K8S_VERSION) \
  -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=37 \
  -X k8s.io/component-base/version.gitTreeState=clean \
  -X k8s.io/client-go/pkg/version.gitVersion=$(K8S_VERSION) \
  -X k8s.io/client-go/pkg/version.gitMajor=1 -X k8s.io/client-go/pkg/version.gitMinor=37

K8S_TOOLS := kube-apiserver kube-controller-manager kube-scheduler kubectl kubelet kube-proxy
TOOLS := $(addprefix $(BIN)/,etcd kwok helm karpenter $(K8S_TOOLS))
BERTH_BINS := $(addprefix $(BIN)/,berth-scheduler berth-agent berth-loadwatcher $(if $(wildcard cmd/operator/*.go),berth-operator) kubectl-berth)
HARNESS_BINS := $(addprefix $(BIN)/,berth-local schedbench)
BERTH_SRC := $(shell find api pkg cmd -name '*.go' -o -name go.mod -o -name go.sum 2>/dev/null)
E2E_SRC := $(shell find e2e -name '*.go' -o -name go.mod -o -name go.sum 2>/dev/null)
# Packages whose tests need no cluster; the e2e module's tests run the real binaries.
UNIT_PKGS := ./pkg/... $(patsubst %,./%/...,$(wildcard cmd/*))
E2E_PKGS := ./e2e/...
GO_TEST_FLAGS ?=
# Real nodes `make up` and `make demo` start where root and the packages allow (1 to 8).
REAL_NODES ?= 3
# AUTOSCALER=karpenter: `make up` also runs Karpenter's KWOK provider with NodePools for the
# chart's default isolation pool and a plain autoscaled pool (e2e/cmd/berth-local).
AUTOSCALER ?=

.PHONY: all tools build images push kind-load krew generate seccomp-data lint-chart preflight test test-unit test-e2e verify bench bench-scale bench-exs bench-agent bench-images bench-isolation bench-placement bench-autoscale demo up down fmt clean fuzz

all: build

## tools: build the local cluster's control plane from source into bin/ (skipped when up to date)
tools: $(TOOLS)

$(addprefix $(BIN)/,$(K8S_TOOLS)): $(BIN)/%: tools/k8s/go.mod tools/k8s/go.sum
	@mkdir -p $(BIN)
	cd tools/k8s && GOWORK=off CGO_ENABLED=0 $(GO) build -trimpath -ldflags "$(K8S_LDFLAGS)" -o $@ k8s.io/kubernetes/cmd/$*

$(BIN)/etcd: tools/k8s/go.mod tools/k8s/go.sum
	@mkdir -p $(BIN)
	cd tools/k8s && GOWORK=off CGO_ENABLED=0 $(GO) build -trimpath -ldflags "-s -w" -o $@ go.etcd.io/etcd/server/v3

HELM_VERSION := v3.22.0
# Without the k8s version, helm assumes Kubernetes v1.20 and refuses the chart's kubeVersion.
HELM_LDFLAGS := -s -w -X helm.sh/helm/v3/internal/version.version=$(HELM_VERSION) \
  -X helm.sh/helm/v3/internal/version.gitTreeState=clean \
  -X helm.sh/helm/v3/pkg/lint/rules.k8sVersionMajor=1 -X helm.sh/helm/v3/pkg/lint/rules.k8sVersionMinor=37 \
  -X helm.sh/helm/v3/pkg/chartutil.k8sVersionMajor=1 -X helm.sh/helm/v3/pkg/chartutil.k8sVersionMinor=37

$(BIN)/helm: tools/helm/go.mod tools/helm/go.sum
	@mkdir -p $(BIN)
	cd tools/helm && GOWORK=off CGO_ENABLED=0 $(GO) build -trimpath -ldflags "$(HELM_LDFLAGS)" -o $@ helm.sh/helm/v3/cmd/helm

$(BIN)/kwok: tools/kwok/go.mod tools/kwok/go.sum
	@mkdir -p $(BIN)
	cd tools/kwok && GOWORK=off CGO_ENABLED=0 $(GO) build -trimpath -ldflags "-s -w" -o $@ sigs.k8s.io/kwok/cmd/kwok

# Karpenter's KWOK provider: a complete Karpenter whose "cloud" creates nodes the cluster's KWOK
# simulates (`make up AUTOSCALER=karpenter`, the autoscale suite). Its CRDs come from the same
# module version and are copied beside it: the e2e module cannot import karpenter (its k8s.io
# versions differ), so e2e/cluster applies them from bin/karpenter-crds.
$(BIN)/karpenter: tools/karpenter/go.mod tools/karpenter/go.sum
	@mkdir -p $(BIN) $(BIN)/karpenter-crds
	cd tools/karpenter && GOWORK=off CGO_ENABLED=0 $(GO) build -trimpath -ldflags "-s -w" -o $@ sigs.k8s.io/karpenter/kwok
	cd tools/karpenter && dir=$$(GOWORK=off $(GO) list -m -f '{{.Dir}}' sigs.k8s.io/karpenter) && \
	  rm -f $(BIN)/karpenter-crds/*.yaml && \
	  install -m 0644 $$dir/pkg/apis/crds/karpenter.sh_*.yaml $$dir/kwok/apis/crds/karpenter.kwok.sh_*.yaml $(BIN)/karpenter-crds/

## build: Berth's binaries
build: $(BERTH_BINS)

$(BIN)/berth-scheduler: $(BERTH_SRC)
	@mkdir -p $(BIN)
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags "$(K8S_LDFLAGS)" -o $@ ./cmd/scheduler

# berth-scheduler with three no-op Score plugins (pkg/scheduler/registry/benchfloor.go): make
# bench measures what three more Score plugins cost in the framework alone.
$(BIN)/berth-scheduler-floor: $(BERTH_SRC)
	@mkdir -p $(BIN)
	CGO_ENABLED=0 $(GO) build -trimpath -tags berthbenchfloor -ldflags "$(K8S_LDFLAGS)" -o $@ ./cmd/scheduler

$(BIN)/berth-agent: $(BERTH_SRC)
	@mkdir -p $(BIN)
	CGO_ENABLED=0 $(GO) build -trimpath -o $@ ./cmd/agent

$(BIN)/berth-loadwatcher: $(BERTH_SRC)
	@mkdir -p $(BIN)
	CGO_ENABLED=0 $(GO) build -trimpath -o $@ ./cmd/loadwatcher

$(BIN)/berth-operator: $(BERTH_SRC)
	@mkdir -p $(BIN)
	CGO_ENABLED=0 $(GO) build -trimpath -o $@ ./cmd/operator

# The kubectl plugin (`kubectl berth explain pod NAME`): put it on PATH to use it from kubectl.
$(BIN)/kubectl-berth: $(BERTH_SRC)
	@mkdir -p $(BIN)
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags "-s -w" -o $@ ./cmd/kubectl-berth

## krew: kubectl-berth as a krew plugin: archives for linux and darwin, amd64 and arm64, and the
## manifest bin/krew/berth.yaml with their sha256, validated by krew's own validator (built from
## tools/krew, outside go.work). KREW_VERSION (semver) and KREW_URL_BASE (where the archives will
## be published) name the release.
KREW_VERSION ?= v0.1.0
KREW_URL_BASE ?=
krew: $(BIN)/krew/berth.yaml

$(BIN)/krew/berth.yaml: $(BERTH_SRC) tools/krew/go.mod tools/krew/go.sum tools/krew/krew.sh
	GO=$(GO) OUT=$(BIN)/krew VERSION=$(KREW_VERSION) $(if $(KREW_URL_BASE),URL_BASE=$(KREW_URL_BASE)) tools/krew/krew.sh

$(BIN)/berth-local: $(E2E_SRC) $(BERTH_SRC)
	@mkdir -p $(BIN)
	$(GO) build -o $@ ./e2e/cmd/berth-local

$(BIN)/schedbench: $(E2E_SRC) $(BERTH_SRC)
	@mkdir -p $(BIN)
	$(GO) build -o $@ ./e2e/bench/cmd/schedbench

## images: Berth's binaries as OCI image tarballs in bin/images/ (no Docker, no registry)
images: $(BIN)/images/.stamp

$(BIN)/images/.stamp: $(BERTH_SRC) $(shell find e2e/images e2e/cmd/images -name '*.go') tools/coredns/go.mod tools/coredns/go.sum tools/coredns/main.go
	$(GO) run ./e2e/cmd/images -v
	@touch $@

## push: every Berth image for linux/amd64 and linux/arm64 (CGO_ENABLED=0 GOARCH=…) as one OCI
## index each, to REGISTRY=host[:port]/path as <REGISTRY>/<name>:<TAG>; credentials from the
## Docker config (docker login). Then: helm install … --set global.image.registry=$(REGISTRY)
## --set global.image.tag=$(TAG)
REGISTRY ?=
TAG ?= dev
push:
	@if [ -z "$(REGISTRY)" ]; then echo "make push: set REGISTRY=host[:port]/path, e.g. make push REGISTRY=ghcr.io/you/berth TAG=v0.1.0" >&2; exit 2; fi
	$(GO) run ./e2e/cmd/push -registry "$(REGISTRY)" -tag "$(TAG)" -v

## kind-load: load Berth's image tarballs (this machine's architecture) into the kind cluster
## KIND_CLUSTER (default kind); the chart's default image names then resolve on its nodes
KIND_CLUSTER ?= kind
kind-load: images
	@command -v kind >/dev/null || { echo "make kind-load: kind is not on PATH (https://kind.sigs.k8s.io); or run: kind load image-archive bin/images/<name>.tar" >&2; exit 1; }
	for f in $(BIN)/images/berth-*.tar; do kind load image-archive "$$f" --name "$(KIND_CLUSTER)"; done

## generate: API deepcopy functions and CRD YAML (api/crds) with controller-gen
generate:
	hack/generate.sh

## seccomp-data: SySched's RuntimeDefault set from containerd's default seccomp profile (tools/seccompdefault, its own module; output committed)
seccomp-data:
	cd tools/seccompdefault && GOWORK=off $(GO) run . ../../pkg/scheduler/plugins/sysched/profiles/runtimedefault/containerd.json ../../pkg/scheduler/plugins/sysched/profiles/runtimedefault/syscalls.json

## demo: start the local cluster, run every scenario, print where pods went, stop
demo: tools build images $(HARNESS_BINS)
	$(BIN)/berth-local demo -real-nodes $(REAL_NODES)

## up / down: keep a local cluster running under a supervisor (REAL_NODES real nodes with Berth's
## images as root with the packages, else simulated nodes); up prints the helm install line, down stops it
up: tools build images $(HARNESS_BINS)
	$(BIN)/berth-local up -real-nodes $(REAL_NODES) $(if $(AUTOSCALER),-autoscaler $(AUTOSCALER))

down: $(BIN)/berth-local
	$(BIN)/berth-local down

## preflight: root, the real node's packages and Prometheus present, or ONE message with the
## apt-get line (BERTH_SKIP_REAL_NODE=1: run what can run, naming the suites left out)
preflight:
	@hack/preflight.sh

## test: formatting, unit tests (race detector), then end-to-end tests on the local cluster
test: preflight verify fuzz tools build images krew
	$(GO) test -race -count=1 $(GO_TEST_FLAGS) $(UNIT_PKGS)
	GO=$(GO) GO_TEST_FLAGS="$(GO_TEST_FLAGS)" hack/e2e.sh

test-unit:
	$(GO) test -race -count=1 $(GO_TEST_FLAGS) $(UNIT_PKGS)

test-e2e: preflight tools build images krew
	GO=$(GO) GO_TEST_FLAGS="$(GO_TEST_FLAGS)" hack/e2e.sh

## fuzz: every fuzz target of untrusted input (seed corpora in testdata/fuzz/<Fuzz...>; a crash
## is written there and fails the run: commit it, it becomes a regression test). Budgets are
## execution counts (about 5-15 s each here), not durations: with a duration, Go 1.26's fuzz
## coordinator can fail a clean run with "context deadline exceeded" when a worker is mid-input
## at the deadline (golang/go#75804, fixed in Go 1.27). FUZZTIME=30s (or 1000x) overrides all.
FUZZTIME ?=
FUZZ_TARGETS := \
	FuzzDecodeReport:./pkg/loadwatcher:20000x \
	FuzzTargetLoadPackingArgs:./pkg/scheduler/plugins/targetloadpacking:20000x \
	FuzzLoadVariationRiskBalancingArgs:./pkg/scheduler/plugins/loadvariationriskbalancing:20000x \
	FuzzSySchedArgs:./pkg/scheduler/plugins/sysched:20000x \
	FuzzParseProfile:./pkg/scheduler/plugins/sysched/profiles:200000x \
	FuzzParseBinding:./pkg/scheduler/plugins/sysched/profiles:200000x \
	FuzzRender:./pkg/scheduler/schedconfig:20000x \
	FuzzNodeImageLocalityArgs:./pkg/scheduler/plugins/imagelocality:20000x \
	FuzzParseNodeImages:./pkg/scheduler/plugins/imagelocality:20000x \
	FuzzAdmit:./pkg/isolation/webhook:20000x
fuzz:
	@set -e; for t in $(FUZZ_TARGETS); do \
		name=$${t%%:*}; rest=$${t#*:}; pkg=$${rest%%:*}; budget=$(if $(FUZZTIME),$(FUZZTIME),$${rest#*:}); \
		echo "fuzz $$name in $$pkg for $$budget"; \
		$(GO) test -run '^$$' -fuzz "^$$name\$$" -fuzztime $$budget $$pkg; \
	done

## verify: gofmt, go vet, and no build outputs or huge files tracked in git
verify:
	@out=$$(gofmt -l pkg cmd e2e tools api); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	hack/check-tracked.sh
	$(GO) vet $(UNIT_PKGS) $(E2E_PKGS)
	$(GO) vet -tags berthbenchfloor ./pkg/scheduler/registry

## bench: scheduling throughput, berth-scheduler's profiles vs stock kube-scheduler and the floor
## (default plugins + three no-op Score plugins) (NODES, PODS, ROUNDS)
NODES ?= 500
PODS ?= 2000
ROUNDS ?= 3
bench: tools build $(BIN)/schedbench $(BIN)/berth-scheduler-floor
	$(BIN)/schedbench -nodes $(NODES) -pods $(PODS) -rounds $(ROUNDS) -v

## bench-scale: berth-scheduler's full Berth profile vs its default plugins at 5000 nodes and
## 10 000 pods, load from the real berth-loadwatcher serving every node; pods/s, CPU/pod, peak
## RSS of scheduler and watcher, every pod bound exactly once; then the same table at 1000 nodes
## (SCALE_NODES, SCALE_PODS, SCALE_SMALL_NODES, SCALE_SMALL_PODS, SCALE_ROUNDS; e2e/bench/README.md)
SCALE_NODES ?= 5000
SCALE_PODS ?= 10000
SCALE_SMALL_NODES ?= 1000
SCALE_SMALL_PODS ?= 2000
SCALE_ROUNDS ?= 1
bench-scale: tools build
	$(GO) run ./e2e/bench/cmd/scalebench -nodes $(SCALE_NODES) -pods $(SCALE_PODS) -rounds $(SCALE_ROUNDS) -v
	$(GO) run ./e2e/bench/cmd/scalebench -nodes $(SCALE_SMALL_NODES) -pods $(SCALE_SMALL_PODS) -rounds 3 -v

## lint-chart: helm lint of charts/berth
lint-chart: $(BIN)/helm
	$(BIN)/helm lint --strict charts/berth

## bench-exs: workload ExS (KEP-399's ExS over the workload's pods, DaemonSet pods excluded), SySched vs the default plugins
bench-exs: tools build
	$(GO) run ./e2e/bench/exs/cmd/exsbench -nodes 20 -pods 200 -profiles 10 -v

## bench-images: NodeImageLocality's figures: share of pods placed on a node holding their image
## (stock vs berth, 20 nodes, 10 images, 500 pods), then throughput with it vs the default
## plugins at 1000 nodes (IMAGE_NODES, IMAGE_PODS, ROUNDS)
IMAGE_NODES ?= 1000
IMAGE_PODS ?= 2000
bench-images: tools build $(BIN)/schedbench
	$(GO) run ./e2e/bench/imageshare/cmd/imagesharebench -nodes 20 -images 10 -pods 500 -weights 1,5
	$(BIN)/schedbench -nodes $(IMAGE_NODES) -pods $(IMAGE_PODS) -rounds $(ROUNDS) -profiles 'default plugins,NodeImageLocality' -v

## bench-isolation: instance-class isolation throughput on the same pods: stock kube-scheduler with
## IPP's anti-affinity (cluster-wide) vs InstanceIsolation (berth mode), the isolated profile (both
## mode) and no class (ISO_NODES, ISO_PODS, ISO_CLASSES, ROUNDS)
ISO_NODES ?= 1000
ISO_PODS ?= 2000
ISO_CLASSES ?= 50
bench-isolation: tools build
	$(GO) run ./e2e/bench/cmd/isolationbench -nodes $(ISO_NODES) -pods $(ISO_PODS) -classes $(ISO_CLASSES) -rounds $(ROUNDS) -v

## bench-autoscale: instance classes arriving at once on an empty Karpenter pool: time to all
## Running, NodeClaims, scheduler and Karpenter CPU per pod, for mode berth with the marker,
## both and ipp (stock scheduler); a fresh cluster per arm and round (issue 37)
AUTOSCALE_CLASSES ?= 20
AUTOSCALE_PODS ?= 2
AUTOSCALE_ROUNDS ?= 3
bench-autoscale: tools build
	cd e2e && $(GO) test ./suites/autoscale/ -run '^$$' -bench BenchmarkAutoscale -benchtime 1x -timeout 120m \
		-autoscale.classes $(AUTOSCALE_CLASSES) -autoscale.pods $(AUTOSCALE_PODS) -autoscale.rounds $(AUTOSCALE_ROUNDS)

## bench-agent: the node agent's RSS and CPU over 60 s at 1 s sampling
bench-agent: build
	$(GO) run ./e2e/bench/agentres/cmd/agentbench

## bench-placement: placement quality on simulated real load (agents → load watcher → scheduler):
## the realistic table (load levels 25/40/60 % × seeds × default scheduler and the chart's pack and
## balance presets, then a 200-pod burst, on a timeline scaled by PLACEMENT_TIME_SCALE);
## PLACEMENT_QUICK=1 for one seed on 30 nodes; PLACEMENT_SINGLE=1 for the first version's single
## workload (PLACEMENT_NODES, PLACEMENT_PODS, PLACEMENT_SEED, PLACEMENT_SCALE); e2e/bench/placement/README.md
PLACEMENT_NODES ?= 50
PLACEMENT_PODS ?= 600
PLACEMENT_SEED ?= 1
PLACEMENT_SEEDS ?= 1,2,3
PLACEMENT_SCALE ?= 1
PLACEMENT_TIME_SCALE ?= 0.0666667
PLACEMENT_RUNS ?=
PLACEMENT_QUICK ?=
PLACEMENT_SINGLE ?=
bench-placement: tools build
	$(GO) run ./e2e/bench/placement/cmd/placementbench -nodes $(PLACEMENT_NODES) -pods $(PLACEMENT_PODS) \
		$(if $(PLACEMENT_SINGLE),-single -seed $(PLACEMENT_SEED) -pod-scale $(PLACEMENT_SCALE),-seeds $(PLACEMENT_SEEDS) -time-scale $(PLACEMENT_TIME_SCALE)) \
		$(if $(PLACEMENT_QUICK),-quick) $(if $(PLACEMENT_RUNS),-runs $(PLACEMENT_RUNS)) -v
	@# The load-shift phase: hot-spot relief off, dry-run, on (e2e/bench/placement/relief.go); PLACEMENT_RELIEF=0 skips it.
	$(if $(filter 0,$(PLACEMENT_RELIEF)),,$(GO) run ./e2e/bench/placement/cmd/reliefbench -seed $(PLACEMENT_SEED) -v)

fmt:
	gofmt -w api pkg cmd e2e tools

clean:
	rm -rf $(BIN) .cache
