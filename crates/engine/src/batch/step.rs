//! The step thread: it waits for the sequences of the last step (or `max_wait`), plans the
//! next batch (generating sequences first, prompt chunks after, within the token budget),
//! evaluates it (entry by entry again when the model refuses the batch, so only the entry
//! at fault fails), and wakes each sequence with its logits.

use super::*;

/// Sequences with at most this many tokens left are "generating" and go first in a step.
const GENERATING_TOKENS: usize = 16;

/// The step thread: waits for a step to be due, runs it, hands out the logits.
pub(super) fn step_loop(mut model: Box<dyn BatchModel>, shared: Arc<BatcherInner>) {
    let equal_micro_batches = model.equal_micro_batches();
    let max_tokens = model.max_batch_tokens().max(1);
    let n_vocab = shared.vocab.len();
    loop {
        // 1. Wait until a step is due, and take the requests it serves.
        let mut batch: Vec<Request> = {
            let mut st = shared.lock();
            loop {
                if st.shutdown && st.stats.in_use == 0 {
                    return;
                }
                if !st.pending.is_empty() {
                    let waiting_on = st.awaited.iter().filter(|s| !st.pending.iter().any(|r| r.seq == **s)).count();
                    let waited = st.last_step_end.elapsed();
                    if waiting_on == 0 || waited >= shared.max_wait {
                        break;
                    }
                    let left = shared.max_wait - waited;
                    st = shared.work.wait_timeout(st, left).unwrap_or_else(|e| e.into_inner()).0;
                    continue;
                }
                st = shared.work.wait(st).unwrap_or_else(|e| e.into_inner());
            }
            if st.compact {
                compact(&mut st, model.as_mut());
            }
            // Generating sequences first, then prompts in arrival order.
            let mut pending = std::mem::take(&mut st.pending);
            pending.sort_by_key(|r| r.tokens.len() - r.done > GENERATING_TOKENS);
            for r in &mut pending {
                r.slot = st.slot_of(r.seq).map_or(r.seq, |i| SeqId(i as u32));
                if r.done == 0 {
                    r.copy_from = st.slots[r.slot.index()].copy_from.take().map(|i| SeqId(i as u32));
                }
            }
            pending
        };

        // 2. Pending truncations, then the plan: how many tokens of each request this step.
        let mut plan: Vec<(usize, usize)> = Vec::with_capacity(batch.len()); // (request, tokens)
        let mut room = max_tokens;
        let mut overflow: Vec<(usize, usize)> = Vec::new(); // (request, kept): past the slot's context
        // Models that evaluate equal micro-batches (see `BatchModel::equal_micro_batches`):
        // next to other sequences, a generating sequence with several tokens (forced text)
        // gives one per step instead of costing a micro-batch of its own (measured with
        // llama.cpp, 16 clients with a schema: 130 -> 140 tokens/s).
        let one_each = batch.len() > 1 && equal_micro_batches;
        for (i, r) in batch.iter_mut().enumerate() {
            if r.done == 0 {
                if let (Some(src), Some(prefix)) = (r.copy_from.take(), r.prefix.as_ref()) {
                    // The source still holds the prefix (it may have been truncated since
                    // routing): copy it, and keep the prefix. Otherwise start empty and
                    // evaluate the prefix again.
                    let holds = shared.lock().slots[src.index()].cached.get(..r.keep) == Some(&prefix[..]);
                    if holds && model.seq_copy(src, r.slot) {
                        shared.lock().slots[r.slot.index()].cached = prefix.clone();
                    } else {
                        model.seq_keep(r.slot, 0);
                        shared.lock().slots[r.slot.index()].cached.clear();
                        let mut all = r.prefix.take().unwrap_or_default();
                        all.extend_from_slice(&r.tokens);
                        r.tokens = all;
                        r.keep = 0;
                    }
                }
                if let Some(prefix) = r.prefix.take() {
                    if !model.seq_keep(r.slot, r.keep) {
                        model.seq_keep(r.slot, 0);
                        // Cannot drop a suffix: evaluate the kept prefix again.
                        let mut all = prefix;
                        all.extend_from_slice(&r.tokens);
                        r.tokens = all;
                        r.keep = 0;
                    }
                }
                // The slot's record of its cache, before anything new is added.
                let mut st = shared.lock();
                st.slots[r.slot.index()].cached.truncate(r.keep);
                drop(st);
                if r.keep + r.tokens.len() > shared.info.context_length {
                    overflow.push((i, r.keep));
                    continue;
                }
            }
            if room == 0 {
                continue;
            }
            let left = r.tokens.len() - r.done;
            let take = if one_each && !r.prompt { 1 } else { left.min(room) };
            room -= take;
            plan.push((i, take));
        }

        // 3. Evaluate (the logits go straight into each request's buffer).
        let t0 = Instant::now();
        let outcome = evaluate(model.as_mut(), &mut batch, &plan, n_vocab);
        let n_entries = plan.len();
        let n_tokens: usize = plan.iter().map(|&(_, take)| take).sum();
        if tracing::enabled!(tracing::Level::TRACE) {
            // Runs of consecutive slot ids: what a `contiguous_seqs` model evaluates one by one.
            let mut ids: Vec<u32> = plan.iter().map(|&(i, _)| batch[i].slot.0).collect();
            ids.sort_unstable();
            let runs = ids.windows(2).filter(|w| w[1] != w[0] + 1).count() + usize::from(!ids.is_empty());
            tracing::trace!(entries = n_entries, tokens = n_tokens, runs, ms = t0.elapsed().as_secs_f64() * 1e3, "batch step");
        }

        // 4. Hand out results; unfinished prompts go back to the queue.
        let mut st = shared.lock();
        st.stats.steps += u64::from(n_entries > 0);
        st.stats.max_batch_sequences = st.stats.max_batch_sequences.max(n_entries);
        st.awaited.clear();
        let mut finished: Vec<(Arc<Reply>, Result<Vec<f32>, (ModelError, usize)>)> = Vec::new();
        let mut served = vec![false; batch.len()];
        for (k, &(i, take)) in plan.iter().enumerate() {
            served[i] = true;
            let r = &mut batch[i];
            let wants_logits = r.done + take == r.tokens.len();
            match &outcome[k] {
                Ok(()) => {
                    let slot = &mut st.slots[r.slot.index()];
                    slot.cached.extend_from_slice(&r.tokens[r.done..r.done + take]);
                    r.done += take;
                    st.stats.tokens += take as u64;
                    if wants_logits {
                        st.stats.logits += 1;
                    }
                }
                Err(e) => {
                    let msg = match e {
                        ModelError::ContextOverflow { needed, context } => ModelError::ContextOverflow { needed: *needed, context: *context },
                        other => ModelError::Decode(other.to_string().trim_start_matches("model evaluation failed: ").to_string()),
                    };
                    let kept = r.keep + r.done;
                    let kept = if model.seq_keep(r.slot, kept) {
                        kept
                    } else {
                        model.seq_keep(r.slot, 0);
                        0
                    };
                    st.slots[r.slot.index()].cached.truncate(kept);
                    r.done = usize::MAX; // finished (with an error)
                    finished.push((r.reply.clone(), Err((msg, kept))));
                }
            }
        }
        for (i, kept) in overflow {
            let r = &mut batch[i];
            served[i] = true;
            let needed = r.keep + r.tokens.len();
            r.done = usize::MAX;
            finished.push((r.reply.clone(), Err((ModelError::ContextOverflow { needed, context: shared.info.context_length }, kept))));
        }
        for (i, r) in batch.into_iter().enumerate() {
            if r.done == usize::MAX {
                continue;
            }
            if served[i] && r.done == r.tokens.len() {
                st.awaited.push(r.seq);
                finished.push((r.reply, Ok(r.logits)));
            } else {
                // Not finished (chunked prefill, or no room this step): stays queued, in order.
                st.pending.push(r);
            }
        }
        st.last_step_end = Instant::now();
        drop(st);
        for (reply, result) in finished {
            *reply.slot.lock().unwrap_or_else(|e| e.into_inner()) = Some(result);
            reply.ready.notify_one();
        }
    }
}

