//! `sift broker`.

use sift_broker::front_end::FrontEnd;
use std::net::SocketAddr;
use std::path::PathBuf;

use clap::Args;
use sift_broker::config::{LinkTarget, RoutingMode};
use sift_broker::{Config, RunningBroker};

use crate::broker_doors::{load_config, BoundDoors, DoorPlan, FrontEndConfigs};
use crate::CliError;

/// Arguments of `sift broker`.
#[derive(Debug, Args)]
pub struct BrokerArgs {
    /// Address to listen on [default: 127.0.0.1:7400, or the config file's].
    #[arg(long)]
    listen: Option<SocketAddr>,
    /// Data directory [default: ./sift-data, or the config file's].
    #[arg(long)]
    data: Option<PathBuf>,
    /// TOML configuration file; see sift.example.toml for every option.
    #[arg(long)]
    config: Option<PathBuf>,
    /// Broker name: sent to clients, and this broker's name on the broker
    /// network (unique within the cluster) [default: sift].
    #[arg(long)]
    name: Option<String>,
    /// Address to accept links from other brokers on [default: none, or the config file's].
    #[arg(long, value_name = "ADDR")]
    link_listen: Option<SocketAddr>,
    /// Another broker's link address (host:port) to link to, with cost 1;
    /// repeat for several. Added to the config file's links.
    #[arg(long = "link", value_name = "ADDR")]
    links: Vec<String>,
    /// How messages are forwarded between brokers: `interest` (only towards
    /// brokers that want them) or `flood` (everywhere, for comparison)
    /// [default: interest, or the config file's].
    #[arg(long, value_name = "MODE")]
    routing: Option<RoutingMode>,
    /// Address of the HTTP front-end (JSON, server-sent events, WebSocket,
    /// /metrics), or `off` [default: 127.0.0.1:7480, or the config file's].
    #[arg(long, value_name = "ADDR|off")]
    http: Option<Listen>,
    /// Address of the STOMP 1.2 front-end, or `off` [default:
    /// 127.0.0.1:61613, or the config file's].
    #[arg(long, value_name = "ADDR|off")]
    stomp: Option<Listen>,
    /// Address of the MQTT 3.1.1 and 5.0 front-end, or `off` [default:
    /// 127.0.0.1:1883, or the config file's].
    #[arg(long, value_name = "ADDR|off")]
    mqtt: Option<Listen>,
    /// Address of the AMQP 1.0 front-end (JMS clients such as Qpid JMS), or
    /// `off` [default: 127.0.0.1:5672, or the config file's].
    #[arg(long, value_name = "ADDR|off")]
    amqp: Option<Listen>,
    /// Users file (TOML): who may sign in and what each may do; see
    /// docs/SECURITY.md and `sift passwd` [default: none, or the config
    /// file's; without one the broker is open to every client].
    #[arg(long, value_name = "FILE")]
    users: Option<PathBuf>,
    /// Serve without authentication on addresses other than loopback
    /// (refused by default).
    #[arg(long)]
    allow_anonymous: bool,
    /// Speak TLS on every door and link with this certificate chain (PEM,
    /// leaf first); reloaded on SIGHUP [default: none, or the config
    /// file's `[tls]`].
    #[arg(long, value_name = "PEM", requires = "tls_key")]
    tls_cert: Option<PathBuf>,
    /// The private key of --tls-cert (PEM).
    #[arg(long, value_name = "PEM", requires = "tls_cert")]
    tls_key: Option<PathBuf>,
    /// Check client certificates against this CA (PEM): clients may sign
    /// in by certificate, and broker links must present one (mutual TLS).
    #[arg(long, value_name = "PEM", requires = "tls_cert")]
    tls_client_ca: Option<PathBuf>,
}

/// `--http`, `--stomp`, `--mqtt` and `--amqp`: an address, or `off`.
#[derive(Debug, Clone, Copy)]
enum Listen {
    Off,
    At(SocketAddr),
}

impl Listen {
    /// Applies the choice to a front-end's `enabled` and `listen`.
    fn apply(self, enabled: &mut bool, listen: &mut SocketAddr) {
        match self {
            Listen::Off => *enabled = false,
            Listen::At(address) => {
                *enabled = true;
                *listen = address;
            }
        }
    }
}

impl std::str::FromStr for Listen {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        match text {
            "off" => Ok(Listen::Off),
            address => address
                .parse()
                .map(Listen::At)
                .map_err(|error| format!("{address:?} is neither `off` nor an address (host:port): {error}")),
        }
    }
}

