// Record-batch fixtures for tern-protocol, made and checked with Apache Kafka's Java client.
//
//   gen     write kafka_java/<name>.bin (batches built by MemoryRecordsBuilder with Kafka's own
//           codecs: snappy-java, lz4-java, zstd-jni, java.util.zip) and <name>.expected (the
//           records that were appended); Rust tests decode them (protocol/tests/fixtures.rs).
//   verify  decode tern_built/<name>.bin (from our RecordBatchBuilder) with MemoryRecords,
//           validate each batch's CRC and compare every record with tern_built/<name>.expected.
//
// Setup (any directory): a pom.xml depending on org.apache.kafka:kafka-clients:4.3.1, then
//   mvn dependency:copy-dependencies -DoutputDirectory=lib
// Run from protocol/testdata:
//   java -cp 'LIB/*' KafkaInterop.java gen|verify
// The .expected notation is the one of gen_fixtures.py.

import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.List;
import java.util.StringJoiner;
import java.util.TreeMap;
import org.apache.kafka.common.compress.Compression;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.header.internals.RecordHeader;
import org.apache.kafka.common.record.TimestampType;
import org.apache.kafka.common.record.internal.ControlRecordType;
import org.apache.kafka.common.record.internal.EndTransactionMarker;
import org.apache.kafka.common.record.internal.MemoryRecords;
import org.apache.kafka.common.record.internal.MemoryRecordsBuilder;
import org.apache.kafka.common.record.internal.MutableRecordBatch;
import org.apache.kafka.common.record.internal.Record;
import org.apache.kafka.common.record.internal.RecordBatch;
import org.apache.kafka.common.utils.Crc32C;

public class KafkaInterop {
    record In(long offset, long ts, byte[] key, byte[] value, Header[] headers) {}

    static final byte[] BIG = "tern-mirror keeps offsets ".repeat(100).getBytes(StandardCharsets.UTF_8);
    static final long BASE_OFFSET = 3000;
    static final int LEADER_EPOCH = 11;
    static final long LOG_APPEND_TIME = 1700000009999L;

    static String hex(byte[] b) {
        if (b == null) return "null";
        if (b.length > 64) return String.format("#%d:%08x", b.length, Crc32C.compute(b, 0, b.length));
        StringBuilder sb = new StringBuilder();
        for (byte x : b) sb.append(String.format("%02x", x & 0xff));
        return sb.toString();
    }

    static byte[] bytes(ByteBuffer bb) {
        if (bb == null) return null;
        byte[] a = new byte[bb.remaining()];
        bb.duplicate().get(a);
        return a;
    }

    static byte[] utf8(String s) {
        return s.getBytes(StandardCharsets.UTF_8);
    }

    static String headerLine(ByteBuffer b) {
        return String.format("header base_offset=%d partition_leader_epoch=%d attributes=%d last_offset_delta=%d"
                + " base_timestamp=%d max_timestamp=%d producer_id=%d producer_epoch=%d base_sequence=%d"
                + " records_count=%d\n", b.getLong(0), b.getInt(12), b.getShort(21), b.getInt(23),
                b.getLong(27), b.getLong(35), b.getLong(43), b.getShort(51), b.getInt(53), b.getInt(57));
    }

    static String recordLine(long offset, long ts, byte[] key, byte[] value, Header[] headers) {
        StringJoiner j = new StringJoiner(",");
        for (Header h : headers) j.add(hex(utf8(h.key())) + ":" + hex(h.value()));
        return String.format("record offset=%d timestamp=%d key=%s value=%s headers=%s\n",
                offset, ts, hex(key), hex(value), j);
    }

