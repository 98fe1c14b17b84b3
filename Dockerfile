# syntax=docker/dockerfile:1
# Tern in a container: built in a Rust image, run from a small Debian one.
#
#   docker build -t tern .
#   docker run -p 9092:9092 -p 9644:9644 tern          # clients on the host use localhost:9092
#   docker run tern mirrors --bootstrap-server HOST:9092 --list
#
# Any other advertised name: docker run tern server --config /etc/tern/server.properties
#   --override advertised.listeners=PLAINTEXT://NAME:9092   (docker-compose.yml does this)

FROM rust:1.95-bookworm AS build
# RocksDB (the controller's metadata log) is C++ compiled through bindgen, which needs libclang.
RUN apt-get update \
    && apt-get install -y --no-install-recommends libclang-dev clang cmake \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY . .
# The cache mounts keep downloaded crates and the RocksDB build between image builds. target/ is a
# cache mount, not part of the layer, so the binary is copied out in the same step; the release
# profile keeps debug info (hundreds of MB), which the image does not need.
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/src/target \
    cargo build --release -p tern-broker --bin tern \
    && objcopy --strip-debug target/release/tern /usr/local/bin/tern

FROM debian:bookworm-slim
RUN apt-get update \
    && apt-get install -y --no-install-recommends ca-certificates libstdc++6 \
    && rm -rf /var/lib/apt/lists/* \
    && useradd --system --uid 10001 --user-group --home-dir /var/lib/tern --shell /usr/sbin/nologin tern \
    && mkdir -p /var/lib/tern && chown tern:tern /var/lib/tern
COPY --from=build /usr/local/bin/tern /usr/local/bin/tern
# The defaults of `tern server` serve loopback only; in a container it must listen on every
# interface, and /metrics must be reachable for Prometheus. Overrides on the command line win.
COPY <<EOF /etc/tern/server.properties
listeners=PLAINTEXT://0.0.0.0:9092
advertised.listeners=PLAINTEXT://localhost:9092
http.listeners=http://0.0.0.0:9644
log.dirs=/var/lib/tern/data
EOF
USER tern
WORKDIR /var/lib/tern
VOLUME /var/lib/tern
EXPOSE 9092 9644
ENTRYPOINT ["tern"]
CMD ["server", "--config", "/etc/tern/server.properties"]
