//! Unit tests of `sift bench jbi`: the grid, the report's figures as
//! transcribed, the tables, and a small run over the wire checked against
//! evaluating every XPath filter on every object one by one.

use sift_core::workload::{JbiWorkload, ObjectType};
use sift_filter::XPathFilter;

use super::*;
use crate::report::Cell;
use execute::{run_group, RoundResult};

use plan::{Confirmation, Setup, LEVELS_FULL};
use seed_figures::{seed_point, SEED_POINTS, SLOW_IMPACT_PERCENT};

fn args(quick: bool) -> JbiArgs {
    JbiArgs {
        experiments: Vec::new(),
        levels: Vec::new(),
        rounds: None,
        slow_link_mbit: SLOW_LINK_MBIT_PER_S_DEFAULT,
        via: ViaArg::Native,
        http: None,
        common: CommonArgs { quick, ..CommonArgs::default() },
    }
}

fn setup_of<'a>(plan: &'a Plan, experiment: Experiment, variant: &str, level: u64) -> (usize, &'a Setup) {
    let row = plan
        .rows_of(experiment)
        .find(|row| row.variant == variant && plan.setups[row.setup].level == level)
        .expect("row");
    (row.setup, &plan.setups[row.setup])
}

#[test]
fn the_full_grid_has_the_reports_experiments_and_runs_shared_setups_once() {
    let plan = args(false).plan().expect("plan");
    assert_eq!(plan.choices.levels, LEVELS_FULL);
    assert_eq!(plan.rounds, 3);
    let rows = |experiment| plan.rows_of(experiment).count();
    assert_eq!(rows(Experiment::FastSlow), 8);
    assert_eq!(rows(Experiment::SteadyIncrease), 3);
    assert_eq!(rows(Experiment::PayloadIncrease), 12);
    assert_eq!(rows(Experiment::SteadyPayload), 9);
    assert_eq!(rows(Experiment::HeavyLoad), 4);
    assert_eq!(rows(Experiment::Saturation), 8);
    assert_eq!(rows(Experiment::SyncAsync), 4);
    // 3 × 1000 with 2 KB is the fast run of §7.1, a point of §7.2, §7.3 and §7.4.
    let (fast, setup) = setup_of(&plan, Experiment::FastSlow, "fast", 1000);
    let steady: Vec<usize> = plan.rows_of(Experiment::SteadyIncrease).map(|row| row.setup).collect();
    assert_eq!(steady[1], fast, "the second steady point has 3 subscribers");
    assert_eq!(setup_of(&plan, Experiment::PayloadIncrease, "2 KB", 1000).0, fast);
    assert_eq!((setup.objects(), setup.subscriptions(), setup.payload_bytes), (1000, 3000, 2048));
    assert!(!setup.has_slow_subscriber());
    let (slow_index, slow) = setup_of(&plan, Experiment::FastSlow, "slow", 2000);
    assert_eq!(slow.subscribers.iter().map(|subscriber| subscriber.slow).collect::<Vec<_>>(), [false, false, true]);
    assert_eq!(plan.setups.len(), 8 + 8 + 6 + 4 + 8 + 2, "distinct setups");
    // Setups that differ only in payload, confirmation or the slow link share subscriptions.
    let groups = plan.groups();
    let at_2000 = groups.iter().find(|group| group.contains(&slow_index)).expect("group");
    assert_eq!(at_2000.len(), 6, "fast, slow, 25 KB, 50 KB, async fast, async slow");
    assert_eq!(groups.len(), 4 + 2 + 4 + 4);
}

#[test]
fn heavy_load_and_saturation_multiply_the_level_as_the_report_does() {
    let plan = args(false).plan().expect("plan");
    let (_, heavy) = setup_of(&plan, Experiment::HeavyLoad, plan::HEAVY_VARIANT, 250);
    // Fig. 37: 6 × 250 = 1500 aggregate subscribers; three publishers of one type each.
    assert_eq!((heavy.subscriptions(), heavy.objects()), (1500, 750));
    let types: Vec<ObjectType> = heavy.publishers.iter().map(|source| source.object_type).collect();
    assert_eq!(types, [ObjectType::Basic, ObjectType::XmlXpath, ObjectType::Ato]);
    let (_, saturation) = setup_of(&plan, Experiment::Saturation, "slow", 2000);
    // Fig. 44: four publishers of 2000 objects to one subscriber of 2000 subscriptions.
    assert_eq!((saturation.objects(), saturation.subscriptions()), (8000, 2000));
    assert!(saturation.has_slow_subscriber());
    let (_, sync_async) = setup_of(&plan, Experiment::SyncAsync, "async, slow", 2000);
    assert_eq!(sync_async.confirmation, Confirmation::Async);
}

