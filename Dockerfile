# Multi-stage image: build on Debian 12 with the project's own dependency
# script, then a small runtime image holding the programs, run as non-root.
FROM debian:12 AS build
WORKDIR /src
COPY scripts/install_deps.sh scripts/install_deps.sh
RUN bash scripts/install_deps.sh
COPY . .
RUN bash scripts/build.sh release -DQUANT_BUILD_TESTS=OFF \
      -DQUANT_BUILD_BENCHMARKS=OFF

FROM debian:12-slim
RUN apt-get update \
 && apt-get install -y --no-install-recommends \
      libgrpc++1.51 libprotobuf32 libabsl20220623 libssl3 libsqlite3-0 \
      libyaml-0-2 libpcre2-8-0 libutf8proc2 libprometheus-cpp-core1.0 \
      libprometheus-cpp-pull1.0 ca-certificates \
 && rm -rf /var/lib/apt/lists/* \
 && useradd --system --create-home --uid 10001 quant
COPY --from=build /src/build/client/quantctl /usr/local/bin/quantctl
USER quant
WORKDIR /home/quant
ENTRYPOINT ["/usr/local/bin/quantctl"]
CMD ["--help"]
