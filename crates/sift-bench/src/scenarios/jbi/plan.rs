//! The grid of `sift bench jbi`: the six experiments of the JBI report's
//! §7 and the sync/async comparison of its Table 2, each point a [`Setup`]
//! of publishers and subscribers at a loading level.
//!
//! A loading level L (§6: 250, 500, 1000, 2000) is both the number of
//! objects each publisher publishes and the number of subscriptions each
//! subscriber registers per object type it wants; the experiments multiply
//! it by their numbers of subscribers and publishers (3 × L, 6 × L, 4 × L),
//! as the raw data of §10 shows. The seeds are the report's own (§10): they
//! do not give its objects back (its generator is not published), but they
//! keep publishers and subscribers apart, as §6 asks.

use std::time::Duration;

use sift_core::workload::ObjectType;

use crate::error::BenchError;

/// Loading levels of the full grid (§6).
pub const LEVELS_FULL: [u64; 4] = [250, 500, 1000, 2000];
/// The loading level of `--quick`.
pub const LEVEL_QUICK: u64 = 250;
/// Level of the steady-increase experiments (§7.2, §7.4: 2 × 1000, 3 × 1000, 4 × 1000).
pub const STEADY_LEVEL_FULL: u64 = 1000;
/// Subscriber counts of the steady-increase experiments.
pub const STEADY_SUBSCRIBERS: [usize; 3] = [2, 3, 4];
/// Payload sizes of the payload experiments (§7.3: about 2, 25 and 50 KB).
pub const PAYLOADS_FULL: [usize; 3] = [2 * 1024, 25 * 1024, 50 * 1024];
/// Payload sizes of `--quick`.
pub const PAYLOADS_QUICK: [usize; 2] = [2 * 1024, 25 * 1024];
/// Subscribers of the fast/slow and payload experiments (§7.1, §7.3).
pub const BASE_SUBSCRIBERS: usize = 3;
/// Rounds of the full grid: §7 ran every level three times.
pub const ROUNDS_FULL: u32 = 3;
/// Rounds of `--quick`.
pub const ROUNDS_QUICK: u32 = 1;
/// Rate of the emulated slow link: the report's slow machine had the only
/// 100 Mbit/s card of the lab (§4.3, Table 1).
pub const SLOW_LINK_MBIT_PER_S_DEFAULT: f64 = 100.0;

/// Publisher seed of the one-publisher experiments (§10.1-10.3).
const BASIC_PUBLISHER_SEED: u64 = 1141;
/// Seed of the first subscriber of the one-publisher experiments; the
/// others follow it (§10.1-10.3: 141, 142, 143, 144).
const BASIC_SUBSCRIBER_SEED_FIRST: u64 = 141;
/// Publishers of the heavy-load experiment, one object type each (§10.4).
const HEAVY_PUBLISHERS: [(ObjectType, u64); 3] =
    [(ObjectType::Basic, 1151), (ObjectType::XmlXpath, 1152), (ObjectType::Ato, 1153)];
/// Subscribers of the heavy-load experiment, each wanting all three types
/// (§10.4: seeds 151-153 and 154-156).
const HEAVY_SUBSCRIBERS: [[(ObjectType, u64); 3]; 2] = [
    [(ObjectType::Basic, 151), (ObjectType::XmlXpath, 152), (ObjectType::Ato, 153)],
    [(ObjectType::Basic, 154), (ObjectType::XmlXpath, 155), (ObjectType::Ato, 156)],
];
/// Publisher seeds of the saturation experiment, all `xmlxpath` (§10.5-10.6).
const SATURATION_PUBLISHER_SEEDS: [u64; 4] = [1171, 1172, 1173, 1174];
/// Subscriber seed of the saturation experiment.
const SATURATION_SUBSCRIBER_SEED: u64 = 171;
/// Rough cost of one object on this machine, to guess whether a run
/// deserves a progress bar.
const EXPECTED_OBJECT_COST: Duration = Duration::from_micros(500);

/// One experiment of the report.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Experiment {
    /// §7.1: 1 publisher, 3 subscribers × L, one of them slow or not.
    FastSlow,
    /// §7.2: 1 publisher, 2, 3 and 4 subscribers × 1000.
    SteadyIncrease,
    /// §7.3: 1 publisher, 3 subscribers × L, payloads of 2, 25 and 50 KB.
    PayloadIncrease,
    /// §7.4: §7.2 with the payloads of §7.3.
    SteadyPayload,
    /// §7.5: 3 publishers (one object type each), 2 subscribers × 3 types × L.
    HeavyLoad,
    /// §7.6: 4 publishers × L objects, 1 subscriber × L, fast or slow.
    Saturation,
    /// §4.5.6, Table 2: acknowledged (sync) against best-effort (async) delivery.
    SyncAsync,
}

