//! Reasoning ("thinking") models in one pass: the reasoning section is generated freely and
//! the answer after it is constrained, in the same generation.
//!
//! - [`ReasoningFormat`]: how a model writes its reasoning — the markers (`<think>` …
//!   `</think>` for DeepSeek-R1, Qwen3, QwQ; Harmony's analysis channel for gpt-oss;
//!   `[THINK]` … `[/THINK]`), detected from the chat template ([`ReasoningFormat::detect`])
//!   or given ([`ReasoningMarkers::parse`]), and the template variables that switch it.
//! - [`Reasoning`]: what one generation does: [`Think::On`] (reason, then answer), [`Think::Off`]
//!   (answer directly: the template's switch, e.g. Qwen3's `enable_thinking`, or else an empty
//!   section written into the prompt), or [`Think::Given`] (reasoning already done: written
//!   into the prompt); an optional budget of reasoning tokens after which the close marker is
//!   forced.
//! - [`generate_with_reasoning`]: renders the prompt (opening the section in it when the
//!   template does not), runs [`generate`] under a [`ReasoningConstraint`] that lets the
//!   reasoning run free (EOS refused) and hands the answer to the caller's constraint, and
//!   streams [`Piece::Thinking`] / [`Piece::Answer`] pieces. The returned
//!   [`Generation::text`] is the answer and [`Generation::thinking`] the reasoning, both
//!   without markers; a caller validates the answer only.
//!
//! Limits: stop strings and `num_predict` apply to the whole output, reasoning included.
//!
//! ```
//! use formwork_engine::reasoning::{generate_with_reasoning, Piece, Reasoning, ReasoningFormat, ReasoningMarkers};
//! use formwork_engine::{testing::ScriptedModel, GenerateOptions, Prompt, SamplerOptions};
//! use std::ops::ControlFlow;
//! let mut m = ScriptedModel::new(&["Hi", "<think>", "</think>", "\n", "Let me see.", "Hello!"], &["</s>"]);
//! m.script_text("Let me see.\n</think>\n\nHello!");
//! let r = Reasoning::on(ReasoningFormat::from_markers(ReasoningMarkers::think_tags()));
//! let opts = GenerateOptions { sampler: SamplerOptions::greedy(), ..Default::default() };
//! let mut pieces = Vec::new();
//! let g = generate_with_reasoning(&mut m, &Prompt::Raw("Hi".into()), &opts, &r, None, &mut |p| {
//!     pieces.push(matches!(p, Piece::Thinking(_)));
//!     ControlFlow::Continue(())
//! })?;
//! assert_eq!(g.thinking.as_deref(), Some("Let me see."));
//! assert_eq!(g.text, "Hello!");
//! assert_eq!(pieces, [true, false]);
//! # Ok::<(), formwork_engine::EngineError>(())
//! ```

mod constraint;
mod router;

pub use constraint::{Phase, ReasoningConstraint};

use crate::constraint::Constraint;
use crate::generate::{generate, EngineError, GenerateOptions, Generation, Prompt};
use crate::model::Model;
use crate::template::{ChatTemplate, TemplateError};
use router::{Offsets, Router};
use std::cell::Cell;
use std::ops::ControlFlow;
use std::rc::Rc;

/// The strings that open and close a reasoning section.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReasoningMarkers {
    /// Opens the section (`<think>`).
    pub open: String,
    /// Closes it (`</think>`); the answer follows.
    pub close: String,
}

impl ReasoningMarkers {
    /// `<think>` … `</think>` (DeepSeek-R1, Qwen3, QwQ, Phi-4-reasoning, ...).
    pub fn think_tags() -> Self {
        ReasoningMarkers { open: "<think>".into(), close: "</think>".into() }
    }

    /// gpt-oss's Harmony format: the `analysis` channel, then the `final` channel.
    pub fn harmony() -> Self {
        ReasoningMarkers {
            open: "<|channel|>analysis<|message|>".into(),
            close: "<|end|><|start|>assistant<|channel|>final<|message|>".into(),
        }
    }

    /// `OPEN,CLOSE` (as the CLI's `--think-markers` takes them), e.g. `<think>,</think>`.
    pub fn parse(spec: &str) -> Result<Self, String> {
        match spec.split_once(',') {
            Some((o, c)) if !o.is_empty() && !c.is_empty() && !c.contains(',') => {
                Ok(ReasoningMarkers { open: o.to_string(), close: c.to_string() })
            }
            _ => Err(format!("invalid reasoning markers {spec:?}: give OPEN,CLOSE, e.g. `<think>,</think>`")),
        }
    }
}

