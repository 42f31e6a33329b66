//! A/B helper: non-durable puts of 1-row batches into one writer, reported as puts per second.
//! `cargo run --release -p memwal-core --example put_loop`.

use std::sync::Arc;

use arrow_array::{Int32Array, RecordBatch};
use arrow_schema::{DataType, Field, Schema};
use memwal_core::{ShardWriter, Store, WriterConfig};

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let schema = Arc::new(Schema::new(vec![Field::new("id", DataType::Int32, false)]));
    let batch =
        RecordBatch::try_new(schema.clone(), vec![Arc::new(Int32Array::from(vec![1]))]).unwrap();
    let config = WriterConfig {
        durable_write: false,
        max_wal_flush_interval_ms: None,
        max_wal_buffer_size: 0,
        max_memtable_batches: 1 << 20,
        ..Default::default()
    };
    let w = ShardWriter::open(Store::memory(), schema, config)
        .await
        .unwrap();
    let n = 500_000;
    let started = tokio::time::Instant::now();
    for _ in 0..n {
        w.put(vec![batch.clone()]).await.unwrap();
    }
    let secs = started.elapsed().as_secs_f64();
    println!("{:.0} puts/s", n as f64 / secs);
    w.abort().await.unwrap();
}