impl Experiment {
    /// All of them, in the report's order.
    pub const ALL: [Experiment; 7] = [
        Experiment::FastSlow,
        Experiment::SteadyIncrease,
        Experiment::PayloadIncrease,
        Experiment::SteadyPayload,
        Experiment::HeavyLoad,
        Experiment::Saturation,
        Experiment::SyncAsync,
    ];

    /// The name on the command line and of its table.
    pub fn name(self) -> &'static str {
        match self {
            Experiment::FastSlow => "fast_slow",
            Experiment::SteadyIncrease => "steady_increase",
            Experiment::PayloadIncrease => "payload_increase",
            Experiment::SteadyPayload => "steady_payload",
            Experiment::HeavyLoad => "heavy_load",
            Experiment::Saturation => "saturation",
            Experiment::SyncAsync => "sync_async",
        }
    }

    /// Where the report describes it.
    pub fn section(self) -> &'static str {
        match self {
            Experiment::FastSlow => "§7.1",
            Experiment::SteadyIncrease => "§7.2",
            Experiment::PayloadIncrease => "§7.3",
            Experiment::SteadyPayload => "§7.4",
            Experiment::HeavyLoad => "§7.5",
            Experiment::Saturation => "§7.6",
            Experiment::SyncAsync => "§4.5.6",
        }
    }

    /// Whether its points vary the number of subscribers at one level,
    /// rather than the level.
    pub fn varies_subscribers(self) -> bool {
        matches!(self, Experiment::SteadyIncrease | Experiment::SteadyPayload)
    }

    fn parse(text: &str) -> Result<Experiment, BenchError> {
        Experiment::ALL.into_iter().find(|experiment| experiment.name() == text).ok_or_else(|| {
            let names: Vec<&str> = Experiment::ALL.iter().map(|experiment| experiment.name()).collect();
            BenchError::Usage(format!("--experiments: no experiment {text:?} (one of {})", names.join(", ")))
        })
    }
}

/// How a publisher waits before its next object (§4.5.6).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Confirmation {
    /// Reliable delivery, confirmed once every matched subscriber acknowledged
    /// (`await=delivered`): the report's "sync", used in all of §7.
    Sync,
    /// Best-effort delivery, confirmed once routed: the report's "async".
    Async,
}

impl Confirmation {
    /// `sync` or `async`.
    pub fn name(self) -> &'static str {
        match self {
            Confirmation::Sync => "sync",
            Confirmation::Async => "async",
        }
    }
}

/// Where a publisher's objects or a subscriber's subscriptions of one type
/// come from: the type and the seed of its workload.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Source {
    /// The object type.
    pub object_type: ObjectType,
    /// The workload seed.
    pub seed: u64,
}

/// One subscriber: its subscriptions (L of each source) and its link.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct SubscriberSpec {
    /// What it subscribes to.
    pub interests: Vec<Source>,
    /// Whether it sits behind the emulated slow link.
    pub slow: bool,
}

/// One run: who publishes and subscribes what, at which level.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Setup {
    /// Objects per publisher and subscriptions per subscriber interest.
    pub level: u64,
    /// The publishers, each publishing `level` objects.
    pub publishers: Vec<Source>,
    /// The subscribers.
    pub subscribers: Vec<SubscriberSpec>,
    /// Payload bytes per object (the metadata adds about 2 KB).
    pub payload_bytes: usize,
    /// How publishers wait for their confirms.
    pub confirmation: Confirmation,
}

impl Setup {
    /// Objects published in all.
    pub fn objects(&self) -> u64 {
        self.level * self.publishers.len() as u64
    }

    /// Subscriptions registered in all (the report's aggregate subscribers).
    pub fn subscriptions(&self) -> u64 {
        self.level * self.subscribers.iter().map(|subscriber| subscriber.interests.len() as u64).sum::<u64>()
    }

    /// Whether a subscriber is slow.
    pub fn has_slow_subscriber(&self) -> bool {
        self.subscribers.iter().any(|subscriber| subscriber.slow)
    }

    /// Who subscribes to what: setups with the same audience share one set
    /// of subscriptions.
    pub fn audience(&self) -> Audience {
        (self.level, self.subscribers.iter().map(|subscriber| subscriber.interests.clone()).collect())
    }

    /// A short description for the progress bar.
    pub fn label(&self) -> String {
        let slow = if self.has_slow_subscriber() { ", slow" } else { "" };
        format!(
            "L={} {}→{} {} {}{slow}",
            self.level,
            self.publishers.len(),
            self.subscribers.len(),
            payload_text(self.payload_bytes),
            self.confirmation.name()
        )
    }
}

