//! JavaScript values read through raw Node-API calls: the row conversion's only unsafe code.
//!
//! Why raw `napi::sys` calls: napi-rs's safe accessors check the type again, allocate (a
//! `CString` per property name, a `String` per string) and build formatted errors; on the put
//! path, which reads every field of every row, that would cost more than the conversion itself.
//! Here each read is one Node-API call on a value whose type the caller already learnt with
//! `napi_typeof` ([`Value::ty`]), so a call can only fail because JavaScript threw (a getter, a
//! Proxy trap): that becomes [`Threw`], with the exception cleared and its message kept.
//!
//! Every `napi_value` here lives in the handle scope that was open when it was made: the keys
//! of the schema's fields are made before the per-row scopes ([`Js::scope`]) open, so they stay
//! valid for the whole put; a row's values die with its scope.

use std::any::TypeId;
use std::cell::RefCell;
use std::collections::HashMap;
use std::ffi::c_char;
use std::ptr;
use std::sync::{Mutex, MutexGuard, TryLockError};

use napi::sys;

/// How many bytes of a string are read in one call before asking for its length (most fields
/// are shorter, so most strings cost one call).
const TEXT_GUESS: usize = 256;

/// What `napi_typeof` says a value is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Type {
    Undefined,
    Null,
    Boolean,
    Number,
    String,
    Symbol,
    Object,
    Function,
    External,
    BigInt,
}

/// A JavaScript value and its type.
#[derive(Clone, Copy)]
pub struct Value {
    pub raw: sys::napi_value,
    pub ty: Type,
}

impl Value {
    /// `undefined`, without a handle (what a missing own key reads as).
    pub const UNDEFINED: Value = Value {
        raw: ptr::null_mut(),
        ty: Type::Undefined,
    };

    /// True for `null` and `undefined`.
    pub fn is_nullish(&self) -> bool {
        matches!(self.ty, Type::Undefined | Type::Null)
    }
}

/// A JavaScript exception (or a failed Node-API call), with its message. Reading stops there.
#[derive(Debug)]
pub struct Threw(pub String);

/// The element type of a typed array, as Node-API names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Elements {
    Int8,
    Uint8,
    Uint8Clamped,
    Int16,
    Uint16,
    Int32,
    Uint32,
    Float32,
    Float64,
    BigInt64,
    BigUint64,
}

impl Elements {
    fn of(t: sys::napi_typedarray_type) -> Option<Elements> {
        use sys::TypedarrayType as T;
        Some(match t {
            T::int8_array => Elements::Int8,
            T::uint8_array => Elements::Uint8,
            T::uint8_clamped_array => Elements::Uint8Clamped,
            T::int16_array => Elements::Int16,
            T::uint16_array => Elements::Uint16,
            T::int32_array => Elements::Int32,
            T::uint32_array => Elements::Uint32,
            T::float32_array => Elements::Float32,
            T::float64_array => Elements::Float64,
            T::bigint64_array => Elements::BigInt64,
            T::biguint64_array => Elements::BigUint64,
            _ => return None,
        })
    }

    /// The Rust type of one element.
    fn native(self) -> TypeId {
        match self {
            Elements::Int8 => TypeId::of::<i8>(),
            Elements::Uint8 | Elements::Uint8Clamped => TypeId::of::<u8>(),
            Elements::Int16 => TypeId::of::<i16>(),
            Elements::Uint16 => TypeId::of::<u16>(),
            Elements::Int32 => TypeId::of::<i32>(),
            Elements::Uint32 => TypeId::of::<u32>(),
            Elements::Float32 => TypeId::of::<f32>(),
            Elements::Float64 => TypeId::of::<f64>(),
            Elements::BigInt64 => TypeId::of::<i64>(),
            Elements::BigUint64 => TypeId::of::<u64>(),
        }
    }
}

