#!/usr/bin/env bash
# Regenerates the API's deepcopy functions and CRD YAML with controller-gen, built from its own
# module (tools/controller-gen, outside go.work) so controller-tools' graph never mixes with Berth's.
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p bin
(cd tools/controller-gen && GOWORK=off CGO_ENABLED=0 go build -trimpath -o ../../bin/controller-gen sigs.k8s.io/controller-tools/cmd/controller-gen)
# The plugin table's three generated pieces (spec.plugins, the table's rows, the registry's
# factories) from the +berth:plugin markers on the args types; controller-gen then reads them.
(cd e2e && go run ./cmd/plugingen -root ..)
cd api
../bin/controller-gen object paths=./...
../bin/controller-gen crd paths=./... output:crd:artifacts:config=crds
# The chart follows the types: values.schema.json's scheduler.plugins (each plugin's args
# schema is the CRD's) and templates/_plugins.tpl (the plugin table's rows) from the CRD just
# generated; the CRD copy the chart ships too.
cd ..
cp api/crds/berth.dev_secondaryschedulers.yaml charts/berth/crds/
(cd e2e && go run ./cmd/chartschema -chart ../charts/berth -crd ../api/crds/berth.dev_secondaryschedulers.yaml)