/// A level and each subscriber's interests.
pub type Audience = (u64, Vec<Vec<Source>>);

/// `2 KB`, `25 KB`; sizes that are not whole kilobytes in bytes.
pub fn payload_text(bytes: usize) -> String {
    if bytes.is_multiple_of(1024) {
        format!("{} KB", bytes / 1024)
    } else {
        format!("{bytes} B")
    }
}

/// One row of an experiment's table: which setup it reports.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Row {
    /// The experiment.
    pub experiment: Experiment,
    /// The line it belongs to in the experiment's figure (`fast`, `25 KB`).
    pub variant: String,
    /// Index of its setup in [`Plan::setups`].
    pub setup: usize,
}

/// What to run, parsed from the arguments.
#[derive(Debug, Clone, PartialEq)]
pub struct Choices {
    /// Loading levels.
    pub levels: Vec<u64>,
    /// Level of the steady-increase experiments.
    pub steady_level: u64,
    /// Level of the sync/async comparison.
    pub sync_async_level: u64,
    /// Payload sizes of the payload experiments; the first is the base.
    pub payloads: Vec<usize>,
    /// The experiments.
    pub experiments: Vec<Experiment>,
}

impl Choices {
    /// The grid of `--quick` or the full one, with the experiments named
    /// (all when `names` is empty) and levels given (the default when empty).
    pub fn new(quick: bool, names: &[String], levels: &[u64]) -> Result<Choices, BenchError> {
        let levels = match (levels, quick) {
            ([], false) => LEVELS_FULL.to_vec(),
            ([], true) => vec![LEVEL_QUICK],
            (levels, _) => levels.to_vec(),
        };
        if levels.contains(&0) {
            return Err(BenchError::Usage("--levels must be at least 1".into()));
        }
        let experiments = if names.is_empty() {
            Experiment::ALL.to_vec()
        } else {
            names.iter().map(|name| Experiment::parse(name)).collect::<Result<Vec<_>, _>>()?
        };
        let highest = levels.iter().copied().max().unwrap_or(LEVEL_QUICK);
        Ok(Choices {
            steady_level: if quick || !levels.contains(&STEADY_LEVEL_FULL) { highest } else { STEADY_LEVEL_FULL },
            sync_async_level: highest,
            payloads: if quick { PAYLOADS_QUICK.to_vec() } else { PAYLOADS_FULL.to_vec() },
            levels,
            experiments,
        })
    }
}

/// The whole grid: distinct setups, and the rows that report them (a setup
/// shared by two experiments, such as 3 × 1000 with 2 KB, runs once).
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    /// The choices it was built from.
    pub choices: Choices,
    /// Distinct setups, in the order they run.
    pub setups: Vec<Setup>,
    /// Rows of the experiments' tables, experiment by experiment.
    pub rows: Vec<Row>,
    /// Rounds of the whole grid.
    pub rounds: u32,
}

impl Plan {
    /// The plan of `choices`, each setup run `rounds` times.
    pub fn new(choices: Choices, rounds: u32) -> Result<Plan, BenchError> {
        if rounds == 0 {
            return Err(BenchError::Usage("--rounds must be at least 1".into()));
        }
        let mut plan = Plan { choices, setups: Vec::new(), rows: Vec::new(), rounds };
        for experiment in plan.choices.experiments.clone() {
            for (variant, setup) in experiment_setups(experiment, &plan.choices) {
                plan.add(experiment, variant, setup);
            }
        }
        Ok(plan)
    }

    fn add(&mut self, experiment: Experiment, variant: String, setup: Setup) {
        let index = match self.setups.iter().position(|known| *known == setup) {
            Some(index) => index,
            None => {
                self.setups.push(setup);
                self.setups.len() - 1
            }
        };
        self.rows.push(Row { experiment, variant, setup: index });
    }

    /// The rows of one experiment.
    pub fn rows_of(&self, experiment: Experiment) -> impl Iterator<Item = &Row> + '_ {
        self.rows.iter().filter(move |row| row.experiment == experiment)
    }

    /// Indices of the setups grouped by audience, groups in the order of
    /// their first setup.
    pub fn groups(&self) -> Vec<Vec<usize>> {
        let mut groups: Vec<(Audience, Vec<usize>)> = Vec::new();
        for (index, setup) in self.setups.iter().enumerate() {
            let audience = setup.audience();
            match groups.iter_mut().find(|(known, _)| *known == audience) {
                Some((_, members)) => members.push(index),
                None => groups.push((audience, vec![index])),
            }
        }
        groups.into_iter().map(|(_, members)| members).collect()
    }

    /// A rough guess of the run's length, for the progress bar.
    pub fn expected_duration(&self) -> Duration {
        let objects: u64 = self.setups.iter().map(Setup::objects).sum();
        EXPECTED_OBJECT_COST * (objects * u64::from(self.rounds)).min(u64::from(u32::MAX)) as u32
    }
}

