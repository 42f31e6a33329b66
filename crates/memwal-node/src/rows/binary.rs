//! Columns of bytes: `Binary`, `LargeBinary`, `BinaryView` and `FixedSizeBinary`, from
//! `Uint8Array`s (a Node.js `Buffer` is one), each copied once into the column (`Binary` and
//! `LargeBinary` through [`ByteValues`], as strings are).

use std::sync::Arc;

use arrow_array::builder::{BinaryViewBuilder, FixedSizeBinaryBuilder};
use arrow_array::types::GenericBinaryType;
use arrow_array::{ArrayRef, OffsetSizeTrait};
use arrow_schema::{ArrowError, DataType};

use super::byte_values::ByteValues;
use super::column::{Column, Unsupported, a};
use super::js_value::{Js, Type, Value};
use super::row_error::RowError;

/// Bytes per value reserved up front for variable-width values (the builders grow past it).
const BYTES_PER_VALUE: usize = 32;

/// A builder that takes byte strings.
trait BinaryBuilder: 'static {
    /// Appends `b`, or says why it cannot.
    fn append(&mut self, b: &[u8]) -> Result<(), String>;
    fn append_nulls(&mut self, n: usize);
    fn finish_array(&mut self) -> ArrayRef;
}

impl<O: OffsetSizeTrait> BinaryBuilder for ByteValues<GenericBinaryType<O>> {
    fn append(&mut self, b: &[u8]) -> Result<(), String> {
        ByteValues::append(self, b)
    }

    fn append_nulls(&mut self, n: usize) {
        ByteValues::append_nulls(self, n);
    }

    fn finish_array(&mut self) -> ArrayRef {
        Arc::new(self.finish())
    }
}

impl BinaryBuilder for BinaryViewBuilder {
    fn append(&mut self, b: &[u8]) -> Result<(), String> {
        self.try_append_value(b).map_err(|e| e.to_string())
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

impl BinaryBuilder for FixedSizeBinaryBuilder {
    fn append(&mut self, b: &[u8]) -> Result<(), String> {
        self.append_value(b).map_err(|e| e.to_string())
    }

    fn append_nulls(&mut self, n: usize) {
        FixedSizeBinaryBuilder::append_nulls(self, n);
    }

    fn finish_array(&mut self) -> ArrayRef {
        Arc::new(self.finish())
    }
}

/// A column of byte strings; `width` is the length every value must have, if fixed.
struct BinaryColumn<B> {
    builder: B,
    data_type: DataType,
    width: Option<usize>,
}

impl<B: BinaryBuilder> Column for BinaryColumn<B> {
    fn push(&mut self, js: &mut Js, v: Value) -> Result<(), RowError> {
        let array = match v.ty {
            Type::Object => js.typed_array(v)?,
            _ => None,
        };
        let Some(bytes) = array.as_ref().and_then(|a| a.bytes()) else {
            return Err(RowError::mismatch(self.expected(), js.describe(v), None));
        };
        if let Some(width) = self.width
            && bytes.len() != width
        {
            let why = format!("{} bytes, not {width}", bytes.len());
            return Err(RowError::mismatch(
                self.expected(),
                js.describe(v),
                Some(why),
            ));
        }
        self.builder.append(bytes).map_err(RowError::refused)
    }

    fn push_nulls(&mut self, n: usize) {
        self.builder.append_nulls(n);
    }

    fn expected(&self) -> String {
        match self.width {
            Some(w) => format!(
                "{} as a Buffer or Uint8Array of {w} bytes",
                a(&self.data_type)
            ),
            None => format!("{} as a Buffer or Uint8Array", a(&self.data_type)),
        }
    }

    fn finish(&mut self) -> Result<ArrayRef, ArrowError> {
        Ok(self.builder.finish_array())
    }
}

/// The column of a `Binary`, `LargeBinary` or `BinaryView` field.
pub fn binary_column(data_type: &DataType, capacity: usize) -> Box<dyn Column> {
    let data_type = data_type.clone();
    let bytes = capacity * BYTES_PER_VALUE;
    match data_type {
        DataType::Binary => Box::new(BinaryColumn {
            builder: ByteValues::<GenericBinaryType<i32>>::with_capacity(capacity, bytes),
            data_type,
            width: None,
        }),
        DataType::LargeBinary => Box::new(BinaryColumn {
            builder: ByteValues::<GenericBinaryType<i64>>::with_capacity(capacity, bytes),
            data_type,
            width: None,
        }),
        _ => Box::new(BinaryColumn {
            builder: BinaryViewBuilder::with_capacity(capacity),
            data_type,
            width: None,
        }),
    }
}

/// The column of a `FixedSizeBinary(width)` field.
pub fn fixed_size_binary_column(
    data_type: &DataType,
    width: i32,
    capacity: usize,
) -> Result<Box<dyn Column>, Unsupported> {
    let Ok(w) = usize::try_from(width) else {
        return Err(Unsupported::new(data_type, Some("a negative width".into())));
    };
    Ok(Box::new(BinaryColumn {
        builder: FixedSizeBinaryBuilder::with_capacity(capacity, width),
        data_type: data_type.clone(),
        width: Some(w),
    }))
}
