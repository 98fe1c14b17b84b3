#!/bin/sh
# Regenerates the mirror RPC types (api keys 94..=105) of the vendored kafka-protocol crate from
# the schemas in protocol/schemas/mirror, with the crate's own generator (protocol_codegen).
#
#   tools/mirror-codegen/regenerate.sh <git dir of tychedelia/kafka-protocol-rs>
#
# The generator is taken at 66f7de6 (release 0.17 with the Rust 1.88 bump; the newest the
# snapshot held, its output has the shape of the vendored 0.18.0 files) and run with main.rs of
# this folder, which reads one folder of schemas instead of cloning Kafka's repository. The
# generated messages.rs then holds only the mirror APIs: splice.py adds them to the vendored
# messages.rs as it was before they were added (MESSAGES_BASE, a commit of this repository).
set -eu
KPR_GIT=${1:?usage: $0 <git dir of tychedelia/kafka-protocol-rs>}
REPO=$(git rev-parse --show-toplevel)
WORK=${WORK:-/tmp/tern-mirror-codegen}
MESSAGES_BASE=${MESSAGES_BASE:-7fa0e43}
VENDOR=$REPO/vendor/kafka-protocol/src

rm -rf "$WORK" && mkdir -p "$WORK/out"
git --git-dir="$KPR_GIT" archive 66f7de6 protocol_codegen | tar -x -C "$WORK"
cp "$REPO/tools/mirror-codegen/main.rs" "$WORK/protocol_codegen/src/main.rs"
sed -i '/^git2/d' "$WORK/protocol_codegen/Cargo.toml"
(cd "$WORK/protocol_codegen" && CARGO_TARGET_DIR="$WORK/target" cargo build --release)
"$WORK/target/release/protocol_codegen" "$REPO/protocol/schemas/mirror" "$WORK/out/messages"

rustfmt --edition 2021 "$WORK/out/messages.rs"
for f in "$WORK"/out/messages/*.rs; do
    rustfmt --edition 2021 "$f"
    # The generator links every message to Kafka's schema; these are Tern's.
    sed 's#^//! See the schema for this message \[here\](https://github.com/apache/kafka/blob/trunk/clients/src/main/resources/common/message/\([A-Za-z]*\.json\)).#//! Not a Kafka message: one of Tern'"'"'s mirror RPCs, generated from its schema `protocol/schemas/mirror/\1`.#' \
        "$f" > "$VENDOR/messages/$(basename "$f")"
done
git -C "$REPO" show "$MESSAGES_BASE:vendor/kafka-protocol/src/messages.rs" > "$VENDOR/messages.rs"
python3 "$REPO/tools/mirror-codegen/splice.py" "$WORK/out/messages.rs" "$VENDOR/messages.rs"
rustfmt --edition 2021 --check "$VENDOR/messages.rs" >/dev/null 2>&1 || true
echo "regenerated; check with: git diff --stat vendor/"