/// The variants and setups of one experiment.
fn experiment_setups(experiment: Experiment, choices: &Choices) -> Vec<(String, Setup)> {
    let base = choices.payloads.first().copied().unwrap_or(PAYLOADS_FULL[0]);
    let mut setups = Vec::new();
    match experiment {
        Experiment::FastSlow => {
            for &level in &choices.levels {
                for slow in [false, true] {
                    let setup = basic_setup(level, BASE_SUBSCRIBERS, slow, base, Confirmation::Sync);
                    setups.push((fast_or_slow(slow).to_string(), setup));
                }
            }
        }
        Experiment::SteadyIncrease | Experiment::SteadyPayload => {
            let payloads =
                if experiment == Experiment::SteadyIncrease { &choices.payloads[..1] } else { &choices.payloads };
            for &payload in payloads {
                for subscribers in STEADY_SUBSCRIBERS {
                    let setup = basic_setup(choices.steady_level, subscribers, false, payload, Confirmation::Sync);
                    setups.push((payload_text(payload), setup));
                }
            }
        }
        Experiment::PayloadIncrease => {
            for &payload in &choices.payloads {
                for &level in &choices.levels {
                    let setup = basic_setup(level, BASE_SUBSCRIBERS, false, payload, Confirmation::Sync);
                    setups.push((payload_text(payload), setup));
                }
            }
        }
        Experiment::HeavyLoad => {
            for &level in &choices.levels {
                setups.push((HEAVY_VARIANT.to_string(), heavy_setup(level, base)));
            }
        }
        Experiment::Saturation => {
            for slow in [false, true] {
                for &level in &choices.levels {
                    setups.push((fast_or_slow(slow).to_string(), saturation_setup(level, slow, base)));
                }
            }
        }
        Experiment::SyncAsync => {
            for confirmation in [Confirmation::Sync, Confirmation::Async] {
                for slow in [false, true] {
                    let setup = basic_setup(choices.sync_async_level, BASE_SUBSCRIBERS, slow, base, confirmation);
                    setups.push((format!("{}, {}", confirmation.name(), fast_or_slow(slow)), setup));
                }
            }
        }
    }
    setups
}

/// The variant of the heavy-load experiment's one line.
pub const HEAVY_VARIANT: &str = "3 publishers";

/// `fast` or `slow`: the variants of §7.1 and §7.6.
pub fn fast_or_slow(slow: bool) -> &'static str {
    if slow {
        "slow"
    } else {
        "fast"
    }
}

/// One `basic` publisher and `subscribers` subscribers of `basic`, the last
/// one slow if `slow` (§7.1-7.4).
fn basic_setup(level: u64, subscribers: usize, slow: bool, payload_bytes: usize, confirmation: Confirmation) -> Setup {
    let source = |seed| Source { object_type: ObjectType::Basic, seed };
    let subscribers = (0..subscribers)
        .map(|index| SubscriberSpec {
            interests: vec![source(BASIC_SUBSCRIBER_SEED_FIRST + index as u64)],
            slow: slow && index + 1 == subscribers,
        })
        .collect();
    Setup { level, publishers: vec![source(BASIC_PUBLISHER_SEED)], subscribers, payload_bytes, confirmation }
}

/// Three publishers, one per object type, and two subscribers of all three (§7.5).
fn heavy_setup(level: u64, payload_bytes: usize) -> Setup {
    let source = |(object_type, seed): (ObjectType, u64)| Source { object_type, seed };
    Setup {
        level,
        publishers: HEAVY_PUBLISHERS.into_iter().map(source).collect(),
        subscribers: HEAVY_SUBSCRIBERS
            .iter()
            .map(|interests| SubscriberSpec { interests: interests.iter().copied().map(source).collect(), slow: false })
            .collect(),
        payload_bytes,
        confirmation: Confirmation::Sync,
    }
}

/// Four `xmlxpath` publishers and one subscriber, fast or slow (§7.6).
fn saturation_setup(level: u64, slow: bool, payload_bytes: usize) -> Setup {
    let source = |seed| Source { object_type: ObjectType::XmlXpath, seed };
    Setup {
        level,
        publishers: SATURATION_PUBLISHER_SEEDS.into_iter().map(source).collect(),
        subscribers: vec![SubscriberSpec { interests: vec![source(SATURATION_SUBSCRIBER_SEED)], slow }],
        payload_bytes,
        confirmation: Confirmation::Sync,
    }
}
