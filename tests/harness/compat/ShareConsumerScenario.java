// The share-consumer scenario of tests/e2e/test_compat.py, compiled at test time against
// kafka-clients 4.4: KafkaShareConsumers (KIP-932) reading one topic as a queue. Two consumers
// accept, release and reject records; released records come back once more, rejected ones
// never; a consumer that closes without acknowledging gives its records back to the next. It
// prints one deterministic line per observation; the test compares tern's lines with Apache
// Kafka 4.4's, except those starting with "info".
import java.time.Duration;
import java.util.*;
import java.util.concurrent.*;
import java.util.concurrent.atomic.AtomicBoolean;
import org.apache.kafka.clients.admin.*;
import org.apache.kafka.clients.consumer.*;
import org.apache.kafka.clients.producer.*;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

public class ShareConsumerScenario {
    static final int PER_PARTITION = 30, PARTITIONS = 3, TOTAL = PER_PARTITION * PARTITIONS;

    static KafkaShareConsumer<String, String> consumer(String bootstrap, String group, boolean explicit) {
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        p.put("group.id", group);
        p.put("key.deserializer", StringDeserializer.class.getName());
        p.put("value.deserializer", StringDeserializer.class.getName());
        p.put("share.acknowledgement.mode", explicit ? "explicit" : "implicit");
        return new KafkaShareConsumer<>(p);
    }

    static void produce(String bootstrap, String topic, int partition, int from, int to) throws Exception {
        Properties pp = new Properties();
        pp.put("bootstrap.servers", bootstrap);
        pp.put("key.serializer", StringSerializer.class.getName());
        pp.put("value.serializer", StringSerializer.class.getName());
        try (Producer<String, String> producer = new KafkaProducer<>(pp)) {
            for (int i = from; i < to; i++) {
                int p = partition >= 0 ? partition : i % PARTITIONS;
                producer.send(new ProducerRecord<>(topic, p, "k" + i, "v" + i));
            }
            producer.flush();
        }
    }

    static int index(ConsumerRecord<String, String> r) {
        return Integer.parseInt(r.value().substring(1));
    }

    static short count(ConsumerRecord<String, String> r) {
        return r.deliveryCount().orElse((short) -1);
    }

    static void offsets(Admin admin, String label, String group, String topic) throws Exception {
        ListShareGroupOffsetsSpec spec = new ListShareGroupOffsetsSpec();
        List<TopicPartition> tps = new ArrayList<>();
        for (int p = 0; p < PARTITIONS; p++) tps.add(new TopicPartition(topic, p));
        spec.topicPartitions(tps);
        Map<TopicPartition, SharePartitionOffsetInfo> m =
            admin.listShareGroupOffsets(Map.of(group, spec)).partitionsToOffsetInfo(group).get();
        TreeMap<String, String> lags = new TreeMap<>(), starts = new TreeMap<>();
        m.forEach((tp, info) -> {
            lags.put(tp.toString(), info == null ? "null" : info.lag().map(String::valueOf).orElse("-"));
            starts.put(tp.toString(), info == null ? "null" : String.valueOf(info.startOffset()));
        });
        System.out.println(label + " lags: " + lags);
        // Kafka 4.4 reports the start offset of its last persisted snapshot, which stays at the
        // first record settled out of order: not compared.
        System.out.println("info " + label + " start offsets: " + starts);
    }

    static void describe(Admin admin, String label, String group) throws Exception {
        ShareGroupDescription d = admin.describeShareGroups(List.of(group)).describedGroups().get(group).get();
        System.out.println(label + ": state=" + d.groupState() + " members=" + d.members().size());
    }

