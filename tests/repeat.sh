#!/bin/sh
# Runs the same end-to-end tests N times in a row and stops at the first failure (issue 18: the
# test command passes every time).  Outputs of each run go to $TERN_CACHE/repeat/<n>.log.
#   tests/repeat.sh 20 tests/e2e/test_kafka_python_suite.py
# Uses TERN_BIN and the venv as tests/run.sh leaves them (build first with tests/run.sh or cargo).
set -u
n=${1:?usage: tests/repeat.sh <times> <pytest args...>}
shift
cache=${TERN_CACHE:-$HOME/.cache/tern}
out="$cache/repeat"
rm -rf "$out" && mkdir -p "$out"
python=${PYTHON:-$cache/venv/bin/python}
i=1
while [ "$i" -le "$n" ]; do
    start=$(date +%s)
    if "$python" -m pytest -q "$@" > "$out/$i.log" 2>&1; then
        echo "run $i/$n passed in $(( $(date +%s) - start ))s"
    else
        echo "run $i/$n FAILED after $(( $(date +%s) - start ))s (output: $out/$i.log)"
        tail -5 "$out/$i.log"
        exit 1
    fi
    if [ -f "$cache/kafka-python-suite/summary.txt" ]; then
        cp "$cache/kafka-python-suite/summary.txt" "$out/$i.summary.txt"
    fi
    i=$((i + 1))
done
echo "$n runs in a row passed"
