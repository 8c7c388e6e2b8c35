//! The report's own figures for the experiments of `sift bench jbi`,
//! exactly as its text and raw-data tables state them: objects delivered,
//! times (the average of three runs, §10), and objects delivered per
//! second where the text gives a number for the point (Fig. 17, 21, 28,
//! 33, 37, 44 are charts; only the numbers printed in the text or in the
//! tables under them are here). "Software" is the software JBI, "hardware"
//! the Sarvega XPE-2000 XML router; both ran in sync mode (§6).

use super::plan::Experiment;

/// What the report states for one point of an experiment.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SeedPoint {
    /// The experiment.
    pub experiment: Experiment,
    /// Its line, spelled as the plan's variants.
    pub variant: &'static str,
    /// The loading level, or for the steady-increase experiments the number
    /// of subscribers (at 1000).
    pub x: u64,
    /// Objects delivered.
    pub objects_delivered: Option<u64>,
    /// Software JBI's time, in milliseconds.
    pub software_time_ms: Option<f64>,
    /// Hardware JBI's time, in milliseconds.
    pub hardware_time_ms: Option<f64>,
    /// Software JBI's objects delivered per second.
    pub software_per_s: Option<f64>,
    /// Hardware JBI's objects delivered per second.
    pub hardware_per_s: Option<f64>,
    /// Where the numbers are stated.
    pub source: &'static str,
}

/// Shorthand for the table below: (delivered, software ms, hardware ms,
/// software /s, hardware /s).
type Numbers = (Option<u64>, Option<f64>, Option<f64>, Option<f64>, Option<f64>);

const fn point(
    experiment: Experiment,
    variant: &'static str,
    x: u64,
    numbers: Numbers,
    source: &'static str,
) -> SeedPoint {
    let (objects_delivered, software_time_ms, hardware_time_ms, software_per_s, hardware_per_s) = numbers;
    SeedPoint {
        experiment,
        variant,
        x,
        objects_delivered,
        software_time_ms,
        hardware_time_ms,
        software_per_s,
        hardware_per_s,
        source,
    }
}

use Experiment::{FastSlow, HeavyLoad, PayloadIncrease, Saturation, SteadyIncrease, SteadyPayload};

const FAST: &str = "§10.2 (times), Fig. 28 (objects/s)";
const SLOW: &str = "§10.1 (times)";
const STEADY: &str = "Table 4, Table 6 (times), §7.2.3 (objects/s)";
const STEADY_3X: &str = "Table 4, Table 6 (times), §7.2.3 and Fig. 28 (objects/s)";
const PAYLOAD: &str = "Fig. 28";
const STEADY_PAYLOAD: &str = "Table 4, Table 6 (times)";
const STEADY_PAYLOAD_3X: &str = "Table 4, Table 6 (times), Fig. 28 (objects/s)";
const HEAVY: &str = "Fig. 37";
const SATURATION_FAST: &str = "§10.5 (times), Fig. 44 (objects/s)";
const SATURATION_SLOW: &str = "§10.6 (times), Fig. 44 (objects/s)";

