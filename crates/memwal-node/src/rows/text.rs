//! Columns of strings: `Utf8`, `LargeUtf8`, `Utf8View`, and dictionary-encoded strings
//! (`Dictionary<any integer key, Utf8 or LargeUtf8>`), whose builder keeps one copy of each
//! distinct string.

use std::sync::Arc;

use arrow_array::builder::{GenericByteDictionaryBuilder, StringViewBuilder};
use arrow_array::types::{
    ArrowDictionaryKeyType, GenericStringType, Int8Type, Int16Type, Int32Type, Int64Type,
    UInt8Type, UInt16Type, UInt32Type, UInt64Type,
};
use arrow_array::{ArrayRef, GenericStringArray, OffsetSizeTrait};
use arrow_buffer::{Buffer, NullBufferBuilder, OffsetBuffer, ScalarBuffer};
use arrow_schema::{ArrowError, DataType};

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

/// `Utf8` or `LargeUtf8` values, gathered in plain vectors that become the array's buffers as
/// they are: arrow-rs's `GenericStringBuilder` builds an `ArrayData` on the way to the array and
/// allocates its next offsets buffer as it finishes, which costs a small put more than copying
/// its strings.
///
/// `offsets` is empty until the first value (so a finished column allocates nothing more);
/// after that it holds one offset per value plus the end of the last, never decreasing, the
/// last equal to `values.len()`. `values` holds whole strings only.
struct Strings<O> {
    offsets: Vec<O>,
    values: Vec<u8>,
    nulls: NullBufferBuilder,
}

impl<O: OffsetSizeTrait> Strings<O> {
    fn with_capacity(items: usize, bytes: usize) -> Strings<O> {
        Strings {
            offsets: Vec::with_capacity(items + 1),
            values: Vec::with_capacity(bytes),
            nulls: NullBufferBuilder::new(items),
        }
    }

    /// The offset of the next value, the first one written if there is none yet.
    fn end(&mut self) -> O {
        if self.offsets.is_empty() {
            self.offsets.push(O::usize_as(0));
        }
        O::usize_as(self.values.len())
    }
}

impl<O: OffsetSizeTrait> TextBuilder for Strings<O> {
    fn append(&mut self, s: &str) -> Result<(), String> {
        self.end();
        // An offset past its type's range (2 GiB for Utf8) cannot be written: refuse instead.
        let Some(end) = O::from_usize(self.values.len() + s.len()) else {
            return Err(
                "the put's strings exceed the 2 GiB a Utf8 column holds; split the put".into(),
            );
        };
        self.values.extend_from_slice(s.as_bytes());
        self.offsets.push(end);
        self.nulls.append_non_null();
        Ok(())
    }

    fn append_nulls(&mut self, n: usize) {
        let end = self.end();
        self.offsets.extend(std::iter::repeat_n(end, n));
        self.nulls.append_n_nulls(n);
    }

    fn finish_array(&mut self) -> ArrayRef {
        self.end();
        let offsets = ScalarBuffer::from(std::mem::take(&mut self.offsets));
        let values = Buffer::from_vec(std::mem::take(&mut self.values));
        // SAFETY: see the type's invariant: the offsets start at 0, never decrease and end at
        // the values' length, and every value between two offsets is a whole `&str`.
        let array = unsafe {
            GenericStringArray::<O>::new_unchecked(
                OffsetBuffer::new_unchecked(offsets),
                values,
                self.nulls.finish(),
            )
        };
        Arc::new(array)
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
            builder: Strings::<i32>::with_capacity(capacity, bytes),
            data_type,
        }),
        DataType::LargeUtf8 => Box::new(TextColumn {
            builder: Strings::<i64>::with_capacity(capacity, bytes),
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
