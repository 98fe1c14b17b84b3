import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;

import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.PartitionInfo;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.ProducerFencedException;
import org.apache.kafka.common.errors.TimeoutException;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * A classic exactly-once read-process-write loop (tests/e2e/test_transactions_eos.py).
 *
 * <pre>
 * java -cp ... EosLoop BOOTSTRAP INPUT OUTPUT GROUP TRANSACTIONAL_ID TARGET MAX_SECONDS [options]
 *   --assign          assign all input partitions instead of subscribing (no rebalances)
 *   --delay-ms=N      sleep N ms inside every transaction, between the sends and the commit
 *   --max-poll=N      max.poll.records (default 20)
 * </pre>
 *
 * A read_committed consumer (no auto commit) polls the input topic; every non-empty poll batch is
 * one transaction: each record goes to the output topic's partition with the input record's
 * partition index, with the same key and the value "out-" + input value, then the consumed
 * offsets go into the transaction (sendOffsetsToTransaction with the consumer's group metadata)
 * and the transaction commits.  A commit that times out is retried (its outcome is unknown until
 * it answers).  On any other failure the transaction is aborted, or, when the producer cannot
 * abort (fatal state, unknown commit outcome), the producer is closed and a new one with the same
 * transactional.id is created (its initTransactions aborts whatever the old one left open), and
 * the consumer is rewound to the group's committed offsets: whatever was not committed is read
 * and processed again.  ProducerFencedException (another instance took over the transactional.id)
 * ends the program with exit code 2.
 *
 * The loop ends (exit 0) once the committed offsets add up to TARGET (the input's end offsets),
 * or with exit 3 after MAX_SECONDS.  Every line on stdout starts with a word the test parses:
 * BEGIN (a transaction starts), PROGRESS committed=C txns=T aborts=A producers=P (it committed),
 * ABORT ... (it failed), SYNC/REWIND committed=C (the offsets read back from the group),
 * NEWPRODUCER ..., DONE ..., FATAL ...
 */
public final class EosLoop {
    private final String bootstrap;
    private final String input;
    private final String output;
    private final String group;
    private final String transactionalId;
    private final long target;
    private final long deadline;
    private final boolean assign;
    private final int delayMs;
    private final int maxPoll;

    private final Map<TopicPartition, Long> committed = new HashMap<>();
    private KafkaConsumer<String, String> consumer;
    private KafkaProducer<String, String> producer;
    private long txns;
    private long aborts;
    private long producers;
    private long records;
    /** Set on every assignment: the committed offsets of the assigned partitions are read again. */
    private boolean resync = true;

    private EosLoop(String[] a) {
        bootstrap = a[0];
        input = a[1];
        output = a[2];
        group = a[3];
        transactionalId = a[4];
        target = Long.parseLong(a[5]);
        deadline = System.currentTimeMillis() + 1000L * Long.parseLong(a[6]);
        boolean asg = false;
        int delay = 0;
        int mp = 20;
        for (int i = 7; i < a.length; i++) {
            if (a[i].equals("--assign")) {
                asg = true;
            } else if (a[i].startsWith("--delay-ms=")) {
                delay = Integer.parseInt(a[i].substring("--delay-ms=".length()));
            } else if (a[i].startsWith("--max-poll=")) {
                mp = Integer.parseInt(a[i].substring("--max-poll=".length()));
            } else {
                throw new IllegalArgumentException("unknown option " + a[i]);
            }
        }
        assign = asg;
        delayMs = delay;
        maxPoll = mp;
    }

    static void log(String line) {
        System.out.println(line);
        System.out.flush();
    }

    static String describe(Throwable e) {
        StringBuilder sb = new StringBuilder(e.getClass().getSimpleName() + ": " + e.getMessage());
        for (Throwable c = e.getCause(); c != null && c != c.getCause(); c = c.getCause()) {
            sb.append(" <- ").append(c.getClass().getSimpleName()).append(": ").append(c.getMessage());
        }
        return sb.toString().replace('\n', ' ');
    }

    private KafkaConsumer<String, String> newConsumer() {
        Properties p = new Properties();
        p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        p.put(ConsumerConfig.CLIENT_ID_CONFIG, "eos-loop-consumer");
        p.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed");
        p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        p.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        p.put(ConsumerConfig.MAX_POLL_RECORDS_CONFIG, Integer.toString(maxPoll));
        p.put(ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG, "10000");
        p.put(ConsumerConfig.HEARTBEAT_INTERVAL_MS_CONFIG, "1000");
        p.put(ConsumerConfig.REQUEST_TIMEOUT_MS_CONFIG, "15000");
        p.put(ConsumerConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, "60000");
        p.put(ConsumerConfig.RECONNECT_BACKOFF_MAX_MS_CONFIG, "500");
        p.put(ConsumerConfig.RETRY_BACKOFF_MAX_MS_CONFIG, "500");
        p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        return new KafkaConsumer<>(p);
    }

    private KafkaProducer<String, String> newProducer() {
        Properties p = new Properties();
        p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ProducerConfig.CLIENT_ID_CONFIG, "eos-loop-producer-" + (producers + 1));
        p.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, transactionalId);
        p.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, "true");
        p.put(ProducerConfig.ACKS_CONFIG, "all");
        p.put(ProducerConfig.LINGER_MS_CONFIG, "5");
        p.put(ProducerConfig.MAX_BLOCK_MS_CONFIG, "60000");
        p.put(ProducerConfig.REQUEST_TIMEOUT_MS_CONFIG, "15000");
        p.put(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, "60000");
        p.put(ProducerConfig.TRANSACTION_TIMEOUT_CONFIG, "60000");
        p.put(ProducerConfig.RECONNECT_BACKOFF_MAX_MS_CONFIG, "500");
        p.put(ProducerConfig.RETRY_BACKOFF_MAX_MS_CONFIG, "500");
        p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        while (true) {
            checkDeadline();
            KafkaProducer<String, String> prod = new KafkaProducer<>(p);
            try {
                // A TimeoutException may be retried on the same producer; anything else: a new one.
                for (int attempt = 1; ; attempt++) {
                    try {
                        prod.initTransactions();
                        producers++;
                        log("NEWPRODUCER n=" + producers);
                        return prod;
                    } catch (TimeoutException e) {
                        log("INITRETRY attempt=" + attempt + " " + describe(e));
                        checkDeadline();
                    }
                }
            } catch (ProducerFencedException e) {
                log("FATAL initTransactions fenced: " + describe(e));
                System.exit(2);
            } catch (KafkaException e) {
                log("INITFAILED " + describe(e));
                prod.close(Duration.ZERO);
                sleep(500);
            }
        }
    }

    private void checkDeadline() {
        if (System.currentTimeMillis() > deadline) {
            log("FATAL deadline passed: committed=" + committedSum() + " of " + target);
            System.exit(3);
        }
    }

    private static void sleep(long ms) {
        try {
            Thread.sleep(ms);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }

    private long committedSum() {
        long s = 0;
        for (long v : committed.values()) {
            s += v;
        }
        return s;
    }

    /** Commits; a timed-out commit has an unknown outcome and is retried (the Java client's rule). */
    private void commit() {
        for (int attempt = 1; ; attempt++) {
            try {
                producer.commitTransaction();
                return;
            } catch (TimeoutException e) {
                log("COMMITRETRY attempt=" + attempt + " " + describe(e));
                if (attempt >= 4) {
                    throw e;
                }
            }
        }
    }

    /** Aborts the open transaction; false when this producer cannot (it must be replaced). */
    private boolean abort() {
        for (int attempt = 1; attempt <= 4; attempt++) {
            try {
                producer.abortTransaction();
                return true;
            } catch (ProducerFencedException e) {
                log("FATAL abort fenced: " + describe(e));
                System.exit(2);
            } catch (TimeoutException e) {
                log("ABORTRETRY attempt=" + attempt + " " + describe(e));
            } catch (KafkaException | IllegalStateException e) {
                log("ABORTFAILED " + describe(e));
                return false;
            }
        }
        return false;
    }

    /** Seeks every assigned partition to the group's committed offset (the beginning without one). */
    private void rewind() {
        for (int attempt = 1; ; attempt++) {
            checkDeadline();
            try {
                Set<TopicPartition> assigned = consumer.assignment();
                if (assigned.isEmpty()) {
                    return; // not in the group yet: the assignment starts at the committed offsets
                }
                Map<TopicPartition, OffsetAndMetadata> c = consumer.committed(assigned, Duration.ofSeconds(30));
                StringBuilder sb = new StringBuilder();
                for (TopicPartition tp : assigned) {
                    OffsetAndMetadata om = c.get(tp);
                    long off = om == null ? 0L : om.offset();
                    consumer.seek(tp, off);
                    committed.put(tp, off);
                    sb.append(' ').append(tp.partition()).append('=').append(off);
                }
                log("REWIND" + sb + " committed=" + committedSum());
                return;
            } catch (KafkaException e) {
                log("REWINDRETRY attempt=" + attempt + " " + describe(e));
                sleep(500);
            }
        }
    }

    /**
     * Reads the group's committed offsets of the assigned partitions into {@link #committed}
     * (without seeking: the consumer starts at them anyway), so that the sum this process
     * reports and stops at counts the partitions that an earlier process finished.
     */
    private void syncCommitted() {
        try {
            Set<TopicPartition> assigned = consumer.assignment();
            if (assigned.isEmpty()) {
                return;
            }
            Map<TopicPartition, OffsetAndMetadata> c = consumer.committed(assigned, Duration.ofSeconds(10));
            for (TopicPartition tp : assigned) {
                OffsetAndMetadata om = c.get(tp);
                committed.put(tp, om == null ? 0L : om.offset());
            }
            resync = false;
            log("SYNC committed=" + committedSum());
        } catch (KafkaException e) {
            log("SYNCFAILED " + describe(e));
        }
    }

    private void run() {
        consumer = newConsumer();
        if (assign) {
            List<TopicPartition> tps = new ArrayList<>();
            for (PartitionInfo pi : consumer.partitionsFor(input, Duration.ofSeconds(60))) {
                tps.add(new TopicPartition(input, pi.partition()));
            }
            consumer.assign(tps);
            log("ASSIGNED " + tps);
        } else {
            consumer.subscribe(List.of(input), new ConsumerRebalanceListener() {
                @Override
                public void onPartitionsRevoked(java.util.Collection<TopicPartition> tps) {
                    log("REVOKED " + tps);
                }

                @Override
                public void onPartitionsAssigned(java.util.Collection<TopicPartition> tps) {
                    log("ASSIGNED " + tps);
                    resync = true;
                }
            });
        }
        producer = newProducer();
        long idleSince = System.currentTimeMillis();
        while (true) {
            checkDeadline();
            ConsumerRecords<String, String> batch;
            try {
                batch = consumer.poll(Duration.ofMillis(500));
            } catch (KafkaException e) {
                log("POLLFAILED " + describe(e));
                sleep(200);
                continue;
            }
            if (batch.isEmpty()) {
                // Nothing more to read: are the committed offsets at the end of the input?
                if (System.currentTimeMillis() - idleSince > 2000) {
                    rewind();
                    idleSince = System.currentTimeMillis();
                }
                if (committedSum() >= target) {
                    break;
                }
                continue;
            }
            idleSince = System.currentTimeMillis();
            if (resync) {
                syncCommitted();
            }
            Map<TopicPartition, OffsetAndMetadata> offsets = new HashMap<>();
            log("BEGIN txn=" + (txns + 1) + " records=" + batch.count());
            try {
                producer.beginTransaction();
                for (TopicPartition tp : batch.partitions()) {
                    List<ConsumerRecord<String, String>> recs = batch.records(tp);
                    for (ConsumerRecord<String, String> r : recs) {
                        producer.send(new ProducerRecord<>(output, r.partition(), r.key(), "out-" + r.value()));
                    }
                    offsets.put(tp, new OffsetAndMetadata(recs.get(recs.size() - 1).offset() + 1));
                }
                if (delayMs > 0) {
                    sleep(delayMs);
                }
                producer.sendOffsetsToTransaction(offsets, consumer.groupMetadata());
                commit();
            } catch (ProducerFencedException e) {
                log("FATAL fenced: " + describe(e));
                System.exit(2);
            } catch (KafkaException | IllegalStateException e) {
                aborts++;
                log("ABORT records=" + batch.count() + " offsets=" + render(offsets) + " " + describe(e));
                if (!abort()) {
                    producer.close(Duration.ZERO);
                    producer = newProducer();
                }
                rewind();
                continue;
            }
            txns++;
            records += batch.count();
            for (Map.Entry<TopicPartition, OffsetAndMetadata> e : offsets.entrySet()) {
                committed.put(e.getKey(), e.getValue().offset());
            }
            log("PROGRESS committed=" + committedSum() + " txns=" + txns + " aborts=" + aborts
                    + " producers=" + producers + " records=" + records + " offsets=" + render(offsets));
            if (committedSum() >= target) {
                break;
            }
        }
        log("DONE committed=" + committedSum() + " txns=" + txns + " aborts=" + aborts + " producers=" + producers
                + " records=" + records);
        producer.close(Duration.ofSeconds(10));
        consumer.close();
    }

    private static String render(Map<TopicPartition, OffsetAndMetadata> offsets) {
        StringBuilder sb = new StringBuilder("{");
        offsets.entrySet().stream()
                .sorted((a, b) -> Integer.compare(a.getKey().partition(), b.getKey().partition()))
                .forEach(e -> sb.append(sb.length() > 1 ? "," : "").append(e.getKey().partition()).append(':')
                        .append(e.getValue().offset()));
        return sb.append('}').toString();
    }

    public static void main(String[] args) {
        if (args.length < 7) {
            System.err.println("usage: EosLoop BOOTSTRAP INPUT OUTPUT GROUP TRANSACTIONAL_ID TARGET MAX_SECONDS"
                    + " [--assign] [--delay-ms=N] [--max-poll=N]");
            System.exit(64);
        }
        new EosLoop(args).run();
        System.exit(0);
    }
}
