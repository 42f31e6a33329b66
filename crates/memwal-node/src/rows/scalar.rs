//! The JavaScript forms each fixed-width Arrow type takes, and their range checks: numbers and
//! bigints for the numeric types; also Dates and ISO-8601 strings for timestamps and dates,
//! and time strings for times (parsed by `arrow-cast`, as Arrow's own casts parse them).
//!
//! A number becomes an integer only if it is one and fits (`1.5`, `NaN` and `300` for an Int8
//! are errors), a float of a narrower type only if it does not overflow to infinity. Epoch
//! numbers are in the column's unit: milliseconds for `Timestamp(ms)` and `Date64`, days for
//! `Date32`, nanoseconds for `Timestamp(ns)`.

use std::marker::PhantomData;

use arrow_array::ArrowPrimitiveType;
use arrow_array::types::{Date32Type, Date64Type};
use arrow_buffer::ArrowNativeType;
use arrow_cast::parse::{Parser, string_to_datetime};
use arrow_schema::{DataType, TimeUnit};
use chrono::{
    DateTime, FixedOffset, MappedLocalTime, NaiveDate, NaiveDateTime, Offset, TimeZone, Utc,
};
use half::f16;

use super::js_value::{Js, Number, Threw, Type, Value};

/// Why a value was not taken.
pub enum Reject {
    /// It is not of a form the type takes (a string for an Int32).
    Form,
    /// Its form is right but its value is not, for this reason (out of range, not an integer).
    Value(String),
    /// Reading it threw.
    Threw(Threw),
}

impl From<Threw> for Reject {
    fn from(t: Threw) -> Reject {
        Reject::Threw(t)
    }
}

impl From<String> for Reject {
    fn from(why: String) -> Reject {
        Reject::Value(why)
    }
}

/// How JavaScript values become one fixed-width Arrow type's values.
pub trait Scalar: 'static {
    /// The values' Rust type.
    type Native: ArrowNativeType;

    /// The value of `v`, which is neither `null` nor `undefined`.
    fn read(&self, js: &mut Js, v: Value) -> Result<Self::Native, Reject>;

    /// The value of a number or bigint (also a typed array's element).
    fn number(&self, n: Number) -> Result<Self::Native, String>;

    /// The forms it takes, for messages: `an integer number or a bigint`.
    fn forms(&self) -> String;
}

/// `v` as a [`Number`], if it is a number or a bigint.
fn number_of(js: &Js, v: Value) -> Result<Option<Number>, Reject> {
    match v.ty {
        Type::Number => Ok(Some(Number::F64(js.number(v)?))),
        Type::BigInt => match js.bigint(v)? {
            Some(n) => Ok(Some(n)),
            None => Err(Reject::Value("out of the 64-bit range".into())),
        },
        _ => Ok(None),
    }
}

/// A number's conversion to a native type: exact for integers, overflow-checked for floats.
pub trait FromNumber: ArrowNativeType {
    /// The value, or why there is none.
    fn from_number(n: Number) -> Result<Self, String>;
    /// What numbers of this type are, for messages.
    const FORMS: &'static str;
}

macro_rules! integer {
    ($($t:ty),*) => {$(
        impl FromNumber for $t {
            fn from_number(n: Number) -> Result<$t, String> {
                let range = || format!("out of range: {} to {}", <$t>::MIN, <$t>::MAX);
                match n {
                    Number::F64(f) if !f.is_finite() || f.fract() != 0.0 => {
                        Err("not an integer".into())
                    }
                    // Both bounds are powers of two, so exact as floats: MIN is included, and
                    // MAX + 1 (excluded) is what `MAX as f64` rounds to for 64-bit types.
                    Number::F64(f) if f < <$t>::MIN as f64 || f >= (<$t>::MAX as f64) + 1.0 => {
                        Err(range())
                    }
                    Number::F64(f) => Ok(f as $t),
                    Number::I64(i) => <$t>::try_from(i).map_err(|_| range()),
                    Number::U64(u) => <$t>::try_from(u).map_err(|_| range()),
                }
            }
            const FORMS: &'static str = "an integer number or a bigint";
        }
    )*};
}
integer!(i8, i16, i32, i64, u8, u16, u32, u64);

