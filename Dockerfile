# syntax=docker/dockerfile:1
# Berth's images for a normal build pipeline: one target per binary.
#   docker build --target berth-scheduler -t berth-scheduler .
# Not built in this repository's CI: these machines have no Docker engine. There, `make images`
# builds the same single-binary images offline with go-containerregistry (e2e/cmd/images).

FROM golang:1.26 AS build
WORKDIR /src
COPY . .
ARG K8S_LDFLAGS="-s -w -X k8s.io/component-base/version.gitVersion=v1.37.1 -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=37 -X k8s.io/component-base/version.gitTreeState=clean -X k8s.io/client-go/pkg/version.gitVersion=v1.37.1 -X k8s.io/client-go/pkg/version.gitMajor=1 -X k8s.io/client-go/pkg/version.gitMinor=37"
ENV CGO_ENABLED=0 GOOS=linux
RUN --mount=type=cache,target=/root/.cache/go-build --mount=type=cache,target=/go/pkg/mod \
    go build -trimpath -ldflags "$K8S_LDFLAGS" -o /out/berth-scheduler ./cmd/scheduler && \
    go build -trimpath -ldflags "-s -w" -o /out/berth-agent ./cmd/agent && \
    go build -trimpath -ldflags "-s -w" -o /out/berth-loadwatcher ./cmd/loadwatcher && \
    if ls cmd/operator/*.go >/dev/null 2>&1; then go build -trimpath -ldflags "-s -w" -o /out/berth-operator ./cmd/operator; \
    else touch /out/berth-operator; fi

FROM gcr.io/distroless/static-debian12:nonroot AS berth-scheduler
COPY --from=build /out/berth-scheduler /berth-scheduler
ENTRYPOINT ["/berth-scheduler"]

# The agent reads the node's cgroups and other users' /proc entries: it runs as root.
FROM gcr.io/distroless/static-debian12 AS berth-agent
COPY --from=build /out/berth-agent /berth-agent
USER 0:0
ENTRYPOINT ["/berth-agent"]

FROM gcr.io/distroless/static-debian12:nonroot AS berth-loadwatcher
COPY --from=build /out/berth-loadwatcher /berth-loadwatcher
ENTRYPOINT ["/berth-loadwatcher"]

FROM gcr.io/distroless/static-debian12:nonroot AS berth-operator
COPY --from=build /out/berth-operator /berth-operator
ENTRYPOINT ["/berth-operator"]

# Default target.
FROM berth-scheduler
