//! The batcher on the scripted batch model: concurrent sequences give what each gives
//! alone, prompts are chunked without stalling generation, failures stay with their
//! sequence, slots are routed by prefix and freed on drop.

use formwork_engine::batch::{Batcher, BatcherOptions};
use formwork_engine::testing::{ScriptedBatchModel, ScriptedModel};
use formwork_engine::{generate, GenerateOptions, Generation, GrammarConstraint, Model, Prompt, SamplerOptions};
use formwork_grammar::matcher::CompiledGrammar;
use formwork_grammar::{Expr, GrammarBuilder, Limits};
use std::ops::ControlFlow;
use std::sync::Arc;
use std::time::{Duration, Instant};

const WORDS: &[&str] = &["Hi", "Hel", "lo", " wor", "ld", "!", " ", "a", "b", "c", "{", "}", "\"", ":", "1", "x"];

fn greedy() -> GenerateOptions {
    GenerateOptions { sampler: SamplerOptions::greedy(), ..Default::default() }
}

fn run(model: &mut dyn Model, prompt: &str, opts: &GenerateOptions) -> Generation {
    generate(model, &Prompt::Raw(prompt.into()), opts, None, &mut |_| ControlFlow::Continue(())).unwrap()
}

#[test]
fn concurrent_sequences_give_what_each_gives_alone() {
    let mut alone = ScriptedModel::new(WORDS, &["</s>"]);
    alone.script_text("Hello world!");
    let expected = run(&mut alone, "Hi", &greedy());

    let mut m = ScriptedBatchModel::new(WORDS, &["</s>"], 8).with_step_delay(Duration::from_millis(1));
    m.script_text("Hello world!");
    let batcher = Batcher::new(Box::new(m), BatcherOptions::default());
    let handles: Vec<_> = (0..8)
        .map(|i| {
            let b = batcher.clone();
            std::thread::spawn(move || {
                let prompt = if i % 2 == 0 { "Hi" } else { "Hi a b" };
                let mut seq = b.acquire(&[]);
                run(&mut seq, prompt, &greedy())
            })
        })
        .collect();
    for h in handles {
        let g = h.join().unwrap();
        assert_eq!(g.text, expected.text);
        assert_eq!(g.tokens, expected.tokens);
    }
    let stats = batcher.stats();
    assert!(stats.max_batch_sequences >= 4, "sequences were not batched together: {stats:?}");
    assert!(stats.steps < 8 * 5, "{stats:?}");
    assert_eq!(stats.in_use, 0);
}

#[test]
fn constrained_sequences_share_one_compiled_grammar() {
    let mut b = GrammarBuilder::new();
    b.define("root", Expr::seq([Expr::lit("{\"x\":"), Expr::repeat(Expr::lit("1"), 1, Some(3)), Expr::lit("}")]));
    let g = b.build("root").unwrap();
    let mut m = ScriptedBatchModel::new(WORDS, &["</s>"], 4);
    // The script wants free text; the grammar steers every sequence to the same document.
    m.script_text("Hello!");
    let compiled = Arc::new(CompiledGrammar::new(&g, m_vocab(&m), &Limits::default()).unwrap());
    let batcher = Batcher::new(Box::new(m), BatcherOptions::default());
    let handles: Vec<_> = (0..4)
        .map(|_| {
            let b = batcher.clone();
            let compiled = compiled.clone();
            std::thread::spawn(move || {
                let mut seq = b.acquire(&[]);
                let mut c = GrammarConstraint::new(&compiled);
                generate(&mut seq, &Prompt::Raw("Hi".into()), &greedy(), Some(&mut c), &mut |_| ControlFlow::Continue(())).unwrap()
            })
        })
        .collect();
    for h in handles {
        let g = h.join().unwrap();
        assert!(g.text.starts_with("{\"x\":1") && g.text.ends_with('}'), "{}", g.text);
    }
}

fn m_vocab(m: &ScriptedBatchModel) -> Arc<formwork_vocab::Vocabulary> {
    formwork_engine::batch::BatchModel::vocab(m).clone()
}

