//! Columns of fixed-width values (numbers, timestamps, dates, times, durations; also booleans
//! and the Null type).

use std::sync::Arc;

use arrow_array::builder::{BooleanBuilder, NullBuilder};
use arrow_array::{ArrayRef, ArrowPrimitiveType, PrimitiveArray};
use arrow_buffer::{NullBufferBuilder, ScalarBuffer};
use arrow_schema::{ArrowError, DataType};

use super::column::{Column, a};
use super::js_value::{Js, Number, Type, TypedArray, Value, js_number};
use super::row_error::RowError;
use super::scalar::{Reject, Scalar};

/// A column of `T` whose values [`Scalar`] `S` reads.
///
/// The values gather in a plain vector that becomes the array's buffer as it is: arrow-rs's
/// `PrimitiveBuilder` builds an `ArrayData` on the way to the array, which costs a small put
/// (one row, a handful of fields) more than reading its values.
pub struct PrimitiveColumn<T: ArrowPrimitiveType, S> {
    values: Vec<T::Native>,
    nulls: NullBufferBuilder,
    scalar: S,
    data_type: DataType,
}

impl<T: ArrowPrimitiveType, S: Scalar<Native = T::Native>> PrimitiveColumn<T, S> {
    /// A column of `data_type` (`T`'s, with its time zone if it has one).
    pub fn new(data_type: &DataType, capacity: usize, scalar: S) -> PrimitiveColumn<T, S> {
        PrimitiveColumn {
            values: Vec::with_capacity(capacity),
            nulls: NullBufferBuilder::new(capacity),
            scalar,
            data_type: data_type.clone(),
        }
    }
}

/// The typed array element `n` as messages show it.
fn describe_element(a: &TypedArray, n: Number) -> String {
    match n {
        Number::F64(f) => format!("{:?}Array element {}", a.elements, js_number(f)),
        Number::I64(i) => format!("{:?}Array element {i}n", a.elements),
        Number::U64(u) => format!("{:?}Array element {u}n", a.elements),
    }
}

impl<T: ArrowPrimitiveType, S: Scalar<Native = T::Native>> Column for PrimitiveColumn<T, S> {
    fn push(&mut self, js: &mut Js, v: Value) -> Result<(), RowError> {
        match self.scalar.read(js, v) {
            Ok(x) => {
                self.values.push(x);
                self.nulls.append_non_null();
                Ok(())
            }
            Err(Reject::Threw(t)) => Err(t.into()),
            Err(Reject::Form) => Err(RowError::mismatch(self.expected(), js.describe(v), None)),
            Err(Reject::Value(why)) => Err(RowError::mismatch(
                self.expected(),
                js.describe(v),
                Some(why),
            )),
        }
    }

    fn push_nulls(&mut self, n: usize) {
        self.values
            .resize(self.values.len() + n, T::Native::default());
        self.nulls.append_n_nulls(n);
    }

    fn push_typed(&mut self, a: &TypedArray) -> Option<Result<(), RowError>> {
        // The same element type: one copy of the whole array.
        if let Some(values) = a.slice::<T::Native>() {
            self.values.extend_from_slice(values);
            self.nulls.append_n_non_nulls(values.len());
            return Some(Ok(()));
        }
        // Another one: converted here, with the checks a number gets, still without
        // JavaScript calls.
        for i in 0..a.len {
            let n = a.get(i);
            match self.scalar.number(n) {
                Ok(x) => {
                    self.values.push(x);
                    self.nulls.append_non_null();
                }
                Err(why) => {
                    return Some(Err(RowError::mismatch(
                        self.expected(),
                        describe_element(a, n),
                        Some(why),
                    )
                    .at_index(i)));
                }
            }
        }
        Some(Ok(()))
    }

    fn expected(&self) -> String {
        format!("{} as {}", a(&self.data_type), self.scalar.forms())
    }

    fn finish(&mut self) -> Result<ArrayRef, ArrowError> {
        let values = ScalarBuffer::from(std::mem::take(&mut self.values));
        let array = PrimitiveArray::<T>::try_new(values, self.nulls.finish())?;
        Ok(Arc::new(array.with_data_type(self.data_type.clone())))
    }
}

/// A column of booleans.
pub struct BooleanColumn {
    builder: BooleanBuilder,
}

impl BooleanColumn {
    /// An empty column.
    pub fn new(capacity: usize) -> BooleanColumn {
        BooleanColumn {
            builder: BooleanBuilder::with_capacity(capacity),
        }
    }
}

impl Column for BooleanColumn {
    fn push(&mut self, js: &mut Js, v: Value) -> Result<(), RowError> {
        if v.ty != Type::Boolean {
            return Err(RowError::mismatch(self.expected(), js.describe(v), None));
        }
        self.builder.append_value(js.boolean(v)?);
        Ok(())
    }

    fn push_nulls(&mut self, n: usize) {
        self.builder.append_nulls(n);
    }

    fn expected(&self) -> String {
        "a Boolean as a boolean".into()
    }

    fn finish(&mut self) -> Result<ArrayRef, ArrowError> {
        Ok(Arc::new(self.builder.finish()))
    }
}

/// A column of the Null type: every value is null.
pub struct NullColumn {
    builder: NullBuilder,
}

impl NullColumn {
    /// An empty column.
    pub fn new(_capacity: usize) -> NullColumn {
        NullColumn {
            builder: NullBuilder::new(),
        }
    }
}

impl Column for NullColumn {
    fn push(&mut self, js: &mut Js, v: Value) -> Result<(), RowError> {
        Err(RowError::mismatch(self.expected(), js.describe(v), None))
    }

    fn push_nulls(&mut self, n: usize) {
        self.builder.append_nulls(n);
    }

    fn expected(&self) -> String {
        "a Null as null or undefined".into()
    }

    fn finish(&mut self) -> Result<ArrayRef, ArrowError> {
        Ok(Arc::new(self.builder.finish()))
    }
}