/// Runs a broker until SIGINT or SIGTERM, then shuts it down cleanly.
pub async fn run(args: BrokerArgs) -> Result<(), CliError> {
    let (mut config, mut front_ends) = match &args.config {
        Some(path) => load_config(path)?,
        None => (Config::default(), FrontEndConfigs::default()),
    };
    if let Some(listen) = args.listen {
        config.listen = listen;
    }
    if let Some(data) = args.data {
        config.data_dir = data;
    }
    if let Some(name) = args.name {
        config.network.name = name.clone();
        config.name = name;
    }
    if let Some(link_listen) = args.link_listen {
        config.network.link_listen = Some(link_listen);
    }
    if let Some(routing) = args.routing {
        config.network.routing = routing;
    }
    config.network.links.extend(args.links.into_iter().map(LinkTarget::new));
    if let Some(http) = args.http {
        http.apply(&mut front_ends.http.enabled, &mut front_ends.http.listen);
    }
    if let Some(stomp) = args.stomp {
        stomp.apply(&mut front_ends.stomp.enabled, &mut front_ends.stomp.listen);
    }
    if let Some(mqtt) = args.mqtt {
        mqtt.apply(&mut front_ends.mqtt.enabled, &mut front_ends.mqtt.listen);
    }
    if let Some(amqp) = args.amqp {
        amqp.apply(&mut front_ends.amqp.enabled, &mut front_ends.amqp.listen);
    }
    if let Some(users) = args.users {
        config.auth.users_file = Some(users);
    }
    config.auth.allow_anonymous |= args.allow_anonymous;
    if let (Some(cert), Some(key)) = (args.tls_cert, args.tls_key) {
        config.tls = Some(sift_broker::tls::TlsFiles { cert, key, client_ca: args.tls_client_ca });
    }
    front_ends.inherit_tls(config.tls.as_ref());
    // Handlers go in before the address is printed: whoever reads that line
    // may signal at once, and must get a clean shutdown.
    let signals = Signals::install()?;
    // Every door is bound before the broker opens (and locks) its data
    // directory, so that a failed start leaves it untouched.
    let plan = DoorPlan::of(&config, &front_ends);
    plan.check_exposure(&config)?;
    let users_file = config.auth.users_file.clone();
    let doors = BoundDoors::bind(&front_ends, &plan).await?;
    let broker = RunningBroker::start(config).await.map_err(|error| plan.broker_error(error))?;
    say(&format!("sift broker listening on {}", broker.local_addr()));
    if let Some(tls) = &broker.config().tls {
        say(&format!("sift broker speaks TLS on every door with {}", tls.cert.display()));
    }
    match &users_file {
        None => tracing::warn!("no users file: every client may do everything (--users FILE to require sign-in)"),
        Some(path) => tracing::info!(users = %path.display(), "clients sign in"),
    }
    if let Some(link_addr) = broker.link_addr() {
        say(&format!("sift broker accepting links on {link_addr}"));
    }
    let front_ends = match FrontEnds::start(&broker, doors, front_ends).await {
        Ok(front_ends) => front_ends,
        Err(error) => {
            broker.shutdown().await;
            return Err(error);
        }
    };
    let mut signals = signals;
    while signals.next().await == Signal::Reload {
        front_ends.reload_tls(&broker);
        reload_users(&broker);
    }
    say("sift broker shutting down");
    front_ends.shutdown().await;
    let stats = broker.shutdown().await;
    say(&format!("sift broker stopped: {}", summary(&stats.entries())));
    Ok(())
}

/// Reads the users file again (SIGHUP) and says what came of it.
fn reload_users(broker: &RunningBroker) {
    match broker.reload_users() {
        Ok(Some(count)) => say(&format!("sift broker reloaded its users file ({count} users)")),
        Ok(None) => {}
        Err(error) => say(&format!("sift broker kept its previous users: {error}")),
    }
}

/// The protocol front-ends a broker serves, each over in-process native
/// sessions.
#[derive(Default)]
struct FrontEnds {
    http: Option<sift_http::HttpFrontEnd>,
    stomp: Option<sift_stomp::StompFrontEnd>,
    mqtt: Option<sift_mqtt::MqttFrontEnd>,
    amqp: Option<sift_amqp::AmqpFrontEnd>,
}

impl FrontEnds {
    /// Starts the front-ends whose listeners are bound and prints where
    /// each listens; when one fails, stops those already started.
    async fn start(broker: &RunningBroker, doors: BoundDoors, configs: FrontEndConfigs) -> Result<FrontEnds, CliError> {
        let mut started = FrontEnds::default();
        if let Err(error) = started.start_each(broker, doors, configs).await {
            started.shutdown().await;
            return Err(error);
        }
        Ok(started)
    }