/// A number as f64, the way `Number(bigint)` rounds a bigint.
fn as_f64(n: Number) -> f64 {
    match n {
        Number::F64(f) => f,
        Number::I64(i) => i as f64,
        Number::U64(u) => u as f64,
    }
}

impl FromNumber for f64 {
    fn from_number(n: Number) -> Result<f64, String> {
        Ok(as_f64(n))
    }
    const FORMS: &'static str = "a number or a bigint";
}

impl FromNumber for f32 {
    fn from_number(n: Number) -> Result<f32, String> {
        let f = as_f64(n);
        let x = f as f32;
        if x.is_infinite() && f.is_finite() {
            return Err("out of the range of 32-bit floats".into());
        }
        Ok(x)
    }
    const FORMS: &'static str = "a number or a bigint";
}

impl FromNumber for f16 {
    fn from_number(n: Number) -> Result<f16, String> {
        let f = as_f64(n);
        let x = f16::from_f64(f);
        if x.is_infinite() && f.is_finite() {
            return Err("out of the range of 16-bit floats (±65504)".into());
        }
        Ok(x)
    }
    const FORMS: &'static str = "a number or a bigint";
}

/// Integers and floats: numbers and bigints.
pub struct Numeric<N>(PhantomData<N>);

impl<N> Numeric<N> {
    /// The scalar of a numeric column.
    pub fn new() -> Numeric<N> {
        Numeric(PhantomData)
    }
}

impl<N: FromNumber> Scalar for Numeric<N> {
    type Native = N;

    fn read(&self, js: &mut Js, v: Value) -> Result<N, Reject> {
        match number_of(js, v)? {
            Some(n) => Ok(N::from_number(n)?),
            None => Err(Reject::Form),
        }
    }

    fn number(&self, n: Number) -> Result<N, String> {
        N::from_number(n)
    }

    fn forms(&self) -> String {
        N::FORMS.into()
    }
}

/// Milliseconds since the epoch of a valid Date, as an integer (a Date's time value always is
/// one, within ±8.64e15).
fn date_millis(ms: f64) -> Result<i64, Reject> {
    if ms.is_nan() {
        return Err(Reject::Value("an invalid Date".into()));
    }
    Ok(ms as i64)
}

/// A unit's name in messages.
fn unit_words(unit: TimeUnit) -> &'static str {
    match unit {
        TimeUnit::Second => "seconds",
        TimeUnit::Millisecond => "milliseconds",
        TimeUnit::Microsecond => "microseconds",
        TimeUnit::Nanosecond => "nanoseconds",
    }
}

/// The time zone a timestamp string without an offset is read in.
#[derive(Clone, Copy)]
enum Zone {
    /// The column has a fixed offset (`+02:00`), or none or UTC (its wall clock is UTC's).
    Fixed(FixedOffset),
    /// The column names a zone of the tz database (`Europe/Paris`), which memwal does not
    /// carry: only strings with an offset (or `Z`) can be placed in time.
    Named,
}

/// A [`TimeZone`] that places only instants: `arrow-cast` asks it to place a string without an
/// offset, and it answers that it cannot.
#[derive(Clone, Copy)]
struct InstantsOnly;

impl TimeZone for InstantsOnly {
    type Offset = Utc;

    fn from_offset(_: &Utc) -> InstantsOnly {
        InstantsOnly
    }

    fn offset_from_local_date(&self, _: &NaiveDate) -> MappedLocalTime<Utc> {
        MappedLocalTime::None
    }

    fn offset_from_local_datetime(&self, _: &NaiveDateTime) -> MappedLocalTime<Utc> {
        MappedLocalTime::None
    }

    fn offset_from_utc_date(&self, _: &NaiveDate) -> Utc {
        Utc
    }

    fn offset_from_utc_datetime(&self, _: &NaiveDateTime) -> Utc {
        Utc
    }
}

