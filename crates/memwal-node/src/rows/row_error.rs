//! Why a row does not fit the shard's schema, and where in the row.
//!
//! A column that rejects a value knows what it expected and what it got, but not where it sits:
//! each enclosing struct or list adds its step to the path while the error travels up, and the
//! row loop adds the row index. Nothing is formatted until a put fails, so the happy path
//! allocates nothing for errors.

use std::fmt::Write;

use super::js_value::Threw;

/// One step of the path to a value: a field of a struct, or an element of a list.
enum Step {
    Field(String),
    Index(usize),
}

enum Problem {
    /// The value is not of a form the column takes.
    Mismatch {
        expected: String,
        got: String,
        why: Option<String>,
    },
    /// An object has a key (the path's innermost step) that is not a field of its struct (or
    /// of the schema); `known` are the fields there are.
    UnknownKey { known: Vec<String> },
    /// The column cannot take the value for a reason of its own (already phrased).
    Refused(String),
    /// Reading the value ran JavaScript that threw.
    Threw(String),
    /// Listing or counting an object's keys ran JavaScript that threw (a Proxy's `ownKeys`).
    KeysThrew(String),
}

/// A value of a row that cannot be written; see the module docs.
pub struct RowError {
    /// Innermost step first.
    path: Vec<Step>,
    problem: Problem,
}

impl RowError {
    /// A value that is not of a form the column takes: the column's expectation, the value
    /// described, and, if the form was right but the value was not, why.
    pub fn mismatch(expected: String, got: String, why: Option<String>) -> RowError {
        RowError {
            path: Vec::new(),
            problem: Problem::Mismatch { expected, got, why },
        }
    }

    /// A key of an object that names no field; `known` are the fields there are.
    pub fn unknown_key(key: String, known: Vec<String>) -> RowError {
        RowError {
            path: vec![Step::Field(key)],
            problem: Problem::UnknownKey { known },
        }
    }

    /// A value the column refuses for a reason it phrases itself.
    pub fn refused(message: String) -> RowError {
        RowError {
            path: Vec::new(),
            problem: Problem::Refused(message),
        }
    }

    /// Reading the keys of an object (the row, or a struct value) threw.
    pub fn keys_threw(Threw(message): Threw) -> RowError {
        RowError {
            path: Vec::new(),
            problem: Problem::KeysThrew(message),
        }
    }

    /// The value is in field `name` of its object.
    pub fn in_field(mut self, name: &str) -> RowError {
        self.path.push(Step::Field(name.to_owned()));
        self
    }

    /// The value is element `i` of its list.
    pub fn at_index(mut self, i: usize) -> RowError {
        self.path.push(Step::Index(i));
        self
    }

    /// The message for this error in row `row` of a put.
    pub fn message(&self, row: usize) -> String {
        let path = path_text(&self.path);
        match &self.problem {
            Problem::Mismatch { expected, got, why } => {
                let why = why.as_ref().map(|w| format!(" ({w})")).unwrap_or_default();
                format!("row {row}, field {path:?}: expected {expected}; got {got}{why}")
            }
            Problem::UnknownKey { known } => {
                let parent = match &self.path[1..] {
                    [] => "the shard's schema".to_owned(),
                    outer => format!("the struct {:?}", path_text(outer)),
                };
                format!(
                    "row {row}: unknown key {path:?}: {parent} has no such field (its fields: {}). Fix the key, or open the writer with ignoreUnknownFields: true to skip keys the schema does not have",
                    known.join(", ")
                )
            }
            Problem::Refused(message) => format!("row {row}, field {path:?}: {message}"),
            Problem::Threw(message) if path.is_empty() => {
                format!("row {row}: reading it threw: {message}")
            }
            Problem::Threw(message) => {
                format!("row {row}, field {path:?}: reading the value threw: {message}")
            }
            Problem::KeysThrew(message) if path.is_empty() => {
                format!("row {row}: the row object threw while its keys were read: {message}")
            }
            Problem::KeysThrew(message) => format!(
                "row {row}, field {path:?}: the object threw while its keys were read: {message}"
            ),
        }
    }
}

/// A path as users write it (`meta.tags[2].name`), from its steps innermost first.
fn path_text(steps: &[Step]) -> String {
    let mut s = String::new();
    for step in steps.iter().rev() {
        match step {
            Step::Field(name) if s.is_empty() => s.push_str(name),
            Step::Field(name) => {
                s.push('.');
                s.push_str(name);
            }
            Step::Index(i) => {
                let _ = write!(s, "[{i}]");
            }
        }
    }
    s
}

impl From<Threw> for RowError {
    fn from(Threw(message): Threw) -> RowError {
        RowError {
            path: Vec::new(),
            problem: Problem::Threw(message),
        }
    }
}
