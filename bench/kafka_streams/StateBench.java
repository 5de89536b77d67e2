import java.time.Duration;
import java.util.Properties;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.Grouped;
import org.apache.kafka.streams.kstream.KGroupedStream;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.TimeWindows;
import org.apache.kafka.streams.processor.StateRestoreListener;

/**
 * Kafka Streams' side of bench/stateful.py: a count per key (a KTable in RocksDB with its
 * changelog topic) or a 1 s tumbling window count per key, over a filled topic, with Kafka
 * Streams' defaults (at least once, one stream thread, a 30 s commit interval, record
 * caches). Prints {"rate": N}: messages a second from 10 % of them to the last, as the
 * bench's RateMeter counts.
 *
 * <p>For bench/state_restore.py, {@code restore}: the count's store (its changelog
 * APP_ID-counts-changelog filled by the bench, PARTITIONS partitions) restored into an empty
 * state folder; prints {"records": N, "seconds": S}, from the first partition's restore start
 * to the last one's end (a restore listener's).
 *
 * <pre>java -cp LIBS/*:CLASSES StateBench BOOTSTRAP TOPIC COUNT count|window|restore STATE_DIR APP_ID [PARTITIONS]</pre>
 */
public final class StateBench {
    public static void main(String[] args) throws Exception {
        String bootstrap = args[0];
        String topic = args[1];
        long total = Long.parseLong(args[2]);
        String variant = args[3];
        Properties settings = new Properties();
        settings.put(StreamsConfig.APPLICATION_ID_CONFIG, args[5]);
        settings.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        settings.put(StreamsConfig.STATE_DIR_CONFIG, args[4]);
        if (variant.equals("restore")) {
            restore(topic, Integer.parseInt(args[6]), settings);
            return;
        }

        long threshold = Math.max(1, total / 10);
        AtomicLong seen = new AtomicLong();
        long[] marks = new long[2];
        CountDownLatch done = new CountDownLatch(1);
        StreamsBuilder builder = new StreamsBuilder();
        KGroupedStream<String, byte[]> grouped = builder
            .stream(topic, Consumed.with(Serdes.String(), Serdes.ByteArray()))
            .peek((key, value) -> {
                long n = seen.incrementAndGet();
                if (n == threshold) {
                    marks[0] = System.nanoTime();
                }
                if (n == total) {
                    marks[1] = System.nanoTime();
                    done.countDown();
                }
            })
            .groupByKey(Grouped.with(Serdes.String(), Serdes.ByteArray()));
        if (variant.equals("count")) {
            grouped.count(Materialized.as("counts"));
        } else {
            grouped.windowedBy(TimeWindows.ofSizeWithNoGrace(Duration.ofSeconds(1)))
                .count(Materialized.as("windows"));
        }
        KafkaStreams streams = new KafkaStreams(builder.build(), settings);
        streams.start();
        try {
            if (!done.await(600, TimeUnit.SECONDS)) {
                System.err.println("Kafka Streams counted " + seen.get() + " of " + total);
                System.exit(1);
            }
            double rate = (total - threshold) / ((marks[1] - marks[0]) / 1e9);
            System.out.println("{\"rate\": " + rate + "}");
        } finally {
            streams.close(Duration.ofSeconds(30));
        }
    }

    private static void restore(String topic, int partitions, Properties settings)
            throws Exception {
        StreamsBuilder builder = new StreamsBuilder();
        builder.stream(topic, Consumed.with(Serdes.String(), Serdes.ByteArray()))
            .groupByKey(Grouped.with(Serdes.String(), Serdes.ByteArray()))
            .count(Materialized.as("counts"));
        AtomicLong records = new AtomicLong();
        long[] times = {Long.MAX_VALUE, 0};
        CountDownLatch restored = new CountDownLatch(partitions);
        KafkaStreams streams = new KafkaStreams(builder.build(), settings);
        streams.setGlobalStateRestoreListener(new StateRestoreListener() {
            @Override
            public synchronized void onRestoreStart(
                    TopicPartition partition, String store, long start, long end) {
                times[0] = Math.min(times[0], System.nanoTime());
            }

            @Override
            public void onBatchRestored(
                    TopicPartition partition, String store, long end, long count) {
                records.addAndGet(count);
            }

            @Override
            public synchronized void onRestoreEnd(
                    TopicPartition partition, String store, long total) {
                times[1] = System.nanoTime();
                restored.countDown();
            }
        });
        streams.start();
        try {
            if (!restored.await(900, TimeUnit.SECONDS)) {
                System.err.println("Kafka Streams restored " + records.get() + " records");
                System.exit(1);
            }
            double seconds = (times[1] - times[0]) / 1e9;  // the latch orders the writes
            System.out.println(
                "{\"records\": " + records.get() + ", \"seconds\": " + seconds + "}");
        } finally {
            streams.close(Duration.ofSeconds(30));
        }
    }
}
