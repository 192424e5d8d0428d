//! Documents, identifiers and `$ref` resolution.
//!
//! A [`Loc`] names a schema by document index and JSON pointer. Documents are the root
//! schema and any remote documents (from `SchemaOptions::remotes`) that references reach.
//! Resources (`$id`, draft-4 `id`) and anchors (`$anchor`, `$dynamicAnchor`, fragment-only
//! ids of drafts 4-7) are indexed by a schema-aware walk, so identifiers inside `enum` or
//! `const` values are not mistaken for real ones.

use crate::Draft;
use serde_json::Value;
use foldhash::HashMap;
use std::collections::BTreeMap;

/// The base URI given to a root schema without `$id`.
pub(crate) const DEFAULT_BASE: &str = "https://formwork.invalid/root.json";

/// A schema location.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) struct Loc {
    pub doc: usize,
    pub ptr: String,
}

pub(crate) struct Doc {
    pub value: std::sync::Arc<Value>,
    pub draft: Draft,
    /// The URI the document was retrieved from (before its own `$id` applies).
    pub uri: String,
    /// Some object in it may carry an identifier ([`may_have_ids`]); without any, every
    /// location's base is `uri`.
    pub ids: bool,
    /// Some location below the root may have one (so not every location has the root's
    /// base URI).
    pub ids_below_root: bool,
}

pub(crate) struct Resolver<'a> {
    pub docs: Vec<Doc>,
    resources: HashMap<String, Loc>,
    anchors: HashMap<String, Loc>,
    remotes: std::borrow::Cow<'a, BTreeMap<String, Value>>,
}

use crate::keywords::{ARR_KW, MAP_KW, ONE_KW};

/// The validation vocabulary's keywords (2019-09 and 2020-12).
const VALIDATION_KW: &[&str] = &[
    "type", "enum", "const", "multipleOf", "maximum", "exclusiveMaximum", "minimum", "exclusiveMinimum", "maxLength", "minLength",
    "pattern", "maxItems", "minItems", "uniqueItems", "maxContains", "minContains", "maxProperties", "minProperties", "required",
    "dependentRequired",
];

/// Removes the validation vocabulary's keywords from every subschema of `doc` (a document
/// whose metaschema does not enable that vocabulary: they are annotations there).
fn strip_validation(doc: &mut Value) {
    let mut stack = vec![String::new()];
    while let Some(ptr) = stack.pop() {
        let Some(Value::Object(o)) = doc.pointer_mut(&ptr) else { continue };
        for k in VALIDATION_KW {
            o.remove(*k);
        }
        for (k, sub) in o.iter() {
            if MAP_KW.contains(&k.as_str()) {
                for key in sub.as_object().into_iter().flat_map(|m| m.keys()) {
                    stack.push(format!("{ptr}/{}/{}", escape_ptr(k), escape_ptr(key)));
                }
            } else if ARR_KW.contains(&k.as_str()) && sub.is_array() {
                for i in 0..sub.as_array().map_or(0, |a| a.len()) {
                    stack.push(format!("{ptr}/{}/{i}", escape_ptr(k)));
                }
            } else if ONE_KW.contains(&k.as_str()) {
                stack.push(format!("{ptr}/{}", escape_ptr(k)));
            }
        }
    }
}

pub(crate) fn escape_ptr(seg: &str) -> std::borrow::Cow<'_, str> {
    if seg.contains(['~', '/']) {
        seg.replace('~', "~0").replace('/', "~1").into()
    } else {
        seg.into()
    }
}

/// Does any object in `v` have a string `$id`, `id`, `$anchor` or `$dynamicAnchor` member
/// (keyword or not)? When none has, the documents' index of identifiers is the root alone,
/// without walking every subschema with its pointer.
fn may_have_ids(v: &Value) -> bool {
    has_ids(v, false)
}

/// [`may_have_ids`] below the root (the root's own members aside): when none has, every
/// location has the root's base URI.
fn ids_below_root(v: &Value) -> bool {
    has_ids(v, true)
}

