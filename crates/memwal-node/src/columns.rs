//! Record batches sent as their column buffers: the fast path for apache-arrow Tables.
//!
//! Encoding a Table as Arrow IPC in JavaScript costs tens of microseconds even for one row
//! (flatbuffers and stream machinery), more than the rest of a put, and works only for Tables
//! of memwal's own copy of apache-arrow. Instead `lib/arrow-columns.ts` reads the batches of
//! any copy by their structure and sends the schema (as the JSON description of `schema.rs`,
//! cached per Schema object) and, for every array node in depth-first order, its length, offset
//! and validity flag, plus where each of the node's buffers is: small ones packed into one byte
//! array (copied once, and sliced here without another copy), large ones as views on the
//! JavaScript memory. A dictionary adds a word triple holding its number of dictionary chunks,
//! a view type one holding its number of data buffers. Every buffer is in Rust memory before
//! the arrays are rebuilt here with full validation (`ArrayData::build`), so malformed input is
//! an error, never undefined behaviour or bad data.
//!
//! # apache-arrow's buffer layout (its `Data.slice`, the same in versions 15 to 21)
//! A sliced node keeps its `offset` for the validity bitmap (and a boolean's value bitmap) but
//! has its other buffers already sliced: fixed-width values and views start at the slice,
//! offsets buffers hold `length + 1` entries starting at the slice, union type ids start at the
//! slice, the children of variable-width nodes (lists, maps, dense unions) are not sliced, and
//! the children of structs, fixed-size lists and sparse unions are.

use std::sync::Arc;

use arrow_array::{RecordBatch, make_array};
use arrow_buffer::{BooleanBuffer, Buffer, NullBuffer};
use arrow_data::{ArrayData, ArrayDataBuilder};
use arrow_schema::{DataType, SchemaRef, UnionMode};
use arrow_select::concat::concat;
use napi::bindgen_prelude::Uint8Array;

use crate::error::invalid;

/// Per-node metadata words sent by `lib/arrow-columns.ts`: length, offset, has-validity.
const NODE_WORDS: usize = 3;
/// Per-buffer words: where (an offset into the packed bytes, or `-(i + 1)` for large buffer
/// `i`) and length.
const SPAN_WORDS: usize = 2;

/// The words of a column put, copied out of the caller's reused array: each batch's row count,
/// then the nodes' words, then the buffers' spans.
pub struct Words {
    words: Vec<f64>,
    batches: usize,
    nodes: usize,
}

impl Words {
    /// The words of `all`, the first `batches` of them row counts and the next `nodes` the
    /// nodes' words.
    pub fn new(all: &[f64], batches: f64, nodes: f64) -> napi::Result<Words> {
        let (batches, nodes) = (int(batches, "batch count")?, int(nodes, "node word count")?);
        if batches + nodes > all.len() {
            return Err(invalid("column data: fewer words than its counts say"));
        }
        Ok(Words {
            words: all.to_vec(),
            batches,
            nodes,
        })
    }

    fn batches(&self) -> &[f64] {
        &self.words[..self.batches]
    }

    fn nodes(&self) -> &[f64] {
        &self.words[self.batches..self.batches + self.nodes]
    }

    fn spans(&self) -> &[f64] {
        &self.words[self.batches + self.nodes..]
    }
}