/// Every point for which the report states a number. The software JBI
/// crashed at saturation 4 × 2000 (§7.6.1, §10.5.2, §10.6.2), so it has no
/// figure there.
pub const SEED_POINTS: [SeedPoint; 44] = [
    point(FastSlow, "fast", 250, (Some(1312), Some(16670.11), Some(9972.222), Some(78.70373), Some(131.5655)), FAST),
    point(FastSlow, "fast", 500, (Some(4740), Some(52595.56), Some(23383.89), Some(90.12168), Some(202.7037)), FAST),
    point(FastSlow, "fast", 1000, (Some(17520), Some(189274.3), Some(63283.0), Some(92.56406), Some(276.8516)), FAST),
    point(FastSlow, "fast", 2000, (Some(69327), Some(945826.9), Some(269248.4), Some(73.29777), Some(257.4834)), FAST),
    point(FastSlow, "slow", 250, (Some(1312), Some(18266.0), Some(13297.44), None, None), SLOW),
    point(FastSlow, "slow", 500, (Some(4740), Some(57782.11), Some(30404.22), None, None), SLOW),
    point(FastSlow, "slow", 1000, (Some(17520), Some(210887.0), Some(83465.56), None, None), SLOW),
    point(FastSlow, "slow", 2000, (Some(69327), Some(977102.0), Some(287755.0), None, None), SLOW),
    point(SteadyIncrease, "2 KB", 2, (Some(11788), Some(131377.2), Some(52307.5), Some(89.7), Some(225.4)), STEADY),
    point(
        SteadyIncrease,
        "2 KB",
        3,
        (Some(17520), Some(189274.3), Some(63283.0), Some(92.6), Some(276.8516)),
        STEADY_3X,
    ),
    point(SteadyIncrease, "2 KB", 4, (Some(23487), Some(268981.6), Some(72858.08), Some(87.3), Some(322.4)), STEADY),
    point(PayloadIncrease, "2 KB", 250, (Some(1312), None, None, Some(78.70373), Some(131.5655)), PAYLOAD),
    point(PayloadIncrease, "2 KB", 500, (Some(4740), None, None, Some(90.12168), Some(202.7037)), PAYLOAD),
    point(PayloadIncrease, "2 KB", 1000, (Some(17520), None, None, Some(92.56406), Some(276.8516)), PAYLOAD),
    point(PayloadIncrease, "2 KB", 2000, (Some(69327), None, None, Some(73.29777), Some(257.4834)), PAYLOAD),
    point(PayloadIncrease, "25 KB", 250, (Some(1312), None, None, Some(24.71265), Some(16.66514)), PAYLOAD),
    point(PayloadIncrease, "25 KB", 500, (Some(4740), None, None, Some(27.66537), Some(39.19998)), PAYLOAD),
    point(PayloadIncrease, "25 KB", 1000, (Some(17520), None, None, Some(27.01228), Some(68.40362)), PAYLOAD),
    point(PayloadIncrease, "25 KB", 2000, (Some(69327), None, None, Some(21.51733), Some(105.501)), PAYLOAD),
    point(PayloadIncrease, "50 KB", 250, (Some(1312), None, None, Some(16.42139), Some(14.2426)), PAYLOAD),
    point(PayloadIncrease, "50 KB", 500, (Some(4740), None, None, Some(17.47793), Some(21.92874)), PAYLOAD),
    point(PayloadIncrease, "50 KB", 1000, (Some(17520), None, None, Some(17.24392), Some(36.02545)), PAYLOAD),
    point(PayloadIncrease, "50 KB", 2000, (Some(69327), None, None, Some(12.8515), Some(54.89489)), PAYLOAD),
    point(SteadyPayload, "2 KB", 2, (Some(11788), Some(131377.2), Some(52307.5), Some(89.7), Some(225.4)), STEADY),
    point(
        SteadyPayload,
        "2 KB",
        3,
        (Some(17520), Some(189274.3), Some(63283.0), Some(92.6), Some(276.8516)),
        STEADY_3X,
    ),
    point(SteadyPayload, "2 KB", 4, (Some(23487), Some(268981.6), Some(72858.08), Some(87.3), Some(322.4)), STEADY),
    point(SteadyPayload, "25 KB", 2, (Some(11788), Some(432059.3), Some(238033.7), None, None), STEADY_PAYLOAD),
    point(
        SteadyPayload,
        "25 KB",
        3,
        (Some(17520), Some(648593.9), Some(256126.8), Some(27.01228), Some(68.40362)),
        STEADY_PAYLOAD_3X,
    ),
    point(SteadyPayload, "25 KB", 4, (Some(23487), Some(925448.0), Some(258350.4), None, None), STEADY_PAYLOAD),
    point(SteadyPayload, "50 KB", 2, (Some(11788), Some(692692.5), Some(431924.5), None, None), STEADY_PAYLOAD),
    point(
        SteadyPayload,
        "50 KB",
        3,
        (Some(17520), Some(1016010.0), Some(486322.9), Some(17.24392), Some(36.02545)),
        STEADY_PAYLOAD_3X,
    ),
    point(SteadyPayload, "50 KB", 4, (Some(23487), Some(1564901.0), Some(490261.6), None, None), STEADY_PAYLOAD),
    point(HeavyLoad, "3 publishers", 250, (Some(1740), None, None, Some(53.46179), Some(114.5344)), HEAVY),
    point(HeavyLoad, "3 publishers", 500, (Some(6774), None, None, Some(64.52658), Some(186.1424)), HEAVY),
    point(HeavyLoad, "3 publishers", 1000, (Some(32256), None, None, Some(69.876), Some(296.444)), HEAVY),
    point(HeavyLoad, "3 publishers", 2000, (Some(124316), None, None, Some(49.82671), Some(374.1876)), HEAVY),
    point(
        Saturation,
        "fast",
        250,
        (Some(2843), Some(34078.33), Some(20245.0), Some(83.42544), Some(140.4297)),
        SATURATION_FAST,
    ),
    point(
        Saturation,
        "fast",
        500,
        (Some(10209), Some(86213.67), Some(39547.0), Some(118.4151), Some(258.1485)),
        SATURATION_FAST,
    ),
    point(
        Saturation,
        "fast",
        1000,
        (Some(39535), Some(485494.7), Some(92666.33), Some(81.43241), Some(426.6382)),
        SATURATION_FAST,
    ),
    point(Saturation, "fast", 2000, (Some(151111), None, Some(240926.7), None, Some(627.2074)), SATURATION_FAST),
    point(
        Saturation,
        "slow",
        250,
        (Some(2843), Some(38105.0), Some(25186.67), Some(74.60963), Some(112.8772)),
        SATURATION_SLOW,
    ),
    point(
        Saturation,
        "slow",
        500,
        (Some(10209), Some(97443.67), Some(63017.33), Some(104.7682), Some(162.003)),
        SATURATION_SLOW,
    ),
    point(
        Saturation,
        "slow",
        1000,
        (Some(39535), Some(651039.7), Some(208016.3), Some(60.72595), Some(190.0572)),
        SATURATION_SLOW,
    ),
    point(Saturation, "slow", 2000, (Some(151111), None, Some(734135.3), None, Some(205.8353)), SATURATION_SLOW),
];

