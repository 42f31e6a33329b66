//! Randomized tests that replay from a seed: the generator, and which seeds a run takes.
//!
//! The generator is SplitMix64 (Steele, Lea and Flood, "Fast splittable pseudorandom number
//! generators", 2014), written out rather than taken from `rand`: it is a dozen lines, its
//! sequence for a seed is fixed by this file alone (`rand` documents `SmallRng` as not
//! reproducible across versions), and [`mix`] doubles as the hash that derives one seed from
//! several values. `src/store/faults.rs` and `src/store/sim_fs.rs` keep their own copies, as
//! they are compiled into the library.

use std::ops::Range;

const GOLDEN_GAMMA: u64 = 0x9E37_79B9_7F4A_7C15;

/// A seeded SplitMix64 generator: the same seed gives the same choices, on every machine.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Rng(seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(GOLDEN_GAMMA);
        finalize(self.0)
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
        Rng(self.next_u64())
    }
}

/// A well-mixed 64-bit hash of `z`: the first output of [`Rng::new(z)`](Rng::new). Chain it to
/// derive one seed from several values: `mix(seed ^ mix(a ^ mix(b)))`.
pub fn mix(z: u64) -> u64 {
    Rng::new(z).next_u64()
}

fn finalize(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// The seeds to run: the one in the environment variable `var` (to replay a reported
/// failure), or else `default`.
pub fn seeds(var: &str, default: Range<u64>) -> Vec<u64> {
    match std::env::var(var) {
        Ok(s) => vec![s.parse().unwrap_or_else(|_| panic!("{var} is a u64"))],
        Err(_) => default.collect(),
    }
}
