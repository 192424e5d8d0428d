//! The write side: how a transition is built. A step seeds the stacks that take the byte,
//! closes them (rule references expanded, ended alternatives popped; [`Builder::closure`]),
//! and interns the stacks and the state; whole UTF-8 characters, all of a state's bytes at
//! once, tokens taken whole, unions and truncations are built the same way.

use super::*;

/// Most stacks a join may stand for in a truncation (see [`Builder::truncate`]).
const MAX_CUT_STACKS: usize = 1024;

impl Builder {
    /// Builds deferred rule `r` (see `lower::deferred`); `false` when `r` is not one still
    /// to build.
    pub fn expand_deferred(&mut self, r: u32) -> bool {
        let built = self.deferred.as_mut().is_some_and(|d| d.expand(&mut self.flat, r));
        if built {
            self.expansions.fetch_add(1, std::sync::atomic::Ordering::Release);
        }
        built
    }

    /// Is `r` a deferred rule still to build?
    pub fn is_deferred(&self, r: u32) -> bool {
        self.deferred.as_ref().is_some_and(|d| d.is_pending(r))
    }

    /// Node `n` of the stack arena: `(pos, parent)` (not for [`BOTTOM`] / [`CTX`]).
    #[inline]
    pub fn node(&self, n: StackId) -> (u32, StackId) {
        self.nodes[n.index()]
    }

    /// The state after byte `b` from `s`: memoized, or built and published.
    pub(super) fn step(&mut self, t: &Table, s: StateId, b: u8) -> StateId {
        let st = t.state(s);
        // Another thread may have built it while this one waited for the lock.
        let v = st.trans[b as usize].load(Ordering::Acquire);
        if v != UNKNOWN {
            return StateId(v);
        }
        let info = &st.info;
        let next = if !info.first.contains(b) {
            DEAD
        } else {
            self.seeds.clear();
            for &n in info.stacks.iter() {
                if n == BOTTOM || n == CTX {
                    continue;
                }
                let (pos, parent) = self.nodes[n.index()];
                match self.flat.elems[pos as usize] {
                    Symbol::Bytes(k) => {
                        if self.flat.sets[k as usize].contains(b) {
                            self.seeds.push((pos + 1, parent));
                        }
                    }
                    Symbol::Rule(r) => {
                        if let Some(a) = self.flat.dispatch_alt(r, b) {
                            let cont = self.cont(pos, parent);
                            self.seeds.push((a + 1, cont));
                        }
                    }
                    _ => {}
                }
            }
            self.memo_closure(t)
        };
        st.trans[b as usize].store(next.0, Ordering::Release);
        next
    }

    /// The state after a whole UTF-8 character (lead byte `lead`, then one byte of each of
    /// the ranges `rest`) from `s`, read off the elements without building the states in
    /// the middle of the character: each stack that takes `lead` must be followed by byte
    /// sets that each hold the whole range of their level (the stack survives every such
    /// character) or none of it (it dies on all of them). Then every valid character with
    /// this lead leaves the same stacks behind, and the state after it is the closure of
    /// their continuations: exactly what stepping byte by byte gives, which is what a
    /// `None` (some stack takes part of a range, or meets a rule or the end mid-character)
    /// leaves to the caller. Mid-character states are otherwise built only to be compared,
    /// about a dozen per string state in a new context.
    pub(super) fn char_step(&mut self, t: &Table, s: StateId, lead: u8, rest: &[(u8, u8)]) -> Option<StateId> {
        self.seeds.clear();
        for &n in t.state(s).info.stacks.iter() {
            if n == BOTTOM || n == CTX {
                continue;
            }
            let (pos, parent) = self.nodes[n.index()];
            let (mut p, parent) = match self.flat.elems[pos as usize] {
                Symbol::Bytes(k) if self.flat.sets[k as usize].contains(lead) => (pos + 1, parent),
                Symbol::Rule(r) => match self.flat.dispatch_alt(r, lead) {
                    Some(a) => (a + 1, self.cont(pos, parent)),
                    None => continue,
                },
                _ => continue,
            };
            let mut alive = true;
            for &(a, b) in rest {
                let Symbol::Bytes(k) = self.flat.elems[p as usize] else { return None };
                let set = &self.flat.sets[k as usize];
                let held = set.count_range(a, b);
                if held == 0 {
                    alive = false;
                    break;
                }
                if held != u32::from(b - a) + 1 {
                    return None;
                }
                p += 1;
            }
            if alive {
                self.seeds.push((p, parent));
            }
        }
        if self.seeds.is_empty() {
            return Some(DEAD);
        }
        Some(self.memo_closure(t))
    }

