//! Validation and retry: generate, check the answer, and when it fails ask again with the
//! errors in the conversation.
//!
//! A grammar guarantees syntax; it cannot enforce everything a caller wants (a rule the schema
//! compiler refuses, a business rule, a check only a program can make). [`generate_validated`]
//! closes the loop: each answer is checked by the [`Validator`]s (a JSON Schema, extra rules
//! as another schema, a shell command, or any closure); on failure the answer and a user
//! message listing the errors ([`feedback_message`]) are appended to the chat and the model
//! answers again, up to [`Validation::retries`] more times ([`RetryMode::Resample`] asks the
//! original prompt again instead). Every attempt is reported.
//!
//! When the retries are exhausted the result is **not** an error: [`Validated::valid`] is
//! false and the last answer is returned with every attempt's errors, so that the caller
//! decides (the CLI prints the answer and exits non-zero). Errors are for failures of the
//! machinery: the model, or a validator that cannot run ([`RetryError`]).
//!
//! ```
//! use formwork_engine::retry::{generate_validated, Validation, Validator};
//! use formwork_engine::{ChatMessage, GenerateOptions, Prompt, SamplerOptions};
//! use std::ops::ControlFlow;
//! # use formwork_engine::testing::ScriptedModel;
//! # let mut model = ScriptedModel::new(&["user", "assistant", "\n", "Pick", " a number.", "{", "}", "\"n\"", ":", "1", "2"], &["<|im_end|>", "<|im_start|>"]);
//! # model.script_text("{\"n\":1}");
//! let prompt = Prompt::Chat { messages: vec![ChatMessage::new("user", "Pick a number.")], tools: None };
//! let opts = GenerateOptions { sampler: SamplerOptions::greedy(), ..Default::default() };
//! let mut validation = Validation {
//!     validators: vec![Validator::Rules(serde_json::json!({"properties": {"n": {"minimum": 1}}}))],
//!     retries: 2,
//!     ..Default::default()
//! };
//! let v = generate_validated(&mut model, &prompt, &opts, &mut || None, &mut validation,
//!     &mut |_attempt, _text| ControlFlow::Continue(()), &mut |_attempt| {})?;
//! assert!(v.valid);
//! assert_eq!(v.attempts.len(), 1);
//! # Ok::<(), formwork_engine::retry::RetryError>(())
//! ```

use crate::constraint::Constraint;
use crate::generate::{ChatMessage, EngineError, GenerateOptions, Generation, Prompt, StopReason};
use crate::model::Model;
use crate::reasoning::{Piece, Reasoning};
use formwork_repair::Fix;
use serde_json::Value;
use std::io::{Read, Write};
use std::ops::ControlFlow;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The default time limit of a [`Validator::Command`].
pub const DEFAULT_COMMAND_TIMEOUT: Duration = Duration::from_secs(10);

/// At most this many errors are listed in a feedback message, each cut to `MAX_ERROR_CHARS`.
const MAX_FEEDBACK_ERRORS: usize = 10;
const MAX_ERROR_CHARS: usize = 500;
/// At most this much of a command's output is read.
const MAX_COMMAND_OUTPUT: u64 = 64 * 1024;

/// One check an answer must pass.
pub enum Validator {
    /// The answer must be JSON valid against this schema (typically the one that also
    /// constrains the output: it catches what the grammar cannot, e.g. an answer cut off by
    /// the token limit).
    Schema(Value),
    /// Extra rules, as another JSON Schema the answer must also satisfy (`formwork run --rules`).
    Rules(Value),
    /// A shell command (`sh -c`) that gets the answer on stdin: exit status 0 passes; otherwise
    /// its stderr (or, when empty, its stdout) lines are the errors. It is killed (with its
    /// process group) after `timeout`, which is an error of the validator, not of the answer.
    Command {
        /// The command line.
        command: String,
        /// Time limit ([`DEFAULT_COMMAND_TIMEOUT`] by default).
        timeout: Duration,
    },
    /// Any other check: returns the errors (none = pass).
    Custom {
        /// A name for reports.
        name: String,
        /// The check.
        check: CheckFn,
    },
}

