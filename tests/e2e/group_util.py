"""What the consumer-group tests share: a topic, and a confluent-kafka group member of either
protocol."""

from confluent_kafka import Consumer
from confluent_kafka.admin import AdminClient, NewTopic


def create_topic(bootstrap, name, partitions):
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, partitions, 1)])[name].result(timeout=30)


def consumer(bootstrap, group, protocol="classic", **extra):
    """A confluent-kafka consumer of the classic group protocol, or of KIP-848's (`consumer`:
    the broker sets session and heartbeat timing then, so the client may not)."""
    conf = {
        "bootstrap.servers": bootstrap,
        "group.id": group,
        "auto.offset.reset": "earliest",
        "enable.auto.commit": False,
    }
    if protocol == "consumer":
        conf["group.protocol"] = "consumer"
    else:
        conf.update({"session.timeout.ms": 6000, "heartbeat.interval.ms": 500})
    conf.update(extra)
    return Consumer(conf)
