//! The transforms of the pipeline, each a small function over reusable buffers.
//!
//! In pipeline order (see the crate docs for why this order):
//!
//! 1. [`penalty_overlay`]: the repeat / presence / frequency penalties, computed only for the
//!    distinct tokens of the recent window (at most `repeat_last_n` of them), kept in a small
//!    sorted side table instead of a modified copy of the logits. O(w log w) for a window of w.
//! 2. [`collect_top_k`]: one pass over the logits that applies the mask, substitutes the
//!    penalized values from the overlay and keeps the best `k` in a binary min-heap,
//!    O(n + m log k) where m is the number of heap insertions (small for random-looking logits).
//!    The pass works in 64-token blocks aligned with the [`TokenMask`] words: a block whose
//!    mask word is 0 is skipped without reading its logits, and a block whose (vectorised)
//!    maximum cannot beat the heap's worst entry is skipped after one cheap reduction; in a
//!    block that is not skipped only the tokens reaching the threshold are visited, and a block
//!    with at most 8 allowed tokens visits just those.
//! 3. [`apply_temperature`], 4. [`softmax`], 5. [`top_p`], 6. [`min_p`]: over the few
//!    surviving [`Candidate`]s.
//! 7. [`draw`]: inverse-CDF draw with a uniform number from the seeded RNG.
//!
//! Ordering of candidates: "better" means a higher logit, and among equal logits the lower
//! token id. So greedy ties go to the lowest id, and every sort here is total and deterministic.

use formwork_vocab::{TokenId, TokenMask};

use crate::SampleError;

/// Tokens per block of the top-k pass: one [`TokenMask`] word.
const BLOCK: usize = 64;

/// A block with at most this many allowed tokens skips the block reduction and visits them directly.
const SPARSE_BITS: u32 = 8;

/// A token still in the running, with its (penalized, possibly temperature-scaled) logit.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Candidate {
    /// The token.
    pub id: TokenId,
    /// Its logit at the current stage of the pipeline.
    pub logit: f32,
}

impl Candidate {
    /// `self` ranks strictly before `other`: a higher logit, or an equal one with a lower id.
    #[inline]
    pub fn better_than(&self, other: &Candidate) -> bool {
        self.logit > other.logit || (self.logit == other.logit && self.id < other.id)
    }
}

/// A token of the penalty window with its occurrence count and penalized logit.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Penalized {
    /// The token (allowed by the mask and inside the vocabulary).
    pub id: TokenId,
    /// How often it occurs in the window.
    pub count: u32,
    /// Its logit after [`penalize`].
    pub logit: f32,
}

/// One token's logit after the penalties, llama.cpp/Ollama style: the repeat penalty divides a
/// positive logit and multiplies a non-positive one (so it always pushes the token down when
/// `repeat > 1`); then `count * frequency + presence` is subtracted.
#[inline]
pub fn penalize(logit: f32, count: u32, repeat: f32, presence: f32, frequency: f32) -> f32 {
    let l = if logit > 0.0 { logit / repeat } else { logit * repeat };
    if count == 0 {
        return l;
    }
    l - (count as f32 * frequency + presence)
}

/// Builds the penalty side table for the tokens in `window` (the most recent history tokens).
///
/// `out` is cleared and refilled, sorted by id, one entry per distinct token that is inside the
/// vocabulary (`< logits.len()`) and allowed by `mask`; other tokens are ignored (a disallowed
/// token stays at -inf whatever its penalty). `ids` is scratch space. Errors with
/// [`SampleError::NaN`] if one of those tokens' logit is NaN.
pub fn penalty_overlay(
    logits: &[f32],
    mask: Option<&TokenMask>,
    window: &[TokenId],
    (repeat, presence, frequency): (f32, f32, f32),
    ids: &mut Vec<u32>,
    out: &mut Vec<Penalized>,
) -> Result<(), SampleError> {
    out.clear();
    ids.clear();
    ids.extend(window.iter().map(|t| t.0));
    ids.sort_unstable();
    let mut i = 0;
    while i < ids.len() {
        let id = ids[i];
        let mut j = i + 1;
        while j < ids.len() && ids[j] == id {
            j += 1;
        }
        let count = (j - i) as u32;
        i = j;
        let t = TokenId(id);
        if t.index() >= logits.len() || mask.is_some_and(|m| !m.contains(t)) {
            continue;
        }
        let raw = logits[t.index()];
        if raw.is_nan() {
            return Err(SampleError::NaN { index: t.index() });
        }
        out.push(Penalized { id: t, count, logit: penalize(raw, count, repeat, presence, frequency) });
    }
    Ok(())
}