/// A custom check: the answer in, the errors out (none = pass).
pub type CheckFn = Box<dyn FnMut(&str) -> Vec<String> + Send>;

impl std::fmt::Debug for Validator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Validator::Schema(s) => f.debug_tuple("Schema").field(s).finish(),
            Validator::Rules(s) => f.debug_tuple("Rules").field(s).finish(),
            Validator::Command { command, timeout } => {
                f.debug_struct("Command").field("command", command).field("timeout", timeout).finish()
            }
            Validator::Custom { name, .. } => f.debug_struct("Custom").field("name", name).finish_non_exhaustive(),
        }
    }
}

impl Validator {
    /// A [`Validator::Command`] with the default timeout.
    pub fn command(command: impl Into<String>) -> Self {
        Validator::Command { command: command.into(), timeout: DEFAULT_COMMAND_TIMEOUT }
    }

    /// The name used in reports and feedback: `schema`, `rules`, `check`, or the custom name.
    pub fn name(&self) -> &str {
        match self {
            Validator::Schema(_) => "schema",
            Validator::Rules(_) => "rules",
            Validator::Command { .. } => "check",
            Validator::Custom { name, .. } => name,
        }
    }

    /// Checks that the validator can work (its schema is a valid JSON Schema), so that a bad
    /// one is reported before any generation.
    pub fn check_setup(&self) -> Result<(), RetryError> {
        match self {
            Validator::Schema(s) | Validator::Rules(s) => formwork_schema::check_schema(s)
                .map_err(|message| RetryError::Validator { validator: self.name().to_string(), message }),
            _ => Ok(()),
        }
    }

    /// Checks `text`: the errors (empty = pass), or an error when the validator itself failed.
    pub fn check(&mut self, text: &str) -> Result<Vec<String>, RetryError> {
        let name = self.name().to_string();
        match self {
            Validator::Schema(s) | Validator::Rules(s) => Ok(formwork_schema::validate(s, text).err().unwrap_or_default()),
            Validator::Command { command, timeout } => {
                run_command(command, text, *timeout).map_err(|message| RetryError::Validator { validator: name, message })
            }
            Validator::Custom { check, .. } => Ok(check(text)),
        }
    }
}

/// The validators and how often to retry.
#[derive(Debug, Default)]
pub struct Validation {
    /// Every validator must pass (all are run, so that the feedback lists every error).
    pub validators: Vec<Validator>,
    /// Extra attempts after the first (0: validate once, never retry).
    pub retries: usize,
    /// Extract and repair JSON from the answer before validating ([`formwork_repair`]),
    /// for answers generated without a grammar: the validators then see the repaired JSON and
    /// [`Validated::text`] is it. An answer with no recoverable JSON fails with the reason.
    pub repair: bool,
    /// What a retry sees.
    pub mode: RetryMode,
}

/// What a retry sees.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum RetryMode {
    /// The failed answer and a message listing its errors are appended to the conversation
    /// (the default; what larger models correct best).
    #[default]
    Feedback,
    /// The original prompt again, sampled afresh (with a fixed seed, the next seed): no
    /// conversation grows. Small models often do better this way: measured on SmolLM2-135M,
    /// feedback made them repeat or garble the rejected answer.
    Resample,
}

impl std::str::FromStr for RetryMode {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "feedback" => Ok(RetryMode::Feedback),
            "resample" => Ok(RetryMode::Resample),
            other => Err(format!("unknown retry mode `{other}`: use `feedback` or `resample`")),
        }
    }
}

/// One validation error.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ValidationError {
    /// Which validator ([`Validator::name`], or `repair`).
    pub validator: String,
    /// What is wrong.
    pub message: String,
}

