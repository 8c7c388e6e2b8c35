package sift.jms;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import jakarta.jms.BytesMessage;
import jakarta.jms.Connection;
import jakarta.jms.DeliveryMode;
import jakarta.jms.InvalidDestinationException;
import jakarta.jms.MapMessage;
import jakarta.jms.Message;
import jakarta.jms.MessageConsumer;
import jakarta.jms.MessageProducer;
import jakarta.jms.ObjectMessage;
import jakarta.jms.Queue;
import jakarta.jms.Session;
import jakarta.jms.StreamMessage;
import jakarta.jms.TemporaryQueue;
import jakarta.jms.TextMessage;
import jakarta.jms.Topic;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import org.apache.qpid.jms.JmsConnectionFactory;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * JMS behaviours with Apache Qpid JMS unchanged, against one broker. Every check that something
 * did NOT arrive sends a sentinel after it and waits for the sentinel.
 */
class JmsBehaviourTest {
    /** How long a receive waits for a message that must come. */
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

    private static Message receive(MessageConsumer consumer) throws Exception {
        Message message = consumer.receive(RECEIVE_MS);
        assertNotNull(message, "a message arrives");
        return message;
    }

    /** Texts received up to the sentinel, which must come. */
    private static List<String> textsUntilSentinel(MessageConsumer consumer) throws Exception {
        List<String> texts = new ArrayList<>();
        while (true) {
            String text = ((TextMessage) receive(consumer)).getText();
            if (text.equals("sentinel")) {
                return texts;
            }
            texts.add(text);
        }
    }

    /**
     * The texts of `count` messages taken by either of two consumers sharing them, each text once;
     * fails when they have not all come within {@link #RECEIVE_MS}.
     */
    private static Set<String> textsFromEither(MessageConsumer first, MessageConsumer second, int count)
            throws Exception {
        Set<String> seen = new HashSet<>();
        long deadline = System.currentTimeMillis() + RECEIVE_MS;
        while (seen.size() < count) {
            assertTrue(System.currentTimeMillis() < deadline, "only " + seen.size() + " of " + count + " came");
            for (MessageConsumer consumer : List.of(first, second)) {
                Message message = consumer.receive(50);
                if (message != null) {
                    assertTrue(seen.add(((TextMessage) message).getText()), "each message to one consumer, once");
                }
            }
        }
        return seen;
    }

    @Test
    void aTextMessageCrossesATopicWithItsHeaderFieldsAndTypedProperties() throws Exception {
        try (Connection connection = connect(null)) {
            Session session = connection.createSession(false, Session.AUTO_ACKNOWLEDGE);
            Topic topic = session.createTopic("jms.quotes");
            MessageConsumer consumer = session.createConsumer(topic);
            MessageProducer producer = session.createProducer(topic);
            TextMessage sent = session.createTextMessage("IBM 120");
            sent.setJMSType("quote");
            sent.setJMSCorrelationID("corr-1");
            sent.setIntProperty("lots", 3);
            sent.setLongProperty("volume", 1L << 40);
            sent.setDoubleProperty("price", 120.5);
            sent.setBooleanProperty("firm", true);
            sent.setShortProperty("desk", (short) 7);
            sent.setStringProperty("sym", "IBM");
            producer.send(sent, DeliveryMode.PERSISTENT, 7, 0);
            TextMessage received = (TextMessage) receive(consumer);
            assertEquals("IBM 120", received.getText());
            assertEquals(sent.getJMSMessageID(), received.getJMSMessageID());
            assertEquals("quote", received.getJMSType());
            assertEquals("corr-1", received.getJMSCorrelationID());
            assertEquals(7, received.getJMSPriority());
            assertEquals(DeliveryMode.PERSISTENT, received.getJMSDeliveryMode());
            assertEquals(3, received.getIntProperty("lots"));
            assertEquals(1L << 40, received.getLongProperty("volume"));
            assertEquals(120.5, received.getDoubleProperty("price"));
            assertTrue(received.getBooleanProperty("firm"));
            assertEquals((short) 7, received.getShortProperty("desk"));
            assertEquals("IBM", received.getStringProperty("sym"));
            assertFalse(received.getJMSRedelivered());
            assertInstanceOf(Topic.class, received.getJMSDestination());
        }
    }

