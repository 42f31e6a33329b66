//! The Parquet encoding of generation files, shared by generation flushes and compaction.

use arrow_array::RecordBatch;
use arrow_schema::SchemaRef;
use parquet::arrow::ArrowWriter;
use parquet::basic::Compression;
use parquet::file::properties::WriterProperties;

use bytes::Bytes;

use crate::error::{Error, Result};
use crate::store::{CreateOutcome, ShardPaths, Store};

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

/// Creates `parquet` as the data file of a new generation folder numbered `number`, and returns
/// the folder's name. The name is random per attempt, so a retry never reuses a folder an
/// earlier attempt may have partly written.
pub(crate) async fn create_generation_file(
    store: &Store,
    paths: &ShardPaths,
    number: u64,
    parquet: &Bytes,
) -> Result<String> {
    loop {
        let dir = ShardPaths::new_generation_dir_name(number);
        let path = paths.generation_file(&dir);
        match store.put_if_absent(&path, parquet.clone()).await {
            Ok(CreateOutcome::Created) => return Ok(dir),
            Ok(CreateOutcome::AlreadyExists) => continue,
            Err(e) => return Err(Error::io(format!("writing generation file {path}"), e)),
        }
    }
}