/// Collects the candidates: every allowed token with a logit above -inf, with the overlay's
/// penalized logits in place of the raw ones, keeping only the best `k` (`k == 0`: all).
///
/// Allowed means: `mask` is `None`, or the token's bit is set (tokens at or past `mask.len()`
/// are not allowed, as [`TokenMask::contains`] says). `overlay` must be sorted by id (as
/// [`penalty_overlay`] makes it); its entries for disallowed tokens are ignored. `out` is
/// cleared and refilled; with `k` in `1..logits.len()` it is sorted best-first, otherwise it is
/// in id order. Errors with [`SampleError::NaN`] at the first
/// allowed token whose logit is NaN (disallowed tokens are never looked at).
pub fn collect_top_k(
    logits: &[f32],
    mask: Option<&TokenMask>,
    overlay: &[Penalized],
    k: usize,
    out: &mut Vec<Candidate>,
) -> Result<(), SampleError> {
    out.clear();
    let limited = k > 0 && k < logits.len();
    let mut heap = MinHeap { v: out, k: if limited { k } else { usize::MAX } };
    let mask_words = mask.map(|m| m.words());
    let mut ov = 0usize;

    for (b, chunk) in logits.chunks(BLOCK).enumerate() {
        let base = b * BLOCK;
        let mut word = match mask_words {
            Some(w) => w.get(b).copied().unwrap_or(0),
            None => !0,
        };
        if chunk.len() < BLOCK {
            word &= (1u64 << chunk.len()) - 1;
        }
        // Overlay tokens of this block (all allowed, sorted by id): their penalized value is
        // used instead of the raw one. A block holding one never takes the skip below.
        while ov < overlay.len() && overlay[ov].id.index() < base {
            ov += 1; // only for a malformed overlay (unsorted or with disallowed ids)
        }
        let ov_start = ov;
        let mut excl = 0u64;
        while ov < overlay.len() && overlay[ov].id.index() < base + BLOCK {
            excl |= 1u64 << (overlay[ov].id.index() - base);
            ov += 1;
        }
        excl &= word; // an overlay entry for a disallowed token is ignored
        if word == 0 {
            continue;
        }
        // Sparse words (a constrained state allowing few tokens) go straight to the bits.
        if excl == 0 && word.count_ones() > SPARSE_BITS {
            let (max, any_nan) = match <&[f32; BLOCK]>::try_from(chunk) {
                Ok(full) => block_max_full(full),
                Err(_) => block_max(chunk),
            };
            if any_nan {
                first_nan(chunk, word, base)?;
            }
            let thr = heap.threshold();
            if max == f32::NEG_INFINITY || max < thr {
                continue;
            }
            if thr > f32::NEG_INFINITY {
                // Only tokens reaching the threshold can enter (it only rises while we offer).
                word &= at_least(chunk, thr);
            }
        }
        let block_overlay = &overlay[ov_start..ov];
        let mut bits = word;
        while bits != 0 {
            let i = bits.trailing_zeros() as usize;
            bits &= bits - 1;
            let x = if excl >> i & 1 == 1 {
                let id = base + i;
                block_overlay.iter().find(|p| p.id.index() == id).map_or(chunk[i], |p| p.logit)
            } else {
                chunk[i]
            };
            if x > f32::NEG_INFINITY {
                heap.offer(Candidate { id: TokenId((base + i) as u32), logit: x });
            } else if x.is_nan() {
                return Err(SampleError::NaN { index: base + i });
            }
        }
    }
    if limited {
        sort_best_first(out);
    }
    Ok(())
}