/// The report's point of `experiment`, `variant` and `x`, if it states one.
pub fn seed_point(experiment: Experiment, variant: &str, x: u64) -> Option<&'static SeedPoint> {
    SEED_POINTS.iter().find(|point| point.experiment == experiment && point.variant == variant && point.x == x)
}

/// Table 3 (§7.1): how much longer a run took with a slow subscriber, in
/// percent, per loading level: (level, hardware, software).
pub const SLOW_IMPACT_PERCENT: [(u64, f64, f64); 4] =
    [(250, 33.3, 9.6), (500, 30.0, 9.9), (1000, 31.9, 11.4), (2000, 6.9, 3.3)];

/// One row of Table 2 (§4.5.6).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SyncAsyncRow {
    /// `HW/Async`, `HW/Sync`, `SW/Sync`.
    pub method: &'static str,
    /// Objects received.
    pub objects_received: u64,
    /// Approximate time, milliseconds.
    pub time_ms: f64,
    /// Approximate loss, percent.
    pub loss_percent: f64,
}

/// Table 2 (§4.5.6). The report does not say which run it comes from.
pub const SYNC_ASYNC: [SyncAsyncRow; 3] = [
    SyncAsyncRow { method: "HW/Async", objects_received: 34_477, time_ms: 125_000.0, loss_percent: 0.56 },
    SyncAsyncRow { method: "HW/Sync", objects_received: 34_672, time_ms: 188_000.0, loss_percent: 0.0 },
    SyncAsyncRow { method: "SW/Sync", objects_received: 34_675, time_ms: 442_000.0, loss_percent: 0.0 },
];