#[test]
fn a_long_prompt_is_chunked_and_does_not_stall_generating_sequences() {
    // 4 tokens per step: a 120-token prompt takes 30+ steps.
    let mut m = ScriptedBatchModel::new(WORDS, &["</s>"], 2).with_max_batch_tokens(4).with_step_delay(Duration::from_millis(2));
    m.script_text("a b c a b c!");
    let batcher = Batcher::new(Box::new(m), BatcherOptions::default());
    let started = Instant::now();
    let b = batcher.clone();
    let short = std::thread::spawn(move || {
        let mut seq = b.acquire(&[]);
        let g = run(&mut seq, "Hi", &greedy());
        (g, started.elapsed())
    });
    std::thread::sleep(Duration::from_millis(5));
    let b = batcher.clone();
    let long = std::thread::spawn(move || {
        let mut seq = b.acquire(&[]);
        let prompt = "a ".repeat(60);
        let g = run(&mut seq, &prompt, &greedy());
        (g, started.elapsed())
    });
    let (gs, t_short) = short.join().unwrap();
    let (gl, t_long) = long.join().unwrap();
    assert_eq!(gs.text, "a b c a b c!");
    assert_eq!(gl.text, "a b c a b c!");
    assert_eq!(gl.prompt_tokens, 120);
    // The short sequence finished while the long prompt was still being evaluated.
    assert!(t_short < t_long, "short {t_short:?}, long {t_long:?}");
    assert!(gl.prompt_eval_duration > t_short.saturating_sub(Duration::from_millis(5)), "{:?}", gl.prompt_eval_duration);
}

#[test]
fn a_failing_sequence_does_not_fail_the_others() {
    let m = ScriptedBatchModel::new(WORDS, &["</s>"], 4).with_step_delay(Duration::from_millis(2));
    let bad = m.token("x");
    let mut m = m.with_failing_token(bad);
    m.script_text("Hello!");
    let batcher = Batcher::new(Box::new(m), BatcherOptions::default());
    let handles: Vec<_> = (0..4)
        .map(|i| {
            let b = batcher.clone();
            std::thread::spawn(move || {
                let mut seq = b.acquire(&[]);
                let prompt = if i == 0 { "Hi x" } else { "Hi" };
                generate(&mut seq, &Prompt::Raw(prompt.into()), &greedy(), None, &mut |_| ControlFlow::Continue(()))
            })
        })
        .collect();
    let results: Vec<_> = handles.into_iter().map(|h| h.join().unwrap()).collect();
    assert!(results[0].is_err(), "the sequence with the failing token must fail");
    assert!(results[0].as_ref().unwrap_err().to_string().contains("scripted failure"), "{:?}", results[0].as_ref().err());
    for r in &results[1..] {
        assert_eq!(r.as_ref().unwrap().text, "Hello!");
    }
}

#[test]
fn slots_are_routed_by_prefix_and_freed_on_drop() {
    let mut m = ScriptedBatchModel::new(WORDS, &["</s>"], 2);
    m.script_text("Hello!");
    let batcher = Batcher::new(Box::new(m), BatcherOptions::default());
    let prompt = Prompt::Raw("Hi a b c a b c".into());
    let tokens = batcher.prompt_tokens(&prompt).unwrap();
    let first_slot = {
        let mut seq = batcher.acquire(&tokens);
        run(&mut seq, "Hi a b c a b c", &greedy());
        seq.id()
    };
    // Another prompt takes the other (empty) slot, not the one holding our prefix.
    let other = batcher.prompt_tokens(&Prompt::Raw("a b".into())).unwrap();
    let s2 = batcher.acquire(&other);
    assert_ne!(s2.id(), first_slot);
    drop(s2);
    let mut seq = batcher.acquire(&tokens);
    assert_eq!(seq.id(), first_slot);
    let g = run(&mut seq, "Hi a b c a b c", &greedy());
    assert_eq!(g.cached_prompt_tokens, tokens.len() - 1);
    assert_eq!(g.text, "Hello!");

    let _s3 = batcher.try_acquire(&[]).expect("one slot free");
    assert!(batcher.try_acquire(&[]).is_none(), "both slots are in use");
    drop(seq);
    assert!(batcher.try_acquire(&[]).is_some(), "a dropped sequence frees its slot");
}

