//! What a put returns: [`WriteResult`], where its rows went, as a generation and a
//! [`BatchRange`] of batch positions in it. A leaf of the crate: the batch store, the request
//! ids that remember results and the writer all name these, so they import nothing back.

/// A half-open range `[start, end)` of 0-based batch positions **within one generation's
/// BatchStore**. Never compare it with a range of another generation: that was the seed bug
/// (`docs/durability.md`, "Why it is subtle: the seed bug").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct BatchRange {
    /// First position (inclusive).
    pub start: usize,
    /// One past the last position.
    pub end: usize,
}

impl BatchRange {
    /// Number of batches in the range.
    pub fn len(&self) -> usize {
        self.end - self.start
    }

    /// True if the range holds no batch.
    pub fn is_empty(&self) -> bool {
        self.end == self.start
    }
}

/// Where a put's rows went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WriteResult {
    /// The MemTable generation that accepted the rows (`None` in WAL-only mode).
    pub generation: Option<u64>,
    /// The batches' positions: local to `generation` in MemTable mode (the first put after a
    /// rotation is `0..1` again); writer-lifetime in WAL-only mode.
    pub batch_positions: BatchRange,
}
