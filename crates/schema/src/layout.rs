//! How whitespace is written between JSON tokens: the separators of one container.
//!
//! Every object and array is built from the same pieces, whatever the [`Whitespace`] style:
//!
//! ```text
//! "{" outer_open ( first member (comma member)* last )? outer_close "}"
//! ```
//!
//! (`member` is `key colon value` in objects, an item in arrays). `first` and `last` only
//! appear around a non-empty body, so that a pretty empty container is `{}` and not
//! `{\n}`.
//!
//! | style | outer_open / outer_close | first | comma | last | colon |
//! |---|---|---|---|---|---|
//! | flexible | `ws` / — | — | `ws "," ws` | `ws` | `ws ":" ws` |
//! | compact | — | — | `","` | — | `":"` |
//! | pretty, level *l* | — | `"\n"` + indent(*l*+1) | `",\n"` + indent(*l*+1) | `"\n"` + indent(*l*) | `": "` |
//!
//! `ws` is the flexible style's bounded whitespace run. Pretty indentation depends on the
//! nesting level of the container (the root value is level 0), so a subschema used at two
//! levels compiles to two rules ([`crate::compile()`] keys its memo by level in pretty
//! mode). A context-free grammar cannot indent an unbounded recursion, so containers nested
//! deeper than [`PRETTY_MAX_LEVEL`] are written compact.

use crate::exprs::{alt_of, is_nothing};
use crate::Whitespace;
use formwork_grammar::{Expr, Unordered};

/// The deepest container level written with pretty indentation; deeper ones are compact.
pub const PRETTY_MAX_LEVEL: u32 = 12;

/// The separators of one container at one nesting level (see the module docs).
#[derive(Clone, Debug)]
pub(crate) struct Seps {
    /// After the opening bracket, whether or not a member follows.
    pub outer_open: Expr,
    /// Before the closing bracket, whether or not a member came.
    pub outer_close: Expr,
    /// Before the first member only.
    pub first: Expr,
    /// Between two members (with the comma).
    pub comma: Expr,
    /// After the last member only.
    pub last: Expr,
    /// Between a key and its value (with the colon).
    pub colon: Expr,
}

impl Seps {
    /// The separators of a container at `level` in `style`; `ws` is the flexible style's
    /// whitespace rule.
    pub fn new(style: Whitespace, ws: &Expr, level: u32) -> Seps {
        match style {
            // The run before the closing bracket is `last`, not `outer_close`: in an empty
            // container the two runs would stand side by side, and a run of spaces would
            // split between them in every way (a state per split, and another per count of
            // the second run: ~90 new states walking the whitespace tokens after a `[`).
            Whitespace::Flexible { .. } => Seps {
                outer_open: ws.clone(),
                outer_close: Expr::empty(),
                first: Expr::empty(),
                comma: Expr::seq([ws.clone(), Expr::lit(","), ws.clone()]),
                last: ws.clone(),
                colon: Expr::seq([ws.clone(), Expr::lit(":"), ws.clone()]),
            },
            Whitespace::Pretty { indent } if level < PRETTY_MAX_LEVEL => {
                let pad = |l: u32| " ".repeat((indent as usize) * l as usize);
                Seps {
                    outer_open: Expr::empty(),
                    outer_close: Expr::empty(),
                    first: Expr::lit(format!("\n{}", pad(level + 1))),
                    comma: Expr::lit(format!(",\n{}", pad(level + 1))),
                    last: Expr::lit(format!("\n{}", pad(level))),
                    colon: Expr::lit(": "),
                }
            }
            Whitespace::Compact | Whitespace::Pretty { .. } => Seps {
                outer_open: Expr::empty(),
                outer_close: Expr::empty(),
                first: Expr::empty(),
                comma: Expr::lit(","),
                last: Expr::empty(),
                colon: Expr::lit(":"),
            },
        }
    }

    /// An empty container.
    pub fn empty(&self, open: &str, close: &str) -> Expr {
        Expr::seq([Expr::lit(open), self.outer_open.clone(), self.outer_close.clone(), Expr::lit(close)])
    }