    /// Fills in every byte transition of `s` at once: bytes taken by the same stacks lead to
    /// the same state, so each distinct set of stacks is closed once (a state of many stacks,
    /// an object's unseen keys, would otherwise scan all of them for each of ~200 bytes).
    pub(super) fn step_all(&mut self, t: &Table, s: StateId) {
        if t.complete(s) {
            return;
        }
        // What can take a byte: each stack on a byte set, and each alternative of each
        // stack on a dispatch rule; (its bytes, the position and stack after the byte).
        let mut takers = std::mem::take(&mut self.all_takers);
        takers.clear();
        for &n in t.state(s).info.stacks.iter() {
            if n == BOTTOM || n == CTX {
                continue;
            }
            let (pos, parent) = self.nodes[n.index()];
            match self.flat.elems[pos as usize] {
                Symbol::Bytes(k) => takers.push((self.flat.sets[k as usize], pos + 1, parent)),
                Symbol::Rule(r) if self.flat.dispatch(r).is_some() => {
                    let cont = self.cont(pos, parent);
                    let d = self.flat.dispatch(r).expect("checked above");
                    takers.extend(d.alts.iter().map(|&(a, set)| (set, a + 1, cont)));
                }
                _ => {}
            }
        }
        let words = takers.len().div_ceil(64).max(1);
        // Per byte: the takers (by index) that take it.
        let mut sig = std::mem::take(&mut self.all_sig);
        sig.clear();
        sig.resize(256 * words, 0);
        // By block of 64 takers and word of 64 bytes: bit by bit when the block holds few of
        // those bytes, else as one transposition of the 64 × 64 bit matrix (about 400
        // operations: a string body's takers hold hundreds of bytes each).
        for (blk, chunk) in takers.chunks(64).enumerate() {
            for w in 0..4 {
                let held: u32 = chunk.iter().map(|(set, _, _)| set.0[w].count_ones()).sum();
                if held > 128 {
                    let mut m = [0u64; 64];
                    for (i, (set, _, _)) in chunk.iter().enumerate() {
                        m[i] = set.0[w];
                    }
                    transpose64(&mut m);
                    for (j, &col) in m.iter().enumerate() {
                        sig[(w * 64 + j) * words + blk] |= col;
                    }
                    continue;
                }
                for (i, (set, _, _)) in chunk.iter().enumerate() {
                    let mut bits = set.0[w];
                    while bits != 0 {
                        let b = w * 64 + bits.trailing_zeros() as usize;
                        bits &= bits - 1;
                        sig[b * words + blk] |= 1 << i;
                    }
                }
            }
        }
        // The state of each signature met so far, and the first byte that has it.
        let mut done = std::mem::take(&mut self.all_done);
        done.clear();
        let mut next = [DEAD; 256];
        if words == 1 {
            // Up to 64 takers (nearly every state): a byte's signature is one word, its own
            // key, compared with the last byte's as a value (the general loop pays for
            // slices and their bounds on each of the 256 bytes: at stop 53, two thirds of
            // this function's instructions).
            let (mut last, mut last_x) = (0u64, DEAD);
            for (b, &key) in sig.iter().enumerate() {
                if key != last {
                    last = key;
                    last_x = if key == 0 {
                        DEAD
                    } else if let Some(&(_, x)) = done.get(&key) {
                        x
                    } else {
                        self.seeds.clear();
                        let mut bits = key;
                        while bits != 0 {
                            let (_, next, parent) = takers[bits.trailing_zeros() as usize];
                            bits &= bits - 1;
                            self.seeds.push((next, parent));
                        }
                        let x = self.memo_closure(t);
                        done.insert(key, (b as u16, x));
                        x
                    };
                }
                next[b] = last_x;
            }
        } else {
            for b in 0..256 {
                let key = &sig[b * words..(b + 1) * words];
                if key.iter().all(|&w| w == 0) {
                    continue;
                }
                // Bytes taken by the same stacks come in runs (a range of a class).
                if b > 0 && key == &sig[(b - 1) * words..b * words] {
                    next[b] = next[b - 1];
                    continue;
                }
                // The signature's hash, with the signature compared (a collision only costs a
                // closure, which is memoized anyway).
                let h = std::hash::BuildHasher::hash_one(&rustc_hash::FxBuildHasher, key);
                if let Some(&(c, x)) = done.get(&h) {
                    if &sig[c as usize * words..(c as usize + 1) * words] == key {
                        next[b] = x;
                        continue;
                    }
                }
                self.seeds.clear();
                for (w, &bits) in key.iter().enumerate() {
                    let mut bits = bits;
                    while bits != 0 {
                        let i = w * 64 + bits.trailing_zeros() as usize;
                        bits &= bits - 1;
                        let (_, next, parent) = takers[i];
                        self.seeds.push((next, parent));
                    }
                }
                let x = self.memo_closure(t);
                done.entry(h).or_insert((b as u16, x));
                next[b] = x;
            }
        }
        self.all_takers = takers;
        self.all_sig = sig;
        self.all_done = done;
        for (slot, x) in t.state(s).trans.iter().zip(next) {
            if slot.load(Ordering::Acquire) == UNKNOWN {
                slot.store(x.0, Ordering::Release);
            }
        }
        // After the transitions (release): a reader that sees the flag sees them all.
        t.state(s).complete.store(true, Ordering::Release);
    }

