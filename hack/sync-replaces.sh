#!/usr/bin/env bash
# Writes the k8s.io staging pins into every Berth go.mod and the tools module, so that
# `go mod tidy` works per module (it ignores go.work) and every module resolves the same graph.
set -euo pipefail
cd "$(dirname "$0")/.."
block() {
  echo "// BEGIN k8s pins (hack/sync-replaces.sh)"
  echo "replace ("
  for m in $(cat hack/k8s-replaces.txt); do printf '\t%s => %s v0.37.1\n' "$m" "$m"; done
  # load-watcher requires a 2019 genproto that still holds googleapis/{api,rpc}; those now live
  # in their own modules, and both copies in one build are an "ambiguous import".
  printf '\tgoogle.golang.org/genproto => google.golang.org/genproto v0.0.0-20260526163538-3dc84a4a5aaa\n'
  echo ")"
  echo "// END k8s pins"
}
for f in "$@"; do
  tmp=$(mktemp)
  awk '/^\/\/ BEGIN k8s pins/{skip=1} !skip{print} /^\/\/ END k8s pins/{skip=0}' "$f" > "$tmp"
  block >> "$tmp"
  mv "$tmp" "$f"
done
