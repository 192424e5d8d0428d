//! [`Grammar`] (IR from a schema, GBNF, a regex or the built-in JSON grammar),
//! [`GrammarCompiler`] (one tokenizer, a cache of compiled grammars) and [`CompiledGrammar`].

use crate::error::{error, schema_error};
use crate::tokenizer::TokenizerInfo;
use formwork_grammar::json::JsonGrammarOptions;
use formwork_grammar::{gbnf, GrammarCache, Limits};
use formwork_schema::{KeyOrder, SchemaOptions, Whitespace, DEFAULT_MAX_WHITESPACE_RUN};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyString;
use std::sync::Arc;

/// A grammar (formwork's IR), not yet tied to a tokenizer. Immutable.
///
/// `str(grammar)` is the grammar as GBNF (objects with keys in any order print as
/// `@unordered(...)`, which is not GBNF).
#[pyclass(module = "formwork._formwork", frozen)]
pub struct Grammar {
    source: Source,
    warnings: Vec<String>,
}

/// Where a [`Grammar`] comes from.
enum Source {
    /// A whole grammar (GBNF, a regex, the built-in JSON grammar).
    Ir(formwork_grammar::Grammar),
    /// A JSON Schema, compiled lazily for each tokenizer (`formwork_schema::compile_lazy`):
    /// the locations the first masks do not reach are compiled when a matcher reaches them.
    Schema(Box<LazySchema>),
}

struct LazySchema {
    /// Shared with the lazy grammars compiled from it (not copied into each).
    value: std::sync::Arc<serde_json::Value>,
    opts: SchemaOptions,
    /// The cache key: everything the grammar depends on.
    key: String,
    /// The lazy grammar made when the schema was checked, for the first compilation.
    first: std::sync::Mutex<Option<formwork_grammar::LazyGrammar>>,
    /// The whole grammar, made only to print it.
    whole: std::sync::OnceLock<formwork_grammar::Grammar>,
}

impl Grammar {
    /// The whole grammar (a schema's compiled in full on first ask, to print it).
    fn ir(&self) -> PyResult<&formwork_grammar::Grammar> {
        match &self.source {
            Source::Ir(g) => Ok(g),
            Source::Schema(s) => {
                if let Some(g) = s.whole.get() {
                    return Ok(g);
                }
                let g = formwork_schema::compile(&s.value, &s.opts).map_err(error)?;
                Ok(s.whole.get_or_init(|| g))
            }
        }
    }

    fn whole(ir: formwork_grammar::Grammar) -> Self {
        Grammar { source: Source::Ir(ir), warnings: Vec::new() }
    }
}

/// `whitespace=`: `None`/`"flexible"` (runs of at most 128), `"compact"`, `"pretty"` (two-space
/// indentation), `"unbounded"`, or an int (the longest run).
fn whitespace(w: Option<&Bound<'_, PyAny>>) -> PyResult<Whitespace> {
    let Some(w) = w else { return Ok(Whitespace::default()) };
    if w.is_none() {
        return Ok(Whitespace::default());
    }
    if let Ok(n) = w.extract::<u32>() {
        return Ok(Whitespace::Flexible { max_run: Some(n) });
    }
    match w.extract::<String>().ok().as_deref() {
        Some("flexible") => Ok(Whitespace::Flexible { max_run: Some(DEFAULT_MAX_WHITESPACE_RUN) }),
        Some("compact") => Ok(Whitespace::Compact),
        Some("pretty") => Ok(Whitespace::Pretty { indent: 2 }),
        Some("unbounded") => Ok(Whitespace::Flexible { max_run: None }),
        _ => Err(PyValueError::new_err(
            "whitespace must be \"flexible\" (the default), \"compact\", \"pretty\", \"unbounded\" or an int (the longest run)",
        )),
    }
}

/// A schema given as JSON text, a dict (or any JSON-serializable value), or a pydantic
/// model class (anything with `model_json_schema()`), as JSON text.
fn schema_text(schema: &Bound<'_, PyAny>) -> PyResult<String> {
    if let Ok(s) = schema.cast::<PyString>() {
        return Ok(s.to_cow()?.into_owned());
    }
    let py = schema.py();
    let value = if schema.hasattr("model_json_schema")? { schema.call_method0("model_json_schema")? } else { schema.clone() };
    let dumps = py.import("json")?.getattr("dumps")?;
    dumps.call1((value,))?.extract().map_err(|_| PyTypeError::new_err("the schema must be JSON text, a dict or a pydantic model"))
}