    /// `open` + a body that is `nonempty` or, when `nullable`, nothing + `close`.
    pub fn wrap(&self, open: &str, nonempty: Expr, nullable: bool, close: &str) -> Expr {
        if is_nothing(&nonempty) {
            return if nullable { self.empty(open, close) } else { nonempty };
        }
        let inner = Expr::seq([self.first.clone(), nonempty, self.last.clone()]);
        let body = if nullable { Expr::opt(inner) } else { inner };
        Expr::seq([Expr::lit(open), self.outer_open.clone(), body, self.outer_close.clone(), Expr::lit(close)])
    }
}

/// `v` as text in `style`: what a grammar compiled with that style generates for it
/// (the flexible style's canonical text is compact). Keys keep `v`'s order.
pub fn to_layout_string(v: &serde_json::Value, style: Whitespace) -> String {
    let mut out = String::new();
    write(v, style, 0, &mut out);
    out
}

fn write(v: &serde_json::Value, style: Whitespace, level: u32, out: &mut String) {
    use serde_json::Value;
    let indent = match style {
        Whitespace::Pretty { indent } if level < PRETTY_MAX_LEVEL => indent as usize,
        _ => {
            out.push_str(&serde_json::to_string(v).unwrap_or_default());
            return;
        }
    };
    let pad = |l: u32| " ".repeat(indent * l as usize);
    let member = |i: usize, out: &mut String| {
        out.push_str(if i == 0 { "\n" } else { ",\n" });
        out.push_str(&pad(level + 1));
    };
    let (close, len) = match v {
        Value::Array(a) => {
            out.push('[');
            for (i, x) in a.iter().enumerate() {
                member(i, out);
                write(x, style, level + 1, out);
            }
            (']', a.len())
        }
        Value::Object(o) => {
            out.push('{');
            for (i, (k, x)) in o.iter().enumerate() {
                member(i, out);
                out.push_str(&serde_json::to_string(k).unwrap_or_default());
                out.push_str(": ");
                write(x, style, level + 1, out);
            }
            ('}', o.len())
        }
        _ => {
            out.push_str(&serde_json::to_string(v).unwrap_or_default());
            return;
        }
    };
    if len > 0 {
        out.push('\n');
        out.push_str(&pad(level));
    }
    out.push(close);
}

/// An object as one unordered group: listed members `(key: value, required)` in any order,
/// each at most once, additional members `(quoted key, value)` among them (also for
/// constant objects, `Compiler::literal`).
pub(crate) fn unordered(seps: &Seps, members: Vec<(Expr, bool)>, extra: Vec<(Expr, Expr)>, minp: u64, maxp: Option<u64>, presence: Vec<Vec<formwork_grammar::Presence>>) -> Expr {
    let kv = |k: Expr, v: Expr| Expr::seq([k, seps.colon.clone(), v]);
    let extra = extra.into_iter().map(|(k, v)| kv(k, v)).collect();
    unordered_in(seps, "{", "}", members, extra, minp, maxp, presence)
}