    @Test
    void selectorsChooseWhatArrives() throws Exception {
        try (Connection connection = connect(null)) {
            Session session = connection.createSession(false, Session.AUTO_ACKNOWLEDGE);
            Topic topic = session.createTopic("jms.orders");
            MessageConsumer selected = session.createConsumer(topic,
                    "(region = 'EU' AND qty > 2) OR JMSType = 'sentinel'");
            MessageProducer producer = session.createProducer(topic);
            String[][] orders = {{"EU", "3"}, {"US", "5"}, {"EU", "1"}, {"EU", "9"}};
            for (String[] order : orders) {
                TextMessage message = session.createTextMessage(order[0] + " " + order[1]);
                message.setStringProperty("region", order[0]);
                message.setIntProperty("qty", Integer.parseInt(order[1]));
                producer.send(message);
            }
            TextMessage sentinel = session.createTextMessage("sentinel");
            sentinel.setJMSType("sentinel");
            producer.send(sentinel);
            assertEquals(List.of("EU 3", "EU 9"), textsUntilSentinel(selected));
        }
    }

    @Test
    void aQueueGivesEachMessageToOneConsumer() throws Exception {
        try (Connection connection = connect(null)) {
            Session session = connection.createSession(false, Session.AUTO_ACKNOWLEDGE);
            Queue queue = session.createQueue("jms.work");
            MessageConsumer first = session.createConsumer(queue);
            MessageConsumer second = session.createConsumer(queue);
            MessageProducer producer = session.createProducer(queue);
            int count = 20;
            for (int number = 0; number < count; number++) {
                producer.send(session.createTextMessage("job-" + number));
            }
            assertEquals(count, textsFromEither(first, second, count).size());
        }
    }

    @Test
    void everyMessageTypeRoundTrips() throws Exception {
        try (Connection connection = connect(null)) {
            Session session = connection.createSession(false, Session.AUTO_ACKNOWLEDGE);
            Queue queue = session.createQueue("jms.kinds");
            MessageConsumer consumer = session.createConsumer(queue);
            MessageProducer producer = session.createProducer(queue);
            BytesMessage bytes = session.createBytesMessage();
            bytes.writeBytes(new byte[] {0, 1, (byte) 0xff});
            MapMessage map = session.createMapMessage();
            map.setInt("qty", 3);
            map.setString("sym", "IBM");
            map.setBytes("raw", new byte[] {9, 8});
            StreamMessage stream = session.createStreamMessage();
            stream.writeInt(42);
            stream.writeString("answer");
            ObjectMessage object = session.createObjectMessage(new ArrayList<>(List.of("a", "b")));
            Message plain = session.createMessage();
            plain.setStringProperty("kind", "plain");
            for (Message message : List.of(bytes, map, stream, object, plain, session.createTextMessage("text"))) {
                producer.send(message);
            }
            BytesMessage gotBytes = (BytesMessage) receive(consumer);
            byte[] read = new byte[(int) gotBytes.getBodyLength()];
            gotBytes.readBytes(read);
            assertArrayEquals(new byte[] {0, 1, (byte) 0xff}, read);
            MapMessage gotMap = (MapMessage) receive(consumer);
            assertEquals(3, gotMap.getInt("qty"));
            assertEquals("IBM", gotMap.getString("sym"));
            assertArrayEquals(new byte[] {9, 8}, gotMap.getBytes("raw"));
            StreamMessage gotStream = (StreamMessage) receive(consumer);
            assertEquals(42, gotStream.readInt());
            assertEquals("answer", gotStream.readString());
            ObjectMessage gotObject = (ObjectMessage) receive(consumer);
            assertEquals(List.of("a", "b"), gotObject.getObject());
            Message gotPlain = receive(consumer);
            assertEquals("plain", gotPlain.getStringProperty("kind"));
            assertFalse(gotPlain instanceof TextMessage || gotPlain instanceof BytesMessage);
            assertEquals("text", ((TextMessage) receive(consumer)).getText());
        }
    }

