// ShareFetch and ShareAcknowledge v2 through kafka-clients 4.4 (tests/e2e/test_compat.py): a
// share consumer in record-limit acquire mode (KIP-1206, share.acquire.mode=record_limit) takes
// exactly max.poll.records records out of a batch of ten, renews the lock of one (KIP-1222,
// AcknowledgeType.RENEW), accepts one, releases one, and reads on until every record is
// accepted. It prints one line per poll and commit; the test compares tern's lines with Apache
// Kafka 4.4's.
import java.time.Duration;
import java.util.*;
import org.apache.kafka.clients.admin.*;
import org.apache.kafka.clients.consumer.*;
import org.apache.kafka.clients.producer.*;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.TopicIdPartition;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

public class ShareV2Scenario {
    public static void main(String[] args) throws Exception {
        String bootstrap = args[0], topic = args[1], group = topic + "-v2";
        TopicPartition tp = new TopicPartition(topic, 0);
        Properties common = new Properties();
        common.put("bootstrap.servers", bootstrap);
        try (Admin admin = Admin.create(common)) {
            admin.createTopics(List.of(new NewTopic(topic, 1, (short) 1))).all().get();
            Properties pp = new Properties();
            pp.putAll(common);
            pp.put("key.serializer", StringSerializer.class.getName());
            pp.put("value.serializer", StringSerializer.class.getName());
            pp.put("linger.ms", "1000");
            try (Producer<String, String> producer = new KafkaProducer<>(pp)) {
                for (int i = 0; i < 10; i++) producer.send(new ProducerRecord<>(topic, 0, "k", "v" + i));
                producer.flush();
            }
            admin.alterShareGroupOffsets(group, Map.of(tp, 0L)).all().get();

            Properties cp = new Properties();
            cp.putAll(common);
            cp.put("group.id", group);
            cp.put("key.deserializer", StringDeserializer.class.getName());
            cp.put("value.deserializer", StringDeserializer.class.getName());
            cp.put("share.acknowledgement.mode", "explicit");
            cp.put("share.acquire.mode", "record_limit");
            cp.put("max.poll.records", "3");
            Set<Long> accepted = new TreeSet<>();
            try (KafkaShareConsumer<String, String> consumer = new KafkaShareConsumer<>(cp)) {
                consumer.subscribe(List.of(topic));
                long deadline = System.currentTimeMillis() + 60_000;
                int round = 0;
                while (accepted.size() < 10 && System.currentTimeMillis() < deadline) {
                    ConsumerRecords<String, String> records = consumer.poll(Duration.ofMillis(500));
                    if (records.isEmpty()) continue;
                    round++;
                    List<String> seen = new ArrayList<>();
                    for (ConsumerRecord<String, String> r : records) {
                        seen.add(r.offset() + ":" + r.deliveryCount().orElse((short) -1));
                        if (round == 1 && r.offset() == 0) {
                            consumer.acknowledge(r, AcknowledgeType.RENEW);
                        } else if (round == 1 && r.offset() == 2) {
                            consumer.acknowledge(r, AcknowledgeType.RELEASE);
                        } else {
                            consumer.acknowledge(r, AcknowledgeType.ACCEPT);
                            accepted.add(r.offset());
                        }
                    }
                    Map<TopicIdPartition, Optional<KafkaException>> result = consumer.commitSync();
                    List<String> outcomes = new ArrayList<>();
                    result.forEach((p, e) -> outcomes.add(p.topicPartition() + "=" + e.map(x -> x.getClass().getSimpleName()).orElse("OK")));
                    System.out.println("poll " + round + ": " + seen + " commit " + outcomes);
                }
            }
            System.out.println("accepted " + accepted);
            SharePartitionOffsetInfo info = admin.listShareGroupOffsets(Map.of(group, new ListShareGroupOffsetsSpec()))
                .partitionsToOffsetInfo(group).get().get(tp);
            System.out.println("lag " + info.lag().map(String::valueOf).orElse("-"));
            // Kafka 4.4 reports its last persisted snapshot's start offset, which may lag behind: not compared.
            System.out.println("info start offset " + info.startOffset());
        }
    }
}
