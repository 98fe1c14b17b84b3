import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.ExecutionException;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.ProducerState;
import org.apache.kafka.clients.admin.TransactionDescription;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerGroupMetadata;
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
 * Transactions through kafka-clients 4.4, which turns transaction version 2 (KIP-890 part 2) on
 * when the broker has it in force: partitions and offsets join a transaction through the writes,
 * and every commit or abort ends with a new producer epoch. Three transactions (commit with
 * offsets, abort, commit), a fenced zombie, then what readers, the admin client and the
 * partitions' producer state show. Prints one line per observation; producer ids (which differ
 * between clusters) are not printed.
 *
 * Usage: TransactionScenario <bootstrap> <topic>
 */
public class TransactionScenario {
    static String bootstrap;
    static String topic;

    public static void main(String[] args) throws Exception {
        bootstrap = args[0];
        topic = args[1];
        String txnId = topic + "-app";
        String group = topic + "-group";
        try (Admin admin = Admin.create(adminProps())) {
            admin.createTopics(List.of(new NewTopic(topic, 2, (short) 1),
                    new NewTopic(topic + "-in", 1, (short) 1))).all().get();
            try (KafkaProducer<String, String> producer = producer(txnId)) {
                producer.initTransactions();
                describe(admin, txnId, "after init");

                producer.beginTransaction();
                send(producer, 0, "c1-a");
                send(producer, 0, "c1-b");
                send(producer, 1, "c1-c");
                producer.sendOffsetsToTransaction(
                        Map.of(new TopicPartition(topic + "-in", 0), new OffsetAndMetadata(5)),
                        new ConsumerGroupMetadata(group));
                producer.commitTransaction();
                describe(admin, txnId, "after commit 1");

                producer.beginTransaction();
                send(producer, 0, "a2-a");
                send(producer, 1, "a2-b");
                producer.sendOffsetsToTransaction(
                        Map.of(new TopicPartition(topic + "-in", 0), new OffsetAndMetadata(9)),
                        new ConsumerGroupMetadata(group));
                producer.abortTransaction();
                describe(admin, txnId, "after abort 2");

                producer.beginTransaction();
                send(producer, 1, "c3-a");
                producer.commitTransaction();
                describe(admin, txnId, "after commit 3");

                // A second producer with the same id fences the first.
                producer.beginTransaction();
                send(producer, 0, "zombie-open");
                try (KafkaProducer<String, String> successor = producer(txnId)) {
                    successor.initTransactions();
                    describe(admin, txnId, "after successor init");
                    try {
                        producer.send(new ProducerRecord<>(topic, 0, "k", "zombie")).get();
                        producer.commitTransaction();
                        System.out.println("zombie commit: OK");
                    } catch (Exception e) {
                        System.out.println("zombie commit: " + rootName(e));
                    }
                    successor.beginTransaction();
                    send(successor, 0, "c4-a");
                    successor.commitTransaction();
                    describe(admin, txnId, "after successor commit");
                } catch (Exception e) {
                    System.out.println("successor: " + rootName(e));
                }
            } catch (Exception e) {
                System.out.println("producer closed: " + rootName(e));
            }
            System.out.println("committed offset: " + admin.listConsumerGroupOffsets(group)
                    .partitionsToOffsetAndMetadata().get()
                    .get(new TopicPartition(topic + "-in", 0)).offset());
            for (int p = 0; p < 2; p++) {
                TopicPartition tp = new TopicPartition(topic, p);
                for (ProducerState s : admin.describeProducers(List.of(tp)).partitionResult(tp).get()
                        .activeProducers()) {
                    System.out.println("partition " + p + " producer epoch " + s.producerEpoch()
                            + " open transaction from " + s.currentTransactionStartOffset());
                }
            }
        }
        read("read_committed");
        read("read_uncommitted");
    }

    static void send(KafkaProducer<String, String> producer, int partition, String value)
            throws ExecutionException, InterruptedException {
        long offset = producer.send(new ProducerRecord<>(topic, partition, "k", value)).get().offset();
        System.out.println("sent " + value + " to " + partition + " at " + offset);
    }

    /** The transaction's state once its markers are written, and its producer epoch. */
    static void describe(Admin admin, String txnId, String when) throws Exception {
        TransactionDescription d = null;
        for (int i = 0; i < 200; i++) {
            d = admin.describeTransactions(List.of(txnId)).description(txnId).get();
            String state = d.state().toString();
            if (!state.startsWith("Prepare")) {
                break;
            }
            Thread.sleep(50);
        }
        System.out.println(when + ": " + d.state() + " epoch " + d.producerEpoch()
                + " partitions " + d.topicPartitions().size());
    }

    static void read(String isolation) {
        Properties props = new Properties();
        props.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, isolation);
        props.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        props.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(props)) {
            List<TopicPartition> tps = List.of(new TopicPartition(topic, 0), new TopicPartition(topic, 1));
            consumer.assign(tps);
            consumer.seekToBeginning(tps);
            Map<TopicPartition, Long> ends = consumer.endOffsets(tps);
            List<String> seen = new ArrayList<>();
            long deadline = System.currentTimeMillis() + 30_000;
            while (System.currentTimeMillis() < deadline
                    && tps.stream().anyMatch(tp -> consumer.position(tp) < ends.get(tp))) {
                for (ConsumerRecord<String, String> r : consumer.poll(Duration.ofMillis(200))) {
                    seen.add(r.partition() + "@" + r.offset() + "=" + r.value());
                }
            }
            seen.sort(null);
            System.out.println(isolation + " ends " + ends.get(tps.get(0)) + "," + ends.get(tps.get(1))
                    + ": " + seen);
        }
    }

    static KafkaProducer<String, String> producer(String txnId) {
        Properties props = new Properties();
        props.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, txnId);
        props.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        props.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        return new KafkaProducer<>(props);
    }

    static Properties adminProps() {
        Properties props = new Properties();
        props.put("bootstrap.servers", bootstrap);
        return props;
    }

    static String rootName(Throwable e) {
        while (e.getCause() != null) {
            e = e.getCause();
        }
        return e.getClass().getSimpleName();
    }
}
