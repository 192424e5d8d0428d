//! One worker thread per model, fed by a FIFO queue.
//!
//! A loaded model holds one sequence (its KV cache) and is driven through `&mut`, so it
//! cannot be shared between concurrent decodes. Each model gets a dedicated OS thread that
//! takes [`Job`]s in arrival order (std `mpsc` is FIFO) and streams [`Event`]s back over a
//! tokio channel. Concurrent requests wait in the queue; none is refused for concurrency.
//!
//! Cancellation: when a request's receiver is dropped (client disconnect, handler timeout)
//! the next `on_text` callback sees the closed channel and returns `Break`, so generation
//! stops within a token; a job whose client left while it was queued is skipped. A panic
//! inside a backend is caught per job: that request gets a 500 and the worker goes on.

use crate::backend::{Backend, BackendError, Job, ModelMeta, Outcome, Piece};
use std::ops::ControlFlow;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};
use tokio::sync::mpsc::{unbounded_channel, UnboundedReceiver, UnboundedSender};

/// What a worker sends back for one job: text (and reasoning) pieces, then exactly one `Done`.
#[derive(Debug)]
pub enum Event {
    /// A piece of output text.
    Text(String),
    /// A piece of the model's reasoning.
    Thinking(String),
    /// The job ended.
    Done(Result<Outcome, BackendError>),
}

struct Queued {
    job: Job,
    events: UnboundedSender<Event>,
}

/// A handle to a model's worker thread. Cloning shares the same worker and queue.
#[derive(Clone)]
pub struct ModelWorker {
    meta: Arc<ModelMeta>,
    tx: mpsc::Sender<Queued>,
    queued: Arc<AtomicUsize>,
    load_duration: Duration,
}

impl std::fmt::Debug for ModelWorker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ModelWorker").field("model", &self.meta.name).field("queued", &self.queue_len()).finish()
    }
}

/// The worker thread is gone (it can only end when the server shuts down).
#[derive(Debug, thiserror::Error)]
#[error("the worker of model '{0}' has stopped; restart the server")]
pub struct WorkerGone(pub String);

impl ModelWorker {
    /// Starts the worker thread for `backend`. `load_duration` is how long loading took
    /// (reported as Ollama's `load_duration` of the first request).
    pub fn spawn(meta: ModelMeta, backend: Box<dyn Backend>, load_duration: Duration) -> std::io::Result<Self> {
        let (tx, rx) = mpsc::channel::<Queued>();
        let queued = Arc::new(AtomicUsize::new(0));
        let q = queued.clone();
        let name = meta.name.clone();
        std::thread::Builder::new()
            .name(format!("model-{name}"))
            .spawn(move || run(backend, rx, q, name))?;
        Ok(ModelWorker { meta: Arc::new(meta), tx, queued, load_duration })
    }

    /// Facts about the model.
    pub fn meta(&self) -> &ModelMeta {
        &self.meta
    }

    /// How long loading the model took.
    pub fn load_duration(&self) -> Duration {
        self.load_duration
    }

    /// Jobs waiting (not counting the one running).
    pub fn queue_len(&self) -> usize {
        self.queued.load(Ordering::Relaxed)
    }

    /// Queues `job`; the receiver yields its events. Dropping the receiver cancels the job.
    pub fn submit(&self, job: Job) -> Result<UnboundedReceiver<Event>, WorkerGone> {
        let (events, rx) = unbounded_channel();
        self.queued.fetch_add(1, Ordering::Relaxed);
        if self.tx.send(Queued { job, events }).is_err() {
            self.queued.fetch_sub(1, Ordering::Relaxed);
            return Err(WorkerGone(self.meta.name.clone()));
        }
        Ok(rx)
    }
}

fn run(mut backend: Box<dyn Backend>, rx: mpsc::Receiver<Queued>, queued: Arc<AtomicUsize>, name: String) {
    for Queued { job, events } in rx {
        queued.fetch_sub(1, Ordering::Relaxed);
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
        let result = catch_unwind(AssertUnwindSafe(|| {
            let mut on_text = |piece: Piece<'_>| {
                if Instant::now() >= job.deadline {
                    timed_out = true;
                    return ControlFlow::Break(());
                }
                let event = match piece {
                    Piece::Text(t) if !t.is_empty() => Event::Text(t.to_string()),
                    Piece::Thinking(t) if !t.is_empty() => Event::Thinking(t.to_string()),
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
                let msg = panic
                    .downcast_ref::<&str>()
                    .map(|s| s.to_string())
                    .or_else(|| panic.downcast_ref::<String>().cloned())
                    .unwrap_or_else(|| "unknown panic".into());
                tracing::error!(model = %name, "generation panicked: {msg}");
                Err(BackendError::Internal(format!("internal error: generation panicked ({msg})")))
            }
        };
        if cancelled {
            tracing::info!(model = %name, "client disconnected; generation stopped");
        }
        let _ = events.send(Event::Done(result));
    }
    tracing::debug!(model = %name, "worker stopped");
}
