#!/bin/sh
# Builds librdkafka's `rdkafka_performance` (examples/rdkafka_performance.c) for bench/fetch_cpu/run.py,
# from the librdkafka source that the `rdkafka-sys` crate ships (the same librdkafka the Rust
# clients link), into $TERN_CACHE/librdkafka-src (TERN_CACHE defaults to ~/.cache/tern):
#
#     bench/fetch_cpu/build_rdkafka_perf.sh        -> $TERN_CACHE/librdkafka-src/examples/rdkafka_performance
#
# Needs cargo (only `cargo fetch`, in a scratch project under /tmp), a C compiler and make. zstd is
# required (Kafka sources in the mirror benchmark hold zstd batches): libzstd-dev is installed
# through apt-get when missing. zlib is used when zlib1g-dev is there; lz4 is librdkafka's
# built-in copy.  SSL and SASL are left out (the benchmark speaks PLAINTEXT on loopback).
set -eu
CACHE=${TERN_CACHE:-$HOME/.cache/tern}
DEST=$CACHE/librdkafka-src
SCRATCH=${RDK_SCRATCH:-/tmp/rdk-fetch}
RDKAFKA_SYS=${RDKAFKA_SYS:-4}

if [ -x "$DEST/examples/rdkafka_performance" ] && [ "${1:-}" != "--rebuild" ]; then
    echo "$DEST/examples/rdkafka_performance"
    exit 0
fi

if [ ! -f "$DEST/configure" ]; then
    mkdir -p "$SCRATCH/src"
    cat > "$SCRATCH/Cargo.toml" <<TOML
[package]
name = "rdk-fetch"
version = "0.1.0"
edition = "2021"

[dependencies]
rdkafka-sys = "$RDKAFKA_SYS"
TOML
    echo 'fn main() {}' > "$SCRATCH/src/main.rs"
    (cd "$SCRATCH" && cargo fetch)
    # the newest rdkafka-sys the fetch brought
    SRC=$(ls -d "${CARGO_HOME:-$HOME/.cargo}"/registry/src/*/rdkafka-sys-*/librdkafka | sort -V | tail -n 1)
    echo "librdkafka source: $SRC"
    mkdir -p "$CACHE"
    rm -rf "$DEST.partial"
    cp -r "$SRC" "$DEST.partial"
    mv "$DEST.partial" "$DEST"
fi

if ! dpkg -s libzstd-dev >/dev/null 2>&1; then
    SUDO=""
    [ "$(id -u)" = 0 ] || SUDO=sudo
    $SUDO apt-get install -y -qq libzstd-dev
fi

cd "$DEST"
./configure --disable-ssl --disable-gssapi --disable-curl --disable-syslog --enable-static
nice -n 10 make -j"$(nproc)" libs
nice -n 10 make -C examples rdkafka_performance
./examples/rdkafka_performance -h 2>&1 | head -n 3 || true
echo "$DEST/examples/rdkafka_performance"
