//! Where JSON Schema keeps subschemas: the keywords whose values are schemas (all drafts
//! formwork reads). Shared by `$ref` resolution here and by everything that walks a schema
//! the same way (the server relocates tool parameters' `$ref`s with them).

/// Keywords whose value is a map of subschemas.
pub const MAP_KW: &[&str] = &["properties", "patternProperties", "$defs", "definitions", "dependentSchemas", "dependencies"];
/// Keywords whose value is one subschema.
pub const ONE_KW: &[&str] = &[
    "additionalProperties",
    "additionalItems",
    "items",
    "contains",
    "propertyNames",
    "not",
    "if",
    "then",
    "else",
    "unevaluatedItems",
    "unevaluatedProperties",
    "contentSchema",
];
/// Keywords whose value is an array of subschemas.
pub const ARR_KW: &[&str] = &["allOf", "anyOf", "oneOf", "prefixItems", "items"];