impl std::fmt::Display for ValidationError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.validator, self.message)
    }
}

/// What one attempt cost.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AttemptStats {
    /// Prompt tokens (the conversation so far).
    pub prompt_tokens: usize,
    /// Of those, reused from the model's cache.
    pub cached_prompt_tokens: usize,
    /// Tokens generated.
    pub eval_tokens: usize,
    /// Why the generation ended.
    pub done_reason: StopReason,
    /// Wall time of the generation.
    pub duration: Duration,
    /// Wall time of the validators.
    pub validation_duration: Duration,
    /// The sampler's seed for this attempt.
    pub seed: u64,
}

/// One generated answer and its verdict.
#[derive(Clone, Debug)]
pub struct Attempt {
    /// 1-based.
    pub number: usize,
    /// The answer as generated.
    pub text: String,
    /// The repaired JSON the validators saw (with [`Validation::repair`]).
    pub repaired: Option<String>,
    /// The repairs made (with [`Validation::repair`]).
    pub fixes: Vec<Fix>,
    /// Validation errors (empty: it passed).
    pub errors: Vec<ValidationError>,
    /// Token counts and times.
    pub stats: AttemptStats,
}

impl Attempt {
    /// True when every validator passed.
    pub fn passed(&self) -> bool {
        self.errors.is_empty()
    }
}

/// The result of [`generate_validated`].
#[derive(Clone, Debug)]
pub struct Validated {
    /// The last attempt's generation.
    pub generation: Generation,
    /// The final answer: the repaired JSON with [`Validation::repair`], else the generated text.
    pub text: String,
    /// Whether the final answer passed every validator (false: retries exhausted, or the
    /// generation was cancelled).
    pub valid: bool,
    /// Every attempt, in order.
    pub attempts: Vec<Attempt>,
}

/// Failures of the machinery (not of the answer).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RetryError {
    /// Generation failed (including a conversation that outgrew the context on a retry).
    #[error(transparent)]
    Engine(#[from] EngineError),
    /// A validator could not run (an invalid schema, a command that cannot start or timed out).
    #[error("the {validator} validator failed: {message}")]
    Validator {
        /// Which validator.
        validator: String,
        /// What went wrong.
        message: String,
    },
}

/// The user message sent after a failed attempt.
pub fn feedback_message(errors: &[ValidationError]) -> String {
    let mut s = String::from("Your answer did not pass validation:\n");
    for e in errors.iter().take(MAX_FEEDBACK_ERRORS) {
        let msg: String = e.message.chars().take(MAX_ERROR_CHARS).collect();
        let cut = if msg.len() < e.message.len() { "..." } else { "" };
        s.push_str(&format!("- {}: {msg}{cut}\n", e.validator));
    }
    if errors.len() > MAX_FEEDBACK_ERRORS {
        s.push_str(&format!("- and {} more\n", errors.len() - MAX_FEEDBACK_ERRORS));
    }
    s.push_str("Answer again, fixing these errors.");
    s
}

/// The prompt for the next attempt: the failed answer and the feedback appended (for a raw
/// prompt, as plain text separated by blank lines).
pub fn retry_prompt(prompt: &Prompt, answer: &str, errors: &[ValidationError]) -> Prompt {
    let feedback = feedback_message(errors);
    match prompt {
        Prompt::Chat { messages, tools } => {
            let mut messages = messages.clone();
            messages.push(ChatMessage::new("assistant", answer));
            messages.push(ChatMessage::new("user", feedback));
            Prompt::Chat { messages, tools: tools.clone() }
        }
        Prompt::Raw(text) => Prompt::Raw(format!("{text}{answer}\n\n{feedback}\n\n")),
    }
}

