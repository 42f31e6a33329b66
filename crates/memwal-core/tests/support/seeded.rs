//! Randomized tests that replay from a seed: the generator, and which seeds a run takes.
//!
//! The generator is the library's test SplitMix64 ([`SplitMix64`], compiled with the
//! `testing` feature), not `rand`: its sequence for a seed is fixed by memwal alone (`rand`
//! documents `SmallRng` as not reproducible across versions), the fault store and the
//! power-loss simulator draw from the same one, and [`mix`] doubles as the hash that derives
//! one seed from several values.

use std::ops::Range;

use memwal_core::store::splitmix64::SplitMix64;

/// A seeded SplitMix64 generator: the same seed gives the same choices, on every machine.
#[derive(Debug, Clone)]
pub struct Rng(SplitMix64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Rng(SplitMix64::new(seed))
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0.next_u64()
    }

    /// A number in `0..n` (`0` when `n` is 0).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n.max(1)
    }

    /// One of `from`, uniformly.
    pub fn pick<T: Copy>(&mut self, from: &[T]) -> T {
        from[self.below(from.len() as u64) as usize]
    }

    /// True with probability `percent` / 100.
    pub fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }

    /// An independent generator for a concurrent task, seeded from this one, so each task's
    /// choices do not depend on how the tasks interleave.
    pub fn fork(&mut self) -> Rng {
        Rng::new(self.next_u64())
    }
}

/// A well-mixed 64-bit hash of `z`: the first output of [`Rng::new(z)`](Rng::new). Chain it to
/// derive one seed from several values: `mix(seed ^ mix(a ^ mix(b)))`.
pub fn mix(z: u64) -> u64 {
    Rng::new(z).next_u64()
}

/// The seeds to run: the one in the environment variable `var` (to replay a reported
/// failure), or else `default`.
pub fn seeds(var: &str, default: Range<u64>) -> Vec<u64> {
    match std::env::var(var) {
        Ok(s) => vec![s.parse().unwrap_or_else(|_| panic!("{var} is a u64"))],
        Err(_) => default.collect(),
    }
}
