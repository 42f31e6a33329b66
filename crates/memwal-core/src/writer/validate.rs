//! Validation of a put's batches: a non-empty list, no empty batch, and the shard's schema
//! (field names and types; nullability is checked against the data). Dictionary-encoded
//! columns are decoded when their values have the field's type.

use std::sync::Arc;

use arrow_array::RecordBatch;
use arrow_array::cast::AsArray;
use arrow_schema::SchemaRef;

use crate::error::{Error, Result};

/// Checks a put's batches (non-empty list, no empty batch, the shard's schema) and returns them
/// rebuilt with exactly the shard's schema.
pub(super) fn validate(schema: &SchemaRef, batches: Vec<RecordBatch>) -> Result<Vec<RecordBatch>> {
    if batches.is_empty() {
        return Err(Error::invalid(
            "Cannot write empty batch list; pass at least one RecordBatch",
        ));
    }
    batches
        .into_iter()
        .enumerate()
        .map(|(i, b)| {
            if b.num_rows() == 0 {
                return Err(Error::invalid(format!(
                    "Batch {i} is empty (0 rows); remove empty batches before put"
                )));
            }
            let b = unpack_dictionaries(b, schema)?;
            if let Some(e) = schema_mismatch(schema, &b, i) {
                return Err(e);
            }
            crate::reader::conform(b, schema)
        })
        .collect()
}

/// Dictionary-encoded columns whose value type is the shard field's type are decoded
/// (lossless): apache-arrow's `tableFromArrays` dictionary-encodes strings by default, and a
/// user with a `Utf8` shard should not have to know that.
fn unpack_dictionaries(batch: RecordBatch, schema: &SchemaRef) -> Result<RecordBatch> {
    let unpack = |(col, field): (&arrow_array::ArrayRef, &arrow_schema::FieldRef)| match (
        col.data_type(),
        col.as_any_dictionary_opt(),
    ) {
        (arrow_schema::DataType::Dictionary(_, value), Some(dict))
            if value.as_ref() == field.data_type() =>
        {
            arrow_select::take::take(dict.values().as_ref(), dict.keys(), None).map(Some)
        }
        _ => Ok(None),
    };
    if batch.schema().fields().len() != schema.fields().len()
        || !batch
            .columns()
            .iter()
            .any(|c| matches!(c.data_type(), arrow_schema::DataType::Dictionary(..)))
    {
        return Ok(batch);
    }
    let mut changed = false;
    let mut fields = Vec::with_capacity(batch.num_columns());
    let mut columns = Vec::with_capacity(batch.num_columns());
    for (i, pair) in batch
        .columns()
        .iter()
        .zip(schema.fields().iter())
        .enumerate()
    {
        match unpack(pair).map_err(|e| Error::SchemaMismatch {
            message: format!(
                "field `{}` could not be decoded from its dictionary: {e}",
                pair.1.name()
            ),
        })? {
            Some(values) => {
                changed = true;
                fields.push(
                    batch
                        .schema()
                        .field(i)
                        .clone()
                        .with_data_type(values.data_type().clone()),
                );
                columns.push(values);
            }
            None => {
                fields.push(batch.schema().field(i).clone());
                columns.push(pair.0.clone());
            }
        }
    }
    if !changed {
        return Ok(batch);
    }
    RecordBatch::try_new(Arc::new(arrow_schema::Schema::new(fields)), columns).map_err(|e| {
        Error::SchemaMismatch {
            message: format!("batch could not be rebuilt after decoding dictionaries: {e}"),
        }
    })
}

fn schema_mismatch(schema: &SchemaRef, batch: &RecordBatch, index: usize) -> Option<Error> {
    let given = batch.schema();
    if given.fields().len() != schema.fields().len() {
        let names = |s: &arrow_schema::Schema| {
            s.fields()
                .iter()
                .map(|f| f.name().clone())
                .collect::<Vec<_>>()
                .join(", ")
        };
        return Some(Error::SchemaMismatch {
            message: format!(
                "batch {index} has {} fields ({}) but the shard has {} ({}); build the batch with the shard's schema",
                given.fields().len(),
                names(&given),
                schema.fields().len(),
                names(schema)
            ),
        });
    }
    for (i, (g, s)) in given
        .fields()
        .iter()
        .zip(schema.fields().iter())
        .enumerate()
    {
        if g.name() != s.name() {
            return Some(Error::SchemaMismatch {
                message: format!(
                    "field {i} of batch {index} is `{}` but the shard's field {i} is `{}`; build the batch with the shard's schema",
                    g.name(),
                    s.name()
                ),
            });
        }
        if g.data_type() != s.data_type() {
            return Some(Error::SchemaMismatch {
                message: format!(
                    "field `{}` is {} in batch {index} but {} in the shard; cast it before put",
                    g.name(),
                    g.data_type(),
                    s.data_type()
                ),
            });
        }
        if !s.is_nullable() && batch.column(i).null_count() > 0 {
            return Some(Error::SchemaMismatch {
                message: format!(
                    "field `{}` is not nullable in the shard but batch {index} has {} nulls in it; fill or drop them before put",
                    g.name(),
                    batch.column(i).null_count()
                ),
            });
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow_array::{Array, DictionaryArray, Int32Array, StringArray, types::Int32Type};
    use arrow_schema::{DataType, Field, Schema};

    fn shard_schema() -> SchemaRef {
        Arc::new(Schema::new(vec![
            Field::new("id", DataType::Int32, false),
            Field::new("name", DataType::Utf8, true),
        ]))
    }

    #[test]
    fn dictionary_strings_are_decoded_for_a_utf8_field() {
        let dict: DictionaryArray<Int32Type> = vec![Some("a"), None, Some("a"), Some("b")]
            .into_iter()
            .collect();
        let given = Arc::new(Schema::new(vec![
            Field::new("id", DataType::Int32, false),
            Field::new("name", dict.data_type().clone(), true),
        ]));
        let batch = RecordBatch::try_new(
            given,
            vec![Arc::new(Int32Array::from(vec![1, 2, 3, 4])), Arc::new(dict)],
        )
        .unwrap();
        let out = unpack_dictionaries(batch, &shard_schema()).unwrap();
        assert!(schema_mismatch(&shard_schema(), &out, 0).is_none());
        let names = out.column(1).as_string::<i32>();
        assert_eq!(
            names.iter().collect::<Vec<_>>(),
            vec![Some("a"), None, Some("a"), Some("b")]
        );
    }

    #[test]
    fn dictionaries_of_another_value_type_are_left_for_the_schema_check() {
        let dict: DictionaryArray<Int32Type> = vec![Some("1")].into_iter().collect();
        let given = Arc::new(Schema::new(vec![
            Field::new("id", dict.data_type().clone(), false),
            Field::new("name", DataType::Utf8, true),
        ]));
        let batch = RecordBatch::try_new(
            given,
            vec![Arc::new(dict), Arc::new(StringArray::from(vec!["x"]))],
        )
        .unwrap();
        let out = unpack_dictionaries(batch, &shard_schema()).unwrap();
        let e = schema_mismatch(&shard_schema(), &out, 0).unwrap();
        assert!(e.to_string().contains("`id`"), "{e}");
    }
}
