//! Garbage collection across the boundary: its options from JavaScript, its report back.

use std::time::Duration;

use memwal_core::gc::{GcOptions, GcReport};
use napi_derive::napi;

use crate::error::invalid;

/// What `collectGarbage` may remove; every field optional (the core's defaults).
#[napi(object, object_to_js = false)]
pub struct NativeGcOptions {
    /// Manifest versions to keep, newest first (at least 2).
    pub keep_manifest_versions: Option<f64>,
    /// How old an abandoned generation folder must be before it goes, in milliseconds.
    pub grace_ms: Option<f64>,
    /// Report only; remove nothing.
    pub dry_run: Option<bool>,
}

/// What one collection removed (or, in a dry run, would remove).
#[napi(object, object_from_js = false, js_name = "GcReport")]
pub struct NativeGcReport {
    /// The manifest version collection read.
    pub manifest_version: f64,
    /// Its WAL low-water mark: entries at or below it may be removed.
    pub low_water: f64,
    /// WAL entries removed (on a shard of the segment layout: the positions the segments
    /// removed held).
    pub wal_entries_removed: f64,
    /// WAL entries at or below the mark kept to fence stale writers (fence sentinels and the
    /// entry before each). Always 0 on the segment layout.
    pub wal_entries_kept: f64,
    /// WAL segments taken out of the log (segment layout): recycled as spares for the writer's
    /// next segments, or removed.
    pub wal_segments_removed: f64,
    /// Manifest versions removed.
    pub manifest_versions_removed: f64,
    /// Generation folders the manifest does not list that were removed.
    pub generation_dirs_removed: Vec<String>,
    /// Such folders kept: too recent, or of a flush that may be in progress.
    pub generation_dirs_kept: Vec<String>,
    /// Bytes of the objects removed (a segment recycled as a spare keeps its bytes).
    pub bytes_removed: f64,
    /// True if nothing was removed on purpose.
    pub dry_run: bool,
}

impl From<GcReport> for NativeGcReport {
    fn from(r: GcReport) -> Self {
        NativeGcReport {
            manifest_version: r.manifest_version as f64,
            low_water: r.low_water as f64,
            wal_entries_removed: r.wal_entries_removed as f64,
            wal_entries_kept: r.wal_entries_kept as f64,
            wal_segments_removed: r.wal_segments_removed as f64,
            manifest_versions_removed: r.manifest_versions_removed as f64,
            generation_dirs_removed: r.generation_dirs_removed,
            generation_dirs_kept: r.generation_dirs_kept,
            bytes_removed: r.bytes_removed as f64,
            dry_run: r.dry_run,
        }
    }
}

/// A non-negative integer option, or an `INVALID_ARGUMENT` naming it.
fn whole(name: &str, v: f64) -> napi::Result<u64> {
    if v.is_finite() && v >= 0.0 && v.fract() == 0.0 && v <= 9_007_199_254_740_991.0 {
        Ok(v as u64)
    } else {
        Err(invalid(format!(
            "invalid option {name}: expected a non-negative integer, got {v}"
        )))
    }
}

/// The core's options from `o` (its defaults where `o` leaves a field out).
pub fn gc_options(o: Option<NativeGcOptions>) -> napi::Result<GcOptions> {
    let mut out = GcOptions::default();
    let Some(o) = o else { return Ok(out) };
    if let Some(v) = o.keep_manifest_versions {
        out.keep_manifest_versions = whole("keepManifestVersions", v)?;
    }
    if let Some(v) = o.grace_ms {
        out.grace = Duration::from_millis(whole("graceMs", v)?);
    }
    out.dry_run = o.dry_run.unwrap_or(false);
    Ok(out)
}
