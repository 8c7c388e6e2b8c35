package sift.bench;

import jakarta.jms.Connection;
import jakarta.jms.DeliveryMode;
import jakarta.jms.JMSException;
import jakarta.jms.Message;
import jakarta.jms.MessageConsumer;
import jakarta.jms.MessageProducer;
import jakarta.jms.Session;
import jakarta.jms.Topic;
import java.lang.management.ManagementFactory;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import org.apache.qpid.jms.JmsConnectionFactory;

/**
 * JMS producer and consumer runs through Qpid JMS against one AMQP 1.0 broker. Each scenario
 * prints one JSON line: what it ran, messages per second, and the CPU seconds this client
 * process used (the Qpid JMS client itself may be the limit).
 *
 * <pre>
 *   JmsBench URI nonpersistent COUNT   1 producer to 1 consumer on a topic, NON_PERSISTENT
 *   JmsBench URI selectors COUNT       1,000 consumers with selectors, about 1 % matching each message
 *   JmsBench URI persistent COUNT      synchronous PERSISTENT sends to a queue, with its consumer
 * </pre>
 */
public final class JmsBench {
    private static final int PAYLOAD_BYTES = 128;
    private static final int SELECTOR_CONSUMERS = 1_000;
    private static final int SELECTOR_BUCKETS = 100;

    private JmsBench() {}

    public static void main(String[] args) throws Exception {
        if (args.length != 3) {
            System.err.println("usage: JmsBench URI nonpersistent|selectors|persistent COUNT");
            System.exit(2);
        }
        String uri = args[0];
        int count = Integer.parseInt(args[2]);
        long cpuBefore = processCpuNanos();
        Result result = switch (args[1]) {
            case "nonpersistent" -> nonPersistent(uri, count);
            case "selectors" -> selectors(uri, count);
            case "persistent" -> persistent(uri, count);
            default -> throw new IllegalArgumentException("unknown scenario " + args[1]);
        };
        double cpuSeconds = (processCpuNanos() - cpuBefore) / 1e9;
        System.out.printf("{\"scenario\":\"%s\",\"messages\":%d,\"deliveries\":%d,\"seconds\":%.3f,"
                + "\"messages_per_s\":%.0f,\"deliveries_per_s\":%.0f,\"client_cpu_s\":%.2f}%n",
                args[1], count, result.deliveries, result.seconds, count / result.seconds,
                result.deliveries / result.seconds, cpuSeconds);
        System.exit(0);
    }

    private record Result(long deliveries, double seconds) {}

    private static long processCpuNanos() {
        return ((com.sun.management.OperatingSystemMXBean) ManagementFactory.getOperatingSystemMXBean())
                .getProcessCpuTime();
    }

    private static String payload() {
        return "x".repeat(PAYLOAD_BYTES);
    }

    /** One producer, one consumer, non-persistent sends (asynchronous in Qpid JMS). */
    private static Result nonPersistent(String uri, int count) throws Exception {
        try (Connection connection = new JmsConnectionFactory(uri).createConnection()) {
            connection.start();
            Session consuming = connection.createSession(false, Session.AUTO_ACKNOWLEDGE);
            Topic topic = consuming.createTopic("bench.jms.plain");
            CountDownLatch done = new CountDownLatch(count);
            consuming.createConsumer(topic).setMessageListener(message -> done.countDown());
            Session producing = connection.createSession(false, Session.AUTO_ACKNOWLEDGE);
            MessageProducer producer = producing.createProducer(topic);
            producer.setDeliveryMode(DeliveryMode.NON_PERSISTENT);
            String body = payload();
            long start = System.nanoTime();
            for (int number = 0; number < count; number++) {
                producer.send(producing.createTextMessage(body));
            }
            await(done, "deliveries");
            return new Result(count, (System.nanoTime() - start) / 1e9);
        }
    }

    /** 1,000 consumers, each selecting one bucket of 100, so each message matches 1 % of them. */
    private static Result selectors(String uri, int count) throws Exception {
        try (Connection connection = new JmsConnectionFactory(uri).createConnection()) {
            connection.start();
            Session consuming = connection.createSession(false, Session.AUTO_ACKNOWLEDGE);
            Topic topic = consuming.createTopic("bench.jms.selected");
            long expected = (long) count * (SELECTOR_CONSUMERS / SELECTOR_BUCKETS);
            CountDownLatch done = new CountDownLatch((int) expected);
            List<MessageConsumer> consumers = new ArrayList<>();
            for (int number = 0; number < SELECTOR_CONSUMERS; number++) {
                MessageConsumer consumer = consuming.createConsumer(topic, "bucket = " + (number % SELECTOR_BUCKETS));
                consumer.setMessageListener(message -> done.countDown());
                consumers.add(consumer);
            }
            Session producing = connection.createSession(false, Session.AUTO_ACKNOWLEDGE);
            MessageProducer producer = producing.createProducer(topic);
            producer.setDeliveryMode(DeliveryMode.NON_PERSISTENT);
            String body = payload();
            long start = System.nanoTime();
            for (int number = 0; number < count; number++) {
                Message message = producing.createTextMessage(body);
                message.setIntProperty("bucket", number % SELECTOR_BUCKETS);
                producer.send(message);
            }
            await(done, "selected deliveries");
            return new Result(expected, (System.nanoTime() - start) / 1e9);
        }
    }

    /** Synchronous persistent sends (each returns once the broker stored it) to a queue. */
    private static Result persistent(String uri, int count) throws Exception {
        try (Connection connection = new JmsConnectionFactory(uri).createConnection()) {
            connection.start();
            Session consuming = connection.createSession(false, Session.AUTO_ACKNOWLEDGE);
            jakarta.jms.Queue queue = consuming.createQueue("bench.jms.stored");
            CountDownLatch done = new CountDownLatch(count);
            AtomicLong received = new AtomicLong();
            consuming.createConsumer(queue).setMessageListener(message -> {
                received.incrementAndGet();
                done.countDown();
            });
            Session producing = connection.createSession(false, Session.AUTO_ACKNOWLEDGE);
            MessageProducer producer = producing.createProducer(queue);
            producer.setDeliveryMode(DeliveryMode.PERSISTENT);
            String body = payload();
            long start = System.nanoTime();
            for (int number = 0; number < count; number++) {
                producer.send(producing.createTextMessage(body));
            }
            double sendSeconds = (System.nanoTime() - start) / 1e9;
            await(done, "stored deliveries");
            return new Result(received.get(), sendSeconds);
        }
    }

    private static void await(CountDownLatch done, String what) throws InterruptedException, JMSException {
        if (!done.await(10, TimeUnit.MINUTES)) {
            throw new JMSException("timed out waiting for " + what + ": " + done.getCount() + " missing");
        }
    }
}