    @Test
    void requestAndReplyGoThroughATemporaryQueue() throws Exception {
        try (Connection connection = connect(null)) {
            Session session = connection.createSession(false, Session.AUTO_ACKNOWLEDGE);
            Queue requests = session.createQueue("jms.requests");
            MessageConsumer server = session.createConsumer(requests);
            TemporaryQueue replies = session.createTemporaryQueue();
            MessageConsumer client = session.createConsumer(replies);
            TextMessage request = session.createTextMessage("ping");
            request.setJMSReplyTo(replies);
            session.createProducer(requests).send(request);
            Message received = receive(server);
            assertEquals(replies.getQueueName(), ((Queue) received.getJMSReplyTo()).getQueueName());
            TextMessage reply = session.createTextMessage("pong");
            reply.setJMSCorrelationID(received.getJMSMessageID());
            session.createProducer(received.getJMSReplyTo()).send(reply);
            Message answer = receive(client);
            assertEquals("pong", ((TextMessage) answer).getText());
            assertEquals(request.getJMSMessageID(), answer.getJMSCorrelationID());
        }
    }

    @Test
    void aDurableSubscriberGetsWhatWasSentWhileAwayUntilItUnsubscribes() throws Exception {
        try (Connection connection = connect("durable-client")) {
            Session session = connection.createSession(false, Session.AUTO_ACKNOWLEDGE);
            Topic topic = session.createTopic("jms.audit");
            MessageConsumer subscriber = session.createDurableSubscriber(topic, "audit");
            MessageProducer producer = session.createProducer(topic);
            producer.setDeliveryMode(DeliveryMode.PERSISTENT);
            producer.send(session.createTextMessage("while-here"));
            assertEquals("while-here", ((TextMessage) receive(subscriber)).getText());
            subscriber.close();
            producer.send(session.createTextMessage("while-away"));
            MessageConsumer back = session.createDurableSubscriber(topic, "audit");
            assertEquals("while-away", ((TextMessage) receive(back)).getText());
            back.close();
            session.unsubscribe("audit");
            assertThrows(InvalidDestinationException.class, () -> session.unsubscribe("audit"));
        }
    }

    @Test
    void anUnacknowledgedMessageComesBackRedeliveredWithItsId() throws Exception {
        try (Connection connection = connect(null)) {
            Session producing = connection.createSession(false, Session.AUTO_ACKNOWLEDGE);
            Queue queue = producing.createQueue("jms.retry");
            Session first = connection.createSession(false, Session.CLIENT_ACKNOWLEDGE);
            MessageConsumer firstConsumer = first.createConsumer(queue);
            TextMessage sent = producing.createTextMessage("retry me");
            producing.createProducer(queue).send(sent);
            Message unacknowledged = receive(firstConsumer);
            assertFalse(unacknowledged.getJMSRedelivered());
            Session second = connection.createSession(false, Session.CLIENT_ACKNOWLEDGE);
            MessageConsumer secondConsumer = second.createConsumer(queue);
            first.close();
            Message again = receive(secondConsumer);
            assertTrue(again.getJMSRedelivered());
            assertEquals(sent.getJMSMessageID(), again.getJMSMessageID());
            assertTrue(again.getIntProperty("JMSXDeliveryCount") >= 2);
            again.acknowledge();
        }
    }

