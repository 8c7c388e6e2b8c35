//! Independent random streams derived from one workload seed.
//!
//! Each generated item (subscription `i`, message `i`) gets its own
//! generator, seeded from the workload seed, the item's stream and its index.
//! Items can then be produced in any order and each is the same whatever was
//! produced before it.

/// The golden-ratio increment of SplitMix64.
const SPLITMIX_INCREMENT: u64 = 0x9E37_79B9_7F4A_7C15;

/// First multiplier of the SplitMix64 finaliser.
const SPLITMIX_MULTIPLIER_1: u64 = 0xBF58_476D_1CE4_E5B9;

/// Second multiplier of the SplitMix64 finaliser.
const SPLITMIX_MULTIPLIER_2: u64 = 0x94D0_49BB_1331_11EB;

/// Names one random stream of a workload, so that two kinds of item (say,
/// JBI subscriptions and JBI objects) never share random numbers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Stream(pub(crate) u64);

/// Scrambles `value` with the SplitMix64 step, so that seeds, streams and
/// indices that differ in one bit give unrelated generator seeds.
fn scramble(value: u64) -> u64 {
    let mut mixed = value.wrapping_add(SPLITMIX_INCREMENT);
    mixed = (mixed ^ (mixed >> 30)).wrapping_mul(SPLITMIX_MULTIPLIER_1);
    mixed = (mixed ^ (mixed >> 27)).wrapping_mul(SPLITMIX_MULTIPLIER_2);
    mixed ^ (mixed >> 31)
}

/// The generator for item `index` of `stream` under the workload `seed`.
pub(crate) fn item_rng(seed: u64, stream: Stream, index: u64) -> fastrand::Rng {
    let mixed = scramble(scramble(scramble(seed) ^ stream.0) ^ index);
    fastrand::Rng::with_seed(mixed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn items_are_reproducible_and_distinct() {
        let draw = |seed, stream, index| item_rng(seed, Stream(stream), index).u64(..);
        assert_eq!(draw(7, 1, 3), draw(7, 1, 3));
        assert_ne!(draw(7, 1, 3), draw(8, 1, 3), "seed");
        assert_ne!(draw(7, 1, 3), draw(7, 2, 3), "stream");
        assert_ne!(draw(7, 1, 3), draw(7, 1, 4), "index");
    }
}