    /// The state after token `tok` taken whole from `s` (see [`Automaton::step_token`]).
    pub(super) fn step_token(&mut self, t: &Table, s: StateId, tok: TokenId, negated: bool) -> StateId {
        self.seeds.clear();
        for &n in t.state(s).info.stacks.iter() {
            if n == BOTTOM || n == CTX {
                continue;
            }
            let (pos, parent) = self.nodes[n.index()];
            let takes = match self.flat.elems[pos as usize] {
                Symbol::Token(x) => x == tok,
                Symbol::NotToken(x) => negated && x != tok,
                _ => false,
            };
            if takes {
                self.seeds.push((pos + 1, parent));
            }
        }
        self.closure(t)
    }

    /// The state of the stacks of `a` and `b` (see [`Automaton::union`]), within the limits.
    pub(super) fn union(&mut self, t: &Table, a: StateId, b: StateId) -> StateId {
        let (sa, sb) = (&t.state(a).info.stacks, &t.state(b).info.stacks);
        let mut stacks: Vec<StackId> = sa.iter().chain(sb.iter()).copied().collect();
        stacks.sort_unstable();
        stacks.dedup();
        self.normalize(&mut stacks);
        if stacks.len() > self.max_stacks {
            return OVERFLOW;
        }
        self.intern_within_bounds(t, &stacks)
    }

    /// The state of `stacks` (sorted), published if new; [`OVERFLOW`] when that would make
    /// more than `max_states` states.
    fn intern_within_bounds(&mut self, t: &Table, stacks: &[StackId]) -> StateId {
        match self.state_ids.get(stacks) {
            Some(&id) => id,
            None if self.state_ids.len() >= self.max_states => {
                t.states_capped.store(true, Ordering::Relaxed);
                OVERFLOW
            }
            None => self.publish_state(t, stacks),
        }
    }