    @Test
    void aNoLocalConsumerSkipsItsOwnConnectionsMessages() throws Exception {
        try (Connection own = connect(null); Connection other = connect(null)) {
            Session session = own.createSession(false, Session.AUTO_ACKNOWLEDGE);
            Topic topic = session.createTopic("jms.chat");
            MessageConsumer consumer = session.createConsumer(topic, null, true);
            session.createProducer(topic).send(session.createTextMessage("own"));
            Session otherSession = other.createSession(false, Session.AUTO_ACKNOWLEDGE);
            MessageProducer producer = otherSession.createProducer(otherSession.createTopic("jms.chat"));
            producer.send(otherSession.createTextMessage("theirs"));
            producer.send(otherSession.createTextMessage("sentinel"));
            assertEquals(List.of("theirs"), textsUntilSentinel(consumer));
        }
    }

    @Test
    void sharedConsumersShareATopicsMessages() throws Exception {
        try (Connection connection = connect("shared-client")) {
            Session session = connection.createSession(false, Session.AUTO_ACKNOWLEDGE);
            Topic topic = session.createTopic("jms.shared");
            MessageConsumer first = session.createSharedConsumer(topic, "workers");
            MessageConsumer second = session.createSharedConsumer(topic, "workers");
            MessageConsumer durable = session.createSharedDurableConsumer(topic, "ledger");
            MessageProducer producer = session.createProducer(topic);
            int count = 10;
            for (int number = 0; number < count; number++) {
                producer.send(session.createTextMessage("tick-" + number));
            }
            assertEquals(count, textsFromEither(first, second, count).size());
            for (int number = 0; number < count; number++) {
                assertEquals("tick-" + number, ((TextMessage) receive(durable)).getText());
            }
            durable.close();
            session.unsubscribe("ledger");
        }
    }

    @Test
    void aQueueKeepsWhatIsSentBeforeItsFirstConsumer() throws Exception {
        try (Connection connection = connect(null)) {
            Session session = connection.createSession(false, Session.AUTO_ACKNOWLEDGE);
            Queue queue = session.createQueue("jms.inbox");
            MessageProducer producer = session.createProducer(queue);
            producer.setDeliveryMode(DeliveryMode.NON_PERSISTENT);
            producer.send(session.createTextMessage("early-1"));
            producer.send(session.createTextMessage("early-2"));
            MessageConsumer consumer = session.createConsumer(queue);
            assertEquals("early-1", ((TextMessage) receive(consumer)).getText());
            assertEquals("early-2", ((TextMessage) receive(consumer)).getText());
        }
    }

    @Test
    void aTransactionsSendsArriveOnlyWhenItCommits() throws Exception {
        try (Connection connection = connect(null)) {
            Session plain = connection.createSession(false, Session.AUTO_ACKNOWLEDGE);
            Queue queue = plain.createQueue("jms.tx.sends");
            MessageConsumer consumer = plain.createConsumer(queue);
            Session transacted = connection.createSession(true, Session.SESSION_TRANSACTED);
            MessageProducer producer = transacted.createProducer(queue);
            producer.send(transacted.createTextMessage("rolled-back"));
            transacted.rollback();
            producer.send(transacted.createTextMessage("committed-1"));
            producer.send(transacted.createTextMessage("committed-2"));
            transacted.commit();
            producer.send(transacted.createTextMessage("sentinel"));
            transacted.commit();
            assertEquals(List.of("committed-1", "committed-2"), textsUntilSentinel(consumer));
        }
    }

