// The compatibility scenario of tests/e2e/test_compat.py, compiled at test time against each
// kafka-clients version (so it keeps to API present from 2.1 to 4.x).  It prints one
// deterministic line per observation; the test compares the lines from tern and Apache Kafka.
import java.time.Duration;
import java.util.*;
import java.util.concurrent.ExecutionException;
import org.apache.kafka.clients.admin.*;
import org.apache.kafka.clients.consumer.*;
import org.apache.kafka.clients.producer.*;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.*;

public class CompatScenario {
    static String err(Throwable t) {
        while (t instanceof ExecutionException && t.getCause() != null) t = t.getCause();
        return t == null ? "OK" : t.getClass().getSimpleName();
    }

    static String outcome(org.apache.kafka.common.KafkaFuture<?> f) {
        try { f.get(); return "OK"; } catch (Exception e) { return err(e); }
    }

    // committed(Set) came in 2.4 and committed(TopicPartition) went in 4.0: whichever this has.
    @SuppressWarnings("unchecked")
    static OffsetAndMetadata committed(Consumer<?, ?> consumer, TopicPartition tp) throws Exception {
        try {
            java.lang.reflect.Method m = Consumer.class.getMethod("committed", Set.class);
            return ((Map<TopicPartition, OffsetAndMetadata>) m.invoke(consumer, Set.of(tp))).get(tp);
        } catch (NoSuchMethodException e) {
            return (OffsetAndMetadata) Consumer.class.getMethod("committed", TopicPartition.class).invoke(consumer, tp);
        }
    }

    public static void main(String[] args) throws Exception {
        String bootstrap = args[0], topic = args[1], group = topic + "-group";
        int partitions = 3, records = 1000;
        Properties common = new Properties();
        common.put("bootstrap.servers", bootstrap);
        try (AdminClient admin = AdminClient.create(common)) {
            NewTopic nt = new NewTopic(topic, partitions, (short) 1);
            System.out.println("create " + outcome(admin.createTopics(List.of(nt)).all()));
            System.out.println("create again " + outcome(admin.createTopics(List.of(nt)).all()));
            System.out.println("create bad partitions " + outcome(
                admin.createTopics(List.of(new NewTopic(topic + "-bad", 0, (short) 1))).all()));
            System.out.println("create bad replication " + outcome(
                admin.createTopics(List.of(new NewTopic(topic + "-rf", 1, (short) 3))).all()));
            System.out.println("delete missing " + outcome(admin.deleteTopics(List.of(topic + "-missing")).all()));
        }

        Properties pp = new Properties();
        pp.putAll(common);
        pp.put("acks", "all");
        pp.put("key.serializer", StringSerializer.class.getName());
        pp.put("value.serializer", StringSerializer.class.getName());
        TreeMap<Integer, long[]> produced = new TreeMap<>();  // partition -> {count, first, last}
        try (Producer<String, String> producer = new KafkaProducer<>(pp)) {
            List<java.util.concurrent.Future<RecordMetadata>> acks = new ArrayList<>();
            for (int i = 0; i < records; i++) {
                acks.add(producer.send(new ProducerRecord<>(topic, "key-" + i, "value-" + i)));
            }
            for (java.util.concurrent.Future<RecordMetadata> f : acks) {
                RecordMetadata md = f.get();
                long[] s = produced.computeIfAbsent(md.partition(), p -> new long[] {0, Long.MAX_VALUE, -1});
                s[0]++;
                s[1] = Math.min(s[1], md.offset());
                s[2] = Math.max(s[2], md.offset());
            }
        }
        produced.forEach((p, s) -> System.out.println(
            "produced partition " + p + " count " + s[0] + " offsets " + s[1] + ".." + s[2]));

        Properties cp = new Properties();
        cp.putAll(common);
        cp.put("group.id", group);
        cp.put("auto.offset.reset", "earliest");
        cp.put("enable.auto.commit", "false");
        cp.put("key.deserializer", StringDeserializer.class.getName());
        cp.put("value.deserializer", StringDeserializer.class.getName());
        TreeMap<Integer, List<String>> consumed = new TreeMap<>();
        int total = 0;
        try (Consumer<String, String> consumer = new KafkaConsumer<>(cp)) {
            consumer.subscribe(List.of(topic));
            long deadline = System.currentTimeMillis() + 60_000;
            while (total < records && System.currentTimeMillis() < deadline) {
                for (ConsumerRecord<String, String> r : consumer.poll(Duration.ofMillis(500))) {
                    consumed.computeIfAbsent(r.partition(), p -> new ArrayList<>())
                        .add(r.offset() + ":" + r.key() + "=" + r.value());
                    total++;
                }
            }
            System.out.println("assignment " + new TreeSet<>(consumer.assignment().stream()
                .map(TopicPartition::partition).collect(java.util.stream.Collectors.toList())));
            consumer.commitSync();
            Set<TopicPartition> tps = new HashSet<>();
            for (int p = 0; p < partitions; p++) tps.add(new TopicPartition(topic, p));
            for (int p = 0; p < partitions; p++) {
                OffsetAndMetadata om = committed(consumer, new TopicPartition(topic, p));
                System.out.println("consumer committed partition " + p + " " + (om == null ? "none" : om.offset()));
            }
            Map<TopicPartition, Long> end = consumer.endOffsets(tps);
            Map<TopicPartition, Long> begin = consumer.beginningOffsets(tps);
            for (int p = 0; p < partitions; p++) {
                TopicPartition tp = new TopicPartition(topic, p);
                System.out.println("offsets partition " + p + " begin " + begin.get(tp) + " end " + end.get(tp));
            }
        }
        System.out.println("consumed " + total);
        consumed.forEach((p, l) -> System.out.println("consumed partition " + p + " count " + l.size()
            + " first " + l.get(0) + " last " + l.get(l.size() - 1)
            + " digest " + Integer.toHexString(String.join(",", l).hashCode())));

        try (AdminClient admin = AdminClient.create(common)) {
            Map<TopicPartition, OffsetAndMetadata> offsets =
                admin.listConsumerGroupOffsets(group).partitionsToOffsetAndMetadata().get();
            new TreeMap<Integer, Long>() {{
                offsets.forEach((tp, om) -> put(tp.partition(), om.offset()));
            }}.forEach((p, o) -> System.out.println("admin committed partition " + p + " " + o));
            System.out.println("delete group while empty " + outcome(admin.deleteConsumerGroups(List.of(group)).all()));
            System.out.println("delete group again " + outcome(admin.deleteConsumerGroups(List.of(group)).all()));
        }
    }
}