    pub(super) fn intern_node(&mut self, pos: u32, parent: StackId) -> StackId {
        let next = StackId(self.nodes.len() as u32);
        let id = *self.node_ids.get_or_insert_with((pos, parent), || next);
        if id == next {
            self.nodes.push((pos, parent));
            self.heights.push(self.heights[parent.index()] + 1);
        }
        id
    }

    /// The stack to return to after the rule referenced at `pos` in a frame over `parent`:
    /// the frame at the next position, or `parent` itself when the reference ends its
    /// alternative (a tail call pushes no frame).
    #[inline]
    fn cont(&mut self, pos: u32, parent: StackId) -> StackId {
        if self.flat.elems[pos as usize + 1] == Symbol::End {
            parent
        } else {
            self.intern_node(pos + 1, parent)
        }
    }

    /// [`closure`](Self::closure) through the memo of seed sets.
    pub(super) fn memo_closure(&mut self, t: &Table) -> StateId {
        // Stacks are sorted, so equal seed sets come out in the same order.
        if let Some(&s) = self.closures.get(self.seeds.as_slice()) {
            return s;
        }
        let key: Box<[(u32, StackId)]> = self.seeds.as_slice().into();
        let s = self.closure(t);
        self.closures.insert(key, s);
        s
    }

    /// Expands `self.seeds` (positions to match, with their stacks) into a state: the union
    /// of each seed's own closure. A seed's closure depends on nothing but the seed (its
    /// position and stack), so it is computed once and remembered ([`SeedClosure`]): a state
    /// of many stacks (the branches of an ambiguous `anyOf` alive side by side) is stepped
    /// on many bytes and seeds many sets that share most of their seeds, and each of those
    /// would otherwise walk the same rules and intern the same nodes again.
    pub(super) fn closure(&mut self, t: &Table) -> StateId {
        let mut stacks = std::mem::take(&mut self.union);
        stacks.clear();
        let (mut accepting, mut ctx) = (false, false);
        for i in 0..self.seeds.len() {
            let seed = self.seeds[i];
            // A seed at a terminal (or a dispatch rule) is its own closure: one stack, not
            // remembered (in a state of many stacks stepped on a byte, most seeds are the
            // next byte of a key or a literal, each new).
            let terminal = match self.flat.elems[seed.0 as usize] {
                Symbol::Bytes(_) | Symbol::Token(_) | Symbol::NotToken(_) => true,
                Symbol::Rule(r) => self.flat.dispatch(r).is_some(),
                Symbol::End => false,
            };
            if terminal {
                let n = self.intern_node(seed.0, seed.1);
                stacks.push(n);
                continue;
            }
            if !self.seed_closures.contains_key(&seed) {
                let c = self.reach(seed);
                self.seed_bytes += c.as_ref().map_or(0, |c| c.stacks.len() * 4) + 40;
                self.seed_closures.insert(seed, c);
            }
            let Some(c) = self.seed_closures.get(&seed).expect("inserted just above") else {
                self.union = stacks;
                return OVERFLOW;
            };
            stacks.extend_from_slice(&c.stacks);
            accepting |= c.accepting;
            ctx |= c.ctx;
        }
        if accepting {
            stacks.push(BOTTOM);
        }
        if ctx {
            stacks.push(CTX);
        }
        stacks.sort_unstable();
        stacks.dedup();
        self.normalize(&mut stacks);
        let real = stacks.len() - usize::from(accepting) - usize::from(ctx);
        let id = if real > self.max_stacks { OVERFLOW } else { self.intern_within_bounds(t, &stacks) };
        self.union = stacks;
        id
    }

