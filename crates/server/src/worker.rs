//! The slots of a model: worker threads fed by one bounded FIFO queue.
//!
//! A model serves as many requests at once as it has *slots*: [`ModelWorker::spawn_pool`]
//! starts one worker thread per [`Backend`] given (the engine backend over a batched model
//! gives one per sequence; their decodes are batched together, see
//! `formwork_engine::batch`). Each idle worker takes the next [`Job`] in arrival order and
//! streams [`Event`]s back over a tokio channel, so a new request starts at the next batch
//! step and a finished one frees its slot (continuous batching). Requests beyond the slots
//! wait in the queue; past [`ModelWorker::max_queue`] waiting requests a new one is refused
//! at once ([`SubmitError::QueueFull`], a 503 with `Retry-After`), never left hanging.
//!
//! Cancellation: when a request's receiver is dropped (client disconnect, handler timeout)
//! the next `on_text` callback sees the closed channel and returns `Break`, so generation
//! stops within a token; a job whose client left while it was queued is skipped. A panic
//! inside a backend is caught per job: that request gets a 500 and the worker goes on.
//!
//! Embedding requests ([`ModelWorker::submit_embed`]) wait in the same queue and take a slot
//! like generation; the slot's thread computes them with the backend's
//! [`embedder`](Backend::embedder) (for llama.cpp a context of its own over the same
//! weights), so they never enter a generation batch and never disturb running generations.

use crate::backend::{Backend, BackendError, EmbedJob, Embeddings, Job, ModelMeta, Outcome, Piece};
use std::ops::ControlFlow;
use std::panic::{catch_unwind, AssertUnwindSafe};
use crate::metrics::Metrics;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::mpsc::{unbounded_channel, UnboundedReceiver, UnboundedSender};
use tokio::sync::oneshot;

/// What a worker sends back for one job: text (and reasoning) pieces, then exactly one `Done`.
#[derive(Debug)]
pub enum Event {
    /// A piece of output text.
    Text(String),
    /// A piece of the model's reasoning.
    Thinking(String),
    /// Log-probabilities of tokens just chosen, sent before the text that carries them
    /// (only for jobs that asked: [`Job::logprobs`](crate::backend::Job::logprobs)).
    Logprobs(Vec<crate::backend::TokenLogprob>),
    /// The job ended.
    Done(Result<Outcome, BackendError>),
}

/// A job waiting for a slot.
enum Queued {
    /// Generation, streaming its events.
    Generate { job: Job, events: UnboundedSender<Event> },
    /// Embeddings, answered once.
    Embed { job: EmbedJob, reply: oneshot::Sender<Result<Embeddings, BackendError>> },
}

/// A handle to a model's workers. Cloning shares the same workers and queue.
#[derive(Clone)]
pub struct ModelWorker {
    meta: Arc<ModelMeta>,
    tx: mpsc::Sender<Queued>,
    queued: Arc<AtomicUsize>,
    max_queue: usize,
    slots: usize,
    metrics: Arc<Metrics>,
    load_duration: Duration,
    can_embed: bool,
    /// The batcher the slots' decodes join (a batched model), for `/metrics`.
    batcher: Option<formwork_engine::batch::Batcher>,
}

impl std::fmt::Debug for ModelWorker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ModelWorker").field("model", &self.meta.name).field("queued", &self.queue_len()).finish()
    }
}

/// Why a job was not queued.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SubmitError {
    /// The worker threads are gone (they only end when the server shuts down).
    #[error("the workers of model '{0}' have stopped; restart the server")]
    Gone(String),
    /// The queue holds its limit of waiting requests.
    #[error("model '{model}' is busy: {slots} requests are running and {queued} are waiting, this server's limit (--max-queue {queued}); retry in a few seconds")]
    QueueFull {
        /// The model.
        model: String,
        /// Requests running.
        slots: usize,
        /// Requests waiting (the limit).
        queued: usize,
    },
}