#[test]
fn the_quick_grid_is_one_small_level() {
    let plan = args(true).plan().expect("plan");
    assert_eq!(plan.choices.levels, [plan::LEVEL_QUICK]);
    assert_eq!(plan.choices.steady_level, plan::LEVEL_QUICK);
    assert_eq!(plan.rounds, 1);
    assert!(plan.setups.iter().all(|setup| setup.level == plan::LEVEL_QUICK));
    assert!(plan.setups.iter().all(|setup| setup.payload_bytes <= 25 * 1024));
}

#[test]
fn bad_arguments_are_refused() {
    let mut bad = args(true);
    bad.experiments = vec!["fast-slow".into()];
    assert!(bad.plan().expect_err("unknown experiment").to_string().contains("fast_slow"));
    let mut bad = args(true);
    bad.levels = vec![0];
    assert!(bad.plan().is_err());
    let mut bad = args(true);
    bad.rounds = Some(0);
    assert!(bad.plan().is_err());
    let mut bad = args(true);
    bad.slow_link_mbit = 0.0;
    assert!(bad.plan().is_err());
}

/// Where the report states a time and a rate for the same point, the rate
/// is objects delivered over the time: a check of the transcription.
#[test]
fn the_reports_rates_are_its_deliveries_over_its_times() {
    let mut checked = 0;
    for point in &SEED_POINTS {
        let Some(delivered) = point.objects_delivered else { continue };
        for (time_ms, per_s) in
            [(point.software_time_ms, point.software_per_s), (point.hardware_time_ms, point.hardware_per_s)]
        {
            let (Some(time_ms), Some(per_s)) = (time_ms, per_s) else { continue };
            let derived = delivered as f64 / (time_ms / 1e3);
            assert!((derived / per_s - 1.0).abs() < 1e-3, "{point:?}: {derived} against {per_s}");
            checked += 1;
        }
    }
    assert!(checked >= 30, "{checked}");
}

/// Table 3 is the slow runs' times of §10.1 over the fast runs' of §10.2.
#[test]
fn table_3_is_the_slow_times_over_the_fast_times() {
    for (level, hardware, software) in SLOW_IMPACT_PERCENT {
        let fast = seed_point(Experiment::FastSlow, "fast", level).expect("fast");
        let slow = seed_point(Experiment::FastSlow, "slow", level).expect("slow");
        let impact = |slow: Option<f64>, fast: Option<f64>| (slow.expect("slow") / fast.expect("fast") - 1.0) * 100.0;
        assert!((impact(slow.hardware_time_ms, fast.hardware_time_ms) - hardware).abs() < 0.06, "{level}");
        assert!((impact(slow.software_time_ms, fast.software_time_ms) - software).abs() < 0.06, "{level}");
    }
}

fn round(delivered: u64, time_s: f64) -> RoundResult {
    RoundResult { published: 100, owed: delivered + 1, delivered, time_s, ..RoundResult::default() }
}

#[test]
fn a_setup_reports_its_round_of_median_time() {
    let summary = Summary::of(&[round(10, 3.0), round(20, 1.0), round(30, 2.0)]).expect("summary");
    assert_eq!((summary.median.delivered, summary.time_s_min, summary.time_s_max), (30, 1.0, 3.0));
    assert_eq!(summary.median.lost(), 1);
    assert_eq!(summary.median.delivered_per_s(), 15.0);
    assert_eq!(summary.median.ms_per_object(), Some(2000.0 / 30.0));
    assert_eq!(Summary::of(&[]), None);
    assert_eq!(round(0, 1.0).ms_per_object(), None);
}