/// A free slot's cache longer than this many tokens beyond the moved sequence's is dropped
/// rather than swapped (a swap copies both caches' positions), unless a request is about
/// to copy from it.
const SWAP_KEEPS: usize = 256;

/// A sequence holding more positions than this is not moved: a swap copies them (23 KB a
/// position for SmolLM2-135M, 128 KB for an 8B Llama), which must stay a small part of a step.
const MOVE_MAX: usize = 2048;

/// Moves the sequence on the highest slot in use into the lowest free slot while one is
/// below it (see "Sequences on consecutive ids" in the module docs): the two slots' caches
/// change places, so a free slot's cache survives the move, one slot higher. It stops at a
/// highest sequence of over [`MOVE_MAX`] positions: moving a lower one instead would split
/// the slots in use into more runs, not fewer.
fn compact(st: &mut State, model: &mut dyn BatchModel) {
    loop {
        let Some(free) = st.slots.iter().position(|s| s.handle.is_none()) else { return };
        let Some(used) = (free + 1..st.slots.len()).rev().find(|&i| st.slots[i].handle.is_some()) else { return };
        if st.slots[used].cached.len() > MOVE_MAX {
            return;
        }
        let (f, u) = (SeqId(free as u32), SeqId(used as u32));
        let copy_source = st.slots.iter().any(|s| s.copy_from == Some(free));
        if !copy_source && st.slots[free].cached.len() > st.slots[used].cached.len() + SWAP_KEEPS {
            model.seq_keep(f, 0);
            st.slots[free].cached.clear();
        }
        if !model.seq_swap(f, u) {
            tracing::warn!(free, used, "the model could not swap two sequences' caches; sequences stay where they are");
            st.compact = false;
            return;
        }
        st.slots.swap(free, used);
        for s in &mut st.slots {
            if s.copy_from == Some(free) {
                s.copy_from = Some(used);
            } else if s.copy_from == Some(used) {
                s.copy_from = Some(free);
            }
        }
        st.stats.moves += 1;
        tracing::trace!(from = used, to = free, "sequence moved");
    }
}

