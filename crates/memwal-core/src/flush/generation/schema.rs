//! Which schemas a generation file can hold, checked when a MemTable-mode writer opens.
//!
//! A shard whose schema Parquet cannot store would take every put and then fail its first
//! generation flush, which fences the writer with `PersistenceFailure`; the rows stay in the
//! WAL, so every later writer replays them into the same failure. Refusing the schema at open,
//! naming the field, is the only point where the caller can still choose another type.
//!
//! The check asks the generation writer itself rather than a list of types, because what
//! parquet's `ArrowWriter` refuses is spread over three places that change between versions:
//! schema conversion (a union panics, "not implemented"), column writing (a `MonthDayNano`
//! interval is an error, but only once a row is written) and reading back. So it encodes a
//! two-row sample of the schema with [`encode_parquet`] (the flush's own writer and
//! properties), reads it back as a scan does, and compares. Unions are refused before that,
//! because the writer's answer to them is a panic.

use std::sync::Arc;

use arrow_array::{RecordBatch, make_array};
use arrow_buffer::{Buffer, MutableBuffer, NullBuffer};
use arrow_data::ArrayData;
use arrow_schema::{DataType, Field, FieldRef, Schema, SchemaRef};
use bytes::Bytes;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;

use crate::error::{Error, Result};
use crate::flush::parquet::encode_parquet;

/// Rows in the sample: a value, then (in a nullable field) a null.
const SAMPLE_ROWS: usize = 2;

/// Checks that a generation file can hold rows of `schema`.
///
/// # Errors
/// `InvalidArgument` naming the innermost field that cannot be stored, its type, and why.
pub(crate) fn check(schema: &SchemaRef) -> Result<()> {
    if round_trip(schema.fields()).is_ok() {
        return Ok(());
    }
    for field in schema.fields() {
        if let Some((path, data_type, why)) = unstorable(field) {
            return Err(Error::invalid(format!(
                "field `{path}` has type {data_type}, which a Parquet generation file cannot store ({why}); {}, or open with enableMemtable: false to keep the shard in the WAL only",
                advice(&data_type)
            )));
        }
    }
    // Every field passes alone but not together: no type known to parquet 60 does this.
    round_trip(schema.fields()).map_err(|why| {
        Error::invalid(format!(
            "the schema cannot be stored in a Parquet generation file ({why}); open with enableMemtable: false to keep the shard in the WAL only"
        ))
    })
}

/// What to use instead of `data_type`.
fn advice(data_type: &DataType) -> &'static str {
    match data_type {
        DataType::Union(..) => "use a struct with one nullable field per variant instead",
        DataType::Interval(_) => {
            "use an Interval(YearMonth) or Interval(DayTime), a Duration, or a struct of months, days and nanoseconds instead"
        }
        DataType::Null => "make the field nullable, or drop it",
        _ => "use another type",
    }
}

/// The innermost field of `field` (itself included) that cannot be stored, as a dotted path,
/// with its type and the reason; `None` if `field` can be stored.
fn unstorable(field: &FieldRef) -> Option<(String, DataType, String)> {
    let why = round_trip(std::slice::from_ref(field)).err()?;
    let inner = children(field.data_type())
        .iter()
        .find_map(unstorable)
        .map(|(path, data_type, why)| (format!("{}.{path}", field.name()), data_type, why));
    Some(inner.unwrap_or_else(|| (field.name().clone(), field.data_type().clone(), why)))
}

/// The fields nested directly in `data_type`.
fn children(data_type: &DataType) -> Vec<FieldRef> {
    match data_type {
        DataType::Struct(fields) => fields.iter().cloned().collect(),
        DataType::Union(fields, _) => fields.iter().map(|(_, f)| f.clone()).collect(),
        DataType::List(f)
        | DataType::LargeList(f)
        | DataType::ListView(f)
        | DataType::LargeListView(f)
        | DataType::FixedSizeList(f, _)
        | DataType::Map(f, _) => vec![f.clone()],
        DataType::Dictionary(_, values) => {
            vec![Arc::new(Field::new(
                "values",
                values.as_ref().clone(),
                true,
            ))]
        }
        _ => Vec::new(),
    }
}