    /// The closure of one seed: the stacks whose top is a terminal (or a dispatch rule) that
    /// it reaches by expanding rule references and popping ended alternatives, and whether
    /// it reaches the end of the input ([`BOTTOM`]) or the placeholder [`CTX`]. `None` past
    /// the work budget or `max_stacks`.
    fn reach(&mut self, seed: (u32, StackId)) -> Option<SeedClosure> {
        self.visited.clear();
        self.out.clear();
        self.work.clear();
        self.work.push(seed);
        let mut accepting = false;
        let mut ctx = false;
        let budget = self.max_stacks.saturating_mul(8).max(1024);
        // Small closures (the common case) dedupe with a linear scan; big ones use the set.
        self.visited_small.clear();
        while let Some((pos, parent)) = self.work.pop() {
            if self.visited_small.len() < 32 {
                if self.visited_small.contains(&(pos, parent)) {
                    continue;
                }
                self.visited_small.push((pos, parent));
                if self.visited_small.len() == 32 {
                    self.visited.extend(self.visited_small.iter().copied());
                }
            } else {
                if !self.visited.insert((pos, parent)) {
                    continue;
                }
                if self.visited.len() > budget {
                    return None;
                }
            }
            match self.flat.elems[pos as usize] {
                Symbol::End => {
                    if parent == BOTTOM {
                        accepting = true;
                    } else if parent == CTX {
                        ctx = true;
                    } else if self.is_join(parent) {
                        // Pop into every member of the join (see `join`; its members are
                        // read through the field, beside the work list being pushed to).
                        let j = self.nodes[parent.index()].1 .0 as usize;
                        for &m in self.joins[j].iter() {
                            if m == BOTTOM {
                                accepting = true;
                            } else if m == CTX {
                                ctx = true;
                            } else {
                                self.work.push(self.nodes[m.index()]);
                            }
                        }
                    } else {
                        let p = self.nodes[parent.index()];
                        self.work.push(p);
                    }
                }
                // A dispatch rule stays unexpanded, a stack of its own (see `Dispatch`).
                Symbol::Rule(r) if self.flat.dispatch(r).is_some() => {
                    let n = self.intern_node(pos, parent);
                    self.out.push(n);
                }
                Symbol::Rule(r) => {
                    if self.flat.alts[r as usize].is_empty() {
                        // An unordered group's rule or a deferred rule, built on first use.
                        if !self.expand_deferred(r) {
                            self.flat.expand(r);
                        }
                    }
                    let cont = self.cont(pos, parent);
                    for i in 0..self.flat.alts[r as usize].len() {
                        let a = self.flat.alts[r as usize][i];
                        self.work.push((a, cont));
                    }
                }
                Symbol::Bytes(_) | Symbol::Token(_) | Symbol::NotToken(_) => {
                    let n = self.intern_node(pos, parent);
                    self.out.push(n);
                }
            }
        }
        if self.out.len() > self.max_stacks {
            return None;
        }
        Some(SeedClosure { stacks: self.out.as_slice().into(), accepting, ctx })
    }

    /// The id of the state of `stacks`, published in the table if new.
    pub(super) fn intern_state(&mut self, t: &Table, stacks: &[StackId]) -> StateId {
        match self.state_ids.get(stacks) {
            Some(&id) => id,
            None => self.publish_state(t, stacks),
        }
    }

    /// Publishes the state of `stacks`, which is not interned yet (the caller looked).
    fn publish_state(&mut self, t: &Table, stacks: &[StackId]) -> StateId {
        debug_assert!(!self.state_ids.contains_key(stacks));
        let id = StateId(self.state_ids.len() as u32);
        let mut first = ByteSet::default();
        let mut tokens = Vec::new();
        let mut not_tokens = Vec::new();
        let mut accepting = false;
        let mut ctx = false;
        for &n in stacks {
            if n == BOTTOM {
                accepting = true;
                continue;
            }
            if n == CTX {
                ctx = true;
                continue;
            }
            match self.flat.elems[self.nodes[n.index()].0 as usize] {
                Symbol::Bytes(k) => first.union(&self.flat.sets[k as usize]),
                Symbol::Rule(r) => {
                    if let Some(d) = self.flat.dispatch(r) {
                        first.union(&d.first);
                    }
                }
                Symbol::Token(t) if t.0 != u32::MAX && !tokens.contains(&t) => tokens.push(t),
                Symbol::NotToken(t) if !not_tokens.contains(&t) => not_tokens.push(t),
                _ => {}
            }
        }
        let stacks: std::sync::Arc<[StackId]> = stacks.into();
        self.state_bytes += 1024 + stacks.len() * 4 + (tokens.len() + not_tokens.len()) * 4;
        self.state_ids.insert(stacks.clone(), id);
        let info = StateInfo { stacks, accepting, first, tokens: tokens.into_boxed_slice(), not_tokens: not_tokens.into_boxed_slice() };
        let trans = self.new_transitions();
        t.states.set(id.0, State { trans, ctx, complete: AtomicBool::new(false), info });
        // Published: the slot is set before the count says so.
        t.n_states.store(id.0 + 1, Ordering::Release);
        id
    }