/// How a model writes reasoning: markers, padding, and the template's switches.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReasoningFormat {
    /// The markers.
    pub markers: ReasoningMarkers,
    /// Written after the open marker and before the close marker when formwork writes a
    /// section into the prompt (`"\n"` for `<think>` tags, nothing for Harmony).
    pub pad: String,
    /// Written after the close marker, before the answer (`"\n\n"` for `<think>` tags).
    pub after_close: String,
    /// A template variable that switches reasoning on or off (Qwen3: `enable_thinking`).
    pub switch_var: Option<String>,
    /// A template variable taking the effort (gpt-oss: `reasoning_effort`).
    pub effort_var: Option<String>,
}

impl ReasoningFormat {
    /// The format a chat template shows, if it shows one: Harmony channels, `<think>` tags,
    /// or `[THINK]` tags, with the `enable_thinking` / `reasoning_effort` variables when the
    /// template reads them.
    pub fn detect(template: &str) -> Option<Self> {
        let var = |name: &str| template.contains(name).then(|| name.to_string());
        let markers = if template.contains("<|channel|>") && template.contains("analysis") {
            ReasoningMarkers::harmony()
        } else if template.contains("<think>") || template.contains("</think>") {
            ReasoningMarkers::think_tags()
        } else if template.contains("[THINK]") {
            ReasoningMarkers { open: "[THINK]".into(), close: "[/THINK]".into() }
        } else {
            return None;
        };
        Some(ReasoningFormat { switch_var: var("enable_thinking"), effort_var: var("reasoning_effort"), ..Self::from_markers(markers) })
    }

    /// A format with these markers and no template switches; Harmony markers get no padding,
    /// others a newline inside the section and a blank line after it.
    pub fn from_markers(markers: ReasoningMarkers) -> Self {
        let harmony = markers.open.starts_with("<|channel|>");
        ReasoningFormat {
            pad: if harmony { "" } else { "\n" }.into(),
            after_close: if harmony { "" } else { "\n\n" }.into(),
            markers,
            switch_var: None,
            effort_var: None,
        }
    }

    /// The model's format: its template's, with `markers` replacing the detected ones when
    /// given. `None` when the template shows none and no markers are given.
    pub fn for_model(model: &dyn Model, markers: Option<ReasoningMarkers>) -> Option<Self> {
        let detected = model.info().chat_template.as_deref().and_then(Self::detect);
        match (detected, markers) {
            (Some(f), Some(m)) => Some(ReasoningFormat { markers: m, ..f }),
            (None, Some(m)) => Some(Self::from_markers(m)),
            (d, None) => d,
        }
    }
}

/// Reason or not, in one generation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Think {
    /// Reason, then answer. `effort` (`"low"`, `"medium"`, `"high"`) goes to templates that
    /// take one.
    On {
        /// The reasoning effort.
        effort: Option<String>,
    },
    /// Answer directly.
    Off,
    /// The reasoning is already done (this text): write it into the prompt, generate the
    /// answer only.
    Given(String),
}

/// What [`generate_with_reasoning`] does about reasoning.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Reasoning {
    /// The model's format.
    pub format: ReasoningFormat,
    /// On, off, or given.
    pub think: Think,
    /// Most reasoning tokens; then the close marker is forced (`None`: no limit but
    /// `num_predict`).
    pub budget: Option<usize>,
}

impl Reasoning {
    /// Reasoning on, no effort, no budget.
    pub fn on(format: ReasoningFormat) -> Self {
        Reasoning { format, think: Think::On { effort: None }, budget: None }
    }
}