/// Writes a sample of `fields` as a generation file and reads it back; the error says what
/// failed.
fn round_trip(fields: &[FieldRef]) -> std::result::Result<(), String> {
    if let Some(f) = fields.iter().find(|f| contains_union(f.data_type())) {
        return Err(format!(
            "`{}`: Parquet has no union type, and the Parquet writer panics on one",
            f.name()
        ));
    }
    let schema = Arc::new(Schema::new(fields.to_vec()));
    let columns = fields
        .iter()
        .map(|f| sample(f.data_type(), f.is_nullable(), SAMPLE_ROWS).map(make_array))
        .collect::<std::result::Result<Vec<_>, _>>()
        .map_err(|e| format!("no sample row could be built: {e}"))?;
    let batch = RecordBatch::try_new(schema.clone(), columns)
        .map_err(|e| format!("no sample row could be built: {e}"))?;
    // A writer that panics on a type it does not know must not take the caller down with it.
    let encoded = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        encode_parquet(&schema, std::slice::from_ref(&batch))
    }))
    .map_err(|_| "the Parquet writer panicked".to_string())?
    .map_err(|e| match std::error::Error::source(&e) {
        Some(cause) => cause.to_string(),
        None => e.to_string(),
    })?;
    let reader = ParquetRecordBatchReaderBuilder::try_new(Bytes::from(encoded))
        .and_then(|b| b.build())
        .map_err(|e| format!("it does not read back: {e}"))?;
    let mut read = Vec::new();
    for b in reader {
        let b = b.map_err(|e| format!("it does not read back: {e}"))?;
        read.push(
            crate::reader::conform(b, &schema)
                .map_err(|e| format!("it reads back as another type: {e}"))?,
        );
    }
    let read = arrow_select::concat::concat_batches(&schema, &read)
        .map_err(|e| format!("it does not read back: {e}"))?;
    if read != batch {
        return Err("it reads back with other values".to_string());
    }
    Ok(())
}

fn contains_union(data_type: &DataType) -> bool {
    matches!(data_type, DataType::Union(..))
        || children(data_type)
            .iter()
            .any(|f| contains_union(f.data_type()))
}

/// `len` rows of `data_type`: every row a value (zeros, empty strings, one-element lists), except
/// that in a nullable field every second row is null. Types that are null by nature (`Null`)
/// stay null.
fn sample(
    data_type: &DataType,
    nullable: bool,
    len: usize,
) -> std::result::Result<ArrayData, arrow_schema::ArrowError> {
    let offsets = |wide: bool| -> Buffer {
        if wide {
            Buffer::from_iter(0..=len as i64)
        } else {
            Buffer::from_iter(0..=len as i32)
        }
    };
    let builder = match data_type {
        DataType::Null => return Ok(ArrayData::new_null(data_type, len)),
        DataType::Struct(fields) => ArrayData::builder(data_type.clone()).child_data(
            fields
                .iter()
                .map(|f| sample(f.data_type(), f.is_nullable(), len))
                .collect::<std::result::Result<_, _>>()?,
        ),
        DataType::FixedSizeList(f, size) => {
            ArrayData::builder(data_type.clone()).child_data(vec![sample(
                f.data_type(),
                f.is_nullable(),
                len * *size as usize,
            )?])
        }
        DataType::List(f) | DataType::Map(f, _) | DataType::LargeList(f) => {
            ArrayData::builder(data_type.clone())
                .add_buffer(offsets(matches!(data_type, DataType::LargeList(_))))
                .child_data(vec![sample(f.data_type(), f.is_nullable(), len)?])
        }
        DataType::Dictionary(key, values) => {
            let width = key.primitive_width().unwrap_or(8);
            ArrayData::builder(data_type.clone())
                .add_buffer(MutableBuffer::from_len_zeroed(width * len).into())
                .child_data(vec![sample(values, false, 1)?])
        }
        // The rest have no children (or, for types outside the schema grammar, get their
        // null form): zeroed buffers with the validity bitmap dropped are values.
        _ => ArrayData::new_null(data_type, len)
            .into_builder()
            .nulls(None),
    };
    let nulls = nullable
        .then(|| NullBuffer::from_iter((0..len).map(|i| i % 2 == 0)))
        .filter(|_| !matches!(data_type, DataType::Union(..) | DataType::RunEndEncoded(..)));
    builder.len(len).nulls(nulls).build()
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow_schema::IntervalUnit;

    fn schema(fields: Vec<Field>) -> SchemaRef {
        Arc::new(Schema::new(fields))
    }

    #[test]
    fn plain_columns_pass() {
        let s = schema(vec![
            Field::new("id", DataType::Int32, false),
            Field::new("name", DataType::Utf8, true),
        ]);
        check(&s).unwrap();
    }

    #[test]
    fn a_nested_interval_is_named_by_its_path() {
        let inner = Field::new("span", DataType::Interval(IntervalUnit::MonthDayNano), true);
        let s = schema(vec![
            Field::new("id", DataType::Int32, false),
            Field::new("s", DataType::Struct(vec![inner].into()), true),
        ]);
        let e = check(&s).unwrap_err();
        assert_eq!(e.code(), crate::error::ErrorCode::InvalidArgument);
        assert!(e.to_string().contains("field `s.span`"), "{e}");
    }
}