struct Reader<'a> {
    packed: &'a Buffer,
    large: &'a [Uint8Array],
    spans: &'a [f64],
    nodes: &'a [f64],
    next_buffer: usize,
    next_node: usize,
    large_read: usize,
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
        let at = self.next_buffer * SPAN_WORDS;
        let span = self
            .spans
            .get(at..at + SPAN_WORDS)
            .ok_or_else(|| invalid("column data: fewer buffers than the schema needs"))?;
        self.next_buffer += 1;
        let len = int(span[1], "buffer length")?;
        if span[0] < 0.0 {
            let i = int(-span[0] - 1.0, "large buffer index")?;
            let b = self
                .large
                .get(i)
                .filter(|b| b.len() == len)
                .ok_or_else(|| {
                    invalid(format!("column data: no large buffer {i} of {len} bytes"))
                })?;
            self.large_read += 1;
            return Ok(Buffer::from_slice_ref(b.as_ref()));
        }
        let offset = int(span[0], "buffer offset")?;
        if offset
            .checked_add(len)
            .is_none_or(|end| end > self.packed.len())
        {
            return Err(invalid(format!(
                "column data: a buffer of {len} bytes at {offset} is outside the {} packed bytes",
                self.packed.len()
            )));
        }
        Ok(self.packed.slice_with_length(offset, len))
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
            DataType::Utf8View | DataType::BinaryView => {
                let views = self.buffer()?;
                let (count, _, _) = self.node()?;
                let data = (0..count)
                    .map(|_| self.buffer())
                    .collect::<napi::Result<Vec<_>>>()?;
                builder.add_buffer(views).add_buffers(data)
            }
            DataType::Union(fields, mode) => {
                // A union has no validity bitmap of its own (its children hold the nulls).
                if has_validity {
                    return Err(invalid("column data: a union array with a validity bitmap"));
                }
                let builder = builder.add_buffer(self.buffer()?);
                let builder = match mode {
                    UnionMode::Dense => builder.add_buffer(self.buffer()?),
                    UnionMode::Sparse => builder,
                };
                let children = fields
                    .iter()
                    .map(|(_, f)| self.array(f.data_type()))
                    .collect::<napi::Result<Vec<_>>>()?;
                builder.child_data(children)
            }
            DataType::Dictionary(_, value) => {
                let keys = self.buffer()?;
                builder
                    .add_buffer(keys)
                    .child_data(vec![self.dictionary(value)?])
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

impl Reader<'_> {
    /// The values of a dictionary: its chunks (apache-arrow appends one per dictionary delta;
    /// the keys index them as one array), concatenated when there are several.
    fn dictionary(&mut self, value: &DataType) -> napi::Result<ArrayData> {
        let (count, _, _) = self.node()?;
        if count == 0 {
            return Err(invalid("column data: a dictionary without values"));
        }
        let chunks = (0..count)
            .map(|_| self.array(value).map(make_array))
            .collect::<napi::Result<Vec<_>>>()?;
        if chunks.len() == 1 {
            return Ok(chunks[0].to_data());
        }
        let refs: Vec<&dyn arrow_array::Array> = chunks.iter().map(|c| c.as_ref()).collect();
        concat(&refs).map(|a| a.to_data()).map_err(|e| {
            invalid(format!(
                "column data: dictionary chunks do not concatenate: {e}"
            ))
        })
    }
}

/// `e` with the column it arose in named at the start of its message.
fn in_column(e: napi::Error, name: &str) -> napi::Error {
    match e.reason.strip_prefix("[memwal:INVALID_ARGUMENT] ") {
        Some(message) => invalid(format!("column `{name}`: {message}")),
        None => e,
    }
}

/// Rebuilds the batches sent by `lib/arrow-columns.ts` (see the module docs). `batches` holds each
/// batch's row count; `rows` and `columns` are what the caller passed, checked against what was
/// decoded, so that a mismatch is an error and rows are never dropped silently.
///
/// # Errors
/// `INVALID_ARGUMENT` for malformed column data, or data that does not decode into the rows and
/// columns the caller passed.
pub fn decode(
    schema: &SchemaRef,
    words: &Words,
    packed: &Buffer,
    large: &[Uint8Array],
    rows: f64,
    columns: f64,
) -> napi::Result<Vec<RecordBatch>> {
    let mut r = Reader {
        packed,
        large,
        spans: words.spans(),
        nodes: words.nodes(),
        next_buffer: 0,
        next_node: 0,
        large_read: 0,
    };
    let batches = words.batches();
    let mut out = Vec::with_capacity(batches.len());
    for rows in batches {
        let rows = int(*rows, "row count")?;
        let columns = schema
            .fields()
            .iter()
            .map(|f| {
                r.array(f.data_type())
                    .map(make_array)
                    .map_err(|e| in_column(e, f.name()))
            })
            .collect::<napi::Result<Vec<_>>>()?;
        let options = arrow_array::RecordBatchOptions::new().with_row_count(Some(rows));
        out.push(
            RecordBatch::try_new_with_options(Arc::clone(schema), columns, &options)
                .map_err(|e| invalid(format!("column data does not form a record batch: {e}")))?,
        );
    }
    if r.next_buffer * SPAN_WORDS != r.spans.len()
        || r.next_node * NODE_WORDS != r.nodes.len()
        || r.large_read != large.len()
    {
        return Err(invalid(
            "column data: more buffers or nodes than the schema needs",
        ));
    }
    let decoded_rows: usize = out.iter().map(|b| b.num_rows()).sum();
    if decoded_rows as f64 != rows || schema.fields().len() as f64 != columns {
        return Err(invalid(format!(
            "the data passed to put has {rows} rows and {columns} columns, but memwal decoded {decoded_rows} rows and {} columns from its column buffers; pass Arrow IPC bytes from tableToIPC(table, 'stream') and report this",
            schema.fields().len()
        )));
    }
    Ok(out)
}