#[test]
fn a_shared_prefix_is_copied_to_a_free_slot_and_other_slots_keep_their_caches() {
    let mut m = ScriptedBatchModel::new(WORDS, &["</s>"], 3).with_seq_copy();
    m.script_text("Hello!");
    let batcher = Batcher::new(Box::new(m), BatcherOptions::default());
    // A long shared head (a system prompt), then different questions, the first one long
    // enough that its slot is worth keeping.
    let head = "Hi a b c a b c a b c a b c a b c a b c a b c a b c ";
    let (p1, p2) = (format!("{head}{}", "x 1 ".repeat(12)), format!("{head}1 1"));
    let t1 = batcher.prompt_tokens(&Prompt::Raw(p1.clone())).unwrap();
    let t2 = batcher.prompt_tokens(&Prompt::Raw(p2.clone())).unwrap();
    let shared = t1.iter().zip(&t2).take_while(|(a, b)| a == b).count();
    assert!(shared >= 20, "the test needs a long shared head ({shared} tokens)");
    let first = {
        let mut seq = batcher.acquire(&t1);
        assert_eq!(run(&mut seq, &p1, &greedy()).text, "Hello!");
        seq.id()
    };
    let before = batcher.stats();
    // The second prompt goes to an empty slot and starts from a copy of the head, so the
    // first slot keeps its whole conversation.
    let second = {
        let mut seq = batcher.acquire(&t2);
        assert_ne!(seq.id(), first, "the slot holding another conversation is spared");
        let g = run(&mut seq, &p2, &greedy());
        assert_eq!(g.text, "Hello!", "a copied prefix generates as an evaluated one");
        assert_eq!(g.cached_prompt_tokens, shared);
        seq.id()
    };
    let after = batcher.stats();
    assert_eq!(after.prefix_copies - before.prefix_copies, 1);
    let generated = "Hello!".len() as u64; // one token per byte here ("Hel", "lo" aside: at most this)
    assert!(after.tokens - before.tokens <= (t2.len() - shared) as u64 + generated, "the head was not evaluated again");
    // Both conversations are still cached: each prompt comes back to its own slot whole.
    let mut seq = batcher.acquire(&t1);
    assert_eq!(seq.id(), first);
    assert_eq!(run(&mut seq, &p1, &greedy()).cached_prompt_tokens, t1.len() - 1);
    drop(seq);
    let mut seq = batcher.acquire(&t2);
    assert_eq!(seq.id(), second);
    assert_eq!(run(&mut seq, &p2, &greedy()).cached_prompt_tokens, t2.len() - 1);
}

#[test]
fn with_equal_micro_batches_forced_tokens_go_one_per_step_next_to_other_sequences() {
    let log = Arc::new(std::sync::Mutex::new(Vec::new()));
    let mut m = ScriptedBatchModel::new(WORDS, &["</s>"], 2)
        .with_equal_micro_batches()
        .with_step_log(log.clone())
        .with_step_delay(Duration::from_millis(2));
    m.script_text("Hello world! Hello world! Hello world!");
    let (a, b) = (m.token("a"), m.token("b"));
    let batcher = Batcher::new(Box::new(m), BatcherOptions::default());
    let b2 = batcher.clone();
    // One sequence generates; the other evaluates a prompt, then several tokens at once
    // (what forced text does), then generates.
    let long = std::thread::spawn(move || {
        let mut seq = b2.acquire(&[]);
        run(&mut seq, "Hi", &GenerateOptions { num_predict: Some(30), ..greedy() })
    });
    let mut seq = batcher.acquire(&[]);
    let prompt: Vec<_> = batcher.prompt_tokens(&Prompt::Raw("a b c a b c a b c".into())).unwrap();
    seq.decode(&prompt).unwrap();
    seq.decode(&[a, b, a, b, a]).unwrap();
    let after = seq.decode(&[b]).unwrap().len();
    assert!(after > 0);
    assert!(long.join().unwrap().eval_tokens > 10);
    let steps = log.lock().unwrap().clone();
    // The prompt went in one piece; the forced tokens one per step while the other
    // sequence was in the step; no step mixed a several-token generating entry with others.
    assert!(steps.iter().any(|s| s.contains(&prompt.len())), "{steps:?}");
    assert!(steps.iter().filter(|s| s.len() == 2).count() >= 5, "the sequences shared steps: {steps:?}");
    assert!(steps.iter().all(|s| s.len() == 1 || s.iter().all(|&n| n == 1 || n == prompt.len())), "{steps:?}");
}

#[test]
fn a_slow_session_holds_the_others_up_for_at_most_max_wait() {
    let mut m = ScriptedBatchModel::new(WORDS, &["</s>"], 2);
    m.script_text("a b c a b c a b c!");
    let batcher = Batcher::new(Box::new(m), BatcherOptions { max_wait: Duration::from_millis(2), ..Default::default() });
    // A session that took a slot, evaluated its prompt and then went quiet for a long time.
    let mut idle = batcher.acquire(&[]);
    idle.decode(&idle.tokenize("Hi", false, false).unwrap()).unwrap();
    let started = Instant::now();
    let mut seq = batcher.acquire(&[]);
    let g = run(&mut seq, "Hi", &greedy());
    assert_eq!(g.text, "a b c a b c a b c!");
    assert!(started.elapsed() < Duration::from_millis(500), "{:?}", started.elapsed());
    drop(idle);
}

