//! The built-in JSON grammar.
