# syntax=docker/dockerfile:1
#
# sluice's image: the dispatcher, the producer, the mock provider and a
# health check, as static binaries on a distroless base (no shell, no
# package manager), run as a non-root user.
#
#   docker build -t sluice:local .
#   docker run --rm -v "$PWD/sluice.yaml:/etc/sluice/sluice.yaml:ro" -p 127.0.0.1:9464:9464 sluice:local
#
# The image ships no configuration: mount one (metrics.listen 0.0.0.0:9464 to
# be scraped from outside the container). docker-compose.yml runs it all.
#
# The go build line is the one the tests in deploy/ run in CI (make test), so
# the binaries the image ships are built the same way the tests build them.
# -tags production leaves the demo (embedded Redis and NATS, charts) out of
# the dispatcher; deploy/production_test.go checks it stays out.

ARG GO_VERSION=1.26

FROM --platform=$BUILDPLATFORM golang:${GO_VERSION}-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod go mod download
COPY . .
# Set by BuildKit from --platform; cross-compiling needs no cgo toolchain.
ARG TARGETOS
ARG TARGETARCH
RUN --mount=type=cache,target=/go/pkg/mod --mount=type=cache,target=/root/.cache/go-build \
    GOOS=$TARGETOS GOARCH=$TARGETARCH CGO_ENABLED=0 go build -trimpath -tags production -o /out/ ./cmd/dispatcher ./cmd/producer ./cmd/mockprovider ./cmd/healthcheck

FROM gcr.io/distroless/static-debian12:nonroot AS runtime
COPY --from=build /out/ /usr/local/bin/
# distroless' "nonroot" user; numeric, so that runAsNonRoot checks can see it.
USER 65532:65532
WORKDIR /home/nonroot
# /metrics, /healthz, /readyz (metrics.listen must not be 127.0.0.1 for
# anything outside the container to reach it).
EXPOSE 9464
# Liveness: the process serves HTTP. /readyz (queue and Redis answer) is the
# better check where a failing one only marks the container, as in
# docker-compose.yml; an orchestrator that restarts unhealthy containers
# should use /healthz, so that a Redis outage does not restart every replica.
HEALTHCHECK --interval=10s --timeout=5s --start-period=15s --retries=3 \
    CMD ["/usr/local/bin/healthcheck", "http://127.0.0.1:9464/healthz"]
ENTRYPOINT ["/usr/local/bin/dispatcher"]
CMD ["--config", "/etc/sluice/sluice.yaml"]
