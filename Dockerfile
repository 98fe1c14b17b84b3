# syntax=docker/dockerfile:1
# Tern in a container: a multi-stage build, a small runtime image.
#   docker build -t tern .
#   docker run -p 9092:9092 -e TERN_ADVERTISED=localhost:9092 tern

FROM rust:1.95-bookworm AS build
# RocksDB (the controller's metadata log) is C++ built through bindgen, which needs libclang.
RUN apt-get update && apt-get install -y --no-install-recommends libclang-dev clang cmake \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY . .
# The caches keep the registry and the RocksDB build between image builds.
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/src/target \
    cargo build --release -p tern-broker --bin tern \
    && objcopy --strip-debug target/release/tern /usr/local/bin/tern

FROM debian:bookworm-slim
RUN apt-get update && apt-get install -y --no-install-recommends ca-certificates \
    && rm -rf /var/lib/apt/lists/* \
    && useradd --system --home /var/lib/tern --create-home tern
COPY --from=build /usr/local/bin/tern /usr/local/bin/tern
COPY demo/docker-entrypoint.sh /usr/local/bin/docker-entrypoint.sh
USER tern
VOLUME /var/lib/tern
EXPOSE 9092 9644
ENTRYPOINT ["/usr/local/bin/docker-entrypoint.sh"]
CMD ["server"]
