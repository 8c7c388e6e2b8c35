package sift.jms;

import java.io.BufferedReader;
import java.io.File;
import java.io.IOException;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;

/**
 * A `sift broker` process for one test class: started on free loopback ports with a scratch data
 * directory, its addresses read from the lines it prints, and stopped (by its PID) at the end.
 */
public final class SiftBroker implements AutoCloseable {
    private static final String AMQP_PREFIX = "sift broker serving AMQP on ";
    private static final String STOMP_PREFIX = "sift broker serving STOMP on ";
    private static final String NATIVE_PREFIX = "sift broker listening on ";

    private final Process process;
    private final Path dataDir;
    private final File errors;
    /** The AMQP door's address. */
    public final String amqp;
    /** The STOMP door's address. */
    public final String stomp;
    /** The native protocol's address. */
    public final String nativeAddress;

    private SiftBroker(Process process, Path dataDir, File errors, String amqp, String stomp, String nativeAddress) {
        this.process = process;
        this.dataDir = dataDir;
        this.errors = errors;
        this.amqp = amqp;
        this.stomp = stomp;
        this.nativeAddress = nativeAddress;
    }

    /** The `sift` binary under test, from SIFT_BIN. */
    public static String binary() {
        String binary = System.getenv("SIFT_BIN");
        if (binary == null || binary.isEmpty()) {
            throw new IllegalStateException("set SIFT_BIN to the sift binary under test");
        }
        return binary;
    }

    /** Starts a broker with `extraArgs` (a users file, say) and waits until it serves AMQP. */
    public static SiftBroker start(String... extraArgs) throws IOException {
        Path dataDir = Files.createTempDirectory("sift-jms-");
        return startOn(dataDir, "127.0.0.1:0", "127.0.0.1:0", "127.0.0.1:0", extraArgs);
    }

    /**
     * Kills this broker with SIGKILL and starts it again on the same addresses and data, as a
     * crash and a restart would.
     */
    public SiftBroker restarted() throws IOException, InterruptedException {
        process.destroyForcibly();
        process.waitFor(30, TimeUnit.SECONDS);
        errors.delete();
        return startOn(dataDir, nativeAddress, stomp, amqp);
    }

    private static SiftBroker startOn(Path dataDir, String listen, String stompAddress, String amqpAddress,
            String... extraArgs) throws IOException {
        List<String> command = new ArrayList<>(List.of(binary(), "broker", "--listen", listen,
                "--http", "off", "--stomp", stompAddress, "--mqtt", "off", "--amqp", amqpAddress,
                "--data", dataDir.toString()));
        command.addAll(List.of(extraArgs));
        File errors = dataDir.resolveSibling(dataDir.getFileName() + ".log").toFile();
        Process process = new ProcessBuilder(command).redirectError(errors).start();
        BufferedReader lines = new BufferedReader(new InputStreamReader(process.getInputStream(), StandardCharsets.UTF_8));
        String amqp = null;
        String stomp = null;
        String nativeAddress = null;
        while (amqp == null || stomp == null || nativeAddress == null) {
            String line = lines.readLine();
            if (line == null) {
                process.destroyForcibly();
                throw new IOException("the broker exited before serving AMQP: " + Files.readString(errors.toPath()));
            }
            if (line.startsWith(AMQP_PREFIX)) {
                amqp = line.substring(AMQP_PREFIX.length()).trim();
            } else if (line.startsWith(STOMP_PREFIX)) {
                stomp = line.substring(STOMP_PREFIX.length()).trim();
            } else if (line.startsWith(NATIVE_PREFIX)) {
                nativeAddress = line.substring(NATIVE_PREFIX.length()).trim();
            }
        }
        // Keep reading its output so that a full pipe never stalls it.
        Thread drain = new Thread(() -> {
            try {
                while (lines.readLine() != null) {
                    // Nothing to do with the lines after the addresses.
                }
            } catch (IOException ignored) {
                // The broker stopped.
            }
        });
        drain.setDaemon(true);
        drain.start();
        return new SiftBroker(process, dataDir, errors, amqp, stomp, nativeAddress);
    }

    /** The Qpid JMS connection URI of this broker, with `options` (`amqp.saslMechanisms=PLAIN`, say). */
    public String uri(String options) {
        return "amqp://" + amqp + (options.isEmpty() ? "" : "?" + options);
    }

    /** Runs `sift` with `args` and returns its standard output. */
    public static String sift(String input, String... args) throws IOException, InterruptedException {
        List<String> command = new ArrayList<>(List.of(binary()));
        command.addAll(List.of(args));
        ProcessBuilder builder = new ProcessBuilder(command).redirectErrorStream(true);
        if (input != null) {
            builder.environment().put("SIFT_PASSWORD", input);
        }
        Process process = builder.start();
        String output = new String(process.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        if (!process.waitFor(60, TimeUnit.SECONDS) || process.exitValue() != 0) {
            throw new IOException("sift " + String.join(" ", args) + " failed: " + output);
        }
        return output;
    }

    @Override
    public void close() throws IOException, InterruptedException {
        process.destroyForcibly();
        process.waitFor(30, TimeUnit.SECONDS);
        try (Stream<Path> paths = Files.walk(dataDir)) {
            paths.sorted(Comparator.reverseOrder()).map(Path::toFile).forEach(File::delete);
        }
        errors.delete();
    }
}
