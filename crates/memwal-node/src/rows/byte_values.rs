//! [`ByteValues`]: the values of a `Utf8`, `LargeUtf8`, `Binary` or `LargeBinary` column,
//! gathered in plain vectors that become the array's buffers as they are.
//!
//! Why not arrow-rs's `GenericByteBuilder`: it builds an `ArrayData` on the way to the array and
//! allocates its next offsets buffer as it finishes, which costs a small put more than copying
//! its values.

use std::marker::PhantomData;

use arrow_array::GenericByteArray;
use arrow_array::types::ByteArrayType;
use arrow_buffer::{ArrowNativeType, Buffer, NullBufferBuilder, OffsetBuffer, ScalarBuffer};

/// Variable-width values of byte array type `T` and their nulls.
///
/// Invariant (what makes [`ByteValues::finish`] sound): `offsets` is empty until the first
/// value or null (so a finished column allocates nothing more); after that it holds one offset
/// per value plus the end of the last, never decreasing, the last equal to `values.len()`, and
/// the bytes between two offsets are one whole `T::Native` (a `&str` for strings), since
/// [`ByteValues::append`] takes only those.
pub struct ByteValues<T: ByteArrayType> {
    offsets: Vec<T::Offset>,
    values: Vec<u8>,
    nulls: NullBufferBuilder,
    kind: PhantomData<T>,
}

impl<T: ByteArrayType> ByteValues<T> {
    /// Room for `items` values of `bytes` in all before growing.
    pub fn with_capacity(items: usize, bytes: usize) -> ByteValues<T> {
        ByteValues {
            offsets: Vec::with_capacity(items + 1),
            values: Vec::with_capacity(bytes),
            nulls: NullBufferBuilder::new(items),
            kind: PhantomData,
        }
    }

    /// The offset of the next value, the first one written if there is none yet.
    fn end(&mut self) -> T::Offset {
        if self.offsets.is_empty() {
            self.offsets.push(T::Offset::usize_as(0));
        }
        T::Offset::usize_as(self.values.len())
    }

    /// Appends `value`, or says why it cannot: an offset past its type's range (2 GiB for
    /// `Utf8` and `Binary`) cannot be written.
    pub fn append(&mut self, value: &T::Native) -> Result<(), String> {
        let bytes: &[u8] = value.as_ref();
        self.end();
        let Some(end) = T::Offset::from_usize(self.values.len() + bytes.len()) else {
            return Err(format!(
                "the put's values exceed the 2 GiB a {} column holds; split the put",
                T::DATA_TYPE
            ));
        };
        self.values.extend_from_slice(bytes);
        self.offsets.push(end);
        self.nulls.append_non_null();
        Ok(())
    }

    /// Appends `n` nulls.
    pub fn append_nulls(&mut self, n: usize) {
        let end = self.end();
        self.offsets.extend(std::iter::repeat_n(end, n));
        self.nulls.append_n_nulls(n);
    }

    /// The array of the values appended so far; the accumulator starts over empty.
    pub fn finish(&mut self) -> GenericByteArray<T> {
        self.end();
        let offsets = ScalarBuffer::from(std::mem::take(&mut self.offsets));
        let values = Buffer::from_vec(std::mem::take(&mut self.values));
        // SAFETY: the type's invariant: the offsets start at 0, never decrease and end at the
        // values' length, and the bytes between two offsets are one whole `T::Native`.
        unsafe {
            GenericByteArray::<T>::new_unchecked(
                OffsetBuffer::new_unchecked(offsets),
                values,
                self.nulls.finish(),
            )
        }
    }
}
