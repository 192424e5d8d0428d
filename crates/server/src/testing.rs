//! Scripted fakes for tests: a [`Backend`] whose answers a closure decides, so the HTTP layer
//! (wire formats, errors, streaming, queueing, cancellation, panics) is tested without a
//! model. The real generation loop is tested in `formwork-engine`.

use crate::backend::{Backend, BackendError, DoneReason, Job, ModelMeta, Outcome, Piece, PromptSpec, Think, TokenLogprob, TopLogprob};
use crate::worker::ModelWorker;
use std::ops::ControlFlow;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// What the fake does for one job.
#[derive(Clone, Debug)]
pub enum Script {
    /// Emit these pieces (one "token" each), honouring `num_predict` and stop strings.
    Text(Vec<String>),
    /// Reason (the first pieces, emitted as thinking unless the job says `think: off`), then
    /// answer (the second), as a reasoning model does.
    Reasoned(Vec<String>, Vec<String>),
    /// Emit the pieces with a pause before each (for cancellation and timeout tests).
    Slow(Vec<String>, Duration),
    /// Fail.
    Fail(BackendError),
    /// Panic with this message.
    Panic(String),
}

/// A fake model: `script` decides each job's answer; every job is recorded in `log`.
/// It embeds only when given a [`FakeEmbedder`] ([`ScriptedBackend::with_embedder`]).
pub struct ScriptedBackend {
    script: Box<dyn FnMut(&Job) -> Script + Send>,
    log: Arc<Mutex<Vec<Job>>>,
    /// Pieces emitted in total (shared), to observe cancellation.
    emitted: Arc<Mutex<usize>>,
    embedder: Option<Arc<FakeEmbedder>>,
}

/// A fake embedder: a text's tokens are its whitespace-separated words (each word's id a
/// hash of it below [`FakeEmbedder::VOCAB`]); a vector counts the token ids modulo the
/// dimensions, plus a constant, normalized. Equal texts give equal vectors, texts sharing
/// words similar ones.
#[derive(Clone, Debug)]
pub struct FakeEmbedder {
    /// The vector length.
    pub dimensions: usize,
    /// The most tokens (words) per input.
    pub max_tokens: usize,
}

impl FakeEmbedder {
    /// The fake vocabulary's size.
    pub const VOCAB: u32 = 1000;
}

impl formwork_model::embed::Embed for FakeEmbedder {
    fn dimensions(&self) -> usize {
        self.dimensions
    }
    fn max_tokens(&self) -> usize {
        self.max_tokens
    }
    fn vocab_size(&self) -> usize {
        Self::VOCAB as usize
    }
    fn tokenize(&self, text: &str) -> Result<Vec<formwork_model::TokenId>, formwork_model::ModelError> {
        let id = |w: &str| w.bytes().fold(17u32, |h, b| h.wrapping_mul(31).wrapping_add(u32::from(b))) % Self::VOCAB;
        Ok(text.split_whitespace().map(|w| formwork_model::TokenId(id(w))).collect())
    }
    fn embed(&self, tokens: &[formwork_model::TokenId]) -> Result<Vec<f32>, formwork_model::ModelError> {
        let mut v = vec![0.1f32; self.dimensions];
        for t in tokens {
            v[t.0 as usize % self.dimensions] += 1.0;
        }
        formwork_model::embed::normalize(&mut v);
        Ok(v)
    }
}

/// Handles to observe a [`ScriptedBackend`] from a test.
#[derive(Clone, Debug, Default)]
pub struct Observed {
    /// Every job received, in order.
    pub jobs: Arc<Mutex<Vec<Job>>>,
    /// Pieces emitted in total.
    pub emitted: Arc<Mutex<usize>>,
}

impl ScriptedBackend {
    /// A fake answering with `script`.
    pub fn new(script: impl FnMut(&Job) -> Script + Send + 'static) -> (Self, Observed) {
        let obs = Observed::default();
        (ScriptedBackend { script: Box::new(script), log: obs.jobs.clone(), emitted: obs.emitted.clone(), embedder: None }, obs)
    }

    /// Lets the fake compute embeddings with `embedder`.
    pub fn with_embedder(mut self, embedder: FakeEmbedder) -> Self {
        self.embedder = Some(Arc::new(embedder));
        self
    }
}

/// Splits text into word-ish pieces (each whitespace run starts a piece).
pub fn pieces(text: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for (i, part) in text.split_inclusive(' ').enumerate() {
        if i > 0 && part.trim().is_empty() {
            if let Some(last) = out.last_mut() {
                last.push_str(part);
                continue;
            }
        }
        out.push(part.to_string());
    }
    out
}

/// The prompt's text (all message contents, or the raw prompt), for scripts that echo.
pub fn prompt_text(job: &Job) -> String {
    match &job.prompt {
        PromptSpec::Raw(s) => s.clone(),
        PromptSpec::Chat { messages, .. } => messages.iter().map(|m| m.content.as_str()).collect::<Vec<_>>().join("\n"),
    }
}