    @Test
    void aTransactionsReceivesComeBackWhenItRollsBack() throws Exception {
        try (Connection connection = connect(null)) {
            Session plain = connection.createSession(false, Session.AUTO_ACKNOWLEDGE);
            Queue queue = plain.createQueue("jms.tx.receives");
            MessageProducer producer = plain.createProducer(queue);
            producer.send(plain.createTextMessage("first"));
            producer.send(plain.createTextMessage("second"));
            Session transacted = connection.createSession(true, Session.SESSION_TRANSACTED);
            MessageConsumer consumer = transacted.createConsumer(queue);
            assertEquals("first", ((TextMessage) receive(consumer)).getText());
            transacted.rollback();
            Message again = receive(consumer);
            assertEquals("first", ((TextMessage) again).getText());
            assertTrue(again.getJMSRedelivered());
            assertEquals("second", ((TextMessage) receive(consumer)).getText());
            transacted.commit();
            consumer.close();
            producer.send(plain.createTextMessage("sentinel"));
            MessageConsumer after = plain.createConsumer(queue);
            assertEquals(List.of(), textsUntilSentinel(after), "committed receives are gone from the queue");
        }
    }

    @Test
    void aMessageGroupStaysWithOneConsumerInOrder() throws Exception {
        assertGroupsStayWithOneConsumer("jms.grouped", null);
    }

    @Test
    void aMessageGroupStaysWithOneSelectingConsumerInOrder() throws Exception {
        assertGroupsStayWithOneConsumer("jms.grouped.selected", "kind = 'order'");
    }

    /**
     * Two consumers of `queueName` (with `selector`, which reads the live queue group, or none, which
     * reads the stored queue) share three groups' messages: each group all to one of them, in order.
     */
    private static void assertGroupsStayWithOneConsumer(String queueName, String selector) throws Exception {
        try (Connection connection = connect(null)) {
            Session session = connection.createSession(false, Session.AUTO_ACKNOWLEDGE);
            Queue queue = session.createQueue(queueName);
            List<MessageConsumer> consumers =
                    List.of(session.createConsumer(queue, selector), session.createConsumer(queue, selector));
            MessageProducer producer = session.createProducer(queue);
            int perGroup = 10;
            // Three groups over two consumers: taken in turn, each group would alternate between them.
            List<String> groups = List.of("cart-1", "cart-2", "cart-3");
            for (int number = 0; number < perGroup; number++) {
                for (String group : groups) {
                    TextMessage message = session.createTextMessage(group + "/" + number);
                    message.setStringProperty("JMSXGroupID", group);
                    message.setStringProperty("kind", "order");
                    producer.send(message);
                }
            }
            java.util.Map<String, Integer> consumerOfGroup = new java.util.HashMap<>();
            java.util.Map<String, Integer> nextOfGroup = new java.util.HashMap<>();
            int received = 0;
            long deadline = System.currentTimeMillis() + RECEIVE_MS;
            while (received < perGroup * groups.size()) {
                assertTrue(System.currentTimeMillis() < deadline, "only " + received + " came");
                for (int index = 0; index < consumers.size(); index++) {
                    Message message = consumers.get(index).receive(50);
                    if (message == null) {
                        continue;
                    }
                    received++;
                    String[] parts = ((TextMessage) message).getText().split("/");
                    assertEquals(parts[0], message.getStringProperty("JMSXGroupID"));
                    Integer owner = consumerOfGroup.putIfAbsent(parts[0], index);
                    assertEquals(owner == null ? index : owner, index, "group " + parts[0] + " stays with one consumer");
                    int expected = nextOfGroup.getOrDefault(parts[0], 0);
                    assertEquals(expected, Integer.parseInt(parts[1]), "group " + parts[0] + " in order");
                    nextOfGroup.put(parts[0], expected + 1);
                }
            }
        }
    }

    /** Sends one message `order-REGION` with the property `region` to `queue` for each region. */
    private static void sendOrders(Session session, Queue queue, String... regions) throws Exception {
        MessageProducer producer = session.createProducer(queue);
        for (String region : regions) {
            TextMessage message = session.createTextMessage("order-" + region);
            message.setStringProperty("region", region);
            producer.send(message);
        }
    }

