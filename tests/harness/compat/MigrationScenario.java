import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.ConsumerGroupDescription;
import org.apache.kafka.clients.admin.MemberDescription;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * A consumer group migrating between protocols with members in it (KIP-848's online migration),
 * through kafka-clients 4.4. A classic member (group.protocol=classic, the range protocol) owns a
 * four-partition topic; a member of the consumer protocol joins, which upgrades the group to a
 * consumer group, and the two split the partitions; the consumer-protocol member leaves, which
 * downgrades the group to a classic one, and the classic member takes everything back; it
 * leaves too. Both commit after every poll. Prints one line per observation: assignment sizes,
 * the group's type, state, assignor and members as the admin client describes them, records
 * read (each exactly once) and the committed offsets.
 *
 * Usage: MigrationScenario <bootstrap> <topic>
 */
public class MigrationScenario {
    static String bootstrap;
    static String topic;
    static String group;
    static final Map<String, Integer> seen = new HashMap<>();

    public static void main(String[] args) throws Exception {
        bootstrap = args[0];
        topic = args[1];
        group = topic + "-group";
        try (Admin admin = Admin.create(props())) {
            admin.createTopics(List.of(new NewTopic(topic, 4, (short) 1))).all().get();
            produce(0, 400);
            try (KafkaConsumer<String, String> classic = consumer("classic", "classic")) {
                classic.subscribe(List.of(topic), listener(classic));
                pollUntil(List.of(classic), () -> classic.assignment().size() == 4 && seen.size() >= 100);
                System.out.println("alone: classic owns " + classic.assignment().size());
                describe(admin, "alone");

                try (KafkaConsumer<String, String> modern = consumer("modern", "consumer")) {
                    modern.subscribe(List.of(topic), listener(modern));
                    pollUntil(List.of(classic, modern), () -> classic.assignment().size() == 2
                            && modern.assignment().size() == 2);
                    Set<TopicPartition> both = new TreeSet<>(MigrationScenario::compare);
                    both.addAll(classic.assignment());
                    both.addAll(modern.assignment());
                    System.out.println("mixed: classic owns 2, consumer owns 2, distinct " + both.size());
                    describe(admin, "mixed");
                    pollUntil(List.of(classic, modern), () -> seen.size() >= 400);
                    System.out.println("mixed: read " + seen.size());
                }
                pollUntil(List.of(classic), () -> classic.assignment().size() == 4);
                System.out.println("after the consumer member left: classic owns " + classic.assignment().size());
                describe(admin, "downgraded");
                produce(400, 100);
                pollUntil(List.of(classic), () -> seen.size() >= 500);
            }
            describe(admin, "all left");
            long twice = seen.values().stream().filter(n -> n > 1).count();
            System.out.println("records read " + seen.size() + ", more than once " + twice);
            Map<TopicPartition, OffsetAndMetadata> committed =
                    admin.listConsumerGroupOffsets(group).partitionsToOffsetAndMetadata().get();
            Map<Integer, Long> byPartition = new TreeMap<>();
            committed.forEach((tp, om) -> byPartition.put(tp.partition(), om.offset()));
            System.out.println("committed " + byPartition);
        }
    }

    static int compare(TopicPartition a, TopicPartition b) {
        return Integer.compare(a.partition(), b.partition());
    }

    interface Condition {
        boolean holds();
    }

    /** Polls every consumer in turn, committing what each read, until the condition holds. */
    static void pollUntil(List<KafkaConsumer<String, String>> consumers, Condition done) {
        long deadline = System.currentTimeMillis() + 90_000;
        while (!done.holds()) {
            if (System.currentTimeMillis() > deadline) {
                throw new IllegalStateException("timed out; read " + seen.size());
            }
            for (KafkaConsumer<String, String> c : consumers) {
                for (ConsumerRecord<String, String> r : c.poll(Duration.ofMillis(100))) {
                    seen.merge(r.value(), 1, Integer::sum);
                }
                c.commitSync();
            }
        }
    }

    static ConsumerRebalanceListener listener(KafkaConsumer<String, String> c) {
        return new ConsumerRebalanceListener() {
            @Override
            public void onPartitionsRevoked(Collection<TopicPartition> partitions) {
                // Everything read was committed after the poll that read it.
            }

            @Override
            public void onPartitionsAssigned(Collection<TopicPartition> partitions) {
            }

            @Override
            public void onPartitionsLost(Collection<TopicPartition> partitions) {
            }
        };
    }

    static void describe(Admin admin, String when) throws Exception {
        ConsumerGroupDescription d = admin.describeConsumerGroups(List.of(group))
                .describedGroups().get(group).get();
        List<String> members = new ArrayList<>();
        for (MemberDescription m : d.members()) {
            members.add(m.clientId() + " upgraded=" + m.upgraded().map(String::valueOf).orElse("-")
                    + " partitions=" + m.assignment().topicPartitions().size());
        }
        members.sort(null);
        System.out.println(when + ": type " + d.type() + " state " + d.groupState()
                + " assignor " + d.partitionAssignor() + " members " + members);
    }

    static void produce(int from, int count) throws Exception {
        Properties p = props();
        p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(p)) {
            for (int i = from; i < from + count; i++) {
                producer.send(new ProducerRecord<>(topic, i % 4, "k" + i, "v" + i)).get();
            }
        }
    }

    static KafkaConsumer<String, String> consumer(String clientId, String protocol) {
        Properties p = props();
        p.put(ConsumerConfig.CLIENT_ID_CONFIG, clientId);
        p.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        p.put("group.protocol", protocol);
        if (protocol.equals("classic")) {
            p.put(ConsumerConfig.HEARTBEAT_INTERVAL_MS_CONFIG, "500");
            p.put(ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG, "10000");
        }
        p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        p.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        p.put(ConsumerConfig.MAX_POLL_RECORDS_CONFIG, "20");
        p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        return new KafkaConsumer<>(p);
    }

    static Properties props() {
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        return p;
    }
}
