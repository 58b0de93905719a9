#!/usr/bin/env bash
# `make krew`: kubectl-berth as a krew plugin. Builds kubectl-berth for every platform krew
# users ask for (linux and darwin, amd64 and arm64), packs each into a .tar.gz archive, writes
# the krew manifest berth.yaml naming each archive's download URL and sha256, and validates the
# manifest with krew's own validator (validate-krew-manifest, built from this module).
# Everything goes into OUT (default bin/krew): build outputs are never committed.
#
# Environment: GO (go), OUT, VERSION (vMAJOR.MINOR.PATCH: krew wants semver), URL_BASE (where
# the archives will be downloaded from; the release page of VERSION by default).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT"
GO=${GO:-go}
OUT=${OUT:-$ROOT/bin/krew}
VERSION=${VERSION:-v0.1.0}
URL_BASE=${URL_BASE:-https://github.com/berth-sched/berth/releases/download/$VERSION}
PLATFORMS=(linux/amd64 linux/arm64 darwin/amd64 darwin/arm64)

# why: krew refuses a version that is not vMAJOR.MINOR.PATCH[-pre]; say so here, not as a
# validator error about a field the caller did not write.
if ! [[ $VERSION =~ ^v[0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.-]+)?$ ]]; then
  echo "krew: VERSION=$VERSION is not a semantic version like v0.1.0" >&2
  exit 1
fi

mkdir -p "$OUT"
(cd tools/krew && GOWORK=off CGO_ENABLED=0 "$GO" build -trimpath -o "$OUT/validate-krew-manifest" sigs.k8s.io/krew/cmd/validate-krew-manifest)

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
manifest=$work/berth.yaml
cat >"$manifest" <<YAML
apiVersion: krew.googlecontainertools.github.com/v1alpha2
kind: Plugin
metadata:
  name: berth
spec:
  version: $VERSION
  homepage: https://github.com/berth-sched/berth
  shortDescription: Ask Berth why pods landed where they did and how nodes really load
  description: |
    kubectl berth reads Berth's running scheduler, load watcher and node agents:
    explain pod NAME (why berth-scheduler placed a pod where it did), nodes (measured
    CPU and memory against requests, freshness, instance class and images per node),
    status (components, the scheduler's leader, the watcher's freshness, webhook and CRDs),
    and podconfig release. It uses your own credentials; the Berth chart ships the roles.
  platforms:
YAML
for p in "${PLATFORMS[@]}"; do
  os=${p%/*} arch=${p#*/}
  dir=$work/$os-$arch
  mkdir -p "$dir"
  echo "krew: building kubectl-berth for $os/$arch"
  GOOS=$os GOARCH=$arch CGO_ENABLED=0 "$GO" build -trimpath -ldflags "-s -w" -o "$dir/kubectl-berth" ./cmd/kubectl-berth
  archive=kubectl-berth_${VERSION}_${os}_${arch}.tar.gz
  # why: fixed owner, mode and time make the archive (and so its sha256) depend only on the
  # binary, so two runs on the same source give the same manifest.
  tar --sort=name --owner=0 --group=0 --numeric-owner --mtime=@0 -C "$dir" -cf - kubectl-berth | gzip -n >"$OUT/$archive"
  sum=$(sha256sum "$OUT/$archive" | cut -d' ' -f1)
  cat >>"$manifest" <<YAML
    - selector:
        matchLabels:
          os: $os
          arch: $arch
      uri: $URL_BASE/$archive
      sha256: $sum
      bin: kubectl-berth
      files:
        - from: kubectl-berth
          to: .
YAML
done

# why: -skip-install: krew's install check downloads every archive from its final URL, which
# exists only once the release is published; the structural checks (name, semver, selectors
# that match real platforms and do not overlap, sha256 form, files) all run here.
"$OUT/validate-krew-manifest" -manifest "$manifest" -skip-install
cp "$manifest" "$OUT/berth.yaml"
echo "krew: $OUT/berth.yaml (validated) and ${#PLATFORMS[@]} archives"
