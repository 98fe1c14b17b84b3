// The share-group admin scenario of tests/e2e/test_share_groups.py, compiled at test time against
// kafka-clients 4.4. It prints one deterministic line per observation (offsets, lags, states,
// error classes); the test compares the lines from tern and Apache Kafka 4.4.
import java.util.*;
import java.util.concurrent.ExecutionException;
import org.apache.kafka.clients.admin.*;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.*;
import org.apache.kafka.common.GroupType;
import org.apache.kafka.common.KafkaFuture;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringSerializer;

public class ShareGroupScenario {
    static String err(Throwable t) {
        while (t instanceof ExecutionException && t.getCause() != null) t = t.getCause();
        return t == null ? "OK" : t.getClass().getSimpleName();
    }

    static String outcome(KafkaFuture<?> f) {
        try { f.get(); return "OK"; } catch (Exception e) { return err(e); }
    }

    static void offsets(Admin admin, String label, String group, Collection<TopicPartition> only) {
        ListShareGroupOffsetsSpec spec = new ListShareGroupOffsetsSpec();
        if (only != null) spec.topicPartitions(only);
        try {
            Map<TopicPartition, SharePartitionOffsetInfo> m =
                admin.listShareGroupOffsets(Map.of(group, spec)).partitionsToOffsetInfo(group).get();
            TreeMap<String, String> sorted = new TreeMap<>();
            m.forEach((tp, info) -> sorted.put(tp.toString(), info == null ? "null"
                : info.startOffset() + " lag=" + info.lag().map(String::valueOf).orElse("-")));
            System.out.println(label + ": " + sorted);
        } catch (Exception e) {
            System.out.println(label + ": " + err(e));
        }
    }

    static void groups(Admin admin, String label, String prefix) throws Exception {
        TreeSet<String> seen = new TreeSet<>();
        for (GroupListing g : admin.listGroups(ListGroupsOptions.forShareGroups()).all().get()) {
            if (g.groupId().startsWith(prefix)) {
                seen.add(g.groupId() + " type=" + g.type().orElse(null) + " protocol=" + g.protocol()
                    + " state=" + g.groupState().orElse(null));
            }
        }
        System.out.println(label + ": " + seen);
    }

    public static void main(String[] args) throws Exception {
        String bootstrap = args[0], topic = args[1];
        String other = topic + "-other", group = topic + "-share", classic = topic + "-classic";
        Properties common = new Properties();
        common.put("bootstrap.servers", bootstrap);
        try (Admin admin = Admin.create(common)) {
            admin.createTopics(List.of(new NewTopic(topic, 3, (short) 1), new NewTopic(other, 1, (short) 1)))
                .all().get();
            Properties pp = new Properties();
            pp.putAll(common);
            pp.put("key.serializer", StringSerializer.class.getName());
            pp.put("value.serializer", StringSerializer.class.getName());
            try (Producer<String, String> producer = new KafkaProducer<>(pp)) {
                for (int i = 0; i < 10; i++) producer.send(new ProducerRecord<>(topic, 0, null, "r" + i));
                for (int i = 0; i < 4; i++) producer.send(new ProducerRecord<>(topic, 1, null, "s" + i));
                producer.flush();
            }
            TopicPartition p0 = new TopicPartition(topic, 0), p1 = new TopicPartition(topic, 1),
                p2 = new TopicPartition(topic, 2), o0 = new TopicPartition(other, 0);

            offsets(admin, "describe missing group", topic + "-missing", null);
            offsets(admin, "describe missing group's partitions", topic + "-missing", List.of(p0, o0));
            System.out.println("describeShareGroups missing: " + describe(admin, topic + "-missing"));

            AlterShareGroupOffsetsResult alter = admin.alterShareGroupOffsets(group, Map.of(p0, 3L, p1, 0L));
            System.out.println("alter new group: " + outcome(alter.all()));
            groups(admin, "share groups", topic);
            offsets(admin, "all offsets", group, null);
            offsets(admin, "some offsets", group, List.of(p0, p2, o0));
            System.out.println("describeShareGroups: " + describe(admin, group));

            alter = admin.alterShareGroupOffsets(group, Map.of(p0, 7L, o0, 0L));
            System.out.println("alter again: " + outcome(alter.partitionResult(p0)) + " " + outcome(alter.partitionResult(o0)));
            offsets(admin, "after alter", group, null);

            // Offsets Kafka takes as they are: past the end (no lag), and negative (no start offset).
            alter = admin.alterShareGroupOffsets(group, Map.of(p2, 1000L, p1, -5L));
            System.out.println("alter past the end and negative: " + outcome(alter.all()));
            offsets(admin, "after odd offsets", group, null);
            alter = admin.alterShareGroupOffsets(group, Map.of(p2, 0L, p1, 0L));
            System.out.println("alter back: " + outcome(alter.all()));

            alter = admin.alterShareGroupOffsets(group, Map.of(new TopicPartition(topic + "-nosuch", 0), 1L));
            System.out.println("alter unknown topic: " + outcome(alter.all()));
            alter = admin.alterShareGroupOffsets(group, Map.of(new TopicPartition(topic, 9), 1L));
            System.out.println("alter unknown partition: " + outcome(alter.all()));

            // A classic group, made by committing an offset: share operations refuse it.
            admin.alterConsumerGroupOffsets(classic, Map.of(p0, new OffsetAndMetadata(2))).all().get();
            alter = admin.alterShareGroupOffsets(classic, Map.of(p0, 1L));
            System.out.println("alter classic group: " + outcome(alter.all()));
            offsets(admin, "describe classic group", classic, null);
            offsets(admin, "describe classic group's partitions", classic, List.of(p0));
            System.out.println("describeShareGroups classic: " + describe(admin, classic));
            System.out.println("commit to share group: "
                + outcome(admin.alterConsumerGroupOffsets(group, Map.of(p0, new OffsetAndMetadata(1))).all()));
            System.out.println("describeConsumerGroups share group: "
                + outcome(admin.describeConsumerGroups(List.of(group)).all()));

            DeleteShareGroupOffsetsResult del = admin.deleteShareGroupOffsets(group, Set.of(other));
            System.out.println("delete offsets: " + outcome(del.topicResult(other)));
            del = admin.deleteShareGroupOffsets(group, Set.of(topic + "-nosuch"));
            System.out.println("delete offsets unknown topic: " + outcome(del.all()));
            del = admin.deleteShareGroupOffsets(topic + "-missing", Set.of(topic));
            System.out.println("delete offsets missing group: " + outcome(del.all()));
            offsets(admin, "after delete", group, null);

            System.out.println("delete missing group: "
                + outcome(admin.deleteShareGroups(List.of(topic + "-missing")).all()));
            System.out.println("delete classic group as share: "
                + outcome(admin.deleteShareGroups(List.of(classic)).all()));
            System.out.println("delete group: " + outcome(admin.deleteShareGroups(List.of(group)).all()));
            groups(admin, "share groups after delete", topic);
            offsets(admin, "offsets after delete", group, null);
        }
    }

    static String describe(Admin admin, String group) {
        try {
            ShareGroupDescription d = admin.describeShareGroups(List.of(group)).describedGroups().get(group).get();
            return "state=" + d.groupState() + " members=" + d.members().size();
        } catch (Exception e) {
            return err(e);
        }
    }
}
