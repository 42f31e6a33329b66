//! A column being filled from JavaScript values, one per field of the schema (and of every
//! struct and list in it), and the one place that picks a column for an Arrow type.

use arrow_array::ArrayRef;
use arrow_array::types::{
    Date32Type, Date64Type, DurationMicrosecondType, DurationMillisecondType,
    DurationNanosecondType, DurationSecondType, Float16Type, Float32Type, Float64Type, Int8Type,
    Int16Type, Int32Type, Int64Type, Time32MillisecondType, Time32SecondType,
    Time64MicrosecondType, Time64NanosecondType, TimestampMicrosecondType,
    TimestampMillisecondType, TimestampNanosecondType, TimestampSecondType, UInt8Type, UInt16Type,
    UInt32Type, UInt64Type,
};
use arrow_schema::{ArrowError, DataType, Field, TimeUnit};

use super::binary::{binary_column, fixed_size_binary_column};
use super::js_value::{Js, Threw, TypedArray, Value};
use super::list::{FixedSizeListColumn, ListColumn};
use super::object::StructColumn;
use super::primitive::{BooleanColumn, NullColumn, PrimitiveColumn};
use super::row_error::RowError;
use super::scalar::{Date32, Date64, Duration, Numeric, Time, Timestamp};
use super::text::{dictionary_column, text_column};

/// A column being filled, row by row.
pub trait Column {
    /// Appends `v`, which is neither `null` nor `undefined`.
    fn push(&mut self, js: &mut Js, v: Value) -> Result<(), RowError>;

    /// Appends `n` nulls: null values of a nullable field, or the slots under a null struct or
    /// list entry (which Arrow masks, so a field that is not nullable may hold them too).
    fn push_nulls(&mut self, n: usize);

    /// Appends each element of `a` as one value, if this column reads typed arrays without
    /// JavaScript calls; `None` makes the caller read the elements one by one instead.
    fn push_typed(&mut self, _a: &TypedArray) -> Option<Result<(), RowError>> {
        None
    }

    /// What the column takes, for error messages: `an Int32 as an integer number or a bigint`.
    fn expected(&self) -> String;

    /// The array of every value appended; the column is then empty.
    fn finish(&mut self) -> Result<ArrayRef, ArrowError>;
}

/// How a put reads its rows.
#[derive(Clone, Copy, Debug)]
pub struct Options {
    /// Skip object keys that are not fields, instead of rejecting the put.
    pub ignore_unknown_fields: bool,
}

/// A field's column and its nullability: what a `null`, `undefined` or missing value becomes.
pub struct Slot {
    column: Box<dyn Column>,
    nullable: bool,
}

impl Slot {
    /// The slot of `field`, holding up to `capacity` values without reallocating.
    pub fn new(
        js: &Js,
        field: &Field,
        capacity: usize,
        options: Options,
    ) -> Result<Slot, Unsupported> {
        let column = column_for(js, field.data_type(), capacity, options)?;
        Ok(Slot {
            column,
            nullable: field.is_nullable() || field.data_type() == &DataType::Null,
        })
    }

    /// Appends `v`: a null for `null` and `undefined` if the field is nullable, an error if not.
    pub fn push(&mut self, js: &mut Js, v: Value) -> Result<(), RowError> {
        if !v.is_nullish() {
            return self.column.push(js, v);
        }
        if !self.nullable {
            return Err(RowError::mismatch(
                self.column.expected(),
                js.describe(v),
                Some("the field is not nullable".into()),
            ));
        }
        self.column.push_nulls(1);
        Ok(())
    }

    /// See [`Column::push_nulls`].
    pub fn push_nulls(&mut self, n: usize) {
        self.column.push_nulls(n);
    }

    /// See [`Column::push_typed`].
    pub fn push_typed(&mut self, a: &TypedArray) -> Option<Result<(), RowError>> {
        self.column.push_typed(a)
    }

    /// See [`Column::finish`].
    pub fn finish(&mut self) -> Result<ArrayRef, ArrowError> {
        self.column.finish()
    }
}

/// Why the columns of a schema cannot be built: a field whose type plain objects cannot fill.
pub struct Unsupported {
    /// Outermost field first.
    path: Vec<String>,
    problem: Problem,
}

enum Problem {
    /// The type, and why if it is a detail (a dictionary of numbers, say).
    Type(DataType, Option<String>),
    /// Making a field's key threw (no memory, say).
    Threw(String),
}

impl Unsupported {
    /// `data_type` cannot be filled, for the reason `why` if it is a detail.
    pub fn new(data_type: &DataType, why: Option<String>) -> Unsupported {
        Unsupported {
            path: Vec::new(),
            problem: Problem::Type(data_type.clone(), why),
        }
    }

    /// The type is that of field `name` of its struct (or of the schema).
    pub fn in_field(mut self, name: &str) -> Unsupported {
        self.path.insert(0, name.to_owned());
        self
    }

    /// The message: which field, its type, and what to pass instead.
    pub fn message(&self) -> String {
        let path = self.path.join(".");
        match &self.problem {
            Problem::Type(data_type, why) => {
                let why = why.as_ref().map(|w| format!(" ({w})")).unwrap_or_default();
                format!(
                    "field {path:?} has type {data_type}, which memwal cannot fill from plain objects{why}; put an apache-arrow Table or RecordBatch of the shard's schema instead"
                )
            }
            Problem::Threw(message) => {
                format!("preparing to read field {path:?} of the rows failed: {message}")
            }
        }
    }
}

impl From<Threw> for Unsupported {
    fn from(Threw(message): Threw) -> Unsupported {
        Unsupported {
            path: Vec::new(),
            problem: Problem::Threw(message),
        }
    }
}

