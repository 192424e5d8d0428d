//! # formwork-schema: JSON Schema to grammar IR, and final validation
//!
//! [`compile()`] turns a JSON Schema (draft 2020-12, also the older spellings of drafts 4, 6, 7
//! and 2019-09) into a [`Grammar`](formwork_grammar::Grammar) whose language is a **subset** of the instances valid
//! against the schema: every string the grammar accepts validates, and as many valid
//! instances as we can express are accepted. A keyword that cannot be enforced exactly (or
//! by a documented safe subset) fails compilation with a [`SchemaError`] naming the keyword
//! and its JSON pointer — or, with [`SchemaOptions::lenient`], becomes a [`Warning`].
//! Nothing is dropped silently.
//!
//! [`validate`] is the final check on generated output, through the `jsonschema` crate.
//!
//! JSON repair (free text from models without a constraint) lives in `formwork-repair`.
//!
//! ## How compilation works
//! - `resolve`: documents, `$id`/`$anchor` indexes, `$ref` resolution (JSON pointers,
//!   anchors, relative URIs, caller-supplied remote documents).
//! - `compile`: a schema location is compiled as a *conjunction* of schema objects
//!   (`allOf` and 2020-12 `$ref` siblings add conjuncts); `anyOf`/`oneOf`/`if`/dependencies are
//!   distributed over the conjunction; `not` is pushed down by `negate` where the negation is
//!   expressible as a schema. The flat conjunction is then compiled per JSON type by
//!   `number` and `string` (leaf emitters), and by `compile::array` and `compile::object`,
//!   the only places that recurse (into items and members). `enum`/`const` are exact:
//!   candidate values are filtered through the `jsonschema` validator of every conjunct's
//!   location (`compiler::values`).
//! - The layers point down: `compile` (recursion) → the leaf emitters (`number`, `string`,
//!   `regex`, `chars`, `negate`, `layout`) → `compiler` (the `Compiler` state:
//!   options, the grammar being built, refusals, limits, shared rules, `$ref` resolution) →
//!   `conjunct`, `exprs`, `json_types`, `resolve`. No module uses one above it
//!   (`crates/testkit/tests/module_cycles.rs` checks it).
//! - Each schema location becomes one grammar rule, so recursive `$ref`s are recursive rules.
//! - [`compile_lazy`] compiles the same grammar with some of those rules *deferred*: a scan
//!   (`compiler::defer`) finds the locations whose compilation can neither refuse nor warn
//!   (warnings it can predict are said up front), that match something and start with `{`
//!   or `[`; their rules are compiled when a matcher first reaches them, by the compiler kept
//!   inside the compiled grammar (`compile::lazy`, and the grammar crate's
//!   [`LazyGrammar`](formwork_grammar::LazyGrammar)). The compiled grammar keeps the
//!   schema for them: [`compile_lazy_shared`] takes it as an `Arc` the caller shares (the
//!   server, the Python package), where `compile_lazy` copies a borrowed one.
//! - `layout`: the separators between tokens in each [`Whitespace`] style (flexible,
//!   compact, pretty with indentation by nesting level).
//!
//! ## Safe subsets (documented, never over-accepting)
//! - integers are accepted only in canonical integer syntax (`1`, not `1.0` or `1e0`);
//! - numbers with bounds are accepted without exponents, and decimals with at most 15
//!   digits, so that decimal and binary comparisons with the bounds agree;
//! - regex-constrained strings use raw characters and mandatory escapes only (no `\u` escape of
//!   printable characters); formats use strict grammars that are subsets of the RFCs (see
//!   `format` module), and formats formwork does not know are annotations (a [`Warning`]).
#![deny(missing_docs)]
#![forbid(unsafe_code)]

mod chars;
mod compile;
mod compiler;
mod conjunct;
mod derived;
mod ecma;
mod exprs;
mod format;
mod json_types;
pub mod keywords;
mod layout;
mod negate;
mod number;
mod presence;
mod regex;
mod resolve;
mod string;

use formwork_grammar::Limits;
use std::collections::BTreeMap;
use std::fmt;

pub use compile::{compile, compile_lazy, compile_lazy_shared, compile_with_warnings};
pub use layout::{to_layout_string, PRETTY_MAX_LEVEL};

