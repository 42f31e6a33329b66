//! Record batches sent as their column buffers: the fast path for apache-arrow Tables.
//!
//! Encoding a Table as Arrow IPC in JavaScript costs tens of microseconds even for one row
//! (flatbuffers and stream machinery), more than the rest of a put. Instead `lib/encoding.ts`
//! sends the batch's schema (as an IPC schema message, cached per Schema object) and, for every
//! array node in depth-first order, its length, offset and validity flag, plus the node's
//! buffers as views on the JavaScript memory. Each buffer is copied once into Rust memory and
//! the arrays are rebuilt here with full validation (`ArrayData::build`), so malformed input is
//! an error, never undefined behaviour.
//!
//! # apache-arrow's buffer layout (its `Data.slice`)
//! A sliced node keeps its `offset` for the validity bitmap (and a boolean's value bitmap) but
//! has its other buffers already sliced: fixed-width values start at the slice, offsets
//! buffers hold `length + 1` entries starting at the slice, the children of variable-width
//! nodes are not sliced, and the children of structs and fixed-size lists are.

use std::sync::Arc;

use arrow_array::{RecordBatch, make_array};
use arrow_buffer::{BooleanBuffer, Buffer, NullBuffer};
use arrow_data::{ArrayData, ArrayDataBuilder};
use arrow_schema::{DataType, SchemaRef};
use napi::bindgen_prelude::Uint8Array;

use crate::error::invalid;

/// Per-node metadata words sent by `lib/encoding.ts`: length, offset, has-validity.
const NODE_WORDS: usize = 3;

struct Reader<'a> {
    buffers: &'a [Uint8Array],
    nodes: &'a [f64],
    next_buffer: usize,
    next_node: usize,
}

fn int(v: f64, what: &str) -> napi::Result<usize> {
    if v.is_finite() && v >= 0.0 && v.fract() == 0.0 && v < 9.007e15 {
        Ok(v as usize)
    } else {
        Err(invalid(format!("column data: invalid {what} {v}")))
    }
}

impl Reader<'_> {
    fn buffer(&mut self) -> napi::Result<Buffer> {
        let b = self
            .buffers
            .get(self.next_buffer)
            .ok_or_else(|| invalid("column data: fewer buffers than the schema needs"))?;
        self.next_buffer += 1;
        Ok(Buffer::from_slice_ref(b.as_ref()))
    }

    fn node(&mut self) -> napi::Result<(usize, usize, bool)> {
        let at = self.next_node * NODE_WORDS;
        let words = self
            .nodes
            .get(at..at + NODE_WORDS)
            .ok_or_else(|| invalid("column data: fewer nodes than the schema needs"))?;
        self.next_node += 1;
        Ok((
            int(words[0], "length")?,
            int(words[1], "offset")?,
            words[2] != 0.0,
        ))
    }

    /// Rebuilds one array of type `dt` (consuming its node, buffers and children).
    fn array(&mut self, dt: &DataType) -> napi::Result<ArrayData> {
        let (len, offset, has_validity) = self.node()?;
        let nulls = if has_validity {
            let bits = self.buffer()?;
            if bits.len() * 8 < offset + len {
                return Err(invalid("column data: validity bitmap too short"));
            }
            Some(NullBuffer::new(BooleanBuffer::new(bits, offset, len)))
        } else {
            None
        };
        let builder = ArrayDataBuilder::new(dt.clone()).len(len).nulls(nulls);
        let builder = match dt {
            DataType::Null => builder,
            DataType::Boolean => builder.offset(offset).add_buffer(self.buffer()?),
            DataType::Utf8 | DataType::Binary | DataType::LargeUtf8 | DataType::LargeBinary => {
                builder
                    .add_buffer(self.buffer()?)
                    .add_buffer(self.buffer()?)
            }
            DataType::List(f) | DataType::LargeList(f) | DataType::Map(f, _) => {
                let offsets = self.buffer()?;
                let child = self.array(f.data_type())?;
                builder.add_buffer(offsets).child_data(vec![child])
            }
            DataType::FixedSizeList(f, _) => {
                let child = self.array(f.data_type())?;
                builder.child_data(vec![child])
            }
            DataType::Struct(fields) => {
                let children = fields
                    .iter()
                    .map(|f| self.array(f.data_type()))
                    .collect::<napi::Result<Vec<_>>>()?;
                builder.child_data(children)
            }
            DataType::Dictionary(_, value) => {
                let keys = self.buffer()?;
                let values = self.array(value)?;
                builder.add_buffer(keys).child_data(vec![values])
            }
            dt if dt.is_primitive() || matches!(dt, DataType::FixedSizeBinary(_)) => {
                builder.add_buffer(self.buffer()?)
            }
            other => {
                return Err(invalid(format!(
                    "column data: type {other} is not supported on this path; pass Arrow IPC bytes"
                )));
            }
        };
        builder
            .build()
            .map_err(|e| invalid(format!("column data does not form a valid {dt} array: {e}")))
    }
}

/// Rebuilds the batches sent by `lib/encoding.ts` (see the module docs). `batches` holds each
/// batch's row count.
pub fn decode(
    schema: &SchemaRef,
    batches: &[f64],
    nodes: &[f64],
    buffers: &[Uint8Array],
) -> napi::Result<Vec<RecordBatch>> {
    let mut r = Reader {
        buffers,
        nodes,
        next_buffer: 0,
        next_node: 0,
    };
    let mut out = Vec::with_capacity(batches.len());
    for rows in batches {
        let rows = int(*rows, "row count")?;
        let columns = schema
            .fields()
            .iter()
            .map(|f| r.array(f.data_type()).map(make_array))
            .collect::<napi::Result<Vec<_>>>()?;
        let options = arrow_array::RecordBatchOptions::new().with_row_count(Some(rows));
        out.push(
            RecordBatch::try_new_with_options(Arc::clone(schema), columns, &options)
                .map_err(|e| invalid(format!("column data does not form a record batch: {e}")))?,
        );
    }
    if r.next_buffer != buffers.len() || r.next_node * NODE_WORDS != nodes.len() {
        return Err(invalid(
            "column data: more buffers or nodes than the schema needs",
        ));
    }
    Ok(out)
}
