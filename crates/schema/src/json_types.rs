//! JSON types as bits (a `type` keyword is a set of them), the type of a value, and JSON
//! equality (numbers by value), as the compiler's type dispatch and value checks use them.

use serde_json::Value;

/// Type bits.
pub(crate) const T_NULL: u8 = 1;
pub(crate) const T_BOOL: u8 = 2;
pub(crate) const T_OBJ: u8 = 4;
pub(crate) const T_ARR: u8 = 8;
pub(crate) const T_STR: u8 = 16;
pub(crate) const T_INT: u8 = 32;
pub(crate) const T_FRAC: u8 = 64;
pub(crate) const T_ALL: u8 = 127;

/// Type bits of a `type` keyword value.
pub(crate) fn type_bits(t: &Value) -> Option<u8> {
    fn one(s: &str) -> Option<u8> {
        Some(match s {
            "null" => T_NULL,
            "boolean" => T_BOOL,
            "object" => T_OBJ,
            "array" => T_ARR,
            "string" => T_STR,
            "integer" => T_INT,
            "number" => T_INT | T_FRAC,
            _ => return None,
        })
    }
    match t {
        Value::String(s) => one(s),
        Value::Array(a) => a.iter().try_fold(0u8, |acc, x| Some(acc | one(x.as_str()?)?)),
        _ => None,
    }
}

/// The type bit of a value.
pub(crate) fn value_type(v: &Value) -> u8 {
    match v {
        Value::Null => T_NULL,
        Value::Bool(_) => T_BOOL,
        Value::Object(_) => T_OBJ,
        Value::Array(_) => T_ARR,
        Value::String(_) => T_STR,
        Value::Number(n) => {
            if n.is_i64() || n.is_u64() || n.as_f64().is_some_and(|f| f.fract() == 0.0) {
                T_INT
            } else {
                T_FRAC
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