/// `an Int32`, `a UInt8`: a type name with its article, as messages use it.
pub fn a(data_type: &DataType) -> String {
    let name = data_type.to_string();
    let article = if name.starts_with("Int") { "an" } else { "a" };
    format!("{article} {name}")
}

/// The column for values of `data_type`.
pub fn column_for(
    js: &Js,
    data_type: &DataType,
    capacity: usize,
    options: Options,
) -> Result<Box<dyn Column>, Unsupported> {
    use DataType as D;
    fn numeric<T: arrow_array::ArrowPrimitiveType>(
        dt: &DataType,
        capacity: usize,
    ) -> Box<dyn Column>
    where
        T::Native: super::scalar::FromNumber,
    {
        Box::new(PrimitiveColumn::<T, _>::new(
            dt,
            capacity,
            Numeric::<T::Native>::new(),
        ))
    }
    Ok(match data_type {
        D::Null => Box::new(NullColumn::new(capacity)),
        D::Boolean => Box::new(BooleanColumn::new(capacity)),
        D::Int8 => numeric::<Int8Type>(data_type, capacity),
        D::Int16 => numeric::<Int16Type>(data_type, capacity),
        D::Int32 => numeric::<Int32Type>(data_type, capacity),
        D::Int64 => numeric::<Int64Type>(data_type, capacity),
        D::UInt8 => numeric::<UInt8Type>(data_type, capacity),
        D::UInt16 => numeric::<UInt16Type>(data_type, capacity),
        D::UInt32 => numeric::<UInt32Type>(data_type, capacity),
        D::UInt64 => numeric::<UInt64Type>(data_type, capacity),
        D::Float16 => numeric::<Float16Type>(data_type, capacity),
        D::Float32 => numeric::<Float32Type>(data_type, capacity),
        D::Float64 => numeric::<Float64Type>(data_type, capacity),
        D::Timestamp(unit, tz) => {
            let scalar = Timestamp::new(*unit, tz.as_deref());
            match unit {
                TimeUnit::Second => Box::new(PrimitiveColumn::<TimestampSecondType, _>::new(
                    data_type, capacity, scalar,
                )),
                TimeUnit::Millisecond => {
                    Box::new(PrimitiveColumn::<TimestampMillisecondType, _>::new(
                        data_type, capacity, scalar,
                    ))
                }
                TimeUnit::Microsecond => {
                    Box::new(PrimitiveColumn::<TimestampMicrosecondType, _>::new(
                        data_type, capacity, scalar,
                    ))
                }
                TimeUnit::Nanosecond => Box::new(
                    PrimitiveColumn::<TimestampNanosecondType, _>::new(data_type, capacity, scalar),
                ),
            }
        }
        D::Date32 => Box::new(PrimitiveColumn::<Date32Type, _>::new(
            data_type, capacity, Date32,
        )),
        D::Date64 => Box::new(PrimitiveColumn::<Date64Type, _>::new(
            data_type, capacity, Date64,
        )),
        D::Time32(TimeUnit::Second) => Box::new(PrimitiveColumn::<Time32SecondType, _>::new(
            data_type,
            capacity,
            Time::<Time32SecondType>::new(),
        )),
        D::Time32(TimeUnit::Millisecond) => {
            Box::new(PrimitiveColumn::<Time32MillisecondType, _>::new(
                data_type,
                capacity,
                Time::<Time32MillisecondType>::new(),
            ))
        }
        D::Time64(TimeUnit::Microsecond) => {
            Box::new(PrimitiveColumn::<Time64MicrosecondType, _>::new(
                data_type,
                capacity,
                Time::<Time64MicrosecondType>::new(),
            ))
        }
        D::Time64(TimeUnit::Nanosecond) => {
            Box::new(PrimitiveColumn::<Time64NanosecondType, _>::new(
                data_type,
                capacity,
                Time::<Time64NanosecondType>::new(),
            ))
        }
        D::Duration(unit) => {
            let scalar = Duration::new(*unit);
            match unit {
                TimeUnit::Second => Box::new(PrimitiveColumn::<DurationSecondType, _>::new(
                    data_type, capacity, scalar,
                )),
                TimeUnit::Millisecond => Box::new(
                    PrimitiveColumn::<DurationMillisecondType, _>::new(data_type, capacity, scalar),
                ),
                TimeUnit::Microsecond => Box::new(
                    PrimitiveColumn::<DurationMicrosecondType, _>::new(data_type, capacity, scalar),
                ),
                TimeUnit::Nanosecond => Box::new(
                    PrimitiveColumn::<DurationNanosecondType, _>::new(data_type, capacity, scalar),
                ),
            }
        }
        D::Utf8 | D::LargeUtf8 | D::Utf8View => text_column(data_type, capacity),
        D::Dictionary(key, value) => dictionary_column(data_type, key, value, capacity)?,
        D::Binary | D::LargeBinary | D::BinaryView => binary_column(data_type, capacity),
        D::FixedSizeBinary(width) => fixed_size_binary_column(data_type, *width, capacity)?,
        D::List(field) => Box::new(ListColumn::<i32>::new(
            js, data_type, field, capacity, options,
        )?),
        D::LargeList(field) => Box::new(ListColumn::<i64>::new(
            js, data_type, field, capacity, options,
        )?),
        D::FixedSizeList(field, width) => Box::new(FixedSizeListColumn::new(
            js, data_type, field, *width, capacity, options,
        )?),
        D::Struct(fields) => Box::new(StructColumn::new(js, fields, capacity, options)?),
        other => return Err(Unsupported::new(other, None)),
    })
}
