//! Columns of lists: `List`, `LargeList` and `FixedSizeList` of any type this module fills,
//! from JavaScript arrays or typed arrays.
//!
//! A typed array whose element type is the child's native type (a `Float32Array` embedding for
//! `FixedSizeList<Float32>`) is copied into the child with one `memcpy`; another typed array is
//! converted element by element in Rust, with a number's checks; an array is read element by
//! element through Node-API, each element as a value of the child's field (so `null` is
//! allowed where the child is nullable).

use std::sync::Arc;

use arrow_array::{ArrayRef, FixedSizeListArray, GenericListArray, OffsetSizeTrait};
use arrow_buffer::{NullBufferBuilder, OffsetBuffer, ScalarBuffer};
use arrow_schema::{ArrowError, DataType, FieldRef};

use super::column::{Column, Options, Slot, Unsupported, a};
use super::js_value::{Js, Type, TypedArray, Value};
use super::row_error::RowError;

/// The elements of a list value.
enum ListValue {
    Typed(TypedArray),
    Array(u32),
}

impl ListValue {
    /// The elements of `v`, if it is an array or a typed array.
    fn of(js: &Js, v: Value) -> Result<Option<ListValue>, RowError> {
        if v.ty != Type::Object {
            return Ok(None);
        }
        if let Some(t) = js.typed_array(v)? {
            return Ok(Some(ListValue::Typed(t)));
        }
        Ok(js.array_len(v)?.map(ListValue::Array))
    }

    fn len(&self) -> usize {
        match self {
            ListValue::Typed(t) => t.len,
            ListValue::Array(n) => *n as usize,
        }
    }

    /// Appends every element to `child` (the elements of `v`).
    fn push_into(self, js: &mut Js, v: Value, child: &mut Slot) -> Result<(), RowError> {
        let n = match self {
            ListValue::Typed(t) => match child.push_typed(&t) {
                Some(done) => return done,
                // The child does not read typed arrays in Rust (strings, say): read each
                // element as JavaScript sees it, which the child then refuses or takes.
                None => t.len as u32,
            },
            ListValue::Array(n) => n,
        };
        for i in 0..n {
            let e = js.element(v, i)?;
            child.push(js, e).map_err(|e| e.at_index(i as usize))?;
        }
        Ok(())
    }
}

/// A column of `List` (`O = i32`) or `LargeList` (`O = i64`) values.
pub struct ListColumn<O: OffsetSizeTrait> {
    field: FieldRef,
    data_type: DataType,
    child: Slot,
    offsets: Vec<O>,
    /// Elements appended to the child so far.
    len: usize,
    nulls: NullBufferBuilder,
}

impl<O: OffsetSizeTrait> ListColumn<O> {
    /// The column of a list whose elements are `field`'s.
    pub fn new(
        js: &Js,
        data_type: &DataType,
        field: &FieldRef,
        capacity: usize,
        options: Options,
    ) -> Result<ListColumn<O>, Unsupported> {
        let mut offsets = Vec::with_capacity(capacity + 1);
        offsets.push(O::usize_as(0));
        Ok(ListColumn {
            field: field.clone(),
            data_type: data_type.clone(),
            child: Slot::new(js, field, capacity, options)?,
            offsets,
            len: 0,
            nulls: NullBufferBuilder::new(capacity),
        })
    }
}

impl<O: OffsetSizeTrait> Column for ListColumn<O> {
    fn push(&mut self, js: &mut Js, v: Value) -> Result<(), RowError> {
        let Some(elements) = ListValue::of(js, v)? else {
            return Err(RowError::mismatch(self.expected(), js.describe(v), None));
        };
        let end = self.len + elements.len();
        let Some(offset) = O::from_usize(end) else {
            return Err(RowError::refused(
                "the put's lists hold more elements than a List's 32-bit offsets number; use LargeList or split the put".into(),
            ));
        };
        elements.push_into(js, v, &mut self.child)?;
        self.len = end;
        self.offsets.push(offset);
        self.nulls.append_non_null();
        Ok(())
    }

    fn push_nulls(&mut self, n: usize) {
        let last = *self.offsets.last().expect("offsets start with 0");
        self.offsets.extend(std::iter::repeat_n(last, n));
        self.nulls.append_n_nulls(n);
    }

    fn expected(&self) -> String {
        format!("{} as an array or a typed array", a(&self.data_type))
    }

    fn finish(&mut self) -> Result<ArrayRef, ArrowError> {
        let offsets = std::mem::replace(&mut self.offsets, vec![O::usize_as(0)]);
        self.len = 0;
        Ok(Arc::new(GenericListArray::<O>::try_new(
            self.field.clone(),
            OffsetBuffer::new(ScalarBuffer::from(offsets)),
            self.child.finish()?,
            self.nulls.finish(),
        )?))
    }
}

/// A column of `FixedSizeList` values: every one has `width` elements.
pub struct FixedSizeListColumn {
    field: FieldRef,
    data_type: DataType,
    width: i32,
    child: Slot,
    nulls: NullBufferBuilder,
    /// Entries appended so far (the child's length says nothing when `width` is 0).
    len: usize,
}

impl FixedSizeListColumn {
    /// The column of lists of `width` elements of `field`'s type.
    pub fn new(
        js: &Js,
        data_type: &DataType,
        field: &FieldRef,
        width: i32,
        capacity: usize,
        options: Options,
    ) -> Result<FixedSizeListColumn, Unsupported> {
        let Ok(w) = usize::try_from(width) else {
            return Err(Unsupported::new(data_type, Some("a negative width".into())));
        };
        Ok(FixedSizeListColumn {
            field: field.clone(),
            data_type: data_type.clone(),
            width,
            child: Slot::new(js, field, capacity.saturating_mul(w), options)?,
            nulls: NullBufferBuilder::new(capacity),
            len: 0,
        })
    }

    fn width(&self) -> usize {
        self.width as usize
    }
}

impl Column for FixedSizeListColumn {
    fn push(&mut self, js: &mut Js, v: Value) -> Result<(), RowError> {
        let Some(elements) = ListValue::of(js, v)? else {
            return Err(RowError::mismatch(self.expected(), js.describe(v), None));
        };
        if elements.len() != self.width() {
            let why = format!("{} elements, not {}", elements.len(), self.width);
            return Err(RowError::mismatch(
                self.expected(),
                js.describe(v),
                Some(why),
            ));
        }
        elements.push_into(js, v, &mut self.child)?;
        self.nulls.append_non_null();
        self.len += 1;
        Ok(())
    }

    fn push_nulls(&mut self, n: usize) {
        // Arrow keeps `width` child slots under a null entry too; its null masks them.
        self.child.push_nulls(n * self.width());
        self.nulls.append_n_nulls(n);
        self.len += n;
    }

    fn expected(&self) -> String {
        format!(
            "{} as an array or a typed array of {} elements",
            a(&self.data_type),
            self.width
        )
    }

    fn finish(&mut self) -> Result<ArrayRef, ArrowError> {
        let len = std::mem::take(&mut self.len);
        Ok(Arc::new(FixedSizeListArray::try_new_with_length(
            self.field.clone(),
            self.width,
            self.child.finish()?,
            self.nulls.finish(),
            len,
        )?))
    }
}