/// Whitespace allowed between JSON tokens.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Whitespace {
    /// Spaces, tabs, newlines and carriage returns, at most `max_run` in a row (`None`: unbounded).
    Flexible {
        /// Longest run of whitespace characters between two tokens.
        max_run: Option<u32>,
    },
    /// No whitespace at all: `{"a":[1,2]}`.
    Compact,
    /// One canonical layout, as `JSON.stringify(v, null, indent)` and
    /// `serde_json::to_string_pretty` write it: a newline and `indent` spaces per level before
    /// each member, `": "` after keys, `{}` and `[]` when empty. Every whitespace token is
    /// then forced, so it costs no sampling. Containers nested deeper than
    /// [`PRETTY_MAX_LEVEL`] are written compact (a grammar cannot indent unbounded depth).
    Pretty {
        /// Spaces per level.
        indent: u8,
    },
}

impl Whitespace {
    /// The style named `flexible`, `compact` or `pretty` (two spaces), as the CLI and the
    /// APIs spell it.
    pub fn from_name(name: &str) -> Option<Whitespace> {
        match name {
            "flexible" => Some(Whitespace::default()),
            "compact" => Some(Whitespace::Compact),
            "pretty" => Some(Whitespace::Pretty { indent: 2 }),
            _ => None,
        }
    }
}

/// The default bound on a whitespace run: enough for any pretty-printed document, and at
/// least the longest whitespace token of common vocabularies (Llama 3's is 128 spaces,
/// SmolLM2's a newline and 80 spaces). A bound below a token's length is costly: that token
/// must then be walked byte by byte from every position where whitespace may start, one new
/// parser state per byte, instead of being answered by the repetition's looping form.
pub const DEFAULT_MAX_WHITESPACE_RUN: u32 = 128;

impl Default for Whitespace {
    fn default() -> Self {
        Whitespace::Flexible { max_run: Some(DEFAULT_MAX_WHITESPACE_RUN) }
    }
}

/// The order of an object's keys that a grammar accepts.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum KeyOrder {
    /// Listed properties in `properties` order (optional ones may be skipped), then
    /// additional ones: what generation uses, so an answer reads in the order the schema
    /// author wrote (and a reasoning field can come before the answer it supports).
    #[default]
    Listed,
    /// Any order, each key at most once (JSON Schema's own semantics: objects are
    /// unordered). For checking documents written elsewhere. Objects become unordered
    /// groups ([`formwork_grammar::Unordered`]), which GBNF cannot express, and a budget
    /// cannot close an output early inside one.
    Any,
}

/// Which specification a schema follows when it does not say (`$schema` wins when present).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Draft {
    /// Draft 4.
    Draft4,
    /// Draft 6.
    Draft6,
    /// Draft 7.
    Draft7,
    /// Draft 2019-09.
    Draft201909,
    /// Draft 2020-12 (the default).
    #[default]
    Draft202012,
}

impl Draft {
    /// True for drafts where `$ref` replaces its siblings (4, 6, 7).
    pub(crate) fn ref_overrides_siblings(self) -> bool {
        matches!(self, Draft::Draft4 | Draft::Draft6 | Draft::Draft7)
    }
    fn to_jsonschema(self) -> jsonschema::Draft {
        match self {
            Draft::Draft4 => jsonschema::Draft::Draft4,
            Draft::Draft6 => jsonschema::Draft::Draft6,
            Draft::Draft7 => jsonschema::Draft::Draft7,
            Draft::Draft201909 => jsonschema::Draft::Draft201909,
            Draft::Draft202012 => jsonschema::Draft::Draft202012,
        }
    }
    /// The draft named by a `$schema` URI, if known.
    pub fn from_schema_uri(uri: &str) -> Option<Draft> {
        let u = uri.trim_end_matches('#');
        if u.contains("draft-04") {
            Some(Draft::Draft4)
        } else if u.contains("draft-06") {
            Some(Draft::Draft6)
        } else if u.contains("draft-07") {
            Some(Draft::Draft7)
        } else if u.contains("2019-09") {
            Some(Draft::Draft201909)
        } else if u.contains("2020-12") {
            Some(Draft::Draft202012)
        } else {
            None
        }
    }
}

