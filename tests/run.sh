#!/usr/bin/env bash
# Runs every test: the Rust unit and integration tests, then the end-to-end tests with real
# Kafka clients (confluent-kafka / librdkafka, kafka-python, kcat) and Apache Kafka's own tools
# against a real tern process.
set -euo pipefail
cd "$(dirname "$0")/.."
export TERN_CACHE="${TERN_CACHE:-$HOME/.cache/tern}"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$TERN_CACHE/target}"

echo "== cargo test (Tern's crates with overflow checks and debug assertions)"
# Optimised like release, but Tern's own crates check arithmetic overflow and debug_assert! as a
# debug build does, so input that would wrap a value fails a test instead of passing silently.
# The dependencies stay the release build's (RocksDB is not compiled a second time); the tern
# binary for the end-to-end tests below is the plain release build.
CHECKED=()
for crate in tern-protocol tern-storage tern-controller tern-replication tern-mirror tern-broker tern-bench; do
  CHECKED+=(--config "profile.release.package.$crate.overflow-checks=true"
            --config "profile.release.package.$crate.debug-assertions=true")
done
cargo test --workspace --release "${CHECKED[@]}" 2>&1 | tee "$TERN_CACHE/cargo-test.log"

echo "== fuzzing (each target 20 s; see README's Fuzzing)"
tests/fuzz.sh 20

echo "== building tern"
cargo build --release -p tern-broker --bin tern
export TERN_BIN="$CARGO_TARGET_DIR/release/tern"

echo "== python clients"
VENV="$TERN_CACHE/venv"
if [ ! -x "$VENV/bin/python" ]; then
  python3 -m venv "$VENV"
fi
"$VENV/bin/pip" install --quiet --disable-pip-version-check -r tests/e2e/requirements.txt

echo "== Apache Kafka's tools (jars from Maven Central, cached in \$TERN_CACHE/kafka)"
"$VENV/bin/python" tests/harness/kafka_peer.py fetch

echo "== end-to-end tests"
"$VENV/bin/python" -m pytest -q tests/e2e tests/soak/test_checker.py "$@"
