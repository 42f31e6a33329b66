//! Every type of the schema grammar (what the Node binding's `schema.rs` can describe, plus the
//! nestings that break) either opens, takes a put, flushes a generation and reads back, or is
//! refused at open with an error naming the field, before anything is written.
//!
//! Why: a `MonthDayNano` interval or a union used to be accepted at open and by every put, then
//! failed the first generation flush and fenced the writer and every later one.

mod support;

use std::sync::Arc;

use arrow_array::{RecordBatch, make_array};
use arrow_buffer::{Buffer, MutableBuffer, NullBuffer};
use arrow_data::ArrayData;
use arrow_schema::{
    DataType, Field, Fields, IntervalUnit, Schema, SchemaRef, TimeUnit, UnionFields, UnionMode,
};
use memwal_core::{ErrorCode, ShardWriter};
use object_store::path::Path;
use support::{Backend, With, non_durable, on};
use uuid::Uuid;

/// The column's name in every shard of this test; refusals must name it.
const COLUMN: &str = "col";

fn list(item: DataType, nullable: bool) -> DataType {
    DataType::List(Arc::new(Field::new("item", item, nullable)))
}

fn structure(children: Vec<(&str, DataType, bool)>) -> DataType {
    DataType::Struct(Fields::from(
        children
            .into_iter()
            .map(|(n, t, nullable)| Field::new(n, t, nullable))
            .collect::<Vec<_>>(),
    ))
}

fn union(mode: UnionMode) -> DataType {
    DataType::Union(
        UnionFields::try_new(
            vec![0, 1],
            vec![
                Field::new("i", DataType::Int32, true),
                Field::new("s", DataType::Utf8, true),
            ],
        )
        .unwrap(),
        mode,
    )
}

/// Every type the binding's schema description can produce, and nestings of the refused ones.
fn grammar() -> Vec<DataType> {
    use DataType as T;
    let mdn = T::Interval(IntervalUnit::MonthDayNano);
    let mut types = vec![
        T::Null,
        T::Boolean,
        T::Int8,
        T::Int16,
        T::Int32,
        T::Int64,
        T::UInt8,
        T::UInt16,
        T::UInt32,
        T::UInt64,
        T::Float16,
        T::Float32,
        T::Float64,
        T::Binary,
        T::Utf8,
        T::LargeBinary,
        T::LargeUtf8,
        T::BinaryView,
        T::Utf8View,
        T::Decimal32(9, 2),
        T::Decimal64(18, 3),
        T::Decimal128(38, 10),
        T::Decimal256(76, 20),
        T::Date32,
        T::Date64,
        T::Time32(TimeUnit::Second),
        T::Time32(TimeUnit::Millisecond),
        T::Time64(TimeUnit::Microsecond),
        T::Time64(TimeUnit::Nanosecond),
        T::Timestamp(TimeUnit::Millisecond, Some("UTC".into())),
        T::Interval(IntervalUnit::YearMonth),
        T::Interval(IntervalUnit::DayTime),
        mdn.clone(),
        T::FixedSizeBinary(4),
        list(T::Int32, true),
        list(T::Utf8, false),
        T::LargeList(Arc::new(Field::new("item", T::Int64, true))),
        T::FixedSizeList(Arc::new(Field::new("item", T::Float32, true)), 3),
        structure(vec![("a", T::Int32, false), ("b", T::Utf8, true)]),
        T::Map(
            Arc::new(Field::new(
                "entries",
                structure(vec![("key", T::Utf8, false), ("value", T::Int32, true)]),
                false,
            )),
            false,
        ),
        union(UnionMode::Sparse),
        union(UnionMode::Dense),
        T::Dictionary(Box::new(T::Int32), Box::new(T::Utf8)),
        T::Dictionary(Box::new(T::UInt8), Box::new(T::Int64)),
        // Refused types below others.
        list(union(UnionMode::Sparse), true),
        structure(vec![("a", T::Int32, true), ("span", mdn.clone(), true)]),
        list(mdn.clone(), true),
        structure(vec![("n", T::Null, false)]),
        list(T::Null, false),
    ];
    types.extend(
        [
            TimeUnit::Second,
            TimeUnit::Millisecond,
            TimeUnit::Microsecond,
            TimeUnit::Nanosecond,
        ]
        .into_iter()
        .flat_map(|u| [T::Timestamp(u, None), T::Duration(u)]),
    );
    types
}

/// `len` rows of `data_type`: values (zeros, empty strings, one-element lists), with every
/// second row null in a nullable field.
fn column(data_type: &DataType, nullable: bool, len: usize) -> ArrayData {
    let builder =
        match data_type {
            DataType::Null => return ArrayData::new_null(data_type, len),
            DataType::Struct(fields) => ArrayData::builder(data_type.clone()).child_data(
                fields
                    .iter()
                    .map(|f| column(f.data_type(), f.is_nullable(), len))
                    .collect(),
            ),
            DataType::FixedSizeList(f, n) => ArrayData::builder(data_type.clone()).child_data(
                vec![column(f.data_type(), f.is_nullable(), len * *n as usize)],
            ),
            DataType::List(f) | DataType::Map(f, _) => ArrayData::builder(data_type.clone())
                .add_buffer(Buffer::from_iter(0..=len as i32))
                .child_data(vec![column(f.data_type(), f.is_nullable(), len)]),
            DataType::LargeList(f) => ArrayData::builder(data_type.clone())
                .add_buffer(Buffer::from_iter(0..=len as i64))
                .child_data(vec![column(f.data_type(), f.is_nullable(), len)]),
            DataType::Dictionary(key, values) => ArrayData::builder(data_type.clone())
                .add_buffer(
                    MutableBuffer::from_len_zeroed(key.primitive_width().unwrap() * len).into(),
                )
                .child_data(vec![column(values, false, 1)]),
            DataType::Union(..) => return ArrayData::new_null(data_type, len),
            _ => ArrayData::new_null(data_type, len)
                .into_builder()
                .nulls(None),
        };
    let nulls = nullable.then(|| NullBuffer::from_iter((0..len).map(|i| i % 2 == 0)));
    builder.len(len).nulls(nulls).build().unwrap()
}