impl ModelWorker {
    /// One worker (one request at a time) with an unbounded queue. `load_duration` is how
    /// long loading took (reported as Ollama's `load_duration` of the first request).
    pub fn spawn(meta: ModelMeta, backend: Box<dyn Backend>, load_duration: Duration) -> std::io::Result<Self> {
        Self::spawn_pool(meta, vec![backend], load_duration, usize::MAX)
    }

    /// One worker thread per backend (the model's slots), all fed by one FIFO queue of at
    /// most `max_queue` waiting jobs.
    pub fn spawn_pool(meta: ModelMeta, backends: Vec<Box<dyn Backend>>, load_duration: Duration, max_queue: usize) -> std::io::Result<Self> {
        let (tx, rx) = mpsc::channel::<Queued>();
        let rx = Arc::new(Mutex::new(rx));
        let queued = Arc::new(AtomicUsize::new(0));
        let metrics = Arc::new(Metrics::default());
        let slots = backends.len().max(1);
        let can_embed = backends.first().is_some_and(|b| b.embedder().is_some());
        let batcher = backends.first().and_then(|b| b.batcher());
        for (i, backend) in backends.into_iter().enumerate() {
            let (rx, q, m, name) = (rx.clone(), queued.clone(), metrics.clone(), meta.name.clone());
            std::thread::Builder::new().name(format!("model-{}-{i}", meta.name)).spawn(move || run(backend, rx, q, m, name))?;
        }
        Ok(ModelWorker { meta: Arc::new(meta), tx, queued, max_queue, slots, metrics, load_duration, can_embed, batcher })
    }

    /// Facts about the model.
    pub fn meta(&self) -> &ModelMeta {
        &self.meta
    }

    /// How long loading the model took.
    pub fn load_duration(&self) -> Duration {
        self.load_duration
    }

    /// Jobs waiting (not counting the ones running).
    pub fn queue_len(&self) -> usize {
        self.queued.load(Ordering::Relaxed)
    }

    /// Most jobs that may wait.
    pub fn max_queue(&self) -> usize {
        self.max_queue
    }

    /// Jobs that can run at once.
    pub fn slots(&self) -> usize {
        self.slots
    }

    /// Whether the model computes embeddings (its backends have an
    /// [`embedder`](Backend::embedder)).
    pub fn can_embed(&self) -> bool {
        self.can_embed
    }

    /// Counters and histograms of this model's requests.
    pub fn metrics(&self) -> &Arc<Metrics> {
        &self.metrics
    }

    /// What `/metrics` shows of this model now.
    pub fn figures(&self) -> crate::metrics::ModelFigures<'_> {
        crate::metrics::ModelFigures {
            name: &self.meta.name,
            metrics: &self.metrics,
            queued: self.queue_len(),
            slots: self.slots(),
            batch: self.batcher.as_ref().map(|b| b.stats()),
        }
    }

    /// Queues `job`; the receiver yields its events. Dropping the receiver cancels the job.
    pub fn submit(&self, job: Job) -> Result<UnboundedReceiver<Event>, SubmitError> {
        let (events, rx) = unbounded_channel();
        self.enqueue(Queued::Generate { job, events })?;
        Ok(rx)
    }

    /// Queues an embedding job; the receiver yields its result. Dropping the receiver
    /// cancels the job if it has not started.
    pub fn submit_embed(&self, job: EmbedJob) -> Result<oneshot::Receiver<Result<Embeddings, BackendError>>, SubmitError> {
        let (reply, rx) = oneshot::channel();
        self.enqueue(Queued::Embed { job, reply })?;
        Ok(rx)
    }

    fn enqueue(&self, work: Queued) -> Result<(), SubmitError> {
        // Reserve a place in the queue, or refuse.
        let reserved = self.queued.fetch_update(Ordering::AcqRel, Ordering::Acquire, |q| (q < self.max_queue).then_some(q + 1));
        if reserved.is_err() {
            self.metrics.rejected.fetch_add(1, Ordering::Relaxed);
            return Err(SubmitError::QueueFull { model: self.meta.name.clone(), slots: self.slots, queued: self.max_queue });
        }
        if self.tx.send(work).is_err() {
            self.queued.fetch_sub(1, Ordering::Relaxed);
            return Err(SubmitError::Gone(self.meta.name.clone()));
        }
        Ok(())
    }
}