fn has_ids(v: &Value, below_root: bool) -> bool {
    let mut stack: Vec<&Value> = match (below_root, v) {
        (true, Value::Object(o)) => o.values().filter(|x| x.is_object() || x.is_array()).collect(),
        _ => vec![v],
    };
    while let Some(v) = stack.pop() {
        match v {
            Value::Object(o) => {
                for (k, x) in o {
                    if x.is_string() && matches!(k.as_str(), "$id" | "id" | "$anchor" | "$dynamicAnchor") {
                        return true;
                    }
                    if x.is_object() || x.is_array() {
                        stack.push(x);
                    }
                }
            }
            Value::Array(a) => stack.extend(a.iter().filter(|x| x.is_object() || x.is_array())),
            _ => {}
        }
    }
    false
}

/// `v.pointer(ptr)` (RFC 6901) without an allocation per segment: only a segment holding an
/// escape (`~0`, `~1`) is unescaped into a new string. Schema compilation looks keywords up
/// through pointers all the time, on documents of hundreds of kilobytes.
pub(crate) fn pointer<'a>(v: &'a Value, ptr: &str) -> Option<&'a Value> {
    if ptr.is_empty() {
        return Some(v);
    }
    let rest = ptr.strip_prefix('/')?;
    let mut v = v;
    for seg in rest.split('/') {
        let owned;
        let seg = if seg.contains('~') {
            owned = seg.replace("~1", "/").replace("~0", "~");
            owned.as_str()
        } else {
            seg
        };
        v = match v {
            Value::Object(m) => map_get(m, seg)?,
            Value::Array(a) => {
                // Array indices as RFC 6901 spells them: no sign, no leading zero.
                if seg.is_empty() || (seg.len() > 1 && seg.starts_with('0')) || !seg.bytes().all(|b| b.is_ascii_digit()) {
                    return None;
                }
                a.get(seg.parse::<usize>().ok()?)?
            }
            _ => return None,
        };
    }
    Some(v)
}

/// `m.get(key)`, by a scan of the entries when the map is small. Most schema objects have a
/// handful of keywords, and a scan comparing lengths first beats hashing the key with the
/// map's SipHash; this is on the path of every keyword lookup (see [`pointer()`]).
#[inline]
pub(crate) fn map_get<'a>(m: &'a serde_json::Map<String, Value>, key: &str) -> Option<&'a Value> {
    if m.len() <= 8 {
        m.iter().find(|(k, _)| k.as_str() == key).map(|(_, v)| v)
    } else {
        m.get(key)
    }
}

fn has_scheme(s: &str) -> bool {
    let mut chars = s.chars();
    match chars.next() {
        Some(c) if c.is_ascii_alphabetic() => {}
        _ => return false,
    }
    for c in chars {
        if c == ':' {
            return true;
        }
        if !(c.is_ascii_alphanumeric() || c == '+' || c == '-' || c == '.') {
            return false;
        }
    }
    false
}

pub(crate) fn strip_fragment(s: &str) -> &str {
    s.split('#').next().unwrap_or(s)
}

fn normalize_path(path: &str) -> String {
    let mut out: Vec<&str> = Vec::new();
    let segs: Vec<&str> = path.split('/').collect();
    for (i, seg) in segs.iter().enumerate() {
        match *seg {
            "." => {
                if i == segs.len() - 1 {
                    out.push("");
                }
            }
            ".." => {
                if out.len() > 1 {
                    out.pop();
                }
                if i == segs.len() - 1 {
                    out.push("");
                }
            }
            s => out.push(s),
        }
    }
    out.join("/")
}

/// Resolves `r` against `base` (RFC 3986, enough of it for schema identifiers).
pub(crate) fn join(base: &str, r: &str) -> String {
    if has_scheme(r) {
        return r.to_string();
    }
    if r.is_empty() {
        return strip_fragment(base).to_string();
    }
    let b = strip_fragment(base);
    if r.starts_with('#') {
        return format!("{b}{r}");
    }
    let scheme_end = b.find(':').map(|i| i + 1).unwrap_or(0);
    let scheme = &b[..scheme_end];
    if let Some(rest) = r.strip_prefix("//") {
        return format!("{scheme}//{rest}");
    }
    let after = &b[scheme_end..];
    let (authority, path) = if let Some(a) = after.strip_prefix("//") {
        match a.find('/') {
            Some(i) => (format!("//{}", &a[..i]), &a[i..]),
            None => (format!("//{a}"), ""),
        }
    } else {
        (String::new(), after)
    };
    let (rpath, rest) = match r.find(['?', '#']) {
        Some(i) => (&r[..i], &r[i..]),
        None => (r, ""),
    };
    let new_path = if rpath.starts_with('/') {
        rpath.to_string()
    } else {
        let dir = match path.rfind('/') {
            Some(i) => &path[..=i],
            None => {
                if authority.is_empty() {
                    ""
                } else {
                    "/"
                }
            }
        };
        format!("{dir}{rpath}")
    };
    format!("{scheme}{authority}{}{rest}", normalize_path(&new_path))
}

