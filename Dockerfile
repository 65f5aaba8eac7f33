# troupe-operator and troupe-agent for a plain `docker build` (no root, no Debian tools), one
# target each; the images are laid out as hack/images/build.sh lays out its own (the static binary
# at /, CA certificates, /etc/passwd and /etc/group with nonroot, user 65532:65532), so the chart,
# config/ and deploy/ run either. From the repository's root:
#
#   docker build --target troupe-operator --build-arg REVISION=$(git rev-parse HEAD) -t REGISTRY/troupe-operator:TAG .
#   docker build --target troupe-agent    --build-arg REVISION=$(git rev-parse HEAD) -t REGISTRY/troupe-agent:TAG .
#
# Build arguments:
#   GO_IMAGE       the Go toolchain the binaries are built with (Debian based: it also gives the
#                  CA certificates the images carry)
#   RUNTIME_IMAGE  what the images are built on; scratch: they hold nothing but what is copied in
#   VERSION        the version stamped into the binaries; default VERSION of hack/versions.mk
#   REVISION       the git revision stamped into them (.git is not in the build context);
#                  default "unknown"
# The base images are pinned by tag; pinning them by digest is a later hardening.
# RUN --mount needs BuildKit (docker's default builder), buildah or podman. The build stage runs
# on the builder's own platform and cross-compiles, so `docker buildx build --platform
# linux/amd64,linux/arm64` needs no emulation.
ARG GO_IMAGE=docker.io/library/golang:1.26.8-bookworm
ARG RUNTIME_IMAGE=scratch

FROM --platform=${BUILDPLATFORM} ${GO_IMAGE} AS build
WORKDIR /src
# Static binaries (the images have no libc), built as hack/images/build.sh builds them. The module
# and build caches live at fixed paths, whatever the Go image's own GOPATH, so the cache mounts
# below find them.
ENV CGO_ENABLED=0 GOWORK=off GOFLAGS="-trimpath -buildvcs=false" \
    GOMODCACHE=/go/pkg/mod GOCACHE=/root/.cache/go-build
# The modules first: a change of source alone reuses this step.
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod go mod download
COPY . .
ARG TARGETOS
ARG TARGETARCH
ENV GOOS=${TARGETOS} GOARCH=${TARGETARCH}
ARG VERSION=
ARG REVISION=
RUN version=${VERSION:-$(sed -n 's/^VERSION ?= *//p' hack/versions.mk)} && \
    hack/version-ldflags.sh "$version" "$REVISION" >/ldflags

# One binary per target: a target builds and links only its own.
FROM build AS build-agent
RUN --mount=type=cache,target=/go/pkg/mod --mount=type=cache,target=/root/.cache/go-build \
    go build -ldflags "-s -w $(cat /ldflags)" -o /out/ ./cmd/troupe-agent

FROM build AS build-operator
RUN --mount=type=cache,target=/go/pkg/mod --mount=type=cache,target=/root/.cache/go-build \
    go build -ldflags "-s -w $(cat /ldflags)" -o /out/ ./cmd/troupe-operator

FROM ${RUNTIME_IMAGE} AS troupe-agent
COPY images/passwd images/group /etc/
COPY --from=build /etc/ssl/certs/ca-certificates.crt /etc/ssl/certs/ca-certificates.crt
COPY --from=build-agent /out/troupe-agent /troupe-agent
USER 65532:65532
ENTRYPOINT ["/troupe-agent"]

# The last stage: what `docker build` without --target builds.
FROM ${RUNTIME_IMAGE} AS troupe-operator
COPY images/passwd images/group /etc/
COPY --from=build /etc/ssl/certs/ca-certificates.crt /etc/ssl/certs/ca-certificates.crt
COPY --from=build-operator /out/troupe-operator /troupe-operator
USER 65532:65532
ENTRYPOINT ["/troupe-operator"]