    /// A fresh transition table (every byte `UNKNOWN`), from the current chunk.
    fn new_transitions(&mut self) -> TransSlot {
        match &mut self.trans_chunk {
            Some((chunk, used)) if (*used as usize) < chunk.len() => {
                *used += 1;
                TransSlot { chunk: chunk.clone(), i: *used - 1 }
            }
            _ => {
                let chunk: TransChunk =
                    (0..TRANS_CHUNK).map(|_| std::array::from_fn(|_| AtomicU32::new(UNKNOWN))).collect();
                self.trans_chunk = Some((chunk.clone(), 1));
                TransSlot { chunk, i: 0 }
            }
        }
    }

    /// State `s` with its stacks cut below a common height: frames more than `k` below the
    /// tallest stack's top are replaced by [`CTX`]. The cut is one height for all stacks (so
    /// stacks sharing frames are cut alike, and a step that stays above the cut maps the
    /// truncation of `s` to the truncation of the next state); stacks that reach the bottom
    /// above the cut are kept whole, so a state of shallow stacks is its own truncation.
    /// A stack is also cut at its topmost frame inside an unordered group's family rule
    /// (which records the members seen so far): what happens inside one member is the same
    /// whichever members came before, so states that differ only there share a truncation.
    /// A join above the cut is gone through: each of its members is cut the same way, as the
    /// stacks it stands for would be (see `join`).
    pub(super) fn truncate(&mut self, t: &Table, s: StateId, k: usize) -> StateId {
        if let Some(&x) = self.truncs.get(&(s, k as u32)) {
            return x;
        }
        let stacks = &t.state(s).info.stacks;
        let tallest = stacks
            .iter()
            .map(|&n| self.heights[n.index()])
            .max()
            .unwrap_or(0);
        let cut = tallest.saturating_sub(k as u32);
        let mut out: Vec<StackId> = Vec::with_capacity(stacks.len());
        let mut path: Vec<StackId> = Vec::with_capacity(k);
        // Cuts below joins, made only when a stack meets one above the cut.
        let mut memo: Option<FxHashMap<StackId, Vec<StackId>>> = None;
        for &n in stacks.iter() {
            if n == BOTTOM || n == CTX {
                out.push(n);
                continue;
            }
            path.clear();
            let mut x = n;
            // Keep at least each stack's top frame (its next terminal).
            while x != BOTTOM
                && x != CTX
                && (path.is_empty()
                    || (self.heights[x.index()] > cut
                        && !self.is_join(x)
                        && !self.flat.lazy.in_family(self.nodes[x.index()].0)))
            {
                path.push(x);
                x = self.nodes[x.index()].1;
            }
            if x == BOTTOM || x == CTX {
                out.push(n);
                continue;
            }
            let below = if self.is_join(x) && self.heights[x.index()] > cut {
                self.cut_below(x, cut, memo.get_or_insert_with(FxHashMap::default))
            } else {
                vec![CTX]
            };
            for r in below {
                let mut parent = r;
                for &p in path.iter().rev() {
                    let pos = self.nodes[p.index()].0;
                    parent = self.intern_node(pos, parent);
                }
                out.push(parent);
            }
        }
        out.sort_unstable();
        out.dedup();
        self.normalize(&mut out);
        let x = self.intern_state(t, &out);
        self.truncs.insert((s, k as u32), x);
        x
    }

