package sift.jms;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertThrows;

import java.util.ArrayList;
import java.util.List;
import javax.jms.Connection;
import javax.jms.DeliveryMode;
import javax.jms.InvalidDestinationException;
import javax.jms.MapMessage;
import javax.jms.MessageConsumer;
import javax.jms.MessageProducer;
import javax.jms.Queue;
import javax.jms.Session;
import javax.jms.TextMessage;
import javax.jms.Topic;
import org.apache.qpid.jms.JmsConnectionFactory;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * The same door with Qpid JMS 1.x and the javax.jms API (JMS 2.0), as older applications use it:
 * selectors on a topic, a queue that keeps what is sent before its consumer, a map message, and
 * a durable subscriber with its unsubscribe.
 */
class JavaxJmsTest {
    private static final long RECEIVE_MS = 10_000;

    private static SiftBroker broker;

    @BeforeAll
    static void startBroker() throws Exception {
        broker = SiftBroker.start();
    }

    @AfterAll
    static void stopBroker() throws Exception {
        broker.close();
    }

    private static Connection connect(String clientId) throws Exception {
        Connection connection = new JmsConnectionFactory(broker.uri("")).createConnection();
        if (clientId != null) {
            connection.setClientID(clientId);
        }
        connection.start();
        return connection;
    }

    private static String text(MessageConsumer consumer) throws Exception {
        TextMessage message = (TextMessage) consumer.receive(RECEIVE_MS);
        assertNotNull(message, "a message arrives");
        return message.getText();
    }

    @Test
    void selectorsQueuesAndMapsWorkAsWithAnyJmsBroker() throws Exception {
        try (Connection connection = connect(null)) {
            Session session = connection.createSession(false, Session.AUTO_ACKNOWLEDGE);
            Topic topic = session.createTopic("javax.prices");
            MessageConsumer cheap = session.createConsumer(topic, "price < 10 OR sym = 'END'");
            MessageProducer producer = session.createProducer(topic);
            for (String[] quote : new String[][] {{"A", "5"}, {"B", "50"}, {"END", "0"}}) {
                TextMessage message = session.createTextMessage(quote[0]);
                message.setStringProperty("sym", quote[0]);
                message.setIntProperty("price", Integer.parseInt(quote[1]));
                producer.send(message);
            }
            List<String> received = new ArrayList<>();
            for (String text = text(cheap); !text.equals("END"); text = text(cheap)) {
                received.add(text);
            }
            assertEquals(List.of("A"), received);

            Queue queue = session.createQueue("javax.inbox");
            MapMessage order = session.createMapMessage();
            order.setString("sym", "IBM");
            order.setInt("qty", 3);
            session.createProducer(queue).send(order);
            MapMessage taken = (MapMessage) session.createConsumer(queue).receive(RECEIVE_MS);
            assertNotNull(taken, "the queue kept the order until its consumer came");
            assertEquals("IBM", taken.getString("sym"));
            assertEquals(3, taken.getInt("qty"));
        }
    }

    @Test
    void aDurableSubscriberCatchesUpAndUnsubscribes() throws Exception {
        try (Connection connection = connect("javax-client")) {
            Session session = connection.createSession(false, Session.AUTO_ACKNOWLEDGE);
            Topic topic = session.createTopic("javax.audit");
            session.createDurableSubscriber(topic, "audit").close();
            MessageProducer producer = session.createProducer(topic);
            producer.setDeliveryMode(DeliveryMode.PERSISTENT);
            producer.send(session.createTextMessage("while away"));
            MessageConsumer back = session.createDurableSubscriber(topic, "audit");
            assertEquals("while away", text(back));
            back.close();
            session.unsubscribe("audit");
            assertThrows(InvalidDestinationException.class, () -> session.unsubscribe("audit"));
        }
    }
}