/// Takes the next job off the shared queue (`None`: the queue is closed).
fn next_job(rx: &Mutex<mpsc::Receiver<Queued>>) -> Option<Queued> {
    rx.lock().unwrap_or_else(|e| e.into_inner()).recv().ok()
}

fn run(mut backend: Box<dyn Backend>, rx: Arc<Mutex<mpsc::Receiver<Queued>>>, queued: Arc<AtomicUsize>, metrics: Arc<Metrics>, name: String) {
    while let Some(work) = next_job(&rx) {
        queued.fetch_sub(1, Ordering::Relaxed);
        let (job, events) = match work {
            Queued::Generate { job, events } => (job, events),
            Queued::Embed { job, reply } => {
                embed(backend.as_ref(), job, reply, &metrics, &name);
                continue;
            }
        };
        if events.is_closed() {
            tracing::debug!(model = %name, "skipping a job whose client has gone");
            continue;
        }
        if Instant::now() >= job.deadline {
            let _ = events.send(Event::Done(Err(BackendError::Timeout(Duration::ZERO))));
            continue;
        }
        let mut timed_out = false;
        let mut cancelled = false;
        let started = Instant::now();
        let running = metrics.running();
        let result = catch_unwind(AssertUnwindSafe(|| {
            let mut on_text = |piece: Piece<'_>| {
                if Instant::now() >= job.deadline {
                    timed_out = true;
                    return ControlFlow::Break(());
                }
                let event = match piece {
                    Piece::Text(t) if !t.is_empty() => Event::Text(t.to_string()),
                    Piece::Thinking(t) if !t.is_empty() => Event::Thinking(t.to_string()),
                    Piece::Logprobs(l) if !l.is_empty() => Event::Logprobs(l.to_vec()),
                    _ => return ControlFlow::Continue(()),
                };
                match events.send(event) {
                    Ok(()) => ControlFlow::Continue(()),
                    Err(_) => {
                        cancelled = true;
                        ControlFlow::Break(())
                    }
                }
            };
            backend.generate(&job, &mut on_text)
        }));
        let result = match result {
            Ok(r) if timed_out => {
                drop(r);
                Err(BackendError::Timeout(started.elapsed()))
            }
            Ok(r) => r,
            Err(panic) => {
                let msg = panic_message(panic.as_ref());
                tracing::error!(model = %name, "generation panicked: {msg}");
                Err(BackendError::Internal(format!("internal error: generation panicked ({msg})")))
            }
        };
        if cancelled {
            tracing::info!(model = %name, "client disconnected; generation stopped");
        }
        // Not running any more once its client can see it finished (so `/metrics` read after
        // an answer does not count it).
        drop(running);
        let _ = events.send(Event::Done(result));
    }
    tracing::debug!(model = %name, "worker stopped");
}

fn panic_message(panic: &(dyn std::any::Any + Send)) -> String {
    panic
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "unknown panic".into())
}

/// Runs one embedding job on this slot's thread (skipped when its client has gone).
fn embed(backend: &dyn Backend, job: EmbedJob, reply: oneshot::Sender<Result<Embeddings, BackendError>>, metrics: &Metrics, name: &str) {
    if reply.is_closed() {
        tracing::debug!(model = %name, "skipping an embedding job whose client has gone");
        return;
    }
    let running = metrics.running();
    let result = if Instant::now() >= job.deadline {
        Err(BackendError::Timeout(Duration::ZERO))
    } else {
        match backend.embedder() {
            None => Err(BackendError::cannot_embed(name)),
            Some(embedder) => catch_unwind(AssertUnwindSafe(|| job.run(embedder.as_ref()))).unwrap_or_else(|panic| {
                let msg = panic_message(panic.as_ref());
                tracing::error!(model = %name, "embedding panicked: {msg}");
                Err(BackendError::Internal(format!("internal error: embedding panicked ({msg})")))
            }),
        }
    };
    drop(running);
    let _ = reply.send(result);
}