/// Bit `i` set when `chunk[i] >= thr` (a vectorisable compare-and-pack; NaN gives 0).
#[inline]
fn at_least(chunk: &[f32], thr: f32) -> u64 {
    let mut bits = 0u64;
    for (g, group) in chunk.chunks(8).enumerate() {
        let mut b = 0u64;
        for (j, &x) in group.iter().enumerate() {
            b |= ((x >= thr) as u64) << j;
        }
        bits |= b << (g * 8);
    }
    bits
}

/// The first allowed NaN of a block, as an error (the slow path after `block_max` saw one).
#[cold]
fn first_nan(chunk: &[f32], word: u64, base: usize) -> Result<(), SampleError> {
    let mut bits = word;
    while bits != 0 {
        let i = bits.trailing_zeros() as usize;
        bits &= bits - 1;
        if chunk[i].is_nan() {
            return Err(SampleError::NaN { index: base + i });
        }
    }
    Ok(())
}

/// Sorts candidates best-first (higher logit, then lower id).
pub fn sort_best_first(c: &mut [Candidate]) {
    c.sort_unstable_by(|a, b| b.logit.total_cmp(&a.logit).then(a.id.cmp(&b.id)));
}

/// [`block_max`] for a full block: fixed length, 16 lanes (four independent SIMD max chains),
/// so the loop unrolls completely and is not latency-bound.
#[inline]
fn block_max_full(chunk: &[f32; BLOCK]) -> (f32, bool) {
    const EXP_ALL_ONES: u32 = 0x7f80_0000;
    let mut m = [f32::NEG_INFINITY; 16];
    let mut nan = [0u32; 16];
    for c in chunk.chunks_exact(16) {
        for j in 0..16 {
            let x = c[j];
            m[j] = if x > m[j] { x } else { m[j] };
            nan[j] |= ((x.to_bits() & 0x7fff_ffff) > EXP_ALL_ONES) as u32;
        }
    }
    let mut max = f32::NEG_INFINITY;
    let mut any = 0u32;
    for j in 0..16 {
        max = if m[j] > max { m[j] } else { max };
        any |= nan[j];
    }
    (max, any != 0)
}

/// Maximum of a block (NaNs ignored) and whether it holds a NaN; written so it vectorises
/// (eight independent max lanes, and the NaN test as an integer compare on the bit pattern:
/// `|bits| > bits(+inf)`).
#[inline]
fn block_max(chunk: &[f32]) -> (f32, bool) {
    const EXP_ALL_ONES: u32 = 0x7f80_0000;
    let mut m = [f32::NEG_INFINITY; 8];
    let mut nan = [0u32; 8];
    let mut lanes = chunk.chunks_exact(8);
    for c in &mut lanes {
        let c: &[f32; 8] = c.try_into().expect("chunks_exact(8)");
        for j in 0..8 {
            let x = c[j];
            m[j] = if x > m[j] { x } else { m[j] };
            nan[j] |= ((x.to_bits() & 0x7fff_ffff) > EXP_ALL_ONES) as u32;
        }
    }
    let mut max = f32::NEG_INFINITY;
    let mut any = 0u32;
    for &x in lanes.remainder() {
        max = if x > max { x } else { max };
        any |= ((x.to_bits() & 0x7fff_ffff) > EXP_ALL_ONES) as u32;
    }
    for j in 0..8 {
        max = if m[j] > max { m[j] } else { max };
        any |= nan[j];
    }
    (max, any != 0)
}