impl Backend for ScriptedBackend {
    fn embedder(&self) -> Option<Arc<dyn formwork_model::embed::Embed>> {
        self.embedder.clone().map(|e| e as Arc<dyn formwork_model::embed::Embed>)
    }

    fn generate(&mut self, job: &Job, on_text: &mut dyn FnMut(Piece<'_>) -> ControlFlow<()>) -> Result<Outcome, BackendError> {
        self.log.lock().expect("log lock").push(job.clone());
        let started = Instant::now();
        let (mut thinking_parts, parts, delay) = match (self.script)(job) {
            Script::Text(p) => (vec![], p, Duration::ZERO),
            Script::Reasoned(t, p) => (t, p, Duration::ZERO),
            Script::Slow(p, d) => (vec![], p, d),
            Script::Fail(e) => return Err(e),
            Script::Panic(m) => panic!("{m}"),
        };
        if job.think == Some(Think::Off) {
            thinking_parts.clear();
        }
        let prompt_tokens = prompt_text(job).split_whitespace().count() as u32;
        let mut thinking: Option<String> = None;
        let mut n = 0u32;
        for p in thinking_parts {
            thinking.get_or_insert_with(String::new).push_str(&p);
            n += 1;
            if on_text(Piece::Thinking(&p)).is_break() {
                break;
            }
        }
        let mut text = String::new();
        let mut done_reason = DoneReason::Stop;
        let mut logprobs: Option<Vec<TokenLogprob>> = job.logprobs.map(|_| Vec::new());
        for p in parts {
            if n >= job.num_predict {
                done_reason = DoneReason::Length;
                break;
            }
            if !delay.is_zero() {
                std::thread::sleep(delay);
            }
            let before = text.len();
            text.push_str(&p);
            n += 1;
            if let Some(cut) = job.stop.iter().filter_map(|s| text.find(s.as_str())).min() {
                text.truncate(cut);
                let piece = text.get(before.min(text.len())..).unwrap_or("").to_string();
                let _ = on_text(Piece::Text(&piece));
                break;
            }
            *self.emitted.lock().expect("emitted lock") += 1;
            if let (Some(all), Some(top)) = (logprobs.as_mut(), job.logprobs) {
                let e = fake_logprob(&p, top);
                let _ = on_text(Piece::Logprobs(std::slice::from_ref(&e)));
                all.push(e);
            }
            if on_text(Piece::Text(&p)).is_break() {
                break;
            }
        }
        Ok(Outcome {
            text,
            thinking,
            done_reason,
            prompt_tokens,
            eval_tokens: n,
            prompt_eval_duration: Duration::from_micros(10),
            eval_duration: started.elapsed(),
            logprobs,
        })
    }
}

/// The scripted backend's logprob for one piece (one piece is one "token"): the piece at
/// probability 1/2, then alternatives `alt1`, `alt2`, ... at 1/4, 1/8, ...; `top` of them.
pub fn fake_logprob(piece: &str, top: u8) -> TokenLogprob {
    let lp = |i: usize| -((i + 1) as f32) * std::f32::consts::LN_2;
    let alts = (0..top as usize).map(|i| {
        let text = if i == 0 { piece.to_string() } else { format!("alt{i}") };
        TopLogprob { token: formwork_model::TokenId(i as u32), bytes: text.into_bytes(), logprob: lp(i) }
    });
    TokenLogprob { token: formwork_model::TokenId(0), bytes: piece.as_bytes().to_vec(), logprob: lp(0), top: alts.collect() }
}

/// Metadata for a fake model called `name`.
pub fn fake_meta(name: &str) -> ModelMeta {
    ModelMeta {
        name: name.into(),
        family: "llama".into(),
        parameter_size: "135M".into(),
        quantization_level: "Q8_0".into(),
        context_length: 8192,
        supports_tools: true,
        ..Default::default()
    }
}

/// Starts a worker over a scripted fake named `name`.
pub fn spawn_scripted(name: &str, script: impl FnMut(&Job) -> Script + Send + 'static) -> (ModelWorker, Observed) {
    spawn_scripted_meta(fake_meta(name), script)
}

/// Starts a worker over a scripted fake named `name` that also embeds with `embedder`.
pub fn spawn_embedding(name: &str, embedder: FakeEmbedder, script: impl FnMut(&Job) -> Script + Send + 'static) -> (ModelWorker, Observed) {
    let (b, obs) = ScriptedBackend::new(script);
    let w = ModelWorker::spawn(fake_meta(name), Box::new(b.with_embedder(embedder)), Duration::from_millis(1)).expect("spawn worker thread");
    (w, obs)
}

/// Starts a worker over a scripted fake described by `meta` (e.g. `supports_thinking`).
pub fn spawn_scripted_meta(meta: ModelMeta, script: impl FnMut(&Job) -> Script + Send + 'static) -> (ModelWorker, Observed) {
    let (b, obs) = ScriptedBackend::new(script);
    let w = ModelWorker::spawn(meta, Box::new(b), Duration::from_millis(1)).expect("spawn worker thread");
    (w, obs)
}