/// Generates, validates, and retries with the errors fed back (see the module docs).
///
/// `make_constraint` gives a fresh constraint for each attempt (`|| None` for none); with a
/// fixed seed, attempt n uses `seed + n - 1` (reproducible, but a new random path);
/// `on_text(attempt, text)` streams each attempt's text (attempts are 1-based; returning
/// `Break` cancels, and a cancelled attempt is not retried); `on_attempt` sees each attempt as
/// soon as it is validated.
pub fn generate_validated(
    model: &mut dyn Model,
    prompt: &Prompt,
    opts: &GenerateOptions,
    make_constraint: &mut dyn FnMut() -> Option<Box<dyn Constraint>>,
    validation: &mut Validation,
    on_text: &mut dyn FnMut(usize, &str) -> ControlFlow<()>,
    on_attempt: &mut dyn FnMut(&Attempt),
) -> Result<Validated, RetryError> {
    let mut on_piece = |n: usize, p: Piece<'_>| match p {
        Piece::Answer(t) => on_text(n, t),
        Piece::Thinking(_) => ControlFlow::Continue(()),
    };
    validated(model, prompt, opts, None, make_constraint, validation, &mut on_piece, on_attempt)
}

/// [`generate_validated`] with reasoning on each attempt (`reasoning`), streaming its
/// pieces: what [`crate::request::Request`] runs.
#[allow(clippy::too_many_arguments)]
pub(crate) fn validated(
    model: &mut dyn Model,
    prompt: &Prompt,
    opts: &GenerateOptions,
    reasoning: Option<&Reasoning>,
    make_constraint: &mut dyn FnMut() -> Option<Box<dyn Constraint>>,
    validation: &mut Validation,
    on_piece: &mut dyn FnMut(usize, Piece<'_>) -> ControlFlow<()>,
    on_attempt: &mut dyn FnMut(&Attempt),
) -> Result<Validated, RetryError> {
    for v in &validation.validators {
        v.check_setup()?;
    }
    let mut attempts: Vec<Attempt> = Vec::new();
    let mut current = prompt.clone();
    loop {
        let number = attempts.len() + 1;
        let mut constraint = make_constraint();
        let c = constraint.as_mut().map(|c| &mut **c as &mut dyn Constraint);
        let attempt_opts = attempt_options(opts, number);
        let generation = crate::reasoning::attempt(model, &current, &attempt_opts, reasoning, c, &mut |p| on_piece(number, p))?;
        let t0 = Instant::now();
        let (checked_text, repaired, fixes, mut errors) = if validation.repair {
            match formwork_repair::repair(&generation.text) {
                Ok(r) => (r.json.clone(), Some(r.json), r.fixes, Vec::new()),
                Err(e) => {
                    let err = ValidationError { validator: "repair".into(), message: e.to_string() };
                    (generation.text.clone(), None, Vec::new(), vec![err])
                }
            }
        } else {
            (generation.text.clone(), None, Vec::new(), Vec::new())
        };
        if errors.is_empty() {
            for v in validation.validators.iter_mut() {
                let name = v.name().to_string();
                errors.extend(v.check(&checked_text)?.into_iter().map(|message| ValidationError { validator: name.clone(), message }));
            }
        }
        let attempt = Attempt {
            number,
            text: generation.text.clone(),
            repaired,
            fixes,
            errors,
            stats: AttemptStats {
                prompt_tokens: generation.prompt_tokens,
                cached_prompt_tokens: generation.cached_prompt_tokens,
                eval_tokens: generation.eval_tokens,
                done_reason: generation.done_reason,
                duration: generation.total_duration,
                validation_duration: t0.elapsed(),
                seed: generation.seed,
            },
        };
        tracing::debug!(attempt = number, errors = attempt.errors.len(), "answer validated");
        on_attempt(&attempt);
        let passed = attempt.passed();
        let cancelled = generation.done_reason == StopReason::Cancelled;
        let last_errors = attempt.errors.clone();
        attempts.push(attempt);
        if passed || cancelled || number > validation.retries {
            return Ok(Validated { generation, text: checked_text, valid: passed && !cancelled, attempts });
        }
        if validation.mode == RetryMode::Feedback {
            current = retry_prompt(&current, &generation.text, &last_errors);
        }
    }
}

/// The options of attempt `number`: with a fixed seed, attempt n samples with `seed + n - 1`,
/// so that a sampled retry is reproducible but not forced down the random path of the answer
/// it is correcting (a small model otherwise often repeats that answer token for token).
fn attempt_options(opts: &GenerateOptions, number: usize) -> std::borrow::Cow<'_, GenerateOptions> {
    match opts.sampler.seed {
        Some(seed) if number > 1 => {
            let mut o = opts.clone();
            o.sampler.seed = Some(seed.wrapping_add(number as u64 - 1));
            std::borrow::Cow::Owned(o)
        }
        _ => std::borrow::Cow::Borrowed(opts),
    }
}