/// One element of a typed array, as the number or bigint JavaScript would read.
#[derive(Clone, Copy, Debug)]
pub enum Number {
    /// A number (every typed array but the two bigint ones).
    F64(f64),
    /// A bigint of a `BigInt64Array`, or one that fits 64 signed bits.
    I64(i64),
    /// A bigint of a `BigUint64Array`, or one above `i64::MAX` that fits 64 unsigned bits.
    U64(u64),
}

/// A typed array's elements, borrowed from its buffer. Valid until JavaScript runs again (a
/// getter could detach or shrink the buffer), so it is copied before the next value is read.
pub struct TypedArray {
    pub elements: Elements,
    data: *const u8,
    pub len: usize,
}

impl TypedArray {
    /// The elements as a slice of `T`, if `T` is their Rust type.
    pub fn slice<T: 'static>(&self) -> Option<&[T]> {
        if TypeId::of::<T>() != self.elements.native() {
            return None;
        }
        if self.len == 0 {
            return Some(&[]);
        }
        // SAFETY: `T` is the element type (checked above); Node-API points `data` at the first
        // element, aligned for it (JavaScript requires a typed array's byte offset to be a
        // multiple of its element size), with `len` elements in the buffer; no JavaScript runs
        // while the slice is borrowed (see the type's docs).
        Some(unsafe { std::slice::from_raw_parts(self.data.cast::<T>(), self.len) })
    }

    /// The bytes of a `Uint8Array` (or `Buffer`), if it is one.
    pub fn bytes(&self) -> Option<&[u8]> {
        match self.elements {
            Elements::Uint8 => self.slice::<u8>(),
            _ => None,
        }
    }

    /// Element `i` (< `len`), as JavaScript would read it.
    pub fn get(&self, i: usize) -> Number {
        fn at<T: Copy + 'static>(a: &TypedArray, i: usize) -> T {
            a.slice::<T>().expect("element type checked by the caller")[i]
        }
        match self.elements {
            Elements::Int8 => Number::F64(at::<i8>(self, i).into()),
            Elements::Uint8 | Elements::Uint8Clamped => Number::F64(at::<u8>(self, i).into()),
            Elements::Int16 => Number::F64(at::<i16>(self, i).into()),
            Elements::Uint16 => Number::F64(at::<u16>(self, i).into()),
            Elements::Int32 => Number::F64(at::<i32>(self, i).into()),
            Elements::Uint32 => Number::F64(at::<u32>(self, i).into()),
            Elements::Float32 => Number::F64(at::<f32>(self, i).into()),
            Elements::Float64 => Number::F64(at::<f64>(self, i)),
            Elements::BigInt64 => Number::I64(at::<i64>(self, i)),
            Elements::BigUint64 => Number::U64(at::<u64>(self, i)),
        }
    }
}

/// What every put of a writer reads with: `Object.prototype` and the property keys of the
/// schema's fields, made once in the writer's environment instead of once per put (a key string
/// made per put costs an allocation and a string-table lookup every time V8 meets it as a
/// property name). They live in one JavaScript array, `[Object.prototype, key, ...]`, held by a
/// reference; the map gives each key's index. Made on a writer's first put of rows.
///
/// A writer belongs to the one environment that opened it, so the array is valid in every call
/// that reads rows for it; the reference is deleted when the writer is dropped (its finalizer
/// runs on that environment's thread). A call holds the cache for as long as it reads; a put
/// made from inside another (a getter of a row that puts) finds it taken and makes its own
/// keys, so the two never share a half-made entry and never wait for each other.
///
/// A mutex, not a `RefCell`, only so that a writer can be built off the JavaScript thread
/// (empty) and moved to it; it is only ever taken on the JavaScript thread, with `try_lock`.
#[derive(Default)]
pub struct KeyCache(Mutex<Option<Keys>>);

struct Keys {
    env: sys::napi_env,
    array: sys::napi_ref,
    len: u32,
    index: HashMap<String, u32>,
}

// SAFETY: the handles are used only in calls on the thread of the environment that made them
// (`Js::new` takes the environment of the call in progress), and deleted on it (`Drop`).
unsafe impl Send for Keys {}