    @Test
    void aBrowserSeesWhatAQueueHoldsWithoutTakingIt() throws Exception {
        try (Connection connection = connect(null)) {
            Session session = connection.createSession(false, Session.AUTO_ACKNOWLEDGE);
            Queue queue = session.createQueue("jms.browsed");
            sendOrders(session, queue, "EU", "US", "EU");
            List<String> browsed = new ArrayList<>();
            java.util.Enumeration<?> everything = session.createBrowser(queue).getEnumeration();
            while (everything.hasMoreElements()) {
                browsed.add(((TextMessage) everything.nextElement()).getText());
            }
            assertEquals(List.of("order-EU", "order-US", "order-EU"), browsed);
            java.util.Enumeration<?> selected = session.createBrowser(queue, "region = 'US'").getEnumeration();
            assertTrue(selected.hasMoreElements());
            assertEquals("order-US", ((TextMessage) selected.nextElement()).getText());
            assertFalse(selected.hasMoreElements());
            MessageConsumer consumer = session.createConsumer(queue);
            for (String region : List.of("EU", "US", "EU")) {
                assertEquals("order-" + region, ((TextMessage) receive(consumer)).getText(), "browsing took nothing");
            }
        }
    }

    @Test
    void receiveNoWaitTakesWhatAQueueHoldsAndThenNothing() throws Exception {
        try (Connection connection = connect(null)) {
            Session session = connection.createSession(false, Session.AUTO_ACKNOWLEDGE);
            Queue queue = session.createQueue("jms.nowait");
            session.createProducer(queue).send(session.createTextMessage("waiting"));
            MessageConsumer consumer = session.createConsumer(queue);
            Message first = consumer.receiveNoWait();
            assertNotNull(first, "the queue's message, though the consumer was just made");
            assertEquals("waiting", ((TextMessage) first).getText());
            assertEquals(null, consumer.receiveNoWait(), "then nothing");
        }
    }

    @Test
    void aSelectingQueueConsumerTakesWhatTheQueueHeldAndLeavesTheRest() throws Exception {
        try (Connection connection = connect(null)) {
            Session session = connection.createSession(false, Session.AUTO_ACKNOWLEDGE);
            Queue queue = session.createQueue("jms.selective");
            sendOrders(session, queue, "EU", "US", "EU");
            MessageConsumer americas = session.createConsumer(queue, "region = 'US'");
            assertEquals("order-US", ((TextMessage) receive(americas)).getText(), "sent before it subscribed");
            assertEquals(null, americas.receiveNoWait(), "the others are not for it");
            MessageConsumer anyone = session.createConsumer(queue);
            assertEquals("order-EU", ((TextMessage) receive(anyone)).getText(), "they waited in the queue");
            assertEquals("order-EU", ((TextMessage) receive(anyone)).getText());
            assertEquals(null, anyone.receiveNoWait(), "the US order was taken");
        }
    }

    @Test
    void aDelayedMessageComesAfterItsTimeOnAQueueAndOnATopic() throws Exception {
        try (Connection connection = connect(null)) {
            Session session = connection.createSession(false, Session.AUTO_ACKNOWLEDGE);
            for (jakarta.jms.Destination destination :
                    List.of(session.createQueue("jms.delayed"), session.createTopic("jms.delayed.news"))) {
                MessageConsumer consumer = session.createConsumer(destination);
                MessageProducer delayed = session.createProducer(destination);
                delayed.setDeliveryDelay(1_500);
                long sentMs = System.currentTimeMillis();
                delayed.send(session.createTextMessage("later"));
                session.createProducer(destination).send(session.createTextMessage("now"));
                assertEquals("now", ((TextMessage) receive(consumer)).getText(), "the message sent after it comes first");
                Message later = receive(consumer);
                long receivedMs = System.currentTimeMillis();
                assertEquals("later", ((TextMessage) later).getText());
                assertTrue(later.getJMSDeliveryTime() >= sentMs + 1_500, "its delivery time is the delay from the send");
                assertTrue(receivedMs >= later.getJMSDeliveryTime(), "not delivered before its time");
            }
        }
    }