/// Options for [`compile()`]. The [`Default`] follows the specification where it is silent on
/// generation: known formats asserted, unknown formats annotations, nothing lenient.
#[derive(Clone, Debug)]
pub struct SchemaOptions {
    /// Unenforceable keywords become [`Warning`]s instead of errors (the grammar then accepts
    /// more than the schema allows; [`validate`] still catches it).
    pub lenient: bool,
    /// OpenAI structured-output semantics: every listed property is required and no
    /// additional properties are allowed.
    pub strict: bool,
    /// Whitespace between tokens.
    pub whitespace: Whitespace,
    /// Whitespace (in the [`whitespace`](SchemaOptions::whitespace) style's runs) allowed
    /// before and after the root value, as JSON allows. On by default, for checking
    /// documents; generation turns it off: whitespace around an answer is never wanted, and
    /// a model that keeps writing newlines after the closing brace spends its budget on them.
    pub root_whitespace: bool,
    /// Bounds on the work done for this schema.
    pub limits: Limits,
    /// When set, objects at the root must start with this key (for tool-call names).
    pub force_first_key: Option<String>,
    /// Treat formats formwork does not know (`url`, `semver`, ...) as annotations, recording
    /// a [`Warning`] for each: any string is accepted, as JSON Schema requires (an unknown
    /// format must not make validation fail) and as the `jsonschema` validator does. On by
    /// default; off, an unknown format is refused like any keyword formwork cannot enforce
    /// (a [`Warning`] again under [`lenient`](SchemaOptions::lenient)).
    pub unknown_formats_as_annotations: bool,
    /// Treat every `format` as an annotation: JSON Schema 2020-12's default when a schema
    /// does not use the format-assertion vocabulary. Strings are not checked against it (a
    /// [`Warning`] is recorded for each), and neither does final validation. Off by default:
    /// formwork asserts the formats it knows, as the specification allows by configuration,
    /// because a generated `date` should be a date.
    pub formats_as_annotations: bool,
    /// Integers only in canonical form (`3`, never `3.0`). For generation: a zero fraction
    /// is a valid integer in JSON Schema, but unexpected in an answer (and refused by strict
    /// clients such as pydantic's strict `int`). Off by default, so that checking existing
    /// documents accepts `3.0` as the specification does.
    pub canonical_integers: bool,
    /// The order of object keys the grammar accepts.
    pub key_order: KeyOrder,
    /// The draft assumed when the schema has no `$schema`.
    pub draft: Draft,
    /// Documents that `$ref`s may point at, by absolute URI (e.g. `http://localhost:1234/x.json`).
    /// Nothing is ever fetched over the network.
    pub remotes: BTreeMap<String, serde_json::Value>,
}

impl Default for SchemaOptions {
    fn default() -> Self {
        SchemaOptions {
            lenient: false,
            strict: false,
            whitespace: Whitespace::default(),
            root_whitespace: true,
            limits: Limits::default(),
            force_first_key: None,
            unknown_formats_as_annotations: true,
            formats_as_annotations: false,
            canonical_integers: false,
            key_order: KeyOrder::default(),
            draft: Draft::default(),
            remotes: BTreeMap::new(),
        }
    }
}

/// What went wrong compiling a schema.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum SchemaErrorKind {
    /// A keyword formwork cannot enforce here.
    Unsupported {
        /// The keyword.
        keyword: String,
        /// Why.
        why: String,
    },
    /// The schema is malformed (a keyword with a value of the wrong shape, a bad regex...).
    Invalid {
        /// The keyword.
        keyword: String,
        /// What is wrong.
        why: String,
    },
    /// A `$ref` that does not resolve.
    UnresolvedRef(String),
    /// A limit was hit.
    Limit {
        /// Which limit (the field of [`Limits`]).
        limit: &'static str,
        /// Detail.
        why: String,
    },
    /// The grammar could not be built (an internal invariant; please report).
    Grammar(String),
}

/// An error compiling a schema, with the JSON pointer of the offending place in the schema.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub struct SchemaError {
    /// What went wrong.
    pub kind: SchemaErrorKind,
    /// JSON pointer into the schema (`""` is the root).
    pub pointer: String,
}

impl SchemaError {
    /// The keyword the error is about, when there is one.
    pub fn keyword(&self) -> Option<&str> {
        match &self.kind {
            SchemaErrorKind::Unsupported { keyword, .. } | SchemaErrorKind::Invalid { keyword, .. } => Some(keyword),
            SchemaErrorKind::UnresolvedRef(_) => Some("$ref"),
            _ => None,
        }
    }
}

impl fmt::Display for SchemaError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let at = if self.pointer.is_empty() { "the root".to_string() } else { self.pointer.clone() };
        match &self.kind {
            SchemaErrorKind::Unsupported { keyword, why } => write!(f, "unsupported keyword `{keyword}` at {at}: {why}"),
            SchemaErrorKind::Invalid { keyword, why } => write!(f, "invalid keyword `{keyword}` at {at}: {why}"),
            SchemaErrorKind::UnresolvedRef(r) => {
                write!(f, "unresolved `$ref` \"{r}\" at {at}: point it at a location in this document or pass the document in SchemaOptions::remotes")
            }
            SchemaErrorKind::Limit { limit, why } => write!(f, "schema too large at {at}: {why} (raise Limits::{limit})"),
            SchemaErrorKind::Grammar(why) => write!(f, "internal error building the grammar at {at}: {why}"),
        }
    }
}