#[test]
fn tables_put_the_reports_figures_beside_the_right_points() {
    let plan = args(false).plan().expect("plan");
    let summaries: Vec<Option<Summary>> =
        plan.setups.iter().map(|setup| Summary::of(&[round(setup.level * 10, 2.0)])).collect();
    let mut report = Report::new(NAME, TITLE);
    fill_report(&mut report, &args(false), &plan, &summaries).expect("report");
    let fast_slow = report.table("fast_slow").expect("fast_slow");
    assert_eq!(fast_slow.rows.len(), 8);
    // Row 4 is the fast run at 1000: Fig. 28 gives 92.56 (software) and 276.85 (hardware).
    assert_eq!(fast_slow.cell(4, "level"), Some(&Cell::Int(1000)));
    assert_eq!(fast_slow.cell(4, "seed_software_per_s"), Some(&Cell::Float(92.56406)));
    assert_eq!(fast_slow.cell(4, "objects_delivered_per_s"), Some(&Cell::Float(5000.0)));
    assert_eq!(fast_slow.cell(5, "seed_software_per_s"), Some(&Cell::Empty), "no rate stated for slow runs");
    let steady = report.table("steady_increase").expect("steady");
    assert_eq!(steady.cell(2, "seed_hardware_per_s"), Some(&Cell::Float(322.4)));
    let saturation = report.table("saturation").expect("saturation");
    assert_eq!(saturation.cell(3, "seed_software_per_s"), Some(&Cell::Empty), "the software JBI crashed");
    let impact = report.table("slow_impact").expect("impact");
    assert_eq!(impact.cell(0, "slow_impact_percent"), Some(&Cell::Float(0.0)));
    assert_eq!(impact.cell(0, "seed_hardware_impact_percent"), Some(&Cell::Float(33.3)));
    let sync_async = report.table("sync_async_comparison").expect("sync/async");
    assert_eq!(sync_async.rows.len(), 4 + 3);
    assert_eq!(report.plots.len(), 5);
}

/// The deliveries each subscriber of `setup` is owed, by evaluating every
/// one of its filters on every object, one by one.
fn owed_one_by_one(setup: &Setup) -> u64 {
    let mut owed = 0;
    for publisher in &setup.publishers {
        let objects = JbiWorkload::new(publisher.seed).expect("workload");
        let objects: Vec<_> = (0..setup.level).map(|index| objects.object_of(publisher.object_type, index)).collect();
        for interest in setup.subscribers.iter().flat_map(|subscriber| &subscriber.interests) {
            if interest.object_type != publisher.object_type {
                continue;
            }
            let subscriptions = JbiWorkload::new(interest.seed).expect("workload");
            for index in 0..setup.level {
                let (_, _, text) = subscriptions.subscription_of(interest.object_type, index);
                let filter = XPathFilter::parse(&text).expect("filter parses");
                owed += objects.iter().filter(|object| filter.matches(object)).count() as u64;
            }
        }
    }
    owed
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_small_run_delivers_exactly_what_the_filters_select() {
    small_run(ViaArg::Native, &["heavy_load", "sync_async"]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_small_run_over_http_delivers_exactly_what_the_filters_select() {
    small_run(ViaArg::Http, &["fast_slow", "sync_async"]).await;
}

/// Runs `experiments` at level 60, two rounds each, via `via`, and checks
/// that every owed delivery came, no more, and that the slow link held.
async fn small_run(via: ViaArg, experiments: &[&str]) {
    let mut small = args(true);
    small.levels = vec![60];
    small.experiments = experiments.iter().map(|name| name.to_string()).collect();
    small.via = via;
    let plan = small.plan().expect("plan");
    let (endpoints, front_end, via) = super::open(&small).await.expect("broker");
    let mut results = Vec::new();
    for group in plan.groups() {
        let setups: Vec<&Setup> = group.iter().map(|&index| &plan.setups[index]).collect();
        let rounds = run_group(&endpoints, via, &setups, 2, small.link_bits_per_s(), &Progress::hidden()).await;
        results.push((setups, rounds));
    }
    if let Some(front_end) = front_end {
        front_end.shutdown().await;
    }
    endpoints.shutdown().await;
    let rounds = results.into_iter().flat_map(|(setups, rounds)| {
        let (rounds, registration) = rounds.expect("run");
        assert!(registration.register_s > 0.0 && registration.close_s > 0.0);
        assert!(rounds.iter().all(|rounds| rounds.len() == 2), "two rounds each");
        setups.into_iter().zip(rounds).flat_map(|(setup, rounds)| rounds.into_iter().map(move |round| (setup, round)))
    });
    for (setup, result) in rounds {
        let expected = owed_one_by_one(setup);
        assert!(expected > 0, "{}", setup.label());
        assert_eq!((result.published, result.owed, result.delivered), (setup.objects(), expected, expected));
        assert_eq!((result.lost(), result.incomplete), (0, 0), "{}", setup.label());
        if setup.has_slow_subscriber() {
            // Every delivery to the slow subscriber crossed the emulated link.
            let link = link::SlowLink::new(small.link_bits_per_s());
            let busy = link.transmit_time(setup.payload_bytes + 2048).as_secs_f64() * result.delivered_slow as f64;
            assert!(result.delivered_slow > 0 && result.time_s >= busy, "{} s for {busy} s", result.time_s);
        }
    }
}