    @Test
    void timeToLiveSetsJmsExpiration() throws Exception {
        try (Connection connection = connect(null)) {
            Session session = connection.createSession(false, Session.AUTO_ACKNOWLEDGE);
            Queue queue = session.createQueue("jms.ttl");
            MessageConsumer consumer = session.createConsumer(queue);
            long sentMs = System.currentTimeMillis();
            session.createProducer(queue).send(session.createTextMessage("fresh"), DeliveryMode.PERSISTENT, 4, 60_000);
            Message fresh = receive(consumer);
            assertTrue(Math.abs(fresh.getJMSExpiration() - (sentMs + 60_000)) < 5_000, "expires a minute after the send");
        }
    }

    @Test
    void individualAcknowledgeAcknowledgesOnlyTheMessageItIsCalledOn() throws Exception {
        final int individualAcknowledge = 101; // Qpid JMS's INDIVIDUAL_ACKNOWLEDGE
        try (Connection connection = connect(null)) {
            Session producing = connection.createSession(false, Session.AUTO_ACKNOWLEDGE);
            Queue queue = producing.createQueue("jms.individual");
            MessageProducer producer = producing.createProducer(queue);
            producer.send(producing.createTextMessage("first"));
            producer.send(producing.createTextMessage("second"));
            Session session = connection.createSession(false, individualAcknowledge);
            MessageConsumer consumer = session.createConsumer(queue);
            Message first = receive(consumer);
            Message second = receive(consumer);
            assertEquals("second", ((TextMessage) second).getText());
            second.acknowledge();
            session.close();
            MessageConsumer again = producing.createConsumer(queue);
            Message redelivered = receive(again);
            assertEquals(((TextMessage) first).getText(), ((TextMessage) redelivered).getText());
            assertTrue(redelivered.getJMSRedelivered());
            producer.send(producing.createTextMessage("sentinel"));
            assertEquals("sentinel", ((TextMessage) receive(again)).getText(), "the acknowledged one is gone");
        }
    }

    @Test
    void dupsOkSessionsReceiveEveryMessage() throws Exception {
        try (Connection connection = connect(null)) {
            Session session = connection.createSession(false, Session.DUPS_OK_ACKNOWLEDGE);
            Queue queue = session.createQueue("jms.dupsok");
            MessageConsumer consumer = session.createConsumer(queue);
            MessageProducer producer = session.createProducer(queue);
            for (int number = 0; number < 5; number++) {
                producer.send(session.createTextMessage("m" + number));
            }
            for (int number = 0; number < 5; number++) {
                assertEquals("m" + number, ((TextMessage) receive(consumer)).getText());
            }
        }
    }

    @Test
    void aTemporaryTopicCarriesRepliesToEachOfItsSubscribers() throws Exception {
        try (Connection connection = connect(null)) {
            Session session = connection.createSession(false, Session.AUTO_ACKNOWLEDGE);
            jakarta.jms.TemporaryTopic replies = session.createTemporaryTopic();
            MessageConsumer first = session.createConsumer(replies);
            MessageConsumer second = session.createConsumer(replies);
            TextMessage request = session.createTextMessage("ping");
            request.setJMSReplyTo(replies);
            Queue requests = session.createQueue("jms.requests.topic");
            MessageConsumer server = session.createConsumer(requests);
            session.createProducer(requests).send(request);
            Message received = receive(server);
            assertInstanceOf(Topic.class, received.getJMSReplyTo());
            session.createProducer(received.getJMSReplyTo()).send(session.createTextMessage("pong"));
            assertEquals("pong", ((TextMessage) receive(first)).getText());
            assertEquals("pong", ((TextMessage) receive(second)).getText());
            first.close();
            second.close();
            replies.delete();
        }
    }
}