fn shard_schema(data_type: &DataType, nullable: bool) -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int32, false),
        Field::new(COLUMN, data_type.clone(), nullable),
    ]))
}

fn rows(schema: &SchemaRef, len: usize) -> RecordBatch {
    let columns = schema
        .fields()
        .iter()
        .map(|f| make_array(column(f.data_type(), f.is_nullable(), len)))
        .collect();
    RecordBatch::try_new(schema.clone(), columns).unwrap()
}

/// What happened to one type.
enum Outcome {
    Stored,
    Refused(String),
}

/// Opens a shard of `data_type`, puts rows, closes (which flushes a generation), reopens and
/// scans; or checks that open refused it cleanly.
async fn try_type(data_type: &DataType, nullable: bool) -> Outcome {
    let backend = Backend::memory();
    let shard = Uuid::new_v4();
    let schema = shard_schema(data_type, nullable);
    let config = on(shard, non_durable().with(|c| c.max_memtable_batches = 4));
    let what = format!("{data_type} (nullable: {nullable})");
    let w = match ShardWriter::open(backend.store.clone(), schema.clone(), config.clone()).await {
        Ok(w) => w,
        Err(e) => {
            let message = e.to_string();
            assert!(
                matches!(
                    e.code(),
                    ErrorCode::InvalidArgument | ErrorCode::SchemaMismatch
                ),
                "{what}: refused with {:?}: {message}",
                e.code()
            );
            assert!(
                message.contains(&format!("field `{COLUMN}")),
                "{what}: the refusal does not name the field: {message}"
            );
            assert!(
                backend.snapshot(&Path::default()).await.is_empty(),
                "{what}: a refused open wrote to the store"
            );
            return Outcome::Refused(message);
        }
    };
    let batch = rows(&schema, 6);
    w.put(vec![batch.clone()])
        .await
        .unwrap_or_else(|e| panic!("{what}: put failed: {e}"));
    w.close()
        .await
        .unwrap_or_else(|e| panic!("{what}: close (generation flush) failed: {e}"));
    let w = ShardWriter::open(backend.store.clone(), schema.clone(), config)
        .await
        .unwrap_or_else(|e| panic!("{what}: reopen failed: {e}"));
    let m = w.manifest().await.unwrap().unwrap();
    assert_eq!(m.flushed_generations.len(), 1, "{what}: no generation");
    let scanned = w
        .scan()
        .await
        .unwrap_or_else(|e| panic!("{what}: scan failed: {e}"));
    let scanned = arrow_select::concat::concat_batches(&schema, &scanned).unwrap();
    assert_eq!(
        scanned, batch,
        "{what}: the generation reads back other rows"
    );
    w.close().await.unwrap();
    Outcome::Stored
}

#[tokio::test]
async fn every_type_is_stored_in_a_generation_or_refused_at_open() {
    let mut refused = Vec::new();
    for data_type in grammar() {
        for nullable in [true, false] {
            if let Outcome::Refused(message) = try_type(&data_type, nullable).await {
                refused.push((data_type.clone(), nullable, message));
            }
        }
    }
    let names: Vec<String> = refused
        .iter()
        .map(|(t, n, _)| format!("{t} nullable={n}"))
        .collect();
    eprintln!("refused at open:\n{}", names.join("\n"));
    // The types that once fenced writers must be among the refused ones (the walk proves the others
    // work).
    for (t, n) in [
        (DataType::Interval(IntervalUnit::MonthDayNano), true),
        (union(UnionMode::Sparse), true),
        (union(UnionMode::Dense), false),
    ] {
        assert!(
            refused.iter().any(|(rt, rn, _)| *rt == t && *rn == n),
            "{t} nullable={n} was not refused"
        );
    }
}

#[tokio::test]
async fn a_refusal_names_the_nested_field() {
    let t = structure(vec![
        ("a", DataType::Int32, true),
        ("span", DataType::Interval(IntervalUnit::MonthDayNano), true),
    ]);
    let Outcome::Refused(message) = try_type(&t, true).await else {
        panic!("a struct holding a MonthDayNano interval was accepted");
    };
    assert!(message.contains("field `col.span`"), "{message}");
    assert!(message.contains("MonthDayNano"), "{message}");
}

#[tokio::test]
async fn wal_only_mode_takes_a_schema_parquet_cannot_store() {
    let backend = Backend::memory();
    let schema = shard_schema(&DataType::Interval(IntervalUnit::MonthDayNano), true);
    let config = on(
        Uuid::new_v4(),
        non_durable().with(|c| c.enable_memtable = false),
    );
    let w = ShardWriter::open(backend.store.clone(), schema.clone(), config)
        .await
        .expect("WAL-only mode writes no generation, so the schema is fine");
    w.put(vec![rows(&schema, 2)]).await.unwrap();
    w.close().await.unwrap();
}
