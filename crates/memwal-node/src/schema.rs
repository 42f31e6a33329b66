//! An apache-arrow Schema as `lib/arrow-schema.ts` describes it (JSON), rebuilt as an
//! [`arrow_schema::Schema`].
//!
//! The description is read from the Schema's structure in JavaScript (field names,
//! nullability, metadata, each type's kind and attributes), so a Schema from any apache-arrow
//! copy reads the same; encoding it with the copy's own IPC writer is what failed before
//! (another copy's type objects mis-encode). Numbers for units, precisions and union modes are
//! the Arrow format's enum values (`Schema.fbs`), which every apache-arrow version uses.
//! Dictionary ids are not part of the description: arrow-rs types carry none.

use std::collections::HashMap;
use std::sync::Arc;

use arrow_schema::{
    DataType, Field, Fields, IntervalUnit, Schema, SchemaRef, TimeUnit, UnionFields, UnionMode,
};
use serde::Deserialize;

use crate::error::invalid;

/// The description of a schema.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SchemaDescription {
    fields: Vec<FieldDescription>,
    #[serde(default)]
    metadata: HashMap<String, String>,
}

/// The description of a field.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FieldDescription {
    name: String,
    nullable: bool,
    #[serde(default)]
    metadata: HashMap<String, String>,
    #[serde(rename = "type")]
    data_type: TypeDescription,
}

/// The description of a type: its kind (apache-arrow's type id, by name) and attributes.
#[derive(Deserialize)]
#[serde(tag = "kind", deny_unknown_fields, rename_all_fields = "camelCase")]
enum TypeDescription {
    Null,
    Int {
        bit_width: u16,
        signed: bool,
    },
    Float {
        precision: u8,
    },
    Binary,
    Utf8,
    Bool,
    Decimal {
        precision: u8,
        scale: i8,
        bit_width: u16,
    },
    Date {
        unit: u8,
    },
    Time {
        unit: u8,
        bit_width: u16,
    },
    Timestamp {
        unit: u8,
        timezone: Option<String>,
    },
    Interval {
        unit: u8,
    },
    List {
        child: Box<FieldDescription>,
    },
    Struct {
        children: Vec<FieldDescription>,
    },
    Union {
        mode: u8,
        type_ids: Vec<i8>,
        children: Vec<FieldDescription>,
    },
    FixedSizeBinary {
        byte_width: i32,
    },
    FixedSizeList {
        list_size: i32,
        child: Box<FieldDescription>,
    },
    Map {
        entries: Box<FieldDescription>,
        keys_sorted: bool,
    },
    Duration {
        unit: u8,
    },
    LargeBinary,
    LargeUtf8,
    LargeList {
        child: Box<FieldDescription>,
    },
    BinaryView,
    Utf8View,
    Dictionary {
        indices: Box<TypeDescription>,
        values: Box<TypeDescription>,
        ordered: bool,
    },
}

/// Rebuilds the schema described by `json` (UTF-8, from `lib/arrow-schema.ts`).
///
/// # Errors
/// `INVALID_ARGUMENT` naming what is wrong: a description that is not one (only a caller
/// bypassing `lib/` sends that), or a type whose attributes Arrow does not allow (a 12-bit
/// integer, a dictionary keyed by strings), with the field it is in.
pub fn decode_schema(json: &[u8]) -> napi::Result<SchemaRef> {
    decode(json).map_err(|e| {
        invalid(format!(
            "the apache-arrow Schema does not describe a valid Arrow schema: {e}; build it with apache-arrow's types (Field, Int32, Utf8, …)"
        ))
    })
}

/// [`decode_schema`], with the error as a plain message.
fn decode(json: &[u8]) -> Result<SchemaRef, String> {
    let d: SchemaDescription = serde_json::from_slice(json).map_err(|e| e.to_string())?;
    let fields = d
        .fields
        .into_iter()
        .map(FieldDescription::into_field)
        .collect::<Result<Vec<_>, _>>()?;
    Ok(Arc::new(Schema::new_with_metadata(fields, d.metadata)))
}

impl FieldDescription {
    fn into_field(self) -> Result<Field, String> {
        let ordered = matches!(
            self.data_type,
            TypeDescription::Dictionary { ordered: true, .. }
        );
        let name = self.name;
        let data_type = self
            .data_type
            .into_data_type()
            .map_err(|e| format!("field `{name}`: {e}"))?;
        let field = Field::new(name, data_type, self.nullable).with_metadata(self.metadata);
        Ok(if ordered {
            field.with_dict_is_ordered(true)
        } else {
            field
        })
    }
}

fn time_unit(unit: u8) -> Result<TimeUnit, String> {
    match unit {
        0 => Ok(TimeUnit::Second),
        1 => Ok(TimeUnit::Millisecond),
        2 => Ok(TimeUnit::Microsecond),
        3 => Ok(TimeUnit::Nanosecond),
        other => Err(format!("unknown time unit {other}")),
    }
}

