//! Joins: stacks that share their top frames are kept as one (a graph-structured stack).
//!
//! The branches of a `oneOf` over closed objects each carry the same nested value: 26
//! branches of a discriminated union, each writing the same string at the same key, are
//! 26 stacks that differ only below the string's frames, and every byte steps all of them.
//! A state's stacks with the same top position are merged into one whose parent is a join
//! node: the set of their parents, itself factored the same way (parents that share a top
//! position become one frame over a join of theirs), so a state is a set of distinct top
//! positions over a DAG of frames. The string is then stepped once; the parents come apart
//! again only when a closure pops into the join (`Builder::reach`).
//!
//! A join is a node of the arena whose position is [`JOIN`] and whose parent field indexes
//! `Builder::joins`; its members are never joins themselves (nested joins are flattened)
//! and may be [`BOTTOM`] or [`CTX`]. Joins are interned like nodes, and the factoring makes
//! the form canonical for a set of stacks (down to [`MAX_FACTOR_DEPTH`] shared frames;
//! past that two forms of one set are possible, which costs only a cache miss).
//!
//! Readers that walk parents treat a join as follows: a closure pops into every member;
//! truncation cuts each member as it would cut the stacks the join stands for, and
//! canonical states replace frames in each member (both stop at a join when going through
//! would cost too much: frames below it then stay as they are, which only makes those
//! optimizations less complete, never wrong); completions take its cheapest member.
//!
//! `Limits::max_stacks` counts the merged stacks, so a language whose stacks multiply
//! under nesting (objects nested in themselves under negated closed objects) no longer
//! runs into it.

use super::{Builder, StackId, BOTTOM, CTX};

/// The position field of a join node.
const JOIN: u32 = u32::MAX - 1;

/// Shared frames factored out of a join before its members are kept as they are.
const MAX_FACTOR_DEPTH: u32 = 64;

impl Builder {
    /// Is `n` a join node?
    #[inline]
    pub fn is_join(&self, n: StackId) -> bool {
        n != BOTTOM && n != CTX && self.nodes[n.index()].0 == JOIN
    }

    /// The members of join node `n`.
    #[inline]
    pub fn join_members(&self, n: StackId) -> &[StackId] {
        &self.joins[self.nodes[n.index()].1 .0 as usize]
    }

    /// Merges the stacks of `stacks` (sorted, without repeats; the ends [`BOTTOM`] and
    /// [`CTX`] allowed) that share a top position, as the module docs describe. Sorted and
    /// without repeats after.
    pub(super) fn normalize(&mut self, stacks: &mut Vec<StackId>) {
        self.factor(stacks, 0);
    }

    /// One level of factoring: stacks with the same top position become one over the join
    /// of their parents.
    fn factor(&mut self, stacks: &mut Vec<StackId>, depth: u32) {
        if stacks.len() < 2 {
            return;
        }
        // Most states hold each top position once: find that out in one pass, marking each
        // position with this call's stamp.
        self.stamp = self.stamp.wrapping_add(1);
        if self.stamp == 0 {
            self.stamps.iter_mut().for_each(|x| *x = 0);
            self.stamp = 1;
        }
        if self.stamps.len() < self.flat.elems.len() {
            self.stamps.resize(self.flat.elems.len(), 0);
        }
        let mut repeated = false;
        for &n in stacks.iter() {
            if n == BOTTOM || n == CTX {
                continue;
            }
            let pos = self.nodes[n.index()].0 as usize;
            if self.stamps[pos] == self.stamp {
                repeated = true;
                break;
            }
            self.stamps[pos] = self.stamp;
        }
        if !repeated {
            return;
        }
        let mut keyed: Vec<(u32, StackId)> = stacks.iter().filter(|&&n| n != BOTTOM && n != CTX).map(|&n| (self.nodes[n.index()].0, n)).collect();
        keyed.sort_unstable_by_key(|&(pos, _)| pos);
        stacks.retain(|&n| n == BOTTOM || n == CTX);
        let mut i = 0;
        while i < keyed.len() {
            let pos = keyed[i].0;
            let mut j = i + 1;
            while j < keyed.len() && keyed[j].0 == pos {
                j += 1;
            }
            if j == i + 1 {
                stacks.push(keyed[i].1);
            } else {
                let parents: Vec<StackId> = keyed[i..j].iter().map(|&(_, n)| self.nodes[n.index()].1).collect();
                let p = self.join_of(parents, depth);
                let n = self.intern_node(pos, p);
                stacks.push(n);
            }
            i = j;
        }
        stacks.sort_unstable();
        stacks.dedup();
    }