/// A piece of streamed output.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Piece<'a> {
    /// Reasoning text.
    Thinking(&'a str),
    /// Answer text.
    Answer(&'a str),
}

/// The prompt text for `prompt` under `r`, and whether generation starts inside the
/// reasoning section. Chats are rendered with the model's template (with the format's
/// switch and effort variables); the section is opened (think on), written empty (off) or
/// written with the given reasoning, unless the template already did so.
pub fn reasoning_prompt(model: &dyn Model, prompt: &Prompt, r: &Reasoning) -> Result<(String, bool), TemplateError> {
    let f = &r.format;
    let mut text = match prompt {
        Prompt::Raw(s) => s.clone(),
        Prompt::Chat { messages, tools } => {
            let info = model.info();
            let t = ChatTemplate::new(info.chat_template.as_deref(), info.bos_token.as_deref(), info.eos_token.as_deref())?;
            let mut vars = serde_json::Map::new();
            if let Some(v) = &f.switch_var {
                vars.insert(v.clone(), (r.think != Think::Off).into());
            }
            if let (Some(v), Think::On { effort: Some(e) }) = (&f.effort_var, &r.think) {
                vars.insert(v.clone(), e.clone().into());
            }
            t.render_with(messages, tools.as_ref(), true, &vars)?
        }
    };
    let m = &f.markers;
    let tail = text.trim_end();
    let opened = tail.ends_with(&m.open);
    if !opened && tail.ends_with(&m.close) {
        // The template wrote an (empty) section itself: answer directly.
        return Ok((text, false));
    }
    if !opened {
        text.push_str(&m.open);
    }
    if !text.ends_with(&f.pad) {
        text.push_str(&f.pad);
    }
    let body = match &r.think {
        Think::On { .. } => return Ok((text, true)),
        Think::Off => String::new(),
        Think::Given(t) => t.trim().to_string(),
    };
    text.push_str(&body);
    if !body.is_empty() || !f.pad.is_empty() {
        text.push_str(&f.pad);
    }
    text.push_str(&m.close);
    text.push_str(&f.after_close);
    Ok((text, false))
}

/// One generation, with reasoning when `reasoning` is given (one attempt of a
/// [`crate::request::Request`] or of a validated retry loop).
pub(crate) fn attempt(
    model: &mut dyn Model,
    prompt: &Prompt,
    opts: &GenerateOptions,
    reasoning: Option<&Reasoning>,
    constraint: Option<&mut dyn Constraint>,
    on_piece: &mut dyn FnMut(Piece<'_>) -> ControlFlow<()>,
) -> Result<Generation, EngineError> {
    match reasoning {
        None => generate(model, prompt, opts, constraint, &mut |t| on_piece(Piece::Answer(t))),
        Some(r) => generate_with_reasoning(model, prompt, opts, r, constraint, on_piece),
    }
}

/// Generates reasoning and answer in one pass (see the module docs). `constraint`
/// constrains the answer only. The result's `text` is the answer, `thinking` the reasoning
/// (`Some` when the model reasoned or it was given; `None` when off).
pub fn generate_with_reasoning(
    model: &mut dyn Model,
    prompt: &Prompt,
    opts: &GenerateOptions,
    r: &Reasoning,
    constraint: Option<&mut dyn Constraint>,
    on_piece: &mut dyn FnMut(Piece<'_>) -> ControlFlow<()>,
) -> Result<Generation, EngineError> {
    let (text, reasoning) = reasoning_prompt(&*model, prompt, r)?;
    let raw = Prompt::Raw(text);
    if !reasoning {
        let mut g = generate(model, &raw, opts, constraint, &mut |t| on_piece(Piece::Answer(t)))?;
        g.thinking = match &r.think {
            Think::Given(t) => Some(t.trim().to_string()),
            _ => None,
        };
        return Ok(g);
    }
    let offsets = Rc::new(Cell::new(Offsets::default()));
    let mut rc = ReasoningConstraint::with_offsets(&*model, &r.format.markers.close, r.budget, constraint, offsets.clone())
        .map_err(EngineError::Constraint)?
        .with_answer_lead(r.format.after_close.len());
    let mut router = Router::default();
    let mut cancelled = false;
    let mut g = generate(model, &raw, opts, Some(&mut rc), &mut |t| {
        let flow = router.push(t, offsets.get(), on_piece);
        cancelled |= flow.is_break();
        flow
    })?;
    if !cancelled {
        let _ = router.finish(offsets.get(), on_piece);
    }
    g.text = router.answer().to_string();
    g.thinking = Some(router.thinking().to_string());
    Ok(g)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markers_parse() {
        assert_eq!(ReasoningMarkers::parse("<think>,</think>").unwrap(), ReasoningMarkers::think_tags());
        for bad in ["<think>", ",x", "x,", "a,b,c"] {
            let e = ReasoningMarkers::parse(bad).unwrap_err();
            assert!(e.contains("OPEN,CLOSE"), "{e}");
        }
    }

    #[test]
    fn detection_from_templates() {
        assert_eq!(ReasoningFormat::detect("{{ '<|im_start|>assistant\\n' }}"), None);
        let qwen3 = "{%- if enable_thinking is defined and enable_thinking is false %}{{- '<think>\\n\\n</think>\\n\\n' }}{%- endif %}";
        let f = ReasoningFormat::detect(qwen3).unwrap();
        assert_eq!(f.markers, ReasoningMarkers::think_tags());
        assert_eq!(f.switch_var.as_deref(), Some("enable_thinking"));
        let oss = "<|start|>assistant<|channel|>analysis<|message|>{{ reasoning_effort }}";
        let f = ReasoningFormat::detect(oss).unwrap();
        assert_eq!(f.markers, ReasoningMarkers::harmony());
        assert_eq!((f.pad.as_str(), f.effort_var.as_deref()), ("", Some("reasoning_effort")));
        let f = ReasoningFormat::detect("[THINK]{{ m }}[/THINK]").unwrap();
        assert_eq!(f.markers.close, "[/THINK]");
    }
}
