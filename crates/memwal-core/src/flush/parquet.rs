//! The Parquet encoding of generation files, shared by generation flushes and compaction.

use arrow_array::RecordBatch;
use arrow_schema::SchemaRef;
use parquet::arrow::ArrowWriter;
use parquet::basic::Compression;
use parquet::file::properties::WriterProperties;

use crate::error::{Error, Result};

/// Encodes `batches` as one Parquet file (Snappy, the Arrow schema embedded).
pub fn encode_parquet(schema: &SchemaRef, batches: &[RecordBatch]) -> Result<Vec<u8>> {
    let props = WriterProperties::builder()
        .set_compression(Compression::SNAPPY)
        .build();
    let mut w = ArrowWriter::try_new(Vec::new(), schema.clone(), Some(props))
        .map_err(|e| Error::io("creating a Parquet writer", e))?;
    for b in batches {
        w.write(b)
            .map_err(|e| Error::io("encoding a generation as Parquet", e))?;
    }
    w.into_inner()
        .map_err(|e| Error::io("finishing a Parquet generation file", e))
}
