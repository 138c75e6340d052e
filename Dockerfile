# One image with both binaries; pick one with the container command:
#   docker run IMAGE                                       # iop-edge --config /etc/iop/edge.yaml
#   docker run IMAGE iop-node --config /etc/iop/node.yaml
# docker-compose.yml builds this image for its edge and node services.

# --- build: static binaries (no cgo), reproducible paths ------------------
FROM golang:1.26 AS build
WORKDIR /src
ENV CGO_ENABLED=0 GOOS=linux GOFLAGS=-trimpath
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod go mod download
COPY . .
RUN --mount=type=cache,target=/go/pkg/mod --mount=type=cache,target=/root/.cache/go-build \
    go build -ldflags="-s -w" -o /out/iop-edge ./cmd/iop-edge && \
    go build -ldflags="-s -w" -o /out/iop-node ./cmd/iop-node

# --- run: small base with busybox wget for the health check ---------------
FROM alpine:3.22
RUN apk add --no-cache ca-certificates tzdata && \
    addgroup -S -g 10001 iop && \
    adduser -S -D -H -u 10001 -G iop -h /var/lib/iop iop && \
    mkdir -p /var/lib/iop/node /var/lib/iop/workspaces /etc/iop && \
    chown -R iop:iop /var/lib/iop
COPY --from=build /out/iop-edge /out/iop-node /usr/local/bin/
COPY configs/compose/edge.yaml configs/compose/node.yaml /etc/iop/
WORKDIR /var/lib/iop
USER 10001:10001
# 8080: OpenAI API, /metrics, /healthz, /readyz, /admin; 7070: node wire.
EXPOSE 8080 7070
# The edge's liveness. A node has no HTTP port: compose disables this check
# for it (healthcheck: disable: true); IOP_HEALTHCHECK_URL overrides the URL.
HEALTHCHECK --interval=10s --timeout=3s --start-period=10s --retries=3 \
    CMD wget -q -O /dev/null "${IOP_HEALTHCHECK_URL:-http://127.0.0.1:8080/healthz}" || exit 1
CMD ["iop-edge", "--config", "/etc/iop/edge.yaml"]