/// Evaluates the planned `(request, tokens)` items in one batch and copies out their logits.
/// When the model refuses the batch, every sequence is rolled back and the items are
/// evaluated one by one, so only the one at fault fails.
pub(super) fn evaluate(model: &mut dyn BatchModel, batch: &mut [Request], plan: &[(usize, usize)], n_vocab: usize) -> Vec<Result<(), ModelError>> {
    fn run(model: &mut dyn BatchModel, batch: &mut [Request], items: &[(usize, usize)], n_vocab: usize) -> Result<(), ModelError> {
        let entries: Vec<BatchEntry<'_>> = items
            .iter()
            .map(|&(i, take)| {
                let r = &batch[i];
                BatchEntry { seq: r.slot, pos: r.keep + r.done, tokens: &r.tokens[r.done..r.done + take], logits: r.done + take == r.tokens.len() }
            })
            .collect();
        model.decode_batch(&entries)?;
        drop(entries);
        let mut k = 0;
        for &(i, take) in items {
            let r = &mut batch[i];
            if r.done + take == r.tokens.len() {
                let l = model.logits(k);
                r.logits.clear();
                r.logits.extend_from_slice(&l[..n_vocab.min(l.len())]);
                k += 1;
            }
        }
        Ok(())
    }
    if plan.is_empty() {
        return Vec::new();
    }
    match run(model, batch, plan, n_vocab) {
        Ok(()) => plan.iter().map(|_| Ok(())).collect(),
        Err(e) if plan.len() == 1 => vec![Err(e)],
        Err(e) => {
            tracing::warn!("a batch of {} sequences failed ({e}); evaluating them one by one", plan.len());
            for &(i, _) in plan {
                let r = &batch[i];
                model.seq_keep(r.slot, r.keep + r.done);
            }
            plan.iter().map(|item| run(model, batch, std::slice::from_ref(item), n_vocab)).collect()
        }
    }
}