    /// The stack standing for all of `members` (nodes, joins or ends): the one member when
    /// they come to one after flattening and factoring, else their (interned) join.
    pub(super) fn join_of(&mut self, members: Vec<StackId>, depth: u32) -> StackId {
        let mut flat: Vec<StackId> = Vec::with_capacity(members.len());
        for m in members {
            if self.is_join(m) {
                flat.extend_from_slice(self.join_members(m));
            } else {
                flat.push(m);
            }
        }
        flat.sort_unstable();
        flat.dedup();
        if depth < MAX_FACTOR_DEPTH {
            self.factor(&mut flat, depth + 1);
        }
        if flat.len() == 1 {
            return flat[0];
        }
        if let Some(&id) = self.join_ids.get(flat.as_slice()) {
            return id;
        }
        let id = StackId(self.nodes.len() as u32);
        let height = flat.iter().map(|m| self.heights[m.index()]).max().unwrap_or(0);
        let key: Box<[StackId]> = flat.into();
        self.nodes.push((JOIN, StackId(self.joins.len() as u32)));
        self.heights.push(height);
        self.join_bytes += key.len() * 8 + 48;
        self.joins.push(key.clone());
        self.join_ids.insert(key, id);
        id
    }
}

#[cfg(test)]
mod tests {
    use crate::matcher::automaton::Automaton;
    use crate::matcher::lower::lower;
    use crate::{gbnf, Limits};

    fn aut(src: &str) -> (Automaton, super::super::StateId) {
        let g = gbnf::parse(src, &Limits::default()).unwrap();
        let flat = lower(&g, None, &Limits::default()).unwrap();
        Automaton::new(flat, None, 64, 100_000).unwrap()
    }

    #[test]
    fn stacks_that_share_their_top_are_stepped_as_one() {
        let string = "str ::= \"\\\"\" [a-z]* \"\\\"\"";
        // One alternative around a string: its stacks inside the string.
        let (a, s) = aut(&format!("root ::= \"k\" str \"-0\"\n{string}"));
        let one = a.info(a.steps(s, b"k\"abc")).stacks.len();
        // Twenty alternatives around the same string, after the same key: the same number
        // of stacks inside it (the twenty continuations are one join), not twenty times.
        // (Each through a rule of its own, which lowering does not factor into one.)
        let alts: Vec<String> = (0..20).map(|i| format!("\"k\" w{i} \"-{i}\"")).collect();
        let wraps: Vec<String> = (0..20).map(|i| format!("w{i} ::= str")).collect();
        let (a, s) = aut(&format!("root ::= {}\n{}\n{string}", alts.join(" | "), wraps.join("\n")));
        let x = a.steps(s, b"k\"abc");
        assert_eq!(a.info(x).stacks.len(), one);
        let b = a.builder();
        let joined = a.info(x).stacks.iter().filter(|&&n| n != super::BOTTOM && b.is_join(b.node(n).1)).count();
        assert!(joined > 0, "no stack over a join");
        drop(b);
        // After the string the continuations come apart again: "-1" is alternative 1
        // (complete) or the start of 10 to 19.
        let y = a.steps(x, b"\"-1");
        assert!(a.info(y).accepting);
        assert!(a.info(a.step(y, b'3')).accepting);
        assert_eq!(a.step(y, b'x'), super::super::DEAD);
        assert!(a.info(a.steps(x, b"\"-2")).accepting);
        assert_eq!(a.steps(x, b"\"-20"), super::super::DEAD);
        assert!(a.info(a.steps(x, b"\"-19")).accepting);
    }

    #[test]
    fn ambiguity_under_nesting_no_longer_multiplies_stacks() {
        // Two ways to parse each level: 2^depth stacks without joins (over the limit of 64
        // after six levels), two per level with them.
        let (a, s) = aut("root ::= \"[\" root \"]\" | \"[\" root \"] \" | \"x\"");
        let mut x = s;
        for _ in 0..40 {
            x = a.step(x, b'[');
            assert!(a.info(x).stacks.len() <= 4, "{}", a.info(x).stacks.len());
        }
        x = a.step(x, b'x');
        for _ in 0..40 {
            x = a.step(x, b']');
            assert_ne!(x, super::super::OVERFLOW);
            assert_ne!(x, super::super::DEAD);
        }
        assert!(a.info(x).accepting);
    }
}