/// Timestamps: Dates, epoch numbers in the column's unit, ISO-8601 strings.
pub struct Timestamp {
    unit: TimeUnit,
    zone: Zone,
    tz: Option<String>,
}

impl Timestamp {
    /// The scalar of a `Timestamp(unit, tz)` column.
    pub fn new(unit: TimeUnit, tz: Option<&str>) -> Timestamp {
        let zone = match tz {
            None => Zone::Fixed(FixedOffset::east_opt(0).expect("zero offset")),
            Some("UTC" | "Etc/UTC" | "utc" | "Z" | "GMT" | "Etc/GMT") => {
                Zone::Fixed(FixedOffset::east_opt(0).expect("zero offset"))
            }
            Some(tz) => match tz.parse::<arrow_array::timezone::Tz>() {
                Ok(parsed) => Zone::Fixed(
                    parsed
                        .offset_from_utc_datetime(&DateTime::UNIX_EPOCH.naive_utc())
                        .fix(),
                ),
                Err(_) => Zone::Named,
            },
        };
        Timestamp {
            unit,
            zone,
            tz: tz.map(str::to_owned),
        }
    }

    /// Milliseconds since the epoch in the column's unit.
    fn in_unit_of_millis(&self, ms: i64) -> Result<i64, String> {
        let scaled = match self.unit {
            TimeUnit::Second => Some(ms.div_euclid(1000)),
            TimeUnit::Millisecond => Some(ms),
            TimeUnit::Microsecond => ms.checked_mul(1000),
            TimeUnit::Nanosecond => ms.checked_mul(1_000_000),
        };
        scaled.ok_or_else(|| self.out_of_range())
    }

    fn out_of_range(&self) -> String {
        format!(
            "out of the range of {} since the epoch in 64 bits",
            unit_words(self.unit)
        )
    }

    fn in_unit_of<T: TimeZone>(&self, dt: DateTime<T>) -> Result<i64, String> {
        let v = match self.unit {
            TimeUnit::Second => Some(dt.timestamp()),
            TimeUnit::Millisecond => Some(dt.timestamp_millis()),
            TimeUnit::Microsecond => Some(dt.timestamp_micros()),
            TimeUnit::Nanosecond => dt.timestamp_nanos_opt(),
        };
        v.ok_or_else(|| self.out_of_range())
    }

    fn parse(&self, s: &str) -> Result<i64, String> {
        let s = s.trim();
        let parsed = match self.zone {
            Zone::Fixed(offset) => string_to_datetime(&offset, s).map(|d| self.in_unit_of(d)),
            Zone::Named => string_to_datetime(&InstantsOnly, s).map(|d| self.in_unit_of(d)),
        };
        match parsed {
            Ok(v) => v,
            Err(_) if matches!(self.zone, Zone::Named) && string_to_datetime(&Utc, s).is_ok() => {
                Err(format!(
                    "a time without an offset, which memwal cannot place in the zone {:?}; add the offset, e.g. \"2024-05-01T12:00:00+02:00\" or \"…Z\"",
                    self.tz.as_deref().unwrap_or_default()
                ))
            }
            Err(_) => Err("not an ISO-8601 date-time".into()),
        }
    }
}

impl Scalar for Timestamp {
    type Native = i64;

    fn read(&self, js: &mut Js, v: Value) -> Result<i64, Reject> {
        if let Some(n) = number_of(js, v)? {
            return Ok(i64::from_number(n)?);
        }
        match v.ty {
            Type::Object => match js.date(v)? {
                Some(ms) => Ok(self.in_unit_of_millis(date_millis(ms)?)?),
                None => Err(Reject::Form),
            },
            Type::String => Ok(self.parse(js.string(v)?)?),
            _ => Err(Reject::Form),
        }
    }

    fn number(&self, n: Number) -> Result<i64, String> {
        i64::from_number(n)
    }

    fn forms(&self) -> String {
        format!(
            "a Date, an epoch number of {} or an ISO-8601 string",
            unit_words(self.unit)
        )
    }
}

