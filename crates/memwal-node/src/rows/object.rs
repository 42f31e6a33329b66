//! Plain objects read field by field: each row, and each value of a `Struct` field.
//!
//! [`ObjectFields`] reads one object into one column per field, by keys made once per writer, and
//! checks for keys that are not fields. That check must stay cheap on the happy path: it
//! compares the object's number of keys with the fields that had a value, and only when there
//! are more keys than that does it list them to find the unknown one (or learn that a field was
//! explicitly `undefined`). A row's key count comes from JavaScript (`lib/encoding.ts` counts
//! them with `for...in`, a few nanoseconds); a nested object's is asked of Node-API, whose only
//! way is to list the keys into a new array (a few hundred nanoseconds).

use std::sync::Arc;

use arrow_array::{ArrayRef, StructArray};
use arrow_buffer::NullBufferBuilder;
use arrow_schema::{ArrowError, Fields};
use napi::sys;

use super::column::{Column, Options, Slot, Unsupported};
use super::js_value::{Js, Value};
use super::row_error::RowError;

/// Names that every plain object inherits from `Object.prototype`: a field with one of these
/// names is read only if the object has it as its own key, so a missing `toString` field is
/// null rather than `Object.prototype.toString`.
const INHERITED: &[&str] = &[
    "constructor",
    "hasOwnProperty",
    "isPrototypeOf",
    "propertyIsEnumerable",
    "toLocaleString",
    "toString",
    "valueOf",
    "__proto__",
    "__defineGetter__",
    "__defineSetter__",
    "__lookupGetter__",
    "__lookupSetter__",
];

/// One field of an object: its name, its key, and its column.
struct ObjectField {
    name: String,
    key: sys::napi_value,
    /// See [`INHERITED`].
    own_only: bool,
    slot: Slot,
}

/// Reads objects into one column per field; see the module docs.
pub struct ObjectFields {
    fields: Vec<ObjectField>,
    check_unknown: bool,
}

impl ObjectFields {
    /// The reader of objects with `fields`, for up to `capacity` objects without reallocating.
    pub fn new(
        js: &Js,
        fields: &Fields,
        capacity: usize,
        options: Options,
    ) -> Result<ObjectFields, Unsupported> {
        let fields = fields
            .iter()
            .map(|f| {
                Ok(ObjectField {
                    name: f.name().clone(),
                    key: js.key(f.name())?,
                    own_only: INHERITED.contains(&f.name().as_str()),
                    slot: Slot::new(js, f, capacity, options).map_err(|e| e.in_field(f.name()))?,
                })
            })
            .collect::<Result<Vec<_>, Unsupported>>()?;
        Ok(ObjectFields {
            fields,
            check_unknown: !options.ignore_unknown_fields,
        })
    }

    /// Appends the fields of `object`, a plain object with `keys` enumerable keys if the caller
    /// counted them.
    pub fn push(&mut self, js: &mut Js, object: Value, keys: Option<u32>) -> Result<(), RowError> {
        let mut with_value = 0;
        for f in &mut self.fields {
            let v = if f.own_only && !js.has_own(object.raw, f.key)? {
                Value::UNDEFINED
            } else {
                js.get(object.raw, f.key)
                    .map_err(|e| RowError::from(e).in_field(&f.name))?
            };
            if v.ty != super::js_value::Type::Undefined {
                with_value += 1;
            }
            f.slot.push(js, v).map_err(|e| e.in_field(&f.name))?;
        }
        if self.check_unknown {
            let keys = match keys {
                Some(n) => n,
                None => js.own_key_count(object.raw).map_err(RowError::keys_threw)?,
            };
            if keys > with_value {
                self.find_unknown_key(js, object)?;
            }
        }
        Ok(())
    }

    /// The slow half of the unknown-key check: `object` has more keys than fields with a
    /// value, so either a key is not a field or a field is explicitly `undefined`.
    fn find_unknown_key(&self, js: &mut Js, object: Value) -> Result<(), RowError> {
        for key in js.own_keys(object.raw).map_err(RowError::keys_threw)? {
            if !self.fields.iter().any(|f| f.name == key) {
                let known = self.fields.iter().map(|f| f.name.clone()).collect();
                return Err(RowError::unknown_key(key, known));
            }
        }
        Ok(())
    }

    /// Appends `n` nulls to every field (under a null struct, which masks them).
    pub fn push_nulls(&mut self, n: usize) {
        for f in &mut self.fields {
            f.slot.push_nulls(n);
        }
    }

    /// The fields' names, for messages.
    pub fn names(&self) -> Vec<&str> {
        self.fields.iter().map(|f| f.name.as_str()).collect()
    }

    /// One array per field.
    pub fn finish(&mut self) -> Result<Vec<ArrayRef>, ArrowError> {
        self.fields.iter_mut().map(|f| f.slot.finish()).collect()
    }
}

/// A column of `Struct` values, each from a plain object.
pub struct StructColumn {
    fields: Fields,
    object: ObjectFields,
    nulls: NullBufferBuilder,
    len: usize,
}

impl StructColumn {
    /// The column of a struct with `fields`.
    pub fn new(
        js: &Js,
        fields: &Fields,
        capacity: usize,
        options: Options,
    ) -> Result<StructColumn, Unsupported> {
        Ok(StructColumn {
            fields: fields.clone(),
            object: ObjectFields::new(js, fields, capacity, options)?,
            nulls: NullBufferBuilder::new(capacity),
            len: 0,
        })
    }
}

impl Column for StructColumn {
    fn push(&mut self, js: &mut Js, v: Value) -> Result<(), RowError> {
        if !js.is_plain_object(v)? {
            return Err(RowError::mismatch(self.expected(), js.describe(v), None));
        }
        self.object.push(js, v, None)?;
        self.nulls.append_non_null();
        self.len += 1;
        Ok(())
    }

    fn push_nulls(&mut self, n: usize) {
        self.object.push_nulls(n);
        self.nulls.append_n_nulls(n);
        self.len += n;
    }

    fn expected(&self) -> String {
        format!(
            "a Struct as a plain object (fields: {})",
            self.object.names().join(", ")
        )
    }

    fn finish(&mut self) -> Result<ArrayRef, ArrowError> {
        let len = std::mem::take(&mut self.len);
        Ok(Arc::new(StructArray::try_new_with_length(
            self.fields.clone(),
            self.object.finish()?,
            self.nulls.finish(),
            len,
        )?))
    }
}
