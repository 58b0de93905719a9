#!/usr/bin/env bash
# Regenerates the API's deepcopy functions and CRD YAML with controller-gen, built from its own
# module (tools/controller-gen, outside go.work) so controller-tools' graph never mixes with Berth's.
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p bin
(cd tools/controller-gen && GOWORK=off CGO_ENABLED=0 go build -trimpath -o ../../bin/controller-gen sigs.k8s.io/controller-tools/cmd/controller-gen)
cd api
../bin/controller-gen object paths=./...
../bin/controller-gen crd paths=./... output:crd:artifacts:config=crds