/// An unordered group of `members` (each at most once, `extra` repeatable) between `open`
/// and `close`: an object's members, or the distinct items of a `uniqueItems` array.
#[allow(clippy::too_many_arguments)]
pub(crate) fn unordered_in(seps: &Seps, open: &str, close: &str, members: Vec<(Expr, bool)>, extra: Vec<Expr>, minp: u64, maxp: Option<u64>, presence: Vec<Vec<formwork_grammar::Presence>>) -> Expr {
    if maxp.is_some_and(|m| m < minp) {
        // Fewer members allowed than required (a `oneOf` branch's negation can ask for
        // that): no object.
        return crate::exprs::nothing();
    }
    let any_required = members.iter().any(|m| m.1);
    let extra = (!extra.is_empty()).then(|| alt_of(extra));
    let clamp = |n: u64| u32::try_from(n).unwrap_or(u32::MAX);
    // An empty object must also satisfy the presence clauses with no key present.
    let none_present_ok = presence.iter().all(|c| c.iter().any(|t| t.present.is_empty()));
    let may_be_empty = minp == 0 && !any_required && none_present_ok;
    let group = |min: u64| Unordered { members, extra, sep: seps.comma.clone(), min: clamp(min), max: maxp.map(clamp), presence };
    let empty = |e: &Expr| matches!(e, Expr::Seq(v) if v.is_empty());
    if empty(&seps.first) && empty(&seps.last) {
        // No separator that only a non-empty group has: the group as it is.
        return seps.wrap(open, Expr::Unordered(Box::new(group(minp))), false, close);
    }
    if maxp == Some(0) {
        return if none_present_ok { seps.empty(open, close) } else { crate::exprs::nothing() };
    }
    seps.wrap(open, Expr::Unordered(Box::new(group(minp.max(1)))), may_be_empty, close)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{compile, SchemaOptions};
    use formwork_grammar::matcher::accepts;
    use serde_json::json;

    fn pretty() -> SchemaOptions {
        SchemaOptions { whitespace: Whitespace::Pretty { indent: 2 }, ..Default::default() }
    }

    fn accepts_doc(schema: serde_json::Value, opts: &SchemaOptions, doc: &str) -> bool {
        let g = compile(&schema, opts).unwrap();
        accepts(&g, doc.as_bytes(), &opts.limits).unwrap()
    }

    #[test]
    fn pretty_accepts_exactly_serde_json_pretty_output() {
        let schema = json!({"type": "object", "properties": {
            "name": {"type": "string"},
            "tags": {"type": "array", "items": {"type": "string"}},
            "inner": {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "array", "items": {"type": "integer"}}}},
            "empty": {"type": "object"},
        }});
        for doc in [
            json!({"name": "x", "tags": ["a", "b"], "inner": {"a": 1, "b": [1, 2]}, "empty": {}}),
            json!({"name": "x", "tags": [], "inner": {"b": []}}),
            json!({}),
            json!({"tags": ["a"], "empty": {"k": [1, {"z": null}]}}),
        ] {
            let text = serde_json::to_string_pretty(&doc).unwrap();
            assert!(accepts_doc(schema.clone(), &pretty(), &text), "pretty grammar refused its own style:\n{text}");
            let compact = serde_json::to_string(&doc).unwrap();
            if compact.len() > 2 {
                assert!(!accepts_doc(schema.clone(), &pretty(), &compact), "pretty grammar accepted compact text {compact}");
            }
        }
    }

    #[test]
    fn compact_accepts_only_compact_text() {
        let opts = SchemaOptions { whitespace: Whitespace::Compact, ..Default::default() };
        let schema = json!({"type": "object", "properties": {"a": {"type": "array", "items": {"type": "integer"}}}});
        assert!(accepts_doc(schema.clone(), &opts, r#"{"a":[1,2]}"#));
        assert!(!accepts_doc(schema.clone(), &opts, r#"{"a": [1,2]}"#));
        assert!(!accepts_doc(schema, &opts, "{\n\"a\":[]}"));
    }

    #[test]
    fn pretty_constants_and_enums_are_indented_at_their_level() {
        let schema = json!({"type": "object", "properties": {"c": {"const": {"k": [1, 2], "e": {}}}}, "required": ["c"]});
        let doc = json!({"c": {"k": [1, 2], "e": {}}});
        assert!(accepts_doc(schema, &pretty(), &serde_json::to_string_pretty(&doc).unwrap()));
    }

    #[test]
    fn pretty_recursion_is_compact_past_the_level_cap() {
        // A linked list: each level nests one deeper.
        let schema = json!({"$defs": {"n": {"type": "object", "properties": {"next": {"$ref": "#/$defs/n"}}}}, "$ref": "#/$defs/n"});
        let mut doc = json!({});
        for _ in 0..(PRETTY_MAX_LEVEL + 3) {
            doc = json!({ "next": doc });
        }
        // serde_json indents every level; the grammar indents the first PRETTY_MAX_LEVEL.
        let text = to_layout_string(&doc, Whitespace::Pretty { indent: 2 });
        assert!(accepts_doc(schema.clone(), &pretty(), &text));
        assert!(!accepts_doc(schema, &pretty(), &serde_json::to_string_pretty(&doc).unwrap()));
    }

    #[test]
    fn the_layout_writer_matches_serde_json_below_the_cap() {
        let doc = json!({"a": [1, {"b": []}, {}], "c": {"d": "e"}, "f": []});
        assert_eq!(to_layout_string(&doc, Whitespace::Pretty { indent: 2 }), serde_json::to_string_pretty(&doc).unwrap());
        assert_eq!(to_layout_string(&doc, Whitespace::Compact), serde_json::to_string(&doc).unwrap());
    }
}
