# syntax=docker/dockerfile:1
# The service image: quantd, quant-worker and quantctl on Debian 12.
#
#   docker build -t quant:dev .
#
# Stage "build" installs the toolchain with the project's own dependency
# script and builds the release configuration without tests or benchmarks;
# the runtime stage holds the three programs and only the shared libraries
# they load, and runs as an unprivileged user. deploy/compose.yaml and
# deploy/k8s/ choose the program with the container's command.
FROM debian:12 AS build
WORKDIR /src
COPY scripts/install_deps.sh scripts/install_deps.sh
RUN bash scripts/install_deps.sh && rm -rf /var/lib/apt/lists/*
COPY . .
# Fewer parallel compilers on a small builder: --build-arg QUANT_JOBS=2.
ARG QUANT_JOBS=
# The ccache cache survives between builds (BuildKit cache mount).
RUN --mount=type=cache,target=/root/.cache/ccache \
    bash scripts/build.sh release -DQUANT_BUILD_TESTS=OFF \
      -DQUANT_BUILD_BENCHMARKS=OFF \
 && mkdir -p /out \
 && strip --strip-debug -o /out/quantd build/server/quantd \
 && strip --strip-debug -o /out/quant-worker build/worker/quant-worker \
 && strip --strip-debug -o /out/quantctl build/client/quantctl

FROM debian:12-slim AS runtime
# The runtime packages of the -dev packages that install_deps.sh builds
# with (tests/deploy checks the list against ldd of the built programs).
RUN apt-get update \
 && apt-get install -y --no-install-recommends \
      ca-certificates \
      libabsl20220623 \
      libc-ares2 \
      libcivetweb1 \
      libgrpc++1.51 \
      libgrpc29 \
      libpcre2-8-0 \
      libprometheus-cpp-core1.0 \
      libprometheus-cpp-pull1.0 \
      libprotobuf32 \
      libre2-9 \
      libsqlite3-0 \
      libssl3 \
      libutf8proc2 \
      libyaml-0-2 \
      zlib1g \
 && rm -rf /var/lib/apt/lists/*
# A fixed numeric id, so that Kubernetes' runAsNonRoot can check it and
# volumes can be prepared for it (fsGroup 10001).
RUN groupadd --system --gid 10001 quant \
 && useradd --system --uid 10001 --gid 10001 --home-dir /var/lib/quantd \
      --shell /usr/sbin/nologin quant \
 && mkdir -p /var/lib/quantd /var/lib/quant/artifacts /models /data \
 && chown quant:quant /var/lib/quantd /var/lib/quant/artifacts
# (Docker fills a new named volume from the image's folder, ownership
# included, so the volumes in deploy/compose.yaml are writable by quant.)
COPY --from=build /out/quantd /usr/local/bin/quantd
COPY --from=build /out/quant-worker /usr/local/bin/quant-worker
COPY --from=build /out/quantctl /usr/local/bin/quantctl
COPY deploy/docker/healthcheck.sh /usr/local/bin/quant-healthcheck
# gRPC (quantd), /metrics of quantd, /metrics of a worker.
EXPOSE 50051 9464 9465
USER 10001:10001
WORKDIR /var/lib/quantd
# quantd's gRPC port by default; worker containers set QUANT_HEALTH_ADDR to
# their metrics port.
HEALTHCHECK --interval=30s --timeout=5s --start-period=20s --retries=3 \
  CMD ["/usr/local/bin/quant-healthcheck"]
CMD ["quantctl", "--help"]
