#!/usr/bin/env bash
# The DR drill on the docker-compose demo (docker-compose.yml): mirror, watch lag, verify, fail
# over, move the billing consumers to Tern, verify again, fail back. Run from the repository root
# after `docker compose up -d --build`. Without Docker, demo/dr_story.py tells the same story with
# real processes on loopback (and CI runs that one).
set -euo pipefail
cd "$(dirname "$0")/.."
tern() { docker compose exec -T tern tern "$@"; }
mirrors() { tern mirrors --bootstrap-server tern:9092 "$@"; }
step() { printf '\n== %s\n' "$*"; }

step "1. the mirror copies Kafka's orders topic; lag from Tern's /metrics"
until mirrors --describe --mirror dr >/dev/null 2>&1; do sleep 2; done
for _ in $(seq 1 60); do
  lag=$(curl -fs http://localhost:9644/metrics | awk '/^tern_mirror_partition_lag_records/ {s += $2} END {print s + 0}')
  echo "lag: ${lag} records"
  [ "$lag" -lt 1000 ] && break
  sleep 2
done
mirrors --describe --mirror dr

step "2. verify: Tern holds Kafka's batches byte for byte (the producer keeps writing)"
mirrors --verify --mirror dr || true

step "3. failover: stop the producer, then make orders writable on Tern"
docker compose stop producer
sleep 3
mirrors --stop --mirror dr --topics orders

step "4. the billing consumers move to Tern and resume at their synced offsets"
docker compose stop consumer
CONSUMER_BOOTSTRAP=tern:9092 docker compose up -d --no-deps consumer
sleep 10
docker compose logs --tail 5 consumer
docker compose exec -T kafka /opt/kafka/bin/kafka-consumer-groups.sh --bootstrap-server tern:9092 \
  --describe --group billing || true

step "5. the application writes to Tern now; verify shows where the two sides part"
PRODUCER_BOOTSTRAP=tern:9092 docker compose up -d --no-deps producer
sleep 5
mirrors --verify --mirror dr || echo "(exit $?: the sides differ from the failover offset on, as expected)"

step "6. fail back to Kafka (the drill ends): Tern drops what it took during the drill and mirrors again"
docker compose stop producer consumer
mirrors --start --mirror dr --topics orders
sleep 10
mirrors --describe --mirror dr
mirrors --verify --mirror dr
CONSUMER_BOOTSTRAP=kafka:9092 docker compose up -d --no-deps consumer
docker compose up -d --no-deps producer
echo "drill complete: Kafka is primary again, Tern mirrors it"
