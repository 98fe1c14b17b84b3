#!/bin/sh
# `server` (the default) starts a broker reachable from other containers: it listens on every
# interface, advertises $TERN_ADVERTISED (host:port, default the container's host name on 9092),
# serves /metrics on 9644 and keeps its data in /var/lib/tern. Any other command runs tern as given
# (`mirrors --bootstrap-server ...`).
set -e
if [ "$1" = "server" ]; then
  shift
  exec tern server \
    --override "listeners=PLAINTEXT://0.0.0.0:9092" \
    --override "advertised.listeners=PLAINTEXT://${TERN_ADVERTISED:-$(hostname):9092}" \
    --override "http.listeners=http://0.0.0.0:9644" \
    --override "log.dirs=/var/lib/tern/data" \
    "$@"
fi
exec tern "$@"