#[pymethods]
impl Grammar {
    /// A JSON Schema (JSON text, a dict, or a pydantic model class) as a grammar whose every
    /// output validates against it. `whitespace`: `"flexible"` (default), `"compact"`,
    /// `"unbounded"` or an int; `key_order`: `"listed"` (generation: `properties` order) or
    /// `"any"` (each key at most once, any order: for checking documents); `strict`: OpenAI
    /// strict mode (every property required, no others); `lenient`: keywords formwork cannot
    /// enforce become `warnings` instead of errors; `formats_as_annotations`: `format` is not
    /// checked; `canonical_integers`: integers as `3`, never `3.0`; `root_whitespace`:
    /// whitespace may come before and after the value (off by default, as for generation:
    /// the output ends at its closing brace, where a model could otherwise write newlines
    /// until its token limit; on to check documents that have it).
    ///
    /// Raises `FormworkError` naming the keyword and its JSON pointer on a refusal.
    #[staticmethod]
    #[pyo3(signature = (schema, *, whitespace=None, key_order="listed", strict=false, lenient=false, formats_as_annotations=false, canonical_integers=false, root_whitespace=false))]
    #[allow(clippy::too_many_arguments)]
    fn from_json_schema(
        py: Python<'_>,
        schema: &Bound<'_, PyAny>,
        whitespace: Option<&Bound<'_, PyAny>>,
        key_order: &str,
        strict: bool,
        lenient: bool,
        formats_as_annotations: bool,
        canonical_integers: bool,
        root_whitespace: bool,
    ) -> PyResult<Self> {
        let text = schema_text(schema)?;
        let value: std::sync::Arc<serde_json::Value> =
            std::sync::Arc::new(serde_json::from_str(&text).map_err(|e| error(format!("the schema is not valid JSON: {e}")))?);
        let key_order = match key_order {
            "listed" => KeyOrder::Listed,
            "any" => KeyOrder::Any,
            _ => return Err(PyValueError::new_err("key_order must be \"listed\" or \"any\"")),
        };
        let opts = SchemaOptions {
            lenient,
            strict,
            whitespace: self::whitespace(whitespace)?,
            key_order,
            formats_as_annotations,
            canonical_integers,
            root_whitespace,
            ..SchemaOptions::default()
        };
        // Refusals and warnings come now; most of the compiling, when matchers reach it.
        let compiled = py.detach(|| formwork_schema::compile_lazy_shared(value.clone(), &opts));
        let (lazy, warnings) = compiled.map_err(|e| schema_error(py, &e))?;
        let key = format!("schema|{opts:?}|{value}");
        let schema = LazySchema { value, opts, key, first: std::sync::Mutex::new(Some(lazy)), whole: std::sync::OnceLock::new() };
        Ok(Grammar { source: Source::Schema(Box::new(schema)), warnings: warnings.iter().map(ToString::to_string).collect() })
    }

    /// A GBNF grammar (llama.cpp's syntax; the start rule is `root`). Raises `FormworkError`
    /// with the line, column and a caret on a syntax error.
    #[staticmethod]
    fn from_gbnf(text: &str) -> PyResult<Self> {
        let ir = gbnf::parse(text, &Limits::default()).map_err(error)?;
        Ok(Grammar::whole(ir))
    }

    /// A regular expression (Rust `regex` syntax) that the whole output must match.
    #[staticmethod]
    fn from_regex(pattern: &str) -> PyResult<Self> {
        let ir = formwork_grammar::regex::parse(pattern, &Limits::default()).map_err(error)?;
        Ok(Grammar::whole(ir))
    }

    /// The built-in JSON grammar: any JSON value (`object_only=True`: an object, as
    /// `format: "json"` asks), with runs of at most `max_whitespace` whitespace characters
    /// between tokens (`None`: unbounded); `trailing_whitespace=False` ends the output at the
    /// value's last character (as serving engines want: the end is then forced at once).
    #[staticmethod]
    #[pyo3(signature = (*, object_only=false, max_whitespace=Some(formwork_grammar::json::DEFAULT_MAX_WS_RUN), trailing_whitespace=true))]
    fn json(object_only: bool, max_whitespace: Option<u32>, trailing_whitespace: bool) -> Self {
        let ir = formwork_grammar::json::grammar(&JsonGrammarOptions { root_object_only: object_only, max_ws_run: max_whitespace, trailing_whitespace });
        Grammar::whole(ir)
    }

    /// Keywords that lenient schema compilation did not enforce, one message each.
    #[getter]
    fn warnings(&self) -> Vec<String> {
        self.warnings.clone()
    }

    /// The grammar as GBNF text.
    fn to_gbnf(&self) -> PyResult<String> {
        Ok(gbnf::print(self.ir()?))
    }

    fn __str__(&self) -> PyResult<String> {
        self.to_gbnf()
    }

