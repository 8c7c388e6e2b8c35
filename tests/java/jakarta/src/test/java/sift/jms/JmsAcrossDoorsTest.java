package sift.jms;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import jakarta.jms.Connection;
import jakarta.jms.DeliveryMode;
import jakarta.jms.MessageConsumer;
import jakarta.jms.MessageProducer;
import jakarta.jms.Session;
import jakarta.jms.TextMessage;
import jakarta.jms.Topic;
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.OutputStream;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.util.HashMap;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.apache.qpid.jms.JmsConnectionFactory;
import org.junit.jupiter.api.Test;

/**
 * JMS messages crossing to and from STOMP and the native protocol (the `sift` command), and
 * persistent messages and a durable subscription through a SIGKILL of the broker.
 */
class JmsAcrossDoorsTest {
    private static final long RECEIVE_MS = 10_000;

    /** A STOMP 1.2 connection on a raw socket: frames written and read as text. */
    private static final class Stomp implements AutoCloseable {
        private final Socket socket;
        private final BufferedReader reader;
        private final OutputStream writer;

        Stomp(String address) throws Exception {
            String[] hostPort = address.split(":");
            socket = new Socket(hostPort[0], Integer.parseInt(hostPort[1]));
            socket.setSoTimeout((int) RECEIVE_MS);
            reader = new BufferedReader(new InputStreamReader(socket.getInputStream(), StandardCharsets.UTF_8));
            writer = socket.getOutputStream();
            send("CONNECT\naccept-version:1.2\nhost:sift\n\n");
            assertEquals("CONNECTED", frame().get(""));
        }

        void send(String frame) throws Exception {
            writer.write((frame + "\0").getBytes(StandardCharsets.UTF_8));
            writer.flush();
        }

        /** The next frame: its command under "", its headers, its body under "body". */
        Map<String, String> frame() throws Exception {
            Map<String, String> frame = new HashMap<>();
            String command = reader.readLine();
            while (command != null && command.isEmpty()) {
                command = reader.readLine(); // heart-beat end-of-lines
            }
            frame.put("", command);
            for (String line = reader.readLine(); line != null && !line.isEmpty(); line = reader.readLine()) {
                int colon = line.indexOf(':');
                frame.putIfAbsent(line.substring(0, colon), line.substring(colon + 1));
            }
            StringBuilder body = new StringBuilder();
            for (int character = reader.read(); character > 0; character = reader.read()) {
                body.append((char) character);
            }
            frame.put("body", body.toString());
            return frame;
        }

        @Override
        public void close() throws Exception {
            socket.close();
        }
    }