fn children(children: Vec<FieldDescription>) -> Result<Vec<Field>, String> {
    children
        .into_iter()
        .map(FieldDescription::into_field)
        .collect()
}

impl TypeDescription {
    fn into_data_type(self) -> Result<DataType, String> {
        use TypeDescription as T;
        Ok(match self {
            T::Null => DataType::Null,
            T::Int { bit_width, signed } => match (bit_width, signed) {
                (8, true) => DataType::Int8,
                (16, true) => DataType::Int16,
                (32, true) => DataType::Int32,
                (64, true) => DataType::Int64,
                (8, false) => DataType::UInt8,
                (16, false) => DataType::UInt16,
                (32, false) => DataType::UInt32,
                (64, false) => DataType::UInt64,
                _ => return Err(format!("an integer cannot be {bit_width} bits wide")),
            },
            T::Float { precision } => match precision {
                0 => DataType::Float16,
                1 => DataType::Float32,
                2 => DataType::Float64,
                other => return Err(format!("unknown float precision {other}")),
            },
            T::Binary => DataType::Binary,
            T::Utf8 => DataType::Utf8,
            T::Bool => DataType::Boolean,
            T::Decimal {
                precision,
                scale,
                bit_width,
            } => {
                let dt = match bit_width {
                    32 => DataType::Decimal32(precision, scale),
                    64 => DataType::Decimal64(precision, scale),
                    128 => DataType::Decimal128(precision, scale),
                    256 => DataType::Decimal256(precision, scale),
                    other => return Err(format!("a decimal cannot be {other} bits wide")),
                };
                let max = match bit_width {
                    32 => 9,
                    64 => 18,
                    128 => 38,
                    _ => 76,
                };
                if precision == 0 || precision > max {
                    return Err(format!(
                        "a {bit_width}-bit decimal needs a precision of 1 to {max}, not {precision}"
                    ));
                }
                dt
            }
            T::Date { unit } => match unit {
                0 => DataType::Date32,
                1 => DataType::Date64,
                other => return Err(format!("unknown date unit {other}")),
            },
            T::Time { unit, bit_width } => match (time_unit(unit)?, bit_width) {
                (u @ (TimeUnit::Second | TimeUnit::Millisecond), 32) => DataType::Time32(u),
                (u @ (TimeUnit::Microsecond | TimeUnit::Nanosecond), 64) => DataType::Time64(u),
                (u, w) => return Err(format!("a time in {u:?}s cannot be {w} bits wide")),
            },
            T::Timestamp { unit, timezone } => {
                DataType::Timestamp(time_unit(unit)?, timezone.map(Arc::from))
            }
            T::Interval { unit } => DataType::Interval(match unit {
                0 => IntervalUnit::YearMonth,
                1 => IntervalUnit::DayTime,
                2 => IntervalUnit::MonthDayNano,
                other => return Err(format!("unknown interval unit {other}")),
            }),
            T::Duration { unit } => DataType::Duration(time_unit(unit)?),
            T::List { child } => DataType::List(Arc::new(child.into_field()?)),
            T::LargeList { child } => DataType::LargeList(Arc::new(child.into_field()?)),
            T::FixedSizeList { list_size, child } => {
                if list_size < 0 {
                    return Err(format!("a fixed-size list cannot have size {list_size}"));
                }
                DataType::FixedSizeList(Arc::new(child.into_field()?), list_size)
            }
            T::Struct { children: c } => DataType::Struct(Fields::from(children(c)?)),
            T::Map {
                entries,
                keys_sorted,
            } => {
                let entries = entries.into_field()?;
                match entries.data_type() {
                    DataType::Struct(f) if f.len() == 2 => {}
                    other => {
                        return Err(format!(
                            "a map's entries must be a struct of a key and a value, not {other}"
                        ));
                    }
                }
                DataType::Map(Arc::new(entries), keys_sorted)
            }
            T::Union {
                mode,
                type_ids,
                children: c,
            } => {
                let mode = match mode {
                    0 => UnionMode::Sparse,
                    1 => UnionMode::Dense,
                    other => return Err(format!("unknown union mode {other}")),
                };
                let fields = UnionFields::try_new(type_ids, children(c)?)
                    .map_err(|e| format!("invalid union: {e}"))?;
                DataType::Union(fields, mode)
            }
            T::FixedSizeBinary { byte_width } => {
                if byte_width < 0 {
                    return Err(format!(
                        "a fixed-size binary cannot be {byte_width} bytes wide"
                    ));
                }
                DataType::FixedSizeBinary(byte_width)
            }
            T::LargeBinary => DataType::LargeBinary,
            T::LargeUtf8 => DataType::LargeUtf8,
            T::BinaryView => DataType::BinaryView,
            T::Utf8View => DataType::Utf8View,
            T::Dictionary {
                indices, values, ..
            } => {
                let key = indices.into_data_type()?;
                if !key.is_dictionary_key_type() {
                    return Err(format!("a dictionary cannot be keyed by {key}"));
                }
                DataType::Dictionary(Box::new(key), Box::new(values.into_data_type()?))
            }
        })
    }
}
