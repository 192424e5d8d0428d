//! One conjunct of a conjunction: a schema object, where it lives, and which combinators
//! were already distributed ([`Consumed`]).

use crate::resolve::escape_ptr;
use serde_json::{Map, Value};
use std::sync::Arc;

bitflags::bitflags! {
    /// The combinators of a [`Conjunct`] already distributed (consumed), so that expanding it
    /// again skips them.
    #[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
    pub(crate) struct Consumed: u16 {
        const ANYOF = 1;
        const ONEOF = 2;
        const IF = 4;
        const DEPS = 8;
        const NOT = 16;
        const ALLOF = 32;
        const REF = 64;
        /// Draft 4-7: `$ref` replaced this object; every sibling is ignored.
        const REF_ONLY = 128;
        /// `oneOf` distributed over branches proven pairwise disjoint: a value of the branch
        /// in the conjunction matches no other, so the branch (a part of its own) decides the
        /// `oneOf`.
        const ONEOF_DISJOINT = 256;
        /// The combinator (consumed too) is a condition on which keys are present, which
        /// the object's member group checks (see `presence`).
        const PRESENCE_ANYOF = 512;
        const PRESENCE_ONEOF = 1024;
        const PRESENCE_NOT = 2048;
        const PRESENCE_DEPS = 4096;
    }
}

/// One conjunct: a schema object, where it lives, and which combinators were already handled.
#[derive(Clone, Debug)]
pub(crate) struct Conjunct {
    pub root: Arc<Value>,
    pub ptr: String,
    pub doc: usize,
    /// Where the schema is (for errors); for synthetic parts, where it came from.
    pub at: String,
    /// True when this part is a location of a real document (validators exist for it).
    pub real: bool,
    /// True when this part is a negation or other derived schema whose properties are not
    /// "evaluated" in the sense of `unevaluated*`.
    pub derived: bool,
    pub consumed: Consumed,
    /// For a part of a synthetic document (see [`Conjunct::key`]): the hashes of that
    /// document's values by node (address in the document, which the part keeps alive),
    /// computed once each and shared by every part of the document. `None` for real parts.
    pub content: Option<Arc<std::sync::Mutex<Hashes>>>,
    /// `ptr` resolved in `root`, once, when the part is made ([`Conjunct::locate`]; a sub-part
    /// resolves only its own tail from here, [`Conjunct::sub`]). `value()` is asked for nearly
    /// every keyword lookup, and walking the pointer from the root each time took about a
    /// quarter of a large schema's compile time.
    pub node: Node,
}

/// A location in a document, held with the document (a reference yoked to its `Arc`).
pub(crate) type Node = yoke::Yoke<&'static Value, Arc<Value>>;

/// What a pointer that resolves to nothing reads as: `true`, the empty schema.
static TRUE: Value = Value::Bool(true);

impl Conjunct {
    /// `ptr` resolved in `root` (`true` when it resolves to nothing).
    pub fn locate(root: &Arc<Value>, ptr: &str) -> Node {
        yoke::Yoke::attach_to_cart(root.clone(), |r| crate::resolve::pointer(r, ptr).unwrap_or(&TRUE))
    }