    async fn start_each(
        &mut self,
        broker: &RunningBroker,
        doors: BoundDoors,
        FrontEndConfigs { http, stomp, mqtt, amqp }: FrontEndConfigs,
    ) -> Result<(), CliError> {
        if let Some(listener) = doors.http {
            let front_end = sift_http::HttpFrontEnd::start_on(listener, http, broker.connector()).await?;
            let scheme = if front_end.listening().tls().is_some() { "https" } else { "http" };
            say(&format!("sift broker serving HTTP on {scheme}://{}", front_end.local_addr()));
            self.http = Some(front_end);
        }
        if let Some(listener) = doors.stomp {
            let front_end = sift_stomp::StompFrontEnd::start_on(listener, stomp, broker.connector()).await?;
            say(&format!("sift broker serving STOMP on {}", front_end.local_addr()));
            self.stomp = Some(front_end);
        }
        if let Some(listener) = doors.mqtt {
            let front_end = sift_mqtt::MqttFrontEnd::start_on(listener, mqtt, broker.connector()).await?;
            say(&format!("sift broker serving MQTT on {}", front_end.local_addr()));
            self.mqtt = Some(front_end);
        }
        if let Some(listener) = doors.amqp {
            let front_end = sift_amqp::AmqpFrontEnd::start_on(listener, amqp, broker.connector()).await?;
            say(&format!("sift broker serving AMQP on {}", front_end.local_addr()));
            self.amqp = Some(front_end);
        }
        Ok(())
    }

    /// Reads every door's certificate files again (SIGHUP): the next
    /// handshake of each door uses what loaded; a door whose files are
    /// missing or wrong keeps its previous certificates, and says so.
    fn reload_tls(&self, broker: &RunningBroker) {
        let mut failures: Vec<String> = broker.reload_tls().iter().map(ToString::to_string).collect();
        let doors = [
            ("HTTP", self.http.as_ref().map(FrontEnd::listening)),
            ("STOMP", self.stomp.as_ref().map(FrontEnd::listening)),
            ("MQTT", self.mqtt.as_ref().map(FrontEnd::listening)),
            ("AMQP", self.amqp.as_ref().map(FrontEnd::listening)),
        ];
        let mut any_tls = broker.tls().native.is_some();
        for (door, tls) in doors.map(|(door, listening)| (door, listening.and_then(|listening| listening.tls()))) {
            let Some(tls) = tls else { continue };
            any_tls = true;
            if let Err(error) = tls.reload() {
                failures.push(format!("the {door} door: {error}"));
            }
        }
        match failures.is_empty() {
            true if any_tls => say("sift broker reloaded its TLS certificates"),
            true => {}
            false => {
                for failure in failures {
                    say(&format!("sift broker kept its previous TLS certificates for {failure}"));
                }
            }
        }
    }

    /// Stops each, printing the counters of those that keep them.
    async fn shutdown(self) {
        if let Some(amqp) = self.amqp {
            let counters = amqp.counters().entries();
            amqp.shutdown().await;
            say(&format!("sift amqp stopped: {}", summary(&counters)));
        }
        if let Some(mqtt) = self.mqtt {
            let counters = mqtt.counters().entries();
            mqtt.shutdown().await;
            say(&format!("sift mqtt stopped: {}", summary(&counters)));
        }
        if let Some(stomp) = self.stomp {
            let counters = stomp.counters().entries();
            stomp.shutdown().await;
            say(&format!("sift stomp stopped: {}", summary(&counters)));
        }
        if let Some(http) = self.http {
            http.shutdown().await;
        }
    }
}

/// The counters that are not zero, as `name=value` words.
fn summary(counters: &[(&'static str, u64)]) -> String {
    let words: Vec<String> =
        counters.iter().filter(|(_, value)| *value != 0).map(|(name, value)| format!("{name}={value}")).collect();
    words.join(" ")
}

/// Prints a status line. A closed or broken stdout (a supervisor that went
/// away) must not stop the broker, so write errors are ignored.
fn say(line: &str) {
    use std::io::Write;
    let mut stdout = std::io::stdout().lock();
    let _ = writeln!(stdout, "{line}").and_then(|()| stdout.flush());
}

/// SIGINT, SIGTERM and SIGHUP, listened for from installation on.
pub(crate) struct Signals {
    interrupt: tokio::signal::unix::Signal,
    terminate: tokio::signal::unix::Signal,
    hangup: tokio::signal::unix::Signal,
}

/// What a signal asks of a running command.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Signal {
    /// SIGINT or SIGTERM: shut down cleanly.
    Stop,
    /// SIGHUP: read the certificate files again.
    Reload,
}

impl Signals {
    pub(crate) fn install() -> Result<Signals, CliError> {
        use tokio::signal::unix::{signal, SignalKind};
        let install = |kind| signal(kind).map_err(|error| CliError::Usage(format!("cannot handle signals: {error}")));
        Ok(Signals {
            interrupt: install(SignalKind::interrupt())?,
            terminate: install(SignalKind::terminate())?,
            hangup: install(SignalKind::hangup())?,
        })
    }

    /// The next signal.
    pub(crate) async fn next(&mut self) -> Signal {
        tokio::select! {
            _ = self.interrupt.recv() => Signal::Stop,
            _ = self.terminate.recv() => Signal::Stop,
            _ = self.hangup.recv() => Signal::Reload,
        }
    }

    /// Waits for SIGINT or SIGTERM (a SIGHUP changes nothing here).
    pub(crate) async fn wait(mut self) {
        while self.next().await == Signal::Reload {}
    }
}