    @Test
    void messagesCrossBetweenJmsStompAndNativeInEveryDirection() throws Exception {
        try (SiftBroker broker = SiftBroker.start();
                Stomp stomp = new Stomp(broker.stomp);
                Connection connection = new JmsConnectionFactory(broker.uri("")).createConnection()) {
            connection.start();
            Session session = connection.createSession(false, Session.AUTO_ACKNOWLEDGE);
            stomp.send("SUBSCRIBE\nid:s\ndestination:/topic/xdoor.to-stomp\nreceipt:r\n\n");
            assertEquals("RECEIPT", stomp.frame().get(""));
            Process nativeSub = new ProcessBuilder(SiftBroker.binary(), "sub", "--server", broker.nativeAddress,
                    "--topic", "xdoor.to-native", "--count", "1", "--format", "json").start();
            BufferedReader subErrors = new BufferedReader(new InputStreamReader(nativeSub.getErrorStream()));
            assertTrue(subErrors.readLine().startsWith("subscribed to"), "the native subscription is live");
            MessageProducer producer = session.createProducer(null);
            for (String topic : new String[] {"xdoor.to-stomp", "xdoor.to-native"}) {
                TextMessage message = session.createTextMessage("from jms to " + topic);
                message.setJMSType("order");
                message.setIntProperty("qty", 3);
                producer.send(session.createTopic(topic), message);
            }
            Map<String, String> frame = stomp.frame();
            assertEquals("from jms to xdoor.to-stomp", frame.get("body"));
            assertEquals("order", frame.get("type"));
            assertEquals("3", frame.get("qty"));
            String line = new String(nativeSub.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
            assertTrue(nativeSub.waitFor(RECEIVE_MS, TimeUnit.MILLISECONDS));
            assertTrue(line.contains("from jms to xdoor.to-native") && line.contains("\"qty\":3"), line);

            Topic back = session.createTopic("xdoor.to-jms");
            MessageConsumer consumer = session.createConsumer(back);
            stomp.send("SEND\ndestination:/topic/xdoor.to-jms\ntype:quote\nprice:12.5\nreceipt:sent\n\nfrom stomp");
            assertEquals("RECEIPT", stomp.frame().get(""));
            SiftBroker.sift(null, "pub", "--server", broker.nativeAddress, "--topic", "xdoor.to-jms", "--prop",
                    "lots=7", "--payload", "from native");
            TextMessage fromStomp = (TextMessage) consumer.receive(RECEIVE_MS);
            assertNotNull(fromStomp);
            assertEquals("from stomp", fromStomp.getText());
            assertEquals("quote", fromStomp.getJMSType());
            assertEquals(12.5, fromStomp.getDoubleProperty("price"));
            TextMessage fromNative = (TextMessage) consumer.receive(RECEIVE_MS);
            assertNotNull(fromNative);
            assertEquals("from native", fromNative.getText());
            assertEquals(7L, fromNative.getLongProperty("lots"), "numbers from other doors are longs");
        }
    }

    @Test
    void persistentMessagesWaitForADurableSubscriberThroughAKill() throws Exception {
        SiftBroker broker = SiftBroker.start();
        try {
            try (Connection connection = new JmsConnectionFactory(broker.uri("")).createConnection()) {
                connection.setClientID("survivor");
                Session session = connection.createSession(false, Session.AUTO_ACKNOWLEDGE);
                Topic topic = session.createTopic("jms.ledger");
                session.createDurableSubscriber(topic, "ledger").close();
                MessageProducer producer = session.createProducer(topic);
                producer.setDeliveryMode(DeliveryMode.PERSISTENT);
                for (int number = 0; number < 3; number++) {
                    producer.send(session.createTextMessage("entry-" + number)); // returns once stored
                }
            }
            broker = broker.restarted();
            try (Connection connection = new JmsConnectionFactory(broker.uri("")).createConnection()) {
                connection.setClientID("survivor");
                connection.start();
                Session session = connection.createSession(false, Session.AUTO_ACKNOWLEDGE);
                MessageConsumer subscriber = session.createDurableSubscriber(session.createTopic("jms.ledger"), "ledger");
                for (int number = 0; number < 3; number++) {
                    TextMessage message = (TextMessage) subscriber.receive(RECEIVE_MS);
                    assertNotNull(message, "entry " + number + " survived");
                    assertEquals("entry-" + number, message.getText());
                }
                subscriber.close();
                session.unsubscribe("ledger");
            }
        } finally {
            broker.close();
        }
    }

    @Test
    void anExpiredMessageReachesNoJmsConsumer() throws Exception {
        try (SiftBroker broker = SiftBroker.start();
                Connection connection = new JmsConnectionFactory(broker.uri("")).createConnection();
                Stomp stomp = new Stomp(broker.stomp)) {
            connection.start();
            Session session = connection.createSession(false, Session.AUTO_ACKNOWLEDGE);
            MessageConsumer consumer = session.createConsumer(session.createQueue("xdoor.expiring"));
            // `expires` is milliseconds since the epoch: 1 is long past.
            stomp.send("SEND\ndestination:/queue/xdoor.expiring\nexpires:1\nreceipt:old\n\nexpired");
            assertEquals("RECEIPT", stomp.frame().get(""));
            stomp.send("SEND\ndestination:/queue/xdoor.expiring\nreceipt:new\n\nsentinel");
            assertEquals("RECEIPT", stomp.frame().get(""));
            TextMessage first = (TextMessage) consumer.receive(RECEIVE_MS);
            assertNotNull(first);
            assertEquals("sentinel", first.getText(), "the expired message was dropped, not delivered");
        }
    }

    @Test
    void aCommittedTransactionsPersistentMessagesSurviveAKillRightAfterTheCommit() throws Exception {
        SiftBroker broker = SiftBroker.start();
        try {
            try (Connection connection = new JmsConnectionFactory(broker.uri("")).createConnection()) {
                Session session = connection.createSession(true, Session.SESSION_TRANSACTED);
                MessageProducer producer = session.createProducer(session.createQueue("jms.tx.kept"));
                producer.setDeliveryMode(DeliveryMode.PERSISTENT);
                for (int number = 0; number < 3; number++) {
                    producer.send(session.createTextMessage("kept-" + number));
                }
                session.commit(); // returns once the broker stored them
            }
            broker = broker.restarted();
            try (Connection connection = new JmsConnectionFactory(broker.uri("")).createConnection()) {
                connection.start();
                Session session = connection.createSession(false, Session.AUTO_ACKNOWLEDGE);
                MessageConsumer consumer = session.createConsumer(session.createQueue("jms.tx.kept"));
                for (int number = 0; number < 3; number++) {
                    TextMessage message = (TextMessage) consumer.receive(RECEIVE_MS);
                    assertNotNull(message, "kept-" + number + " survived");
                    assertEquals("kept-" + number, message.getText());
                }
            }
        } finally {
            broker.close();
        }
    }
}