    fn __repr__(&self) -> PyResult<String> {
        let ir = self.ir()?;
        Ok(format!("Grammar(rules={}, root={:?})", ir.rules().len(), ir.rule(ir.root()).name))
    }
}

/// A grammar compiled for one tokenizer: immutable, shared by every [`Matcher`](crate::Matcher)
/// made from it (they share its mask caches, which warm up for all of them).
#[pyclass(module = "formwork._formwork", frozen)]
pub struct CompiledGrammar {
    pub(crate) compiled: Arc<formwork_grammar::CompiledGrammar>,
    pub(crate) tokenizer: Py<TokenizerInfo>,
    pub(crate) vocab_size: usize,
}

#[pymethods]
impl CompiledGrammar {
    /// The tokenizer it was compiled for.
    #[getter]
    fn tokenizer_info(&self, py: Python<'_>) -> Py<TokenizerInfo> {
        self.tokenizer.clone_ref(py)
    }

    /// Bytes held by the compiled grammar (parser states, transitions, cached masks); grows
    /// as matchers explore it.
    #[getter]
    fn memory_size_bytes(&self) -> usize {
        self.compiled.memory_usage()
    }

    /// Two compiled grammars are equal when they are the same compiled object (the
    /// compiler's cache gives the same one for equal grammars).
    fn __eq__(&self, other: &Bound<'_, PyAny>) -> bool {
        other.cast::<CompiledGrammar>().is_ok_and(|o| Arc::ptr_eq(&self.compiled, &o.get().compiled))
    }

    fn __hash__(&self) -> u64 {
        Arc::as_ptr(&self.compiled) as usize as u64
    }

    fn __repr__(&self) -> String {
        format!("CompiledGrammar(vocab_size={}, memory_size_bytes={})", self.vocab_size, self.compiled.memory_usage())
    }
}

/// Compiles grammars for one tokenizer, caching them by grammar: compiling an equal grammar
/// again returns the same [`CompiledGrammar`] (and its warm caches). Safe to share between
/// threads; compilation releases the GIL.
#[pyclass(module = "formwork._formwork", frozen, subclass)]
pub struct GrammarCompiler {
    tokenizer: Py<TokenizerInfo>,
    vocab: Arc<formwork_vocab::Vocabulary>,
    vocab_size: usize,
    cache: GrammarCache,
}

#[pymethods]
impl GrammarCompiler {
    /// A compiler for `tokenizer_info` keeping at most `cache_size` compiled grammars (least
    /// recently used dropped first).
    #[new]
    #[pyo3(signature = (tokenizer_info, *, cache_size=64))]
    fn new(tokenizer_info: Bound<'_, TokenizerInfo>, cache_size: usize) -> Self {
        let t = tokenizer_info.get();
        GrammarCompiler { vocab: t.vocab.clone(), vocab_size: t.vocab_size, tokenizer: tokenizer_info.unbind(), cache: GrammarCache::new(cache_size) }
    }

    /// The compiled form of `grammar` for this compiler's tokenizer (from the cache when an
    /// equal grammar was compiled before). Raises `FormworkError` when the grammar cannot be
    /// matched (left recursion, a limit, a special token the vocabulary lacks).
    fn compile(&self, py: Python<'_>, grammar: &Grammar) -> PyResult<CompiledGrammar> {
        let limits = Limits::default();
        let compiled = py.detach(|| match &grammar.source {
            Source::Ir(g) => self.cache.get_or_compile(g, &self.vocab, &limits).map_err(error),
            Source::Schema(s) => self.cache.get_or_compile_keyed(&s.key, &self.vocab, &limits, |index| {
                // The lazy grammar made when the schema was checked serves the first
                // compilation; another tokenizer (or a cache miss later) makes its own.
                let first = s.first.lock().unwrap_or_else(|e| e.into_inner()).take();
                let lazy = match first {
                    Some(l) => l,
                    None => formwork_schema::compile_lazy_shared(s.value.clone(), &s.opts).map_err(error)?.0,
                };
                formwork_grammar::CompiledGrammar::lazy(lazy, index, &limits).map_err(error)
            }),
        })?;
        Ok(CompiledGrammar { compiled, tokenizer: self.tokenizer.clone_ref(py), vocab_size: self.vocab_size })
    }

    /// The tokenizer it compiles for.
    #[getter]
    fn tokenizer_info(&self, py: Python<'_>) -> Py<TokenizerInfo> {
        self.tokenizer.clone_ref(py)
    }

    /// Compiled grammars held in the cache.
    #[getter]
    fn cache_len(&self) -> usize {
        self.cache.len()
    }
}
