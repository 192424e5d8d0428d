//! JSON types as bits (a `type` keyword is a set of them), the type of a value, and JSON
//! equality (numbers by value), as the compiler's type dispatch and value checks use them.

use serde_json::Value;

bitflags::bitflags! {
    /// A set of JSON types: what a `type` keyword allows, or the type of one value. Integers
    /// and numbers with a fraction are told apart, so `"number"` is `INT | FRAC`.
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
    pub(crate) struct JsonTypes: u8 {
        const NULL = 1;
        const BOOL = 2;
        const OBJ = 4;
        const ARR = 8;
        const STR = 16;
        /// Numbers with no fractional part (`3`, `3.0`).
        const INT = 32;
        /// Numbers with a fractional part.
        const FRAC = 64;
    }
}

/// The types a `type` keyword value allows (`None`: not a type name or a list of them).
pub(crate) fn type_bits(t: &Value) -> Option<JsonTypes> {
    fn one(s: &str) -> Option<JsonTypes> {
        Some(match s {
            "null" => JsonTypes::NULL,
            "boolean" => JsonTypes::BOOL,
            "object" => JsonTypes::OBJ,
            "array" => JsonTypes::ARR,
            "string" => JsonTypes::STR,
            "integer" => JsonTypes::INT,
            "number" => JsonTypes::INT | JsonTypes::FRAC,
            _ => return None,
        })
    }
    match t {
        Value::String(s) => one(s),
        Value::Array(a) => a.iter().try_fold(JsonTypes::empty(), |acc, x| Some(acc | one(x.as_str()?)?)),
        _ => None,
    }
}

/// The type of a value (one flag).
pub(crate) fn value_type(v: &Value) -> JsonTypes {
    match v {
        Value::Null => JsonTypes::NULL,
        Value::Bool(_) => JsonTypes::BOOL,
        Value::Object(_) => JsonTypes::OBJ,
        Value::Array(_) => JsonTypes::ARR,
        Value::String(_) => JsonTypes::STR,
        Value::Number(n) => {
            if n.is_i64() || n.is_u64() || n.as_f64().is_some_and(|f| f.fract() == 0.0) {
                JsonTypes::INT
            } else {
                JsonTypes::FRAC
            }
        }
    }
}

/// JSON equality (numbers by value).
pub(crate) fn json_eq(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => {
            if let (Some(i), Some(j)) = (x.as_i64(), y.as_i64()) {
                i == j
            } else if let (Some(i), Some(j)) = (x.as_u64(), y.as_u64()) {
                i == j
            } else {
                x.as_f64() == y.as_f64()
            }
        }
        (Value::Array(x), Value::Array(y)) => x.len() == y.len() && x.iter().zip(y).all(|(a, b)| json_eq(a, b)),
        (Value::Object(x), Value::Object(y)) => x.len() == y.len() && x.iter().all(|(k, v)| y.get(k).is_some_and(|w| json_eq(v, w))),
        _ => a == b,
    }
}

/// A count keyword's value (`minLength`, `maxItems`...) as a number: a non-negative integer,
/// also written as a float with no fraction (`2.0`).
pub(crate) fn as_count(v: &Value) -> Option<u64> {
    v.as_u64().or_else(|| v.as_f64().filter(|f| *f >= 0.0 && f.fract() == 0.0).map(|f| f as u64))
}