    static List<In> standard() {
        byte[] v0 = new byte[8 + BIG.length];
        System.arraycopy(utf8("value-0 "), 0, v0, 0, 8);
        System.arraycopy(BIG, 0, v0, 8, BIG.length);
        return List.of(
            new In(0, 1700000000000L, utf8("key-0"), v0, new Header[] {
                new RecordHeader("trace-id", utf8("abc123")), new RecordHeader("empty", new byte[0]),
                new RecordHeader("null", (byte[]) null)}),
            new In(1, 1700000000005L, null, utf8("value with a null key"), new Header[0]),
            new In(2, 1699999999990L, utf8("tombstone-key"), null, new Header[0]),
            new In(3, 1700000001000L, new byte[0], new byte[0], new Header[] {
                new RecordHeader("\u043a\u043b\u044e\u0447", new byte[] {0, 1, (byte) 0xff})}),
            new In(4, 1700000000500L, utf8("k4"), BIG, new Header[0]),
            new In(5, 1700000000600L, null, null, new Header[] {new RecordHeader("h", (byte[]) null)}));
    }

    static List<In> large() {
        List<In> out = new ArrayList<>();
        for (int i = 0; i < 40; i++) {
            byte[] head = utf8("record " + i + " ");
            byte[] v = new byte[head.length + BIG.length + 100];
            System.arraycopy(head, 0, v, 0, head.length);
            System.arraycopy(BIG, 0, v, head.length, BIG.length);
            for (int k = head.length + BIG.length; k < v.length; k++) v[k] = (byte) i;
            out.add(new In(i, 1700000000000L + i, utf8("key-" + i), v, new Header[0]));
        }
        return out;
    }

    record Built(ByteBuffer batch, String expected) {}

    static Built build(Compression c, List<In> recs, long pid, short epoch, int seq, boolean txn, TimestampType tt) {
        long logAppendTime = tt == TimestampType.LOG_APPEND_TIME ? LOG_APPEND_TIME : RecordBatch.NO_TIMESTAMP;
        MemoryRecordsBuilder b = MemoryRecords.builder(ByteBuffer.allocate(1 << 22), RecordBatch.CURRENT_MAGIC_VALUE,
                c, tt, BASE_OFFSET, logAppendTime, pid, epoch, seq, txn, LEADER_EPOCH);
        for (In r : recs) b.appendWithOffset(BASE_OFFSET + r.offset, r.ts, r.key, r.value, r.headers);
        ByteBuffer buf = b.build().buffer();
        StringBuilder exp = new StringBuilder(headerLine(buf));
        for (In r : recs) {
            long ts = tt == TimestampType.LOG_APPEND_TIME ? LOG_APPEND_TIME : r.ts;
            exp.append(recordLine(BASE_OFFSET + r.offset, ts, r.key, r.value, r.headers));
        }
        return new Built(buf, exp.toString());
    }

    static Built plain(Compression c, List<In> recs) {
        return build(c, recs, RecordBatch.NO_PRODUCER_ID, RecordBatch.NO_PRODUCER_EPOCH, RecordBatch.NO_SEQUENCE,
                false, TimestampType.CREATE_TIME);
    }

    static Built marker(ControlRecordType type) {
        EndTransactionMarker m = new EndTransactionMarker(type, 12);
        ByteBuffer buf = MemoryRecords.withEndTransactionMarker(BASE_OFFSET, 1700000000123L, LEADER_EPOCH, 4242L,
                (short) 7, m).buffer();
        byte[] key = {0, 0, 0, (byte) type.type()};
        String exp = headerLine(buf) + recordLine(BASE_OFFSET, 1700000000123L, key, bytes(m.serializeValue()),
                new Header[0]);
        return new Built(buf, exp);
    }