/// A date column's value: a number in its unit, a `Date` (its epoch milliseconds through
/// `from_ms`), or a string `parse` reads.
fn read_date<N: FromNumber>(
    js: &mut Js,
    v: Value,
    from_ms: impl FnOnce(i64) -> Result<N, String>,
    parse: impl FnOnce(&str) -> Option<N>,
) -> Result<N, Reject> {
    if let Some(n) = number_of(js, v)? {
        return Ok(N::from_number(n)?);
    }
    match v.ty {
        Type::Object => match js.date(v)? {
            Some(ms) => Ok(from_ms(date_millis(ms)?)?),
            None => Err(Reject::Form),
        },
        Type::String => {
            parse(js.string(v)?).ok_or_else(|| Reject::Value("not an ISO-8601 date".into()))
        }
        _ => Err(Reject::Form),
    }
}

/// `Date32`: Dates (their UTC day), numbers of days since 1970-01-01, ISO-8601 date strings.
pub struct Date32;

impl Scalar for Date32 {
    type Native = i32;

    fn read(&self, js: &mut Js, v: Value) -> Result<i32, Reject> {
        read_date(
            js,
            v,
            |ms| {
                i32::try_from(ms.div_euclid(86_400_000))
                    .map_err(|_| "out of the range of Date32".to_owned())
            },
            Date32Type::parse,
        )
    }

    fn number(&self, n: Number) -> Result<i32, String> {
        i32::from_number(n)
    }

    fn forms(&self) -> String {
        "a Date, a number of days since 1970-01-01 or an ISO-8601 date string".into()
    }
}

/// `Date64`: Dates, epoch numbers of milliseconds, ISO-8601 date strings.
pub struct Date64;

impl Scalar for Date64 {
    type Native = i64;

    fn read(&self, js: &mut Js, v: Value) -> Result<i64, Reject> {
        read_date(js, v, Ok, |s| Date64Type::parse(s.trim()))
    }

    fn number(&self, n: Number) -> Result<i64, String> {
        i64::from_number(n)
    }

    fn forms(&self) -> String {
        "a Date, an epoch number of milliseconds or an ISO-8601 date string".into()
    }
}

/// `Time32`/`Time64`: numbers in the column's unit since midnight, or time strings.
pub struct Time<T>(PhantomData<T>);

impl<T> Time<T> {
    /// The scalar of a time column of type `T`.
    pub fn new() -> Time<T> {
        Time(PhantomData)
    }
}

impl<T> Scalar for Time<T>
where
    T: ArrowPrimitiveType + Parser + 'static,
    T::Native: FromNumber,
{
    type Native = T::Native;

    fn read(&self, js: &mut Js, v: Value) -> Result<T::Native, Reject> {
        if let Some(n) = number_of(js, v)? {
            return Ok(T::Native::from_number(n)?);
        }
        match v.ty {
            Type::String => T::parse(js.string(v)?.trim())
                .ok_or_else(|| Reject::Value("not a time of day".into())),
            _ => Err(Reject::Form),
        }
    }

    fn number(&self, n: Number) -> Result<T::Native, String> {
        T::Native::from_number(n)
    }

    fn forms(&self) -> String {
        let unit = match T::DATA_TYPE {
            DataType::Time32(u) | DataType::Time64(u) => unit_words(u),
            _ => "units",
        };
        format!("a number of {unit} since midnight or a time string (\"13:45:30.250\")")
    }
}

/// `Duration`: integer numbers or bigints in the column's unit.
pub struct Duration {
    unit: TimeUnit,
}

impl Duration {
    /// The scalar of a `Duration(unit)` column.
    pub fn new(unit: TimeUnit) -> Duration {
        Duration { unit }
    }
}

impl Scalar for Duration {
    type Native = i64;

    fn read(&self, js: &mut Js, v: Value) -> Result<i64, Reject> {
        // A duration is an Int64 in a unit: read as one, described in its unit.
        Numeric::<i64>::new().read(js, v)
    }

    fn number(&self, n: Number) -> Result<i64, String> {
        i64::from_number(n)
    }

    fn forms(&self) -> String {
        format!("an integer number or a bigint of {}", unit_words(self.unit))
    }
}