    /// Stack `x` (below a kept frame) cut as [`truncate`](Self::truncate) cuts: itself when
    /// it reaches the bottom above height `cut`, else its frames down to the cut (or to its
    /// topmost frame inside an unordered group's family rule) over [`CTX`]; a join gives its
    /// members' cuts. Memoized in `memo` for one truncation. The frames above the cut are at
    /// most the truncation depth, so the recursion is that deep (plus one per join).
    fn cut_below(&mut self, x: StackId, cut: u32, memo: &mut FxHashMap<StackId, Vec<StackId>>) -> Vec<StackId> {
        if x == BOTTOM || x == CTX {
            return vec![x];
        }
        if let Some(v) = memo.get(&x) {
            return v.clone();
        }
        let r = if self.is_join(x) {
            let mut all = Vec::new();
            let members: Vec<StackId> = self.join_members(x).to_vec();
            for m in members {
                all.extend(self.cut_below(m, cut, memo));
                if all.len() > MAX_CUT_STACKS {
                    break;
                }
            }
            all.sort_unstable();
            all.dedup();
            if all.len() > MAX_CUT_STACKS {
                // Joins over joins within the top frames could stand for more stacks than a
                // state may hold: cut at the join instead (more is left to the full state).
                vec![CTX]
            } else {
                all
            }
        } else if self.heights[x.index()] <= cut || self.flat.lazy.in_family(self.nodes[x.index()].0) {
            vec![CTX]
        } else {
            let (pos, parent) = self.nodes[x.index()];
            let below = self.cut_below(parent, cut, memo);
            below.iter().map(|&r| if r == parent { x } else { self.intern_node(pos, r) }).collect()
        };
        memo.insert(x, r.clone());
        r
    }
}

/// Transposes the 64 × 64 bit matrix whose row `i` is `m[i]` (bit `j` is column `j`): after
/// it, bit `i` of `m[j]` is what bit `j` of `m[i]` was. Swaps ever smaller blocks (32, 16,
/// ..., 1 bits wide) across the diagonal, six passes of 32 word operations.
fn transpose64(m: &mut [u64; 64]) {
    let mut j = 32usize;
    let mut mask: u64 = 0x0000_0000_FFFF_FFFF;
    while j != 0 {
        let mut k = 0usize;
        while k < 64 {
            let t = ((m[k] >> j) ^ m[k + j]) & mask;
            m[k] ^= t << j;
            m[k + j] ^= t;
            k = (k + j + 1) & !j;
        }
        j >>= 1;
        mask ^= mask << j;
    }
}

#[cfg(test)]
mod transpose_tests {
    /// Bit `j` of row `i` moves to bit `i` of row `j`, for every bit, on rows with patterns
    /// of every shape (pseudo-random, single bits, full rows, ranges).
    #[test]
    fn transpose64_moves_each_bit_across_the_diagonal() {
        let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
        let mut cases: Vec<[u64; 64]> = Vec::new();
        for _ in 0..8 {
            let mut m = [0u64; 64];
            for r in m.iter_mut() {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                *r = x;
            }
            cases.push(m);
        }
        cases.push(std::array::from_fn(|i| 1u64 << i));
        cases.push(std::array::from_fn(|i| if i % 3 == 0 { u64::MAX } else { 0 }));
        cases.push(std::array::from_fn(|i| (u64::MAX >> (63 - i)) & !1));
        for m in cases {
            let mut t = m;
            super::transpose64(&mut t);
            for i in 0..64 {
                for j in 0..64 {
                    assert_eq!((t[j] >> i) & 1, (m[i] >> j) & 1, "row {i}, bit {j}");
                }
            }
        }
    }
}