/// A bounded min-heap over a caller's buffer: the root is the worst kept candidate.
/// With `k == usize::MAX` it is an unbounded plain list (no heap order kept).
struct MinHeap<'a> {
    v: &'a mut Vec<Candidate>,
    k: usize,
}

impl MinHeap<'_> {
    /// The logit a new candidate must reach to have a chance of entering.
    #[inline]
    fn threshold(&self) -> f32 {
        if self.v.len() < self.k {
            f32::NEG_INFINITY
        } else {
            self.v[0].logit
        }
    }

    #[inline]
    fn offer(&mut self, c: Candidate) {
        if self.k == usize::MAX {
            self.v.push(c);
        } else if self.v.len() < self.k {
            self.v.push(c);
            self.sift_up(self.v.len() - 1);
        } else if c.better_than(&self.v[0]) {
            self.v[0] = c;
            self.sift_down(0);
        }
    }

    fn sift_up(&mut self, mut i: usize) {
        while i > 0 {
            let p = (i - 1) / 2;
            if self.v[p].better_than(&self.v[i]) {
                self.v.swap(p, i);
                i = p;
            } else {
                break;
            }
        }
    }

    fn sift_down(&mut self, mut i: usize) {
        let n = self.v.len();
        loop {
            let l = 2 * i + 1;
            if l >= n {
                break;
            }
            let r = l + 1;
            let worst_child = if r < n && self.v[l].better_than(&self.v[r]) { r } else { l };
            if self.v[i].better_than(&self.v[worst_child]) {
                self.v.swap(i, worst_child);
                i = worst_child;
            } else {
                break;
            }
        }
    }
}

/// Divides every candidate's logit by `temperature` (which must be `> 0`).
pub fn apply_temperature(c: &mut [Candidate], temperature: f32) {
    debug_assert!(temperature > 0.0);
    if temperature == 1.0 {
        return;
    }
    let inv = 1.0 / temperature;
    for x in c {
        x.logit *= inv;
    }
}

/// Numerically stable softmax of the candidates' logits into `probs` (same order, sums to 1).
///
/// Subtracts the maximum before exponentiating (so every exponent is `<= 0` and the largest
/// term is exactly 1), with [`exp_nonpositive`]. If the maximum is `+inf`, the `+inf` tokens
/// share the mass equally. `c` must not be empty.
pub fn softmax(c: &[Candidate], probs: &mut Vec<f32>) {
    probs.clear();
    let mut lanes = [f32::NEG_INFINITY; 8];
    let mut it = c.chunks_exact(8);
    for g in &mut it {
        for j in 0..8 {
            lanes[j] = if g[j].logit > lanes[j] { g[j].logit } else { lanes[j] };
        }
    }
    let max = it.remainder().iter().map(|x| x.logit).chain(lanes).fold(f32::NEG_INFINITY, f32::max);
    probs.resize(c.len(), 0.0);
    if max == f32::INFINITY {
        for (p, x) in probs.iter_mut().zip(c) {
            *p = if x.logit == f32::INFINITY { 1.0 } else { 0.0 };
        }
    } else {
        for (p, x) in probs.iter_mut().zip(c) {
            *p = exp_nonpositive(x.logit - max);
        }
    }
    let inv = (1.0 / sum(probs)) as f32;
    for p in probs.iter_mut() {
        *p *= inv;
    }
}