fn percent_decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' && i + 2 < b.len() {
            if let Ok(v) = u8::from_str_radix(&s[i + 1..i + 3], 16) {
                out.push(v);
                i += 3;
                continue;
            }
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn id_of(v: &Value, draft: Draft) -> Option<&str> {
    let o = v.as_object()?;
    if draft.ref_overrides_siblings() && o.contains_key("$ref") {
        return None;
    }
    let key = if draft == Draft::Draft4 { "id" } else { "$id" };
    o.get(key).and_then(|x| x.as_str())
}

impl<'a> Resolver<'a> {
    /// A resolver over a copy of `root` (the tests'; the compiler shares its document).
    #[cfg(test)]
    pub fn new(root: &Value, draft: Draft, remotes: std::borrow::Cow<'a, BTreeMap<String, Value>>) -> Resolver<'a> {
        Self::new_shared(std::sync::Arc::new(root.clone()), draft, remotes)
    }

    /// [`new`](Self::new) on a document the caller shares rather than one it copies (a
    /// large schema's deep copy was 6 % of its compile).
    pub fn new_shared(root: std::sync::Arc<Value>, draft: Draft, remotes: std::borrow::Cow<'a, BTreeMap<String, Value>>) -> Resolver<'a> {
        let mut r = Resolver { docs: Vec::new(), resources: HashMap::default(), anchors: HashMap::default(), remotes };
        r.add_doc(root, DEFAULT_BASE, draft);
        r
    }

    fn add_doc(&mut self, mut value: std::sync::Arc<Value>, uri: &str, draft: Draft) -> usize {
        let draft = value.get("$schema").and_then(|s| s.as_str()).and_then(Draft::from_schema_uri).unwrap_or(draft);
        if !self.validation_vocabulary(&value) {
            // Copied only here (a shared document stays as its owner has it).
            strip_validation(std::sync::Arc::make_mut(&mut value));
        }
        let doc = self.docs.len();
        self.resources.insert(strip_fragment(uri).to_string(), Loc { doc, ptr: String::new() });
        // Schema-aware walk, each subschema with its pointer and base (the base shared, not
        // copied, by the subschemas under one `$id`).
        let root_base: std::rc::Rc<str> = strip_fragment(uri).into();
        let mut stack: Vec<(&Value, String, std::rc::Rc<str>)> = vec![(&value, String::new(), root_base)];
        let ids = may_have_ids(&value);
        let ids_below = ids && ids_below_root(&value);
        if !ids {
            stack.clear();
        }
        while let Some((v, ptr, base)) = stack.pop() {
            let Some(o) = v.as_object() else { continue };
            let mut base = base;
            if let Some(id) = id_of(v, draft) {
                if let Some(frag) = id.strip_prefix('#') {
                    self.anchors.insert(format!("{base}#{frag}"), Loc { doc, ptr: ptr.clone() });
                } else {
                    let abs = join(&base, id);
                    let (u, frag) = match abs.split_once('#') {
                        Some((u, f)) => (u.to_string(), f.to_string()),
                        None => (abs.clone(), String::new()),
                    };
                    base = u.as_str().into();
                    self.resources.insert(u.clone(), Loc { doc, ptr: ptr.clone() });
                    if !frag.is_empty() {
                        self.anchors.insert(format!("{u}#{frag}"), Loc { doc, ptr: ptr.clone() });
                    }
                }
            }
            for k in ["$anchor", "$dynamicAnchor"] {
                if let Some(a) = o.get(k).and_then(|x| x.as_str()) {
                    self.anchors.entry(format!("{base}#{a}")).or_insert(Loc { doc, ptr: ptr.clone() });
                }
            }
            if draft.ref_overrides_siblings() && o.contains_key("$ref") {
                // Siblings of $ref are not schemas in drafts 4-7; still index definitions, which
                // real schemas put next to a root $ref.
                for k in ["definitions", "$defs"] {
                    if let Some(m) = o.get(k).and_then(|x| x.as_object()) {
                        for (key, sub) in m {
                            stack.push((sub, format!("{ptr}/{k}/{}", escape_ptr(key)), base.clone()));
                        }
                    }
                }
                continue;
            }
            for (k, sub) in o {
                if MAP_KW.contains(&k.as_str()) {
                    if let Some(m) = sub.as_object() {
                        for (key, s) in m {
                            stack.push((s, format!("{ptr}/{}/{}", escape_ptr(k), escape_ptr(key)), base.clone()));
                        }
                    }
                } else if ARR_KW.contains(&k.as_str()) {
                    if let Some(a) = sub.as_array() {
                        for (i, s) in a.iter().enumerate() {
                            stack.push((s, format!("{ptr}/{}/{i}", escape_ptr(k)), base.clone()));
                        }
                    }
                } else if ONE_KW.contains(&k.as_str()) {
                    stack.push((sub, format!("{ptr}/{}", escape_ptr(k)), base.clone()));
                }
            }
        }
        self.docs.push(Doc { value, draft, uri: strip_fragment(uri).to_string(), ids, ids_below_root: ids_below });
        doc
    }

    /// Does the document's metaschema enable the validation vocabulary? Only a metaschema
    /// among the remotes with a `$vocabulary` can turn it off (listing a vocabulary, `true` or
    /// `false`, enables it for an implementation that knows it, as formwork does).
    fn validation_vocabulary(&self, value: &Value) -> bool {
        let Some(uri) = value.get("$schema").and_then(|s| s.as_str()) else { return true };
        let Some(vocab) = self.remotes.get(strip_fragment(uri)).and_then(|m| m.get("$vocabulary")).and_then(|v| v.as_object()) else {
            return true;
        };
        vocab.keys().any(|k| k.ends_with("/vocab/validation"))
    }

    pub fn value(&self, loc: &Loc) -> Option<&Value> {
        pointer(&self.docs.get(loc.doc)?.value, &loc.ptr)
    }

    pub fn draft(&self, doc: usize) -> Draft {
        self.docs[doc].draft
    }

    /// The base URI in effect at `loc` (applying every `$id` on the way down).
    pub fn base_at(&self, loc: &Loc) -> String {
        let doc = &self.docs[loc.doc];
        // The retrieval URI: the root's `$id` (also indexed for the root) applies below.
        let mut base = doc.uri.clone();
        if !doc.ids {
            return base;
        }
        let mut cur: &Value = &doc.value;
        if let Some(id) = id_of(cur, doc.draft) {
            if !id.starts_with('#') {
                base = strip_fragment(&join(&base, id)).to_string();
            }
        }
        if loc.ptr.is_empty() {
            return base;
        }
        for seg in loc.ptr[1..].split('/') {
            let seg: std::borrow::Cow<'_, str> = if seg.contains('~') { seg.replace("~1", "/").replace("~0", "~").into() } else { seg.into() };
            let next = match cur {
                Value::Object(o) => o.get(seg.as_ref()),
                Value::Array(a) => seg.parse::<usize>().ok().and_then(|i| a.get(i)),
                _ => None,
            };
            let Some(n) = next else { return base };
            cur = n;
            if let Some(id) = id_of(cur, doc.draft) {
                if !id.starts_with('#') {
                    base = strip_fragment(&join(&base, id)).to_string();
                }
            }
        }
        base
    }

    /// Resolves `reference` found in a schema whose base URI is `base`.
    pub fn resolve(&mut self, base: &str, reference: &str) -> Option<Loc> {
        let abs = join(base, reference);
        let (uri, frag) = match abs.split_once('#') {
            Some((u, f)) => (u.to_string(), f.to_string()),
            None => (abs.clone(), String::new()),
        };
        let res = match self.resources.get(&uri) {
            Some(l) => l.clone(),
            None => {
                let v = std::sync::Arc::new(self.remotes.get(&uri)?.clone());
                let draft = self.docs[0].draft;
                let d = self.add_doc(v, &uri, draft);
                Loc { doc: d, ptr: String::new() }
            }
        };
        if frag.is_empty() {
            return Some(res);
        }
        let frag = percent_decode(&frag);
        if frag.starts_with('/') {
            let loc = Loc { doc: res.doc, ptr: format!("{}{}", res.ptr, frag) };
            self.value(&loc)?;
            return Some(loc);
        }
        self.anchors.get(&format!("{uri}#{frag}")).cloned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identifiers_deep_in_a_document_are_still_indexed() {
        use serde_json::json;
        assert!(!may_have_ids(&json!({"properties": {"a": {"type": "string"}}, "items": [{"enum": [1]}]})));
        let deep = json!({"$defs": {"x": {"items": [{"$anchor": "here", "type": "integer"}]}}, "$ref": "#here"});
        assert!(may_have_ids(&deep));
        let remotes = BTreeMap::new();
        let mut r = Resolver::new(&deep, Draft::Draft202012, std::borrow::Cow::Borrowed(&remotes));
        let loc = r.resolve(DEFAULT_BASE, "#here").expect("the anchor is indexed");
        assert_eq!(loc.ptr, "/$defs/x/items/0");
        // Without identifiers the walk is skipped; pointers still resolve.
        let plain = json!({"$defs": {"a/b": {"type": "string"}}});
        let mut r = Resolver::new(&plain, Draft::Draft202012, std::borrow::Cow::Borrowed(&remotes));
        assert_eq!(r.resolve(DEFAULT_BASE, "#/$defs/a~1b").expect("a pointer").ptr, "/$defs/a~1b");
        assert_eq!(escape_ptr("a/b~c"), "a~1b~0c");
        assert!(matches!(escape_ptr("plain"), std::borrow::Cow::Borrowed("plain")));
    }

    #[test]
    fn pointer_agrees_with_serde_json() {
        let v = serde_json::json!({"a": {"b/c": [1, {"~x": 2}], "": {"": 3}}, "0": [4], "m~n": 5});
        for p in ["", "/", "/a", "/a/b~1c", "/a/b~1c/0", "/a/b~1c/1/~0x", "/a/b~1c/01", "/a/b~1c/+1", "/a/b~1c/2", "/a//", "/0/0",
            "/m~0n", "/m~n", "a", "/a/b/c", "/0/-", "/a/b~1c/1/~0x/y"] {
            assert_eq!(pointer(&v, p), v.pointer(p), "{p:?}");
        }
    }

    #[test]
    fn joins_relative_references() {
        assert_eq!(join("http://x.com/a/b.json", "c.json"), "http://x.com/a/c.json");
        assert_eq!(join("http://x.com/a/b.json", "#/d"), "http://x.com/a/b.json#/d");
        assert_eq!(join("http://x.com/a/b.json", "../c.json"), "http://x.com/c.json");
        assert_eq!(join("http://x.com/a/b.json", "/z"), "http://x.com/z");
        assert_eq!(join("http://x.com/a/", "urn:x"), "urn:x");
    }

    #[test]
    fn resolves_pointers_ids_and_anchors() {
        let s = serde_json::json!({"$defs": {"a": {"$id": "http://e.com/a.json", "$defs": {"b": {"$anchor": "bee"}}}, "p/q": {}}});
        let remotes = BTreeMap::new();
        let mut r = Resolver::new(&s, Draft::Draft202012, std::borrow::Cow::Borrowed(&remotes));
        assert_eq!(r.resolve(DEFAULT_BASE, "#/$defs/p~1q").unwrap().ptr, "/$defs/p~1q");
        assert_eq!(r.resolve(DEFAULT_BASE, "http://e.com/a.json").unwrap().ptr, "/$defs/a");
        assert_eq!(r.resolve("http://e.com/a.json", "#bee").unwrap().ptr, "/$defs/a/$defs/b");
        assert!(r.resolve(DEFAULT_BASE, "#/nope").is_none());
        assert_eq!(r.base_at(&Loc { doc: 0, ptr: "/$defs/a/$defs/b".into() }), "http://e.com/a.json");
    }

    #[test]
    fn a_relative_root_id_applies_once() {
        // The root is indexed under its retrieval URI and under its `$id`; the base is the
        // `$id` joined to the retrieval URI, whichever index entry a hash map yields first.
        let s = serde_json::json!({"$id": "x.io/schemas/a.json", "items": {"$ref": "#/definitions/d"}, "definitions": {"d": {}}});
        let remotes = BTreeMap::new();
        for _ in 0..20 {
            let mut r = Resolver::new(&s, Draft::Draft7, std::borrow::Cow::Borrowed(&remotes));
            let base = r.base_at(&Loc { doc: 0, ptr: "/items".into() });
            assert_eq!(base, "https://formwork.invalid/x.io/schemas/a.json");
            assert_eq!(r.resolve(&base, "#/definitions/d").unwrap().ptr, "/definitions/d");
        }
    }
}