/// Runs `command` with `sh -c`, `input` on stdin: the error lines on a non-zero exit.
fn run_command(command: &str, input: &str, timeout: Duration) -> Result<Vec<String>, String> {
    let mut cmd = Command::new("sh");
    cmd.arg("-c").arg(command).stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped());
    #[cfg(unix)]
    {
        use std::os::unix::process::CommandExt;
        cmd.process_group(0);
    }
    let mut child = cmd.spawn().map_err(|e| format!("cannot run `sh -c {command:?}`: {e}"))?;
    let mut stdin = child.stdin.take().expect("piped stdin");
    let input = input.as_bytes().to_vec();
    // A command that does not read its input closes the pipe: that is not an error.
    std::thread::spawn(move || {
        let _ = stdin.write_all(&input);
    });
    let stdout = read_in_background(child.stdout.take().expect("piped stdout"));
    let stderr = read_in_background(child.stderr.take().expect("piped stderr"));
    let deadline = Instant::now() + timeout;
    let mut nap = Duration::from_millis(1);
    let status = loop {
        if let Some(s) = child.try_wait().map_err(|e| format!("waiting for `{command}`: {e}"))? {
            break s;
        }
        if Instant::now() >= deadline {
            kill_group(&mut child);
            return Err(format!(
                "the command `{command}` did not finish within {:.1}s and was killed; make it faster or raise its timeout",
                timeout.as_secs_f64()
            ));
        }
        std::thread::sleep(nap);
        nap = (nap * 2).min(Duration::from_millis(50));
    };
    if status.success() {
        return Ok(Vec::new());
    }
    // Children of the command may keep the pipes open: wait a little for the output, no more.
    let grace = Duration::from_millis(500);
    let err = stderr.recv_timeout(grace).unwrap_or_default();
    let out = stdout.recv_timeout(grace).unwrap_or_default();
    let text = if err.trim().is_empty() { out } else { err };
    let mut lines: Vec<String> = text.lines().map(str::trim).filter(|l| !l.is_empty()).take(20).map(str::to_string).collect();
    if lines.is_empty() {
        lines.push(match status.code() {
            Some(c) => format!("the check command exited with status {c}"),
            None => "the check command was killed by a signal".to_string(),
        });
    }
    Ok(lines)
}

fn read_in_background(mut r: impl Read + Send + 'static) -> std::sync::mpsc::Receiver<String> {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut buf = Vec::new();
        let _ = (&mut r).take(MAX_COMMAND_OUTPUT).read_to_end(&mut buf);
        let _ = tx.send(String::from_utf8_lossy(&buf).into_owned());
        // Drain the rest so that the command does not block on a full pipe.
        let _ = std::io::copy(&mut r, &mut std::io::sink());
    });
    rx
}

/// Kills the command and everything it started (its process group, on Unix).
fn kill_group(child: &mut std::process::Child) {
    #[cfg(unix)]
    {
        let _ = Command::new("kill")
            .args(["-KILL", "--", &format!("-{}", child.id())])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
    }
    let _ = child.kill();
    let _ = child.wait();
}