    pub fn value(&self) -> &Value {
        self.node.get()
    }
    pub fn obj(&self) -> Option<&Map<String, Value>> {
        if self.consumed.contains(Consumed::REF_ONLY) {
            return None;
        }
        self.value().as_object()
    }
    pub fn get(&self, k: &str) -> Option<&Value> {
        crate::resolve::map_get(self.obj()?, k)
    }
    /// The pointer of keyword `k` in this part, for errors.
    pub fn kw_ptr(&self, k: &str) -> String {
        if self.real {
            format!("{}/{}", self.ptr, escape_ptr(k))
        } else {
            self.at.clone()
        }
    }
    /// A subschema of this part, at `ptr` relative to this part.
    pub fn sub(&self, rel: &str) -> Conjunct {
        let ptr = [self.ptr.as_str(), rel].concat();
        Conjunct {
            root: self.root.clone(),
            node: self.node.map_project_cloned(|v, _| crate::resolve::pointer(v, rel).unwrap_or(&TRUE)),
            at: if self.real { ptr.clone() } else { self.at.clone() },
            ptr,
            doc: self.doc,
            real: self.real,
            derived: self.derived,
            consumed: Consumed::empty(),
            content: self.content.clone(),
        }
    }
    /// What identifies this part for the compiler's memo of conjunctions (`None`: it is
    /// compiled in place each time). A real part is its location. A synthetic part (a
    /// negation, a derived schema) is its value: a 128-bit hash of it, so equal parts of
    /// different synthetic documents share a rule. The negations of a `oneOf`'s branches
    /// are conjoined with every other branch, so the same negated subschema comes back in
    /// each alternative (compiled once, not once per alternative: helm-unittest's schema,
    /// 297,000 grammar elements and 46 ms to first mask, became 6 ms), and the negation of
    /// a recursive schema leaves `{"not": {"$ref": r}}` where the recursion comes back,
    /// which its compilation meets again one level of the instance down: the memo closes
    /// that into a recursive rule, as it does for a recursive `$ref`. (A synthetic part's
    /// `$ref`s resolve against its document's root, so the document, its value and whether
    /// it is derived say everything it compiles to.)
    ///
    /// A real part's location is the address of its node: real documents live as long as the
    /// compiler, and a node of a JSON tree has one path (a pointer that resolves to nothing
    /// reads as the shared `true`, which compiles the same wherever it is). No text is
    /// formatted: keys are asked for every part of every conjunction, and formatting them
    /// was about two fifths of a large schema's compile time.
    pub fn key(&self) -> Option<PartKey> {
        let bits = self.consumed.bits();
        if self.real {
            let node: *const Value = self.value();
            return Some(PartKey::Real { doc: self.doc, node: node as usize, bits });
        }
        let hashes = self.content.as_ref()?;
        let mut hashes = hashes.lock().unwrap_or_else(|e| e.into_inner());
        let hash = hash_value(self.value(), &mut hashes);
        Some(PartKey::Synthetic { doc: self.doc, derived: self.derived, hash, bits })
    }
}

/// What identifies a [`Conjunct`] for the compiler's memo of conjunctions
/// ([`Conjunct::key`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum PartKey {
    /// A location of a real document: its node's address, and the combinators consumed.
    Real { doc: usize, node: usize, bits: u16 },
    /// A derived part: a hash of its value.
    Synthetic { doc: usize, derived: bool, hash: u128, bits: u16 },
}

/// The 128-bit hashes of a synthetic document's values, by node address (see
/// [`Conjunct::content`]).
pub(crate) type Hashes = rustc_hash::FxHashMap<usize, u128>;

/// The 128-bit hash of `v` (two 64-bit hashers fed the same stream: a type tag before each
/// value, lengths before sequences, so different values give different streams), from the
/// hashes of its members, each computed once and kept in `memo` by node: the parts of one
/// document are asked for one level of the instance after another, and hashing each
/// subtree again at every level above it was a quarter of a large `oneOf`'s compile time.
fn hash_value(v: &Value, memo: &mut Hashes) -> u128 {
    use std::hash::{Hash, Hasher};
    fn both<T: Hash + ?Sized>(x: &T, h: &mut (std::collections::hash_map::DefaultHasher, rustc_hash::FxHasher)) {
        x.hash(&mut h.0);
        x.hash(&mut h.1);
    }
    let at = v as *const Value as usize;
    if let Some(&hash) = memo.get(&at) {
        return hash;
    }
    let mut h = (std::collections::hash_map::DefaultHasher::new(), rustc_hash::FxHasher::default());
    match v {
        Value::Null => both(&0u8, &mut h),
        Value::Bool(b) => both(&(1u8, *b), &mut h),
        Value::Number(n) => both(&(2u8, n.to_string().as_str()), &mut h),
        Value::String(x) => both(&(3u8, x.as_str()), &mut h),
        Value::Array(a) => {
            let members: Vec<u128> = a.iter().map(|x| hash_value(x, memo)).collect();
            both(&(4u8, &members), &mut h);
        }
        Value::Object(o) => {
            let members: Vec<(&str, u128)> = o.iter().map(|(k, x)| (k.as_str(), hash_value(x, memo))).collect();
            both(&(5u8, &members), &mut h);
        }
    }
    let hash = (u128::from(h.0.finish()) << 64) | u128::from(h.1.finish());
    memo.insert(at, hash);
    hash
}
