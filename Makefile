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

K8S_TOOLS := kube-apiserver kube-controller-manager kube-scheduler kubectl
TOOLS := $(addprefix $(BIN)/,etcd kwok $(K8S_TOOLS))
BERTH_BINS := $(addprefix $(BIN)/,berth-scheduler)
BERTH_SRC := $(shell find api pkg cmd -name '*.go' -o -name go.mod -o -name go.sum 2>/dev/null)

.PHONY: all tools build test test-unit test-e2e bench demo up down fmt vet clean

all: build

## tools: build the local cluster's control plane from source into bin/ (skipped when up to date)
tools: $(TOOLS)

$(addprefix $(BIN)/,$(K8S_TOOLS)): $(BIN)/%: tools/k8s/go.mod tools/k8s/go.sum
	@mkdir -p $(BIN)
	cd tools/k8s && GOWORK=off CGO_ENABLED=0 $(GO) build -trimpath -ldflags "$(K8S_LDFLAGS)" -o $@ k8s.io/kubernetes/cmd/$*

$(BIN)/etcd: tools/k8s/go.mod tools/k8s/go.sum
	@mkdir -p $(BIN)
	cd tools/k8s && GOWORK=off CGO_ENABLED=0 $(GO) build -trimpath -ldflags "-s -w" -o $@ go.etcd.io/etcd/server/v3

$(BIN)/kwok: tools/kwok/go.mod tools/kwok/go.sum
	@mkdir -p $(BIN)
	cd tools/kwok && GOWORK=off CGO_ENABLED=0 $(GO) build -trimpath -ldflags "-s -w" -o $@ sigs.k8s.io/kwok/cmd/kwok

## build: Berth's binaries
build: $(BERTH_BINS)

$(BIN)/berth-scheduler: $(BERTH_SRC)
	@mkdir -p $(BIN)
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags "$(K8S_LDFLAGS)" -o $@ ./cmd/scheduler