/// With a model that evaluates only runs of consecutive sequence ids, a sequence left above
/// a freed slot moves down into it, takes its state along (here: its own script), and
/// every later step runs on consecutive ids.
#[test]
fn sequences_move_down_to_close_gaps_and_keep_their_state() {
    let seq_log = Arc::new(std::sync::Mutex::new(Vec::new()));
    let mut m = ScriptedBatchModel::new(WORDS, &["</s>"], 4).with_contiguous_seqs().with_seq_log(seq_log.clone());
    let texts = ["Hello!", "abc", "Hi world!", "x1x1"];
    for (i, t) in texts.iter().enumerate() {
        let toks = batcher_tokens(&m, t);
        m.set_seq_script(i, toks.into_iter().map(|t| vec![t]).collect());
    }
    let batcher = Batcher::new(Box::new(m), BatcherOptions::default());
    let mut seqs: Vec<_> = (0..4).map(|_| Some(batcher.acquire(&[]))).collect();
    let ids: Vec<u32> = seqs.iter().map(|s| s.as_ref().unwrap().id().0).collect();
    assert_eq!(ids, [0, 1, 2, 3]);
    // Slots 0 and 2 finish; 1 and 3 are still held.
    for i in [0, 2] {
        let mut s = seqs[i].take().unwrap();
        assert_eq!(run(&mut s, "Hi", &greedy()).text, texts[i]);
    }
    seq_log.lock().unwrap().clear();
    // Slot 3's sequence moves to slot 0 at its first step and generates its own script.
    let threads: Vec<_> = [1usize, 3]
        .into_iter()
        .map(|i| {
            let mut s = seqs[i].take().unwrap();
            std::thread::spawn(move || {
                let text = run(&mut s, "Hi", &greedy()).text;
                (i, text, s.id().0)
            })
        })
        .collect();
    for t in threads {
        let (i, text, now) = t.join().unwrap();
        assert_eq!(text, texts[i], "sequence {i} lost its state when it moved");
        assert!(now <= 1, "sequence {i} is on slot {now}, above a free slot");
    }
    let stats = batcher.stats();
    assert!(stats.moves >= 1, "{stats:?}");
    for step in seq_log.lock().unwrap().iter() {
        let mut ids = step.clone();
        ids.sort_unstable();
        assert!(ids.windows(2).all(|w| w[1] == w[0] + 1) && ids.iter().all(|&i| i <= 1), "a step over ids with gaps: {step:?}");
    }
    assert_eq!(stats.in_use, 0);
}

/// A sequence of more than 2,048 positions is not moved (a swap copies its positions), and
/// no shorter sequence below it moves down into a gap instead: with the slots `free, short,
/// long`, moving the short one to slot 0 would split the slots in use into two runs.
#[test]
fn a_long_sequence_stays_and_nothing_moves_around_it() {
    let seq_log = Arc::new(std::sync::Mutex::new(Vec::new()));
    let m = ScriptedBatchModel::new(WORDS, &["</s>"], 3).with_contiguous_seqs().with_seq_log(seq_log.clone());
    let batcher = Batcher::new(Box::new(m), BatcherOptions::default());
    let mut seqs: Vec<_> = (0..3).map(|_| batcher.acquire(&[])).collect();
    let ids: Vec<u32> = seqs.iter().map(|s| s.id().0).collect();
    assert_eq!(ids, [0, 1, 2]);
    let a = seqs[0].tokenize("a", false, false).unwrap()[0];
    // Slot 2 holds 2,100 positions (over the 2,048 a move may copy), slot 1 a few.
    seqs[2].decode(&vec![a; 2100]).unwrap();
    seqs[1].decode(&[a, a, a]).unwrap();
    // Slot 0 finishes and frees its slot.
    let first = seqs.remove(0);
    drop(first);
    seq_log.lock().unwrap().clear();
    for _ in 0..3 {
        for s in &mut seqs {
            s.decode(&[a]).unwrap();
        }
    }
    let stats = batcher.stats();
    assert_eq!(stats.moves, 0, "{stats:?}");
    assert_eq!((seqs[0].id().0, seqs[1].id().0), (1, 2), "the sequences stay on consecutive slots 1 and 2");
    assert!(seq_log.lock().unwrap().iter().all(|step| step.iter().all(|&i| i >= 1)), "{:?}", seq_log.lock().unwrap());
    drop(seqs);
    // Once the long sequence is gone, a short one above a gap moves down again.
    let mut seqs: Vec<_> = (0..3).map(|_| batcher.acquire(&[])).collect();
    seqs[2].truncate(0).unwrap();
    seqs[2].decode(&[a]).unwrap();
    let (low, mid) = (seqs.remove(0), seqs.remove(0));
    drop((low, mid));
    seqs[0].decode(&[a]).unwrap();
    assert_eq!(seqs[0].id().0, 0, "{:?}", batcher.stats());
    assert!(batcher.stats().moves >= 1);
}

fn batcher_tokens(m: &ScriptedBatchModel, text: &str) -> Vec<formwork_vocab::TokenId> {
    use formwork_engine::batch::BatchModel;
    m.tokenizer().tokenize(text, false, true).unwrap()
}