/// A keyword that lenient mode did not enforce.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Warning {
    /// The keyword.
    pub keyword: String,
    /// JSON pointer of the schema object holding it.
    pub pointer: String,
    /// Why it is not enforced.
    pub why: String,
}

impl fmt::Display for Warning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "keyword `{}` at {} is not enforced: {}", self.keyword, self.pointer, self.why)
    }
}

/// Validates `instance` (JSON text) against `schema` with the `jsonschema` crate, formats
/// asserted. Returns every error message (with the instance path) on failure.
pub fn validate(schema: &serde_json::Value, instance: &str) -> Result<(), Vec<String>> {
    validate_with(schema, instance, &SchemaOptions::default())
}

/// [`validate`] with the draft and remote documents of `opts`.
pub fn validate_with(schema: &serde_json::Value, instance: &str, opts: &SchemaOptions) -> Result<(), Vec<String>> {
    let value: serde_json::Value = serde_json::from_str(instance).map_err(|e| vec![format!("not JSON: {e}")])?;
    let v = build_validator(schema, opts).map_err(|e| vec![e])?;
    let errs: Vec<String> = v.iter_errors(&value).map(|e| format!("{} at `{}`", e, e.instance_path())).collect();
    if errs.is_empty() {
        Ok(())
    } else {
        Err(errs)
    }
}

/// Checks that `schema` is a valid JSON Schema for the `jsonschema` validator (the draft from
/// its `$schema`, else 2020-12), so that a bad schema is reported once, up front, instead of as a
/// validation error of every instance.
pub fn check_schema(schema: &serde_json::Value) -> Result<(), String> {
    build_validator(schema, &SchemaOptions::default()).map(|_| ())
}

pub(crate) fn effective_draft(schema: &serde_json::Value, opts: &SchemaOptions) -> Draft {
    schema.get("$schema").and_then(|s| s.as_str()).and_then(Draft::from_schema_uri).unwrap_or(opts.draft)
}

pub(crate) fn validator_options(schema: &serde_json::Value, opts: &SchemaOptions) -> Result<jsonschema::ValidationOptions<'static>, String> {
    let draft = effective_draft(schema, opts);
    let mut o = jsonschema::options().with_draft(draft.to_jsonschema()).should_validate_formats(!opts.formats_as_annotations);
    if !opts.remotes.is_empty() {
        o = o.with_retriever(MapRetriever(opts.remotes.clone()));
    } else {
        o = o.with_retriever(MapRetriever(BTreeMap::new()));
    }
    Ok(o)
}

/// A compiled validator of one schema (default options: the draft from `$schema`, else
/// 2020-12; formats asserted), for checking many values.
pub struct Validator(jsonschema::Validator);

impl Validator {
    /// Compiles `schema`; an invalid schema is an error saying why.
    pub fn new(schema: &serde_json::Value) -> Result<Self, String> {
        build_validator(schema, &SchemaOptions::default()).map(Validator)
    }

    /// Whether `value` is valid.
    pub fn is_valid(&self, value: &serde_json::Value) -> bool {
        self.0.is_valid(value)
    }

    /// Every error in `value`, each with its instance path (empty: valid).
    pub fn errors(&self, value: &serde_json::Value) -> Vec<String> {
        self.0.iter_errors(value).map(|e| format!("{} at `{}`", e, e.instance_path())).collect()
    }
}

impl std::fmt::Debug for Validator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Validator")
    }
}

fn build_validator(schema: &serde_json::Value, opts: &SchemaOptions) -> Result<jsonschema::Validator, String> {
    validator_options(schema, opts)?.build(schema).map_err(|e| format!("the schema itself is invalid: {e}"))
}

/// Serves `$ref`s to remote documents from [`SchemaOptions::remotes`]; never touches the network.
struct MapRetriever(BTreeMap<String, serde_json::Value>);

impl jsonschema::Retrieve for MapRetriever {
    fn retrieve(&self, uri: &jsonschema::Uri<String>) -> Result<serde_json::Value, Box<dyn std::error::Error + Send + Sync>> {
        let key = uri.as_str().split('#').next().unwrap_or_default().to_string();
        self.0.get(&key).cloned().ok_or_else(|| format!("remote document `{key}` is not in SchemaOptions::remotes").into())
    }
}
