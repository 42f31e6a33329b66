//! Plain JavaScript objects, one per row, converted into one record batch of the shard's schema.
//!
//! `writer.put([{ id: 1, ts: new Date(), user: 'a' }])` hands its array over as it is (see
//! `lib/encoding.ts`); this module reads it on the JavaScript thread (Node-API values cannot be
//! read anywhere else) into one column builder per field of the shard's schema, recursively for
//! structs and lists, and builds the batch, which then goes through the same `submit` as every
//! put. The JavaScript thread only builds the array; there is no per-row Arrow or JSON work in
//! JavaScript.
//!
//! Parts: `js_value` (the raw Node-API reads, the only unsafe code besides the one array
//! `byte_values` builds from buffers it keeps valid), `column` (the column
//! trait, nullability and the choice of a column per Arrow type), `scalar` (numbers, bigints,
//! Dates and strings for fixed-width types), `primitive`, `byte_values` (the values of string
//! and binary columns), `text`, `binary`, `list` and `object`
//! (the column kinds), and `row_error` (where in a row a value failed, and why).
//!
//! # Why not arrow-json
//! Serialising rows to JSON in JavaScript and decoding it with `arrow-json` would cost a
//! `JSON.stringify` per put on the JavaScript thread, and JSON cannot carry what rows hold:
//! bigints, Dates, `Buffer`s and typed arrays (an embedding would become a list of decimal
//! numbers, printed and parsed one element at a time). Reading the values directly keeps a
//! `Float32Array` embedding one `memcpy`.
//!
//! # Errors
//! A row that does not fit rejects the whole put (nothing is written) with `INVALID_ARGUMENT`,
//! naming the row, the field's path and what was expected and got.

mod binary;
mod byte_values;
mod column;
mod js_value;
mod list;
mod object;
mod primitive;
mod row_error;
mod scalar;
mod text;

use arrow_array::{RecordBatch, RecordBatchOptions};
use arrow_schema::SchemaRef;
use napi::sys;

use crate::error::invalid;
use column::Options;
use js_value::{Js, KeyCache, Threw, Value};
use object::ObjectFields;

/// Rows in the handle scope opened around them: a scope per row would cost two Node-API calls
/// each, and one for the whole put would keep every value of a large put alive until it ends.
const ROWS_PER_SCOPE: u32 = 64;

/// Converts a writer's plain-object rows: the shard's schema and how keys are checked.
pub struct RowReader {
    schema: SchemaRef,
    options: Options,
    keys: KeyCache,
}

impl RowReader {
    /// The reader of rows of `schema`; `ignore_unknown_fields` skips keys that are not fields
    /// instead of rejecting the put.
    pub fn new(schema: SchemaRef, ignore_unknown_fields: bool) -> RowReader {
        RowReader {
            schema,
            options: Options {
                ignore_unknown_fields,
            },
            keys: KeyCache::default(),
        }
    }

    /// The batch of the rows in `rows`, a JavaScript array of plain objects, read in `env`
    /// (the environment of the Node-API call in progress, on its thread). `key_counts`, if
    /// the caller counted each row's enumerable keys (`lib/encoding.ts` does, with `for...in`,
    /// far cheaper than asking Node-API per row), spares the unknown-key check that call: row
    /// `i`'s count is `key_counts[i]` (the caller may pass a longer array it reuses); counts
    /// shorter than the rows are ignored.
    ///
    /// # Errors
    /// `INVALID_ARGUMENT` for an empty array, an element that is not a plain object, a value
    /// that does not fit its field (naming the row, the field and what was expected), an
    /// unknown key (unless ignored), or a field of a type plain objects cannot fill.
    pub fn read(
        &self,
        env: sys::napi_env,
        rows: sys::napi_value,
        key_counts: Option<&[u32]>,
    ) -> napi::Result<RecordBatch> {
        let js = &mut Js::new(env, &self.keys).map_err(threw)?;
        let rows = js.value(rows).map_err(threw)?;
        let len = match js.array_len(rows).map_err(threw)? {
            Some(0) => {
                return Err(invalid(
                    "put got an empty array: nothing to write; pass at least one row (a plain object) or RecordBatch",
                ));
            }
            Some(len) => len,
            None => return Err(invalid("put data of kind 'rows' needs an array of rows")),
        };
        let key_counts = key_counts.filter(|c| c.len() >= len as usize);
        let mut fields = ObjectFields::new(js, self.schema.fields(), len as usize, self.options)
            .map_err(|e| invalid(e.message()))?;
        let mut start = 0;
        while start < len {
            let _scope = js.scope().map_err(threw)?;
            let end = len.min(start + ROWS_PER_SCOPE);
            for i in start..end {
                let row = js.element(rows, i).map_err(threw)?;
                if !js.is_plain_object(row).map_err(threw)? {
                    return Err(invalid(not_a_row(js, row, i)));
                }
                let keys = key_counts.map(|c| c[i as usize]);
                fields
                    .push(js, row, keys)
                    .map_err(|e| invalid(e.message(i as usize)))?;
            }
            start = end;
        }
        let columns = fields
            .finish()
            .map_err(|e| invalid(format!("the rows do not form Arrow arrays: {e}")))?;
        let options = RecordBatchOptions::new().with_row_count(Some(len as usize));
        RecordBatch::try_new_with_options(self.schema.clone(), columns, &options)
            .map_err(|e| invalid(format!("the rows do not form a record batch: {e}")))
    }
}

/// The message for element `i` of the rows, which is not a plain object.
fn not_a_row(js: &mut Js, v: Value, i: u32) -> String {
    let got = js.describe(v);
    if i == 0 {
        format!(
            "put expects an array of plain objects (one per row) or of RecordBatches, but element 0 is {got}"
        )
    } else {
        format!(
            "put got an array of rows (element 0 is a plain object), but element {i} is {got}; every element must be a plain object (rows and RecordBatches cannot be mixed in one put)"
        )
    }
}

/// A JavaScript exception while reading the array itself.
fn threw(Threw(message): Threw) -> napi::Error {
    invalid(format!("reading the rows threw: {message}"))
}
