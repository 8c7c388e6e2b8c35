package sift.jms;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import jakarta.jms.Connection;
import jakarta.jms.MessageConsumer;
import jakarta.jms.MessageProducer;
import jakarta.jms.Queue;
import jakarta.jms.ResourceAllocationException;
import jakarta.jms.Session;
import jakarta.jms.TextMessage;
import java.nio.file.Files;
import java.nio.file.Path;
import org.apache.qpid.jms.JmsConnectionFactory;
import org.junit.jupiter.api.Test;

/** A queue's bound (`storage.queue_max_msgs`) as a JMS producer meets it, on a broker of its own. */
class JmsQueueLimitTest {
    @Test
    void aSendToAFullQueueIsRefusedAndNotStored() throws Exception {
        Path config = Files.createTempFile("sift-queue-limit-", ".toml");
        Files.writeString(config, "[storage]\nqueue_max_msgs = 1\n");
        try (SiftBroker broker = SiftBroker.start("--config", config.toString());
                Connection connection = new JmsConnectionFactory(broker.uri("")).createConnection()) {
            connection.start();
            Session session = connection.createSession(false, Session.AUTO_ACKNOWLEDGE);
            Queue queue = session.createQueue("jms.bounded");
            MessageProducer producer = session.createProducer(queue);
            producer.send(session.createTextMessage("first"));
            ResourceAllocationException refused =
                    assertThrows(ResourceAllocationException.class, () -> producer.send(session.createTextMessage("second")));
            assertTrue(refused.getMessage().contains("queue_max_msgs"), refused.getMessage());
            MessageConsumer consumer = session.createConsumer(queue);
            assertEquals("first", ((TextMessage) consumer.receive(10_000)).getText());
            assertNull(consumer.receiveNoWait(), "the refused message was not stored");
        } finally {
            Files.deleteIfExists(config);
        }
    }
}
