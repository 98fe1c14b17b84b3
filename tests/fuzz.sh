#!/usr/bin/env bash
# Builds every cargo-fuzz target under fuzz/ and runs each for a bounded time.
#
#   tests/fuzz.sh [SECONDS] [TARGET...]   each target (default: all) for SECONDS (default 15)
#   tests/fuzz.sh --seed [TARGET...]      rewrite fuzz/corpus/<target>/ from the targets' seeders
#                                         (crash inputs kept there as regression_* stay)
#
# The committed seeds (fuzz/corpus/<target>) are read; what a run adds goes to
# $TERN_CACHE/fuzz-corpus/<target>, outside the clone, and later runs start from it. A crash's
# input is written to fuzz/artifacts/<target>/ and the script exits non-zero after running the
# other targets. Builds go to $TERN_CACHE/fuzz-target: the first one compiles RocksDB (the
# broker and controller crates link it), later ones take seconds.
set -euo pipefail
cd "$(dirname "$0")/.."
export TERN_CACHE="${TERN_CACHE:-$HOME/.cache/tern}"
export CARGO_TARGET_DIR="$TERN_CACHE/fuzz-target"
# cargo fuzz hands rustc -Z flags (sanitizer, coverage): stable accepts them with
# RUSTC_BOOTSTRAP, so no nightly toolchain is needed.
export RUSTC_BOOTSTRAP=1
if command -v rustup >/dev/null 2>&1 && rustup toolchain list | grep -q '^stable'; then
  export RUSTUP_TOOLCHAIN=stable
fi
if ! cargo fuzz --version >/dev/null 2>&1; then
  cargo install cargo-fuzz --locked
fi
# The same flags for build and run, or `cargo fuzz run` rebuilds. Four codegen units: the
# broker crate in one unit takes minutes longer to build on two cores.
FLAGS=(--codegen-units 4)
TRIPLE="$(rustc -vV | sed -n 's/^host: //p')"
BIN_DIR="$CARGO_TARGET_DIR/$TRIPLE/release"

seed=0
if [ "${1:-}" = "--seed" ]; then
  seed=1
  shift
fi
SECS=15
if [ "$seed" = 0 ] && [[ "${1:-}" =~ ^[0-9]+$ ]]; then
  SECS="$1"
  shift
fi
if [ "$#" -gt 0 ]; then
  TARGETS=("$@")
else
  mapfile -t TARGETS < <(cargo fuzz list)
fi

echo "== building fuzz targets (${TARGETS[*]})"
nice -n 10 cargo fuzz build "${FLAGS[@]}"

if [ "$seed" = 1 ]; then
  for t in "${TARGETS[@]}"; do
    # Inputs that once crashed (regression_*) stay.
    mkdir -p "fuzz/corpus/$t"
    find "fuzz/corpus/$t" -type f ! -name 'regression_*' -delete
    TERN_FUZZ_WRITE_SEEDS="fuzz/corpus/$t" "$BIN_DIR/$t"
  done
  exit 0
fi

failed=()
for t in "${TARGETS[@]}"; do
  work="$TERN_CACHE/fuzz-corpus/$t"
  mkdir -p "$work" "fuzz/artifacts/$t"
  echo "== fuzz $t for ${SECS}s"
  # -timeout: an input that runs 10 s is a hang; -rss_limit_mb also bounds single mallocs.
  if ! nice -n 10 cargo fuzz run "${FLAGS[@]}" "$t" "$work" "fuzz/corpus/$t" -- \
    -max_total_time="$SECS" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
    2>&1 | grep -v -e '^#[0-9]*[[:space:]]*\(pulse\|NEW\|REDUCE\)' -e '^"' -e 'dictionary'; then
    failed+=("$t")
  fi
done
if [ "${#failed[@]}" -gt 0 ]; then
  echo "fuzz targets that crashed: ${failed[*]} (inputs under fuzz/artifacts/)" >&2
  exit 1
fi
echo "== fuzz: no crashes"
