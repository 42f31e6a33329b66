//! Columns of strings: `Utf8`, `LargeUtf8`, `Utf8View`, and dictionary-encoded strings
//! (`Dictionary<any integer key, Utf8 or LargeUtf8>`), whose builder keeps one copy of each
//! distinct string.

use std::sync::Arc;

use arrow_array::builder::{GenericByteDictionaryBuilder, StringViewBuilder};
use arrow_array::types::{
    ArrowDictionaryKeyType, GenericStringType, Int8Type, Int16Type, Int32Type, Int64Type,
    UInt8Type, UInt16Type, UInt32Type, UInt64Type,
};
use arrow_array::{ArrayRef, OffsetSizeTrait};
use arrow_schema::{ArrowError, DataType};

use super::byte_values::ByteValues;
use super::column::{Column, Unsupported, a};
use super::js_value::{Js, Type, Value};
use super::row_error::RowError;

/// Average bytes per string reserved up front (the builders grow past it).
const BYTES_PER_STRING: usize = 16;

/// A builder that takes strings.
trait TextBuilder: 'static {
    /// Appends `s`, or says why it cannot.
    fn append(&mut self, s: &str) -> Result<(), String>;
    fn append_nulls(&mut self, n: usize);
    fn finish_array(&mut self) -> ArrayRef;
}

impl<O: OffsetSizeTrait> TextBuilder for ByteValues<GenericStringType<O>> {
    fn append(&mut self, s: &str) -> Result<(), String> {
        ByteValues::append(self, s)
    }

    fn append_nulls(&mut self, n: usize) {
        ByteValues::append_nulls(self, n);
    }

    fn finish_array(&mut self) -> ArrayRef {
        Arc::new(self.finish())
    }
}

impl TextBuilder for StringViewBuilder {
    fn append(&mut self, s: &str) -> Result<(), String> {
        self.try_append_value(s).map_err(|e| e.to_string())
    }

    fn append_nulls(&mut self, n: usize) {
        for _ in 0..n {
            self.append_null();
        }
    }

    fn finish_array(&mut self) -> ArrayRef {
        Arc::new(self.finish())
    }
}

impl<K: ArrowDictionaryKeyType, O: OffsetSizeTrait> TextBuilder
    for GenericByteDictionaryBuilder<K, GenericStringType<O>>
{
    fn append(&mut self, s: &str) -> Result<(), String> {
        GenericByteDictionaryBuilder::append(self, s)
            .map(|_| ())
            .map_err(|_| {
                format!(
                    "more distinct strings than a {} key can number; widen the dictionary's key type",
                    K::DATA_TYPE
                )
            })
    }

    fn append_nulls(&mut self, n: usize) {
        GenericByteDictionaryBuilder::append_nulls(self, n);
    }

    fn finish_array(&mut self) -> ArrayRef {
        Arc::new(self.finish())
    }
}

/// A column of strings.
struct TextColumn<B> {
    builder: B,
    data_type: DataType,
}

impl<B: TextBuilder> Column for TextColumn<B> {
    fn push(&mut self, js: &mut Js, v: Value) -> Result<(), RowError> {
        if v.ty != Type::String {
            return Err(RowError::mismatch(self.expected(), js.describe(v), None));
        }
        self.builder
            .append(js.string(v)?)
            .map_err(RowError::refused)
    }

    fn push_nulls(&mut self, n: usize) {
        self.builder.append_nulls(n);
    }

    fn expected(&self) -> String {
        format!("{} as a string", a(&self.data_type))
    }

    fn finish(&mut self) -> Result<ArrayRef, ArrowError> {
        Ok(self.builder.finish_array())
    }
}

/// The column of a `Utf8`, `LargeUtf8` or `Utf8View` field.
pub fn text_column(data_type: &DataType, capacity: usize) -> Box<dyn Column> {
    let data_type = data_type.clone();
    let bytes = capacity * BYTES_PER_STRING;
    match data_type {
        DataType::Utf8 => Box::new(TextColumn {
            builder: ByteValues::<GenericStringType<i32>>::with_capacity(capacity, bytes),
            data_type,
        }),
        DataType::LargeUtf8 => Box::new(TextColumn {
            builder: ByteValues::<GenericStringType<i64>>::with_capacity(capacity, bytes),
            data_type,
        }),
        _ => Box::new(TextColumn {
            builder: StringViewBuilder::with_capacity(capacity),
            data_type,
        }),
    }
}

fn dictionary<K: ArrowDictionaryKeyType, O: OffsetSizeTrait>(
    data_type: &DataType,
    capacity: usize,
) -> Box<dyn Column> {
    Box::new(TextColumn {
        builder: GenericByteDictionaryBuilder::<K, GenericStringType<O>>::with_capacity(
            capacity,
            capacity.min(1024),
            capacity.min(1024) * BYTES_PER_STRING,
        ),
        data_type: data_type.clone(),
    })
}

/// The column of a `Dictionary<key, value>` field; only strings are taken as values.
pub fn dictionary_column(
    data_type: &DataType,
    key: &DataType,
    value: &DataType,
    capacity: usize,
) -> Result<Box<dyn Column>, Unsupported> {
    macro_rules! by_key {
        ($o:ty) => {
            match key {
                DataType::Int8 => dictionary::<Int8Type, $o>(data_type, capacity),
                DataType::Int16 => dictionary::<Int16Type, $o>(data_type, capacity),
                DataType::Int32 => dictionary::<Int32Type, $o>(data_type, capacity),
                DataType::Int64 => dictionary::<Int64Type, $o>(data_type, capacity),
                DataType::UInt8 => dictionary::<UInt8Type, $o>(data_type, capacity),
                DataType::UInt16 => dictionary::<UInt16Type, $o>(data_type, capacity),
                DataType::UInt32 => dictionary::<UInt32Type, $o>(data_type, capacity),
                DataType::UInt64 => dictionary::<UInt64Type, $o>(data_type, capacity),
                other => {
                    return Err(Unsupported::new(
                        data_type,
                        Some(format!(
                            "a dictionary key must be an integer type, not {other}"
                        )),
                    ));
                }
            }
        };
    }
    Ok(match value {
        DataType::Utf8 => by_key!(i32),
        DataType::LargeUtf8 => by_key!(i64),
        other => {
            return Err(Unsupported::new(
                data_type,
                Some(format!(
                    "only dictionaries of Utf8 or LargeUtf8 values are filled, not of {other}"
                )),
            ));
        }
    })
}