    public static void main(String[] args) throws Exception {
        String bootstrap = args[0], topic = args[1], group = topic + "-queue";
        Properties common = new Properties();
        common.put("bootstrap.servers", bootstrap);
        try (Admin admin = Admin.create(common)) {
            admin.createTopics(List.of(new NewTopic(topic, PARTITIONS, (short) 1))).all().get();
            produce(bootstrap, topic, -1, 0, TOTAL);
            // The group reads from the beginning (share.auto.offset.reset is latest).
            Map<TopicPartition, Long> earliest = new HashMap<>();
            for (int p = 0; p < PARTITIONS; p++) earliest.put(new TopicPartition(topic, p), 0L);
            admin.alterShareGroupOffsets(group, earliest).all().get();

            // Phase 1: two consumers; i % 10 == 3 rejected, i % 10 == 7 released once, the rest accepted.
            ConcurrentHashMap<Integer, List<Short>> deliveries = new ConcurrentHashMap<>();
            ConcurrentHashMap<Integer, Integer> accepted = new ConcurrentHashMap<>();
            AtomicBoolean stop = new AtomicBoolean(false);
            List<String> failures = Collections.synchronizedList(new ArrayList<>());
            ExecutorService pool = Executors.newFixedThreadPool(2);
            int expectedAccepted = TOTAL - TOTAL / 10;
            for (int c = 0; c < 2; c++) {
                pool.submit(() -> {
                    try (KafkaShareConsumer<String, String> consumer = consumer(bootstrap, group, true)) {
                        consumer.subscribe(List.of(topic));
                        while (!stop.get()) {
                            for (ConsumerRecord<String, String> r : consumer.poll(Duration.ofMillis(200))) {
                                int i = index(r);
                                deliveries.computeIfAbsent(i, k -> Collections.synchronizedList(new ArrayList<>()))
                                    .add(count(r));
                                if (i % 10 == 3) {
                                    consumer.acknowledge(r, AcknowledgeType.REJECT);
                                } else if (i % 10 == 7 && count(r) == 1) {
                                    consumer.acknowledge(r, AcknowledgeType.RELEASE);
                                } else {
                                    consumer.acknowledge(r, AcknowledgeType.ACCEPT);
                                    accepted.merge(i, 1, Integer::sum);
                                }
                            }
                            consumer.commitSync();
                        }
                    } catch (Exception e) {
                        failures.add(e.toString());
                    }
                });
            }
            long deadline = System.currentTimeMillis() + 60_000;
            while (accepted.size() < expectedAccepted && System.currentTimeMillis() < deadline) Thread.sleep(100);
            int deliveredBefore = deliveries.values().stream().mapToInt(List::size).sum();
            Thread.sleep(2_000); // nothing more may come
            int deliveredAfter = deliveries.values().stream().mapToInt(List::size).sum();
            stop.set(true);
            pool.shutdown();
            pool.awaitTermination(60, TimeUnit.SECONDS);
            System.out.println("phase1 failures: " + failures);
            System.out.println("phase1 accepted distinct=" + accepted.size() + " accepted twice="
                + accepted.values().stream().filter(n -> n > 1).count());
            long rejectedSeen = deliveries.entrySet().stream().filter(e -> e.getKey() % 10 == 3).count();
            long rejectedAgain = deliveries.entrySet().stream()
                .filter(e -> e.getKey() % 10 == 3 && e.getValue().size() > 1).count();
            System.out.println("phase1 rejected seen=" + rejectedSeen + " delivered again=" + rejectedAgain);
            long releasedTwice = deliveries.entrySet().stream()
                .filter(e -> e.getKey() % 10 == 7 && e.getValue().equals(List.of((short) 1, (short) 2))).count();
            System.out.println("phase1 released then delivered with count 2=" + releasedTwice);
            long others = deliveries.entrySet().stream()
                .filter(e -> e.getKey() % 10 != 7 && !e.getValue().equals(List.of((short) 1))).count();
            System.out.println("phase1 other records delivered more than once=" + others);
            System.out.println("phase1 deliveries after all were settled=" + (deliveredAfter - deliveredBefore));
            offsets(admin, "phase1", group, topic);
            describe(admin, "phase1 group after close", group);

            // Phase 2: a consumer takes records and closes without acknowledging them: the next
            // consumer gets them again, with delivery count 2.
            produce(bootstrap, topic, 0, TOTAL, TOTAL + 10);
            Set<Integer> taken = new TreeSet<>();
            try (KafkaShareConsumer<String, String> c = consumer(bootstrap, group, true)) {
                c.subscribe(List.of(topic));
                long until = System.currentTimeMillis() + 30_000;
                while (taken.isEmpty() && System.currentTimeMillis() < until) {
                    for (ConsumerRecord<String, String> r : c.poll(Duration.ofMillis(200))) taken.add(index(r));
                }
            }
            Map<Integer, Short> second = new TreeMap<>();
            try (KafkaShareConsumer<String, String> c = consumer(bootstrap, group, false)) {
                c.subscribe(List.of(topic));
                long until = System.currentTimeMillis() + 30_000;
                while (second.size() < 10 && System.currentTimeMillis() < until) {
                    for (ConsumerRecord<String, String> r : c.poll(Duration.ofMillis(200))) second.put(index(r), count(r));
                }
                c.commitSync();
            }
            boolean takenAgain = !taken.isEmpty() && taken.stream().allMatch(i -> second.get(i) != null && second.get(i) == 2);
            boolean restOnce = second.entrySet().stream().filter(e -> !taken.contains(e.getKey())).allMatch(e -> e.getValue() == 1);
            System.out.println("phase2 next consumer got all=" + (second.size() == 10)
                + " unacknowledged ones again with count 2=" + takenAgain + " others once=" + restOnce);
            offsets(admin, "phase2", group, topic);
        }
    }
}