/// `e^x` for `x <= 0` (the softmax's shifted logits), relative error about 1e-7, branch-free so
/// it vectorises (a libm call per token was a fifth of a full-vocabulary softmax).
///
/// `e^x = 2^n * e^r` with `n = round(x / ln 2)` and `r = x - n ln 2` in `[-0.35, 0.35]`, where
/// `n ln 2` is subtracted in two parts (Cody–Waite: a short `ln 2` whose product with `n` is
/// exact, then the remainder) so `r` keeps full precision; `e^r` by its degree-7 Taylor
/// polynomial (truncation error < 1e-8); `2^n` assembled in the exponent bits. Below `-87`
/// (where `e^x` leaves the normal `f32` range) the result is 0; NaN gives NaN.
#[inline]
pub fn exp_nonpositive(x: f32) -> f32 {
    const LOG2E: f32 = std::f32::consts::LOG2_E;
    const LN2_HI: f32 = 355.0 / 512.0; // 0.693359375: n * LN2_HI is exact for |n| < 2^15
    const LN2_LO: f32 = -2.121_944_4e-4; // ln 2 - LN2_HI
    const ROUND: f32 = 12_582_912.0; // 1.5 * 2^23: adding and subtracting rounds to an integer
    const C: [f32; 7] = [1.0 / 2.0, 1.0 / 6.0, 1.0 / 24.0, 1.0 / 120.0, 1.0 / 720.0, 1.0 / 5040.0, 1.0 / 40320.0];
    let xc = x.max(-87.5);
    let n = (xc * LOG2E + ROUND) - ROUND;
    let r = (xc - n * LN2_HI) - n * LN2_LO;
    let p = 1.0 + r * (1.0 + r * (C[0] + r * (C[1] + r * (C[2] + r * (C[3] + r * (C[4] + r * (C[5] + r * C[6])))))));
    let scale = f32::from_bits(((n as i32 + 127) as u32) << 23);
    let y = p * scale;
    if x < -87.0 {
        0.0
    } else if x.is_nan() {
        x
    } else {
        y
    }
}

/// Sum in `f64` over eight independent lanes (vectorises; no serial add chain).
pub fn sum(x: &[f32]) -> f64 {
    let mut lanes = [0.0f64; 8];
    let mut it = x.chunks_exact(8);
    for c in &mut it {
        for j in 0..8 {
            lanes[j] += c[j] as f64;
        }
    }
    let tail: f64 = it.remainder().iter().map(|&v| v as f64).sum();
    lanes.iter().sum::<f64>() + tail
}

/// Nucleus cut over probabilities sorted best-first: the length of the shortest prefix whose
/// cumulative probability exceeds `p` (all of them if none does, or if `p >= 1`). Never 0 for a
/// non-empty input.
pub fn top_p(probs: &[f32], p: f32) -> usize {
    if p >= 1.0 {
        return probs.len();
    }
    let mut sum = 0.0f64;
    for (i, &q) in probs.iter().enumerate() {
        sum += q as f64;
        if sum > p as f64 {
            return i + 1;
        }
    }
    probs.len()
}

/// Min-p filter: keeps, in place and in order, the candidates whose probability is at least
/// `min_p` times the largest probability. `c` and `probs` are parallel and stay so; the most
/// likely token always survives for `min_p <= 1`. `min_p <= 0` keeps everything.
pub fn min_p(c: &mut Vec<Candidate>, probs: &mut Vec<f32>, min_p: f32) {
    if min_p <= 0.0 {
        return;
    }
    let max = probs.iter().fold(0.0f32, |m, &p| if p > m { p } else { m });
    let cut = max * min_p;
    let mut w = 0;
    for r in 0..probs.len() {
        if probs[r] >= cut {
            c[w] = c[r];
            probs[w] = probs[r];
            w += 1;
        }
    }
    c.truncate(w);
    probs.truncate(w);
}

/// Inverse-CDF draw: the index `i` such that the cumulative weight up to `i` first exceeds
/// `u * total`, for `u` uniform in `[0, 1)`. Weights need not be normalised; zero-weight entries
/// are never chosen. `weights` must hold at least one positive entry.
pub fn draw(weights: &[f32], u: f64) -> usize {
    let target = u * sum(weights);
    let mut cum = 0.0f64;
    let mut last_positive = 0;
    for (i, &w) in weights.iter().enumerate() {
        if w > 0.0 {
            cum += w as f64;
            last_positive = i;
            if cum > target {
                return i;
            }
        }
    }
    last_positive
}

#[cfg(test)]
mod tests;