impl Drop for Keys {
    fn drop(&mut self) {
        // SAFETY: dropped with its writer, on the thread of the environment that made it.
        unsafe { sys::napi_delete_reference(self.env, self.array) };
    }
}

/// Reads JavaScript values in one Node-API environment, on its thread, during one call.
pub struct Js<'c> {
    env: sys::napi_env,
    /// Where strings are copied; reused across values.
    text: Vec<u8>,
    /// `Object.prototype`, which plain objects have as their prototype.
    object_prototype: sys::napi_value,
    /// The writer's keys, held for this call (`None` if another call holds them), and their
    /// array.
    keys: RefCell<Option<MutexGuard<'c, Option<Keys>>>>,
    key_array: sys::napi_value,
}

/// Open handle scope; closes on drop.
pub struct Scope {
    env: sys::napi_env,
    scope: sys::napi_handle_scope,
}

impl Drop for Scope {
    fn drop(&mut self) {
        // SAFETY: scopes close in the reverse order they opened: each is a local variable.
        unsafe { sys::napi_close_handle_scope(self.env, self.scope) };
    }
}

impl<'c> Js<'c> {
    /// A reader for `env`, which must be the environment of the Node-API call in progress and
    /// the one every earlier use of `keys` was made in.
    pub fn new(env: sys::napi_env, keys: &'c KeyCache) -> Result<Js<'c>, Threw> {
        let mut js = Js {
            env,
            text: Vec::with_capacity(TEXT_GUESS),
            object_prototype: ptr::null_mut(),
            keys: RefCell::new(None),
            key_array: ptr::null_mut(),
        };
        let mut cache = match keys.0.try_lock() {
            Ok(cache) => cache,
            Err(TryLockError::Poisoned(e)) => e.into_inner(),
            Err(TryLockError::WouldBlock) => {
                let mut object = ptr::null_mut();
                js.check(unsafe { sys::napi_create_object(env, &mut object) })?;
                js.object_prototype = js.prototype(object)?;
                return Ok(js);
            }
        };
        let mut key_array = ptr::null_mut();
        match cache.as_ref() {
            Some(k) => {
                js.check(unsafe { sys::napi_get_reference_value(env, k.array, &mut key_array) })?;
            }
            None => {
                let mut object = ptr::null_mut();
                js.check(unsafe { sys::napi_create_object(env, &mut object) })?;
                let prototype = js.prototype(object)?;
                js.check(unsafe { sys::napi_create_array(env, &mut key_array) })?;
                js.define_element(key_array, 0, prototype)?;
                let mut array = ptr::null_mut();
                js.check(unsafe { sys::napi_create_reference(env, key_array, 1, &mut array) })?;
                *cache = Some(Keys {
                    env,
                    array,
                    len: 1,
                    index: HashMap::new(),
                });
            }
        }
        js.key_array = key_array;
        js.object_prototype = js.element_raw(key_array, 0)?;
        js.keys = RefCell::new(Some(cache));
        Ok(js)
    }

    /// Defines `array[i] = value` as its own element, never calling a setter (a plain set would
    /// call one that `Array.prototype` has for index `i`, and leave the element undefined).
    fn define_element(
        &self,
        array: sys::napi_value,
        i: u32,
        value: sys::napi_value,
    ) -> Result<(), Threw> {
        let name = self.new_key(&i.to_string())?;
        let property = sys::napi_property_descriptor {
            utf8name: ptr::null(),
            name,
            method: None,
            getter: None,
            setter: None,
            value,
            attributes: sys::PropertyAttributes::default,
            data: ptr::null_mut(),
        };
        self.check(unsafe { sys::napi_define_properties(self.env, array, 1, &property) })
    }

    fn element_raw(&self, array: sys::napi_value, i: u32) -> Result<sys::napi_value, Threw> {
        let mut v = ptr::null_mut();
        self.check(unsafe { sys::napi_get_element(self.env, array, i, &mut v) })?;
        Ok(v)
    }

    /// `Ok` for `napi_ok`; otherwise the pending exception (cleared) or the failed status.
    fn check(&self, status: sys::napi_status) -> Result<(), Threw> {
        if status == sys::Status::napi_ok {
            return Ok(());
        }
        let mut pending = false;
        unsafe { sys::napi_is_exception_pending(self.env, &mut pending) };
        if !pending {
            return Err(Threw(format!(
                "a Node-API call failed with status {status}"
            )));
        }
        let mut exception = ptr::null_mut();
        unsafe { sys::napi_get_and_clear_last_exception(self.env, &mut exception) };
        Err(Threw(self.exception_message(exception)))
    }

    /// `String(e.message ?? e)` of an exception, without letting a second one escape.
    fn exception_message(&self, exception: sys::napi_value) -> String {
        let mut message = ptr::null_mut();
        let mut ty = 0;
        let status = unsafe {
            sys::napi_get_named_property(self.env, exception, c"message".as_ptr(), &mut message)
        };
        let source = if status == sys::Status::napi_ok
            && unsafe { sys::napi_typeof(self.env, message, &mut ty) } == sys::Status::napi_ok
            && ty == sys::ValueType::napi_string
        {
            message
        } else {
            exception
        };
        let mut text = ptr::null_mut();
        if unsafe { sys::napi_coerce_to_string(self.env, source, &mut text) }
            != sys::Status::napi_ok
        {
            let mut ignored = ptr::null_mut();
            unsafe { sys::napi_get_and_clear_last_exception(self.env, &mut ignored) };
            return "an exception that cannot be converted to a string".into();
        }
        read_string(self.env, text).unwrap_or_default()
    }

    /// Opens a handle scope: values made until the scope drops are released with it.
    pub fn scope(&self) -> Result<Scope, Threw> {
        let mut scope = ptr::null_mut();
        self.check(unsafe { sys::napi_open_handle_scope(self.env, &mut scope) })?;
        Ok(Scope {
            env: self.env,
            scope,
        })
    }

    /// `raw` with its type.
    pub fn value(&self, raw: sys::napi_value) -> Result<Value, Threw> {
        let mut ty = 0;
        self.check(unsafe { sys::napi_typeof(self.env, raw, &mut ty) })?;
        use sys::ValueType as V;
        let ty = match ty {
            V::napi_undefined => Type::Undefined,
            V::napi_null => Type::Null,
            V::napi_boolean => Type::Boolean,
            V::napi_number => Type::Number,
            V::napi_string => Type::String,
            V::napi_symbol => Type::Symbol,
            V::napi_object => Type::Object,
            V::napi_function => Type::Function,
            V::napi_bigint => Type::BigInt,
            _ => Type::External,
        };
        Ok(Value { raw, ty })
    }

    /// A string to use as a property key: the writer's (see [`KeyCache`]), made the first
    /// time a name is asked for.
    pub fn key(&self, name: &str) -> Result<sys::napi_value, Threw> {
        let mut held = self.keys.borrow_mut();
        let Some(keys) = held.as_mut().and_then(|cache| cache.as_mut()) else {
            return self.new_key(name);
        };
        if let Some(&i) = keys.index.get(name) {
            return self.element_raw(self.key_array, i);
        }
        let key = self.new_key(name)?;
        self.define_element(self.key_array, keys.len, key)?;
        keys.index.insert(name.to_owned(), keys.len);
        keys.len += 1;
        Ok(key)
    }

    fn new_key(&self, name: &str) -> Result<sys::napi_value, Threw> {
        let mut key = ptr::null_mut();
        self.check(unsafe {
            sys::napi_create_string_utf8(
                self.env,
                name.as_ptr().cast::<c_char>(),
                name.len() as isize,
                &mut key,
            )
        })?;
        Ok(key)
    }

    /// `object[key]` (getters and the prototype chain included).
    pub fn get(&self, object: sys::napi_value, key: sys::napi_value) -> Result<Value, Threw> {
        let mut v = ptr::null_mut();
        self.check(unsafe { sys::napi_get_property(self.env, object, key, &mut v) })?;
        self.value(v)
    }

    /// `Object.hasOwn(object, key)`.
    pub fn has_own(&self, object: sys::napi_value, key: sys::napi_value) -> Result<bool, Threw> {
        let mut has = false;
        self.check(unsafe { sys::napi_has_own_property(self.env, object, key, &mut has) })?;
        Ok(has)
    }

    /// A number's value.
    pub fn number(&self, v: Value) -> Result<f64, Threw> {
        let mut n = 0.0;
        self.check(unsafe { sys::napi_get_value_double(self.env, v.raw, &mut n) })?;
        Ok(n)
    }

    /// A boolean's value.
    pub fn boolean(&self, v: Value) -> Result<bool, Threw> {
        let mut b = false;
        self.check(unsafe { sys::napi_get_value_bool(self.env, v.raw, &mut b) })?;
        Ok(b)
    }

    /// A bigint as a 64-bit integer; `None` if it fits neither `i64` nor `u64`.
    pub fn bigint(&self, v: Value) -> Result<Option<Number>, Threw> {
        let (mut i, mut lossless) = (0i64, false);
        self.check(unsafe {
            sys::napi_get_value_bigint_int64(self.env, v.raw, &mut i, &mut lossless)
        })?;
        if lossless {
            return Ok(Some(Number::I64(i)));
        }
        let mut u = 0u64;
        self.check(unsafe {
            sys::napi_get_value_bigint_uint64(self.env, v.raw, &mut u, &mut lossless)
        })?;
        Ok(lossless.then_some(Number::U64(u)))
    }

    /// A string's UTF-8 bytes (a lone surrogate becomes U+FFFD), valid until the next call.
    pub fn string(&mut self, v: Value) -> Result<&str, Threw> {
        self.text.clear();
        let mut len = 0usize;
        let cap = self.text.capacity();
        let buf = self.text.as_mut_ptr().cast::<c_char>();
        self.check(unsafe {
            sys::napi_get_value_string_utf8(self.env, v.raw, buf, cap, &mut len)
        })?;
        // Node-API stops before a character that does not fit (up to 4 bytes) and keeps one
        // byte for the terminator: with 5 bytes to spare, nothing was cut off.
        if len + 5 > cap {
            self.check(unsafe {
                sys::napi_get_value_string_utf8(self.env, v.raw, ptr::null_mut(), 0, &mut len)
            })?;
            self.text.reserve(len + 1);
            let cap = self.text.capacity();
            let buf = self.text.as_mut_ptr().cast::<c_char>();
            self.check(unsafe {
                sys::napi_get_value_string_utf8(self.env, v.raw, buf, cap, &mut len)
            })?;
        }
        // SAFETY: Node-API wrote `len` bytes of UTF-8 (lone surrogates replaced) into the
        // buffer, within its capacity.
        unsafe {
            self.text.set_len(len);
            Ok(std::str::from_utf8_unchecked(&self.text))
        }
    }

    /// A Date's milliseconds since the epoch (NaN for an invalid Date); `None` if `v` is not a
    /// Date.
    pub fn date(&self, v: Value) -> Result<Option<f64>, Threw> {
        let mut is = false;
        self.check(unsafe { sys::napi_is_date(self.env, v.raw, &mut is) })?;
        if !is {
            return Ok(None);
        }
        let mut ms = 0.0;
        self.check(unsafe { sys::napi_get_date_value(self.env, v.raw, &mut ms) })?;
        Ok(Some(ms))
    }

    /// The typed array `v` is (a `Buffer` is a `Uint8Array`), if it is one.
    pub fn typed_array(&self, v: Value) -> Result<Option<TypedArray>, Threw> {
        let mut is = false;
        self.check(unsafe { sys::napi_is_typedarray(self.env, v.raw, &mut is) })?;
        if !is {
            return Ok(None);
        }
        let (mut t, mut len, mut data) = (0, 0usize, ptr::null_mut());
        self.check(unsafe {
            sys::napi_get_typedarray_info(
                self.env,
                v.raw,
                &mut t,
                &mut len,
                &mut data,
                ptr::null_mut(),
                ptr::null_mut(),
            )
        })?;
        Ok(Elements::of(t).map(|elements| TypedArray {
            elements,
            data: data.cast_const().cast::<u8>(),
            len: if data.is_null() { 0 } else { len },
        }))
    }

    /// An array's length, if `v` is an array.
    pub fn array_len(&self, v: Value) -> Result<Option<u32>, Threw> {
        let mut is = false;
        self.check(unsafe { sys::napi_is_array(self.env, v.raw, &mut is) })?;
        if !is {
            return Ok(None);
        }
        let mut len = 0u32;
        self.check(unsafe { sys::napi_get_array_length(self.env, v.raw, &mut len) })?;
        Ok(Some(len))
    }

    /// `array[i]` (`undefined` for a hole).
    pub fn element(&self, array: Value, i: u32) -> Result<Value, Threw> {
        let mut v = ptr::null_mut();
        self.check(unsafe { sys::napi_get_element(self.env, array.raw, i, &mut v) })?;
        self.value(v)
    }

    fn prototype(&self, object: sys::napi_value) -> Result<sys::napi_value, Threw> {
        let mut p = ptr::null_mut();
        self.check(unsafe { sys::napi_get_prototype(self.env, object, &mut p) })?;
        Ok(p)
    }

    fn is_null(&self, v: sys::napi_value) -> Result<bool, Threw> {
        Ok(self.value(v)?.ty == Type::Null)
    }

    /// True for an object whose prototype is `Object.prototype` (an object literal, parsed
    /// JSON, `{ ...x }`), `null` (`Object.create(null)`), or another realm's `Object.prototype`
    /// (one whose own prototype is `null`). Arrays, Dates, typed arrays and class instances
    /// (an apache-arrow `RecordBatch`, say) are not plain.
    pub fn is_plain_object(&self, v: Value) -> Result<bool, Threw> {
        if v.ty != Type::Object {
            return Ok(false);
        }
        let p = self.prototype(v.raw)?;
        let mut same = false;
        self.check(unsafe {
            sys::napi_strict_equals(self.env, p, self.object_prototype, &mut same)
        })?;
        Ok(same || self.is_null(p)? || self.is_null(self.prototype(p)?)?)
    }

    /// The own enumerable string keys of `object` (numbers as strings), as an array.
    fn own_key_array(&self, object: sys::napi_value) -> Result<Value, Threw> {
        let mut keys = ptr::null_mut();
        self.check(unsafe {
            sys::napi_get_all_property_names(
                self.env,
                object,
                sys::KeyCollectionMode::own_only,
                sys::KeyFilter::enumerable | sys::KeyFilter::skip_symbols,
                sys::KeyConversion::numbers_to_strings,
                &mut keys,
            )
        })?;
        Ok(Value {
            raw: keys,
            ty: Type::Object,
        })
    }

    /// How many own enumerable string keys `object` has (what `Object.keys` would list).
    pub fn own_key_count(&self, object: sys::napi_value) -> Result<u32, Threw> {
        let keys = self.own_key_array(object)?;
        let mut len = 0u32;
        self.check(unsafe { sys::napi_get_array_length(self.env, keys.raw, &mut len) })?;
        Ok(len)
    }

    /// `Object.keys(object)`.
    pub fn own_keys(&mut self, object: sys::napi_value) -> Result<Vec<String>, Threw> {
        let keys = self.own_key_array(object)?;
        let len = self.array_len(keys)?.unwrap_or(0);
        (0..len)
            .map(|i| {
                let k = self.element(keys, i)?;
                self.string(k).map(str::to_owned)
            })
            .collect()
    }

    /// `value.constructor.name`, or `None`.
    fn constructor_name(&mut self, v: Value) -> Result<Option<String>, Threw> {
        let c = self.get(v.raw, self.key("constructor")?)?;
        if c.ty != Type::Function {
            return Ok(None);
        }
        let name = self.get(c.raw, self.key("name")?)?;
        if name.ty != Type::String {
            return Ok(None);
        }
        Ok(Some(self.string(name)?.to_owned()).filter(|n| !n.is_empty()))
    }

    /// `v` as an error message names what it got: `undefined`, `null`, `number 1.5`,
    /// `bigint 7n`, `"text"` (quoted, shortened), `a Date`, `a Float32Array of length 3`,
    /// `an array of length 2`, `an object (Table)`. For error messages only: it may run
    /// JavaScript (getters of `constructor`).
    pub fn describe(&mut self, v: Value) -> String {
        self.try_describe(v)
            .unwrap_or_else(|Threw(e)| format!("a value that threw when inspected ({e})"))
    }

    fn try_describe(&mut self, v: Value) -> Result<String, Threw> {
        Ok(match v.ty {
            Type::Undefined => "undefined".into(),
            Type::Null => "null".into(),
            Type::Boolean => format!("boolean {}", self.boolean(v)?),
            Type::Number => format!("number {}", js_number(self.number(v)?)),
            Type::BigInt => {
                let mut text = ptr::null_mut();
                self.check(unsafe { sys::napi_coerce_to_string(self.env, v.raw, &mut text) })?;
                let text = self.value(text)?;
                format!("bigint {}n", self.string(text)?)
            }
            Type::String => quoted(self.string(v)?),
            Type::Symbol => "a symbol".into(),
            Type::Function => "a function".into(),
            Type::External => "an external value".into(),
            Type::Object => {
                if let Some(ms) = self.date(v)? {
                    return Ok(if ms.is_nan() {
                        "an invalid Date".into()
                    } else {
                        format!("a Date ({} ms since the epoch)", js_number(ms))
                    });
                }
                if let Some(len) = self.array_len(v)? {
                    return Ok(format!("an array of length {len}"));
                }
                let name = self.constructor_name(v)?;
                if let Some(a) = self.typed_array(v)? {
                    let name = name.unwrap_or_else(|| format!("{:?}Array", a.elements));
                    return Ok(if a.elements == Elements::Uint8 {
                        format!("a {name} of {} bytes", a.len)
                    } else {
                        format!("a {name} of length {}", a.len)
                    });
                }
                format!("an object ({})", name.as_deref().unwrap_or("Object"))
            }
        })
    }
}

/// A string's UTF-8 contents, read with napi-rs's sizing calls (error messages only).
fn read_string(env: sys::napi_env, v: sys::napi_value) -> Option<String> {
    let mut len = 0usize;
    if unsafe { sys::napi_get_value_string_utf8(env, v, ptr::null_mut(), 0, &mut len) }
        != sys::Status::napi_ok
    {
        return None;
    }
    let mut buf = vec![0u8; len + 1];
    if unsafe {
        sys::napi_get_value_string_utf8(env, v, buf.as_mut_ptr().cast(), buf.len(), &mut len)
    } != sys::Status::napi_ok
    {
        return None;
    }
    buf.truncate(len);
    String::from_utf8(buf).ok()
}

/// A number as JavaScript prints it (for messages): `1`, `1.5`, `NaN`, `Infinity`, `1e+39`.
pub fn js_number(n: f64) -> String {
    if n.is_infinite() {
        return if n > 0.0 { "Infinity" } else { "-Infinity" }.into();
    }
    let magnitude = n.abs();
    if magnitude != 0.0 && !(1e-6..1e21).contains(&magnitude) {
        // JavaScript switches to exponents outside [1e-6, 1e21), and signs them: 1e+39.
        let e = format!("{n:e}");
        return match e.split_once('e') {
            Some((m, exp)) if !exp.starts_with('-') => format!("{m}e+{exp}"),
            _ => e,
        };
    }
    format!("{n}")
}

/// A string quoted for a message, cut after 60 characters.
pub fn quoted(s: &str) -> String {
    const MAX: usize = 60;
    match s.char_indices().nth(MAX) {
        Some((cut, _)) => format!("{:?}… ({} bytes)", &s[..cut], s.len()),
        None => format!("{s:?}"),
    }
}