    static void gen(Path dir) throws Exception {
        Files.createDirectories(dir);
        TreeMap<String, Built> f = new TreeMap<>();
        f.put("none", plain(Compression.NONE, standard()));
        f.put("gzip", plain(Compression.gzip().build(), standard()));
        f.put("snappy", plain(Compression.snappy().build(), standard()));
        f.put("lz4", plain(Compression.lz4().build(), standard()));
        f.put("zstd", plain(Compression.zstd().build(), standard()));
        f.put("snappy_large", plain(Compression.snappy().build(), large()));
        f.put("lz4_large", plain(Compression.lz4().level(17).build(), large()));
        f.put("zstd_large_level22", plain(Compression.zstd().level(22).build(), large()));
        f.put("gzip_level9_transactional", build(Compression.gzip().level(9).build(), standard(), 77L, (short) 1, 0,
                true, TimestampType.CREATE_TIME));
        f.put("zstd_idempotent", build(Compression.zstd().build(), standard(), 4242L, (short) 3, 17, false,
                TimestampType.CREATE_TIME));
        f.put("gzip_log_append_time", build(Compression.gzip().build(), standard(), RecordBatch.NO_PRODUCER_ID,
                RecordBatch.NO_PRODUCER_EPOCH, RecordBatch.NO_SEQUENCE, false, TimestampType.LOG_APPEND_TIME));
        f.put("control_commit", marker(ControlRecordType.COMMIT));
        f.put("control_abort", marker(ControlRecordType.ABORT));
        for (var e : f.entrySet()) {
            ByteBuffer b = e.getValue().batch;
            byte[] a = new byte[b.remaining()];
            b.duplicate().get(a);
            // Java must read back what it wrote, through the same checks as verify.
            String decoded = decode(a);
            if (!decoded.equals(e.getValue().expected))
                throw new AssertionError(e.getKey() + ": Java does not read its own batch back:\n" + decoded);
            Files.write(dir.resolve(e.getKey() + ".bin"), a);
            Files.writeString(dir.resolve(e.getKey() + ".expected"), e.getValue().expected);
            System.out.printf("wrote %-28s %6d bytes, attributes %d%n", e.getKey(), a.length, b.getShort(21));
        }
    }

    /** Decodes one batch with MemoryRecords (CRC checked) into the .expected notation. */
    static String decode(byte[] bytes) {
        ByteBuffer buf = ByteBuffer.wrap(bytes);
        Iterator<MutableRecordBatch> it = MemoryRecords.readableRecords(buf.duplicate()).batches().iterator();
        MutableRecordBatch batch = it.next();
        if (it.hasNext()) throw new AssertionError("more than one batch");
        batch.ensureValid();
        if (batch.sizeInBytes() != bytes.length) throw new AssertionError("size mismatch");
        StringBuilder out = new StringBuilder(headerLine(buf));
        int count = 0;
        for (Record r : batch) {
            count++;
            out.append(recordLine(r.offset(), r.timestamp(), bytes(r.key()), bytes(r.value()), r.headers()));
            if (batch.isControlBatch()) {
                ControlRecordType t = ControlRecordType.parse(r.key());
                EndTransactionMarker m = EndTransactionMarker.deserialize(r);
                System.out.printf("  control record %s coordinator epoch %d%n", t, m.coordinatorEpoch());
            }
        }
        if (count != batch.countOrNull()) throw new AssertionError("count mismatch");
        return out.toString();
    }

    static void verify(Path dir) throws Exception {
        int n = 0;
        try (var files = Files.list(dir)) {
            for (Path p : files.filter(p -> p.toString().endsWith(".bin")).sorted().toList()) {
                String name = p.getFileName().toString().replace(".bin", "");
                String expected = Files.readString(dir.resolve(name + ".expected"));
                String decoded = decode(Files.readAllBytes(p));
                if (!decoded.equals(expected)) {
                    System.out.println("MISMATCH " + name + "\n--- Java:\n" + decoded + "--- expected:\n" + expected);
                    System.exit(1);
                }
                System.out.println("ok " + name);
                n++;
            }
        }
        if (n == 0) throw new AssertionError("no batches in " + dir);
        System.out.println("Kafka's Java client decoded all " + n + " tern-built batches");
    }

    public static void main(String[] args) throws Exception {
        if (args.length > 0 && args[0].equals("verify")) verify(Path.of("tern_built"));
        else gen(Path.of("kafka_java"));
    }
}
