//! OpenAI API handlers: `/v1/chat/completions`, `/v1/completions`, `/v1/models`.

use crate::backend::{ChatMessage, ConstraintRequest, PromptSpec, Sampling, TokenLogprob};
use crate::error::{ApiError, ApiJson, Flavor, OpenAiApi};
use crate::jobs;
use crate::tools::detect::Route;
use crate::tools::{self, ToolMode};
use crate::stamps::{new_id, unix_now};
use crate::wire::openai as w;
use crate::worker::Event;
use crate::AppState;
use axum::extract::{Path, State};
use axum::response::sse::{Event as SseEvent, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::Json;
use std::convert::Infallible;
use std::time::Instant;

mod pieces;
mod translate;
use pieces::*;
pub(crate) use translate::{calls, finish_reason, reasoning_effort, tools_and_constraint};
use translate::*;
pub(crate) use pieces::token_logprobs;

const FL: Flavor = Flavor::OpenAi;
const FINGERPRINT: &str = "fp_formwork";

/// `GET /v1/models`.
pub async fn models(State(state): State<AppState>) -> Json<w::ModelList> {
    let data = state.models().iter().map(|m| model_object(&m.meta().name)).collect();
    Json(w::ModelList { object: "list".into(), data })
}

fn model_object(name: &str) -> w::ModelObject {
    w::ModelObject { id: name.into(), object: "model".into(), created: unix_now(), owned_by: "formwork".into() }
}

/// `GET /v1/models/{model}`.
pub async fn model(State(state): State<AppState>, Path(name): Path<String>) -> Result<Json<w::ModelObject>, ApiError> {
    let wk = state.model(&name).map_err(|e| e.flavor(FL))?;
    Ok(Json(model_object(&wk.meta().name)))
}

/// `POST /v1/chat/completions`.
pub async fn chat_completions(
    State(state): State<AppState>,
    ApiJson(req, _): ApiJson<w::ChatCompletionRequest, OpenAiApi>,
) -> Result<Response, ApiError> {
    chat_inner(state, req).await.map_err(|e| e.flavor(FL))
}

async fn chat_inner(state: AppState, req: w::ChatCompletionRequest) -> Result<Response, ApiError> {
    let received = Instant::now();
    let cfg = state.config().clone();
    let wk = state.model(&req.model)?.clone();
    let mut messages = turns(req.messages)?;
    // A query over a configured database: the model sees its schema and worked examples
    // over it first.
    #[cfg(feature = "engine")]
    if let Some(w::ResponseFormat::Sql { database }) = &req.response_format {
        let db = crate::sql::configured(&cfg, database).map_err(|e| e.param("response_format"))?;
        let system = formwork_sql::prompt::system_prompt(&db.catalog);
        let examples = formwork_sql::prompt::example_turns(&db.catalog);
        messages.splice(0..0, std::iter::once(ChatMessage { role: "system".into(), content: system, ..Default::default() }).chain(examples));
    }
    let n = choices(req.n, &cfg)?;
    let (tools, mode, constraint) =
        tools_and_constraint(req.tools, req.tool_choice, req.parallel_tool_calls, req.response_format, &cfg)?;
    let sampling = Sampling {
        temperature: req.temperature,
        top_p: req.top_p,
        seed: jobs::seed(req.seed),
        presence_penalty: req.presence_penalty,
        frequency_penalty: req.frequency_penalty,
        ..Default::default()
    };
    let num_predict = jobs::num_predict(req.max_completion_tokens.or(req.max_tokens).map(i64::from), &cfg);
    let stop = req.stop.map(crate::wire::ollama::StopField::into_vec).unwrap_or_default();
    let schema_in_prompt = jobs::schema_in_prompt(req.schema_in_prompt.as_ref())?;
    let whitespace = jobs::whitespace(req.whitespace.as_ref())?;
    let think = reasoning_effort(req.reasoning_effort.as_deref(), wk.meta().supports_thinking)?;
    let logprobs = chat_logprobs_request(req.logprobs, req.top_logprobs)?;
    let asked = logprobs.is_some();
    let make_job = {
        let prompt = PromptSpec::Chat { messages, tools: tools.clone() };
        let cfg = cfg.clone();
        move |i: u32| {
            let mut s = sampling.clone();
            s.seed = s.seed.map(|x| x.wrapping_add(u64::from(i)));
            let mut job = jobs::job(&cfg, received, prompt.clone(), constraint.clone(), s, num_predict, stop.clone(), None);
            job.schema_in_prompt = schema_in_prompt;
            job.whitespace = whitespace;
            job.think = think.clone();
            job.logprobs = logprobs;
            job
        }
    };
    let id = new_id("chatcmpl-");
    let created = unix_now();
    let model = req.model;
    let first = jobs::start(&wk, make_job(0)).await?;
    if !req.stream.unwrap_or(false) {
        let mut out = Vec::new();
        let (mut prompt_tokens, mut completion) = (0, 0);
        let mut started = Some(first);
        for i in 0..n {
            let s = match started.take() {
                Some(s) => s,
                None => jobs::start(&wk, make_job(i)).await?,
            };
            let o = jobs::collect(s).await?;
            prompt_tokens = o.prompt_tokens;
            completion += o.eval_tokens;
            let (message, finish) = answer(&o, &mode, &tools)?;
            let logprobs = asked.then(|| chat_logprobs(o.logprobs.as_deref().unwrap_or_default()));
            out.push(w::Choice { index: i, message, logprobs, finish_reason: finish });
        }
        return Ok(Json(w::ChatCompletion {
            id,
            object: "chat.completion".into(),
            created,
            model,
            system_fingerprint: FINGERPRINT.into(),
            choices: out,
            usage: usage(prompt_tokens, completion),
        })
        .into_response());
    }
    let include_usage = req.stream_options.is_some_and(|o| o.include_usage);
    let (tx, rx) = tokio::sync::mpsc::channel::<Result<SseEvent, Infallible>>(64);
    // With tools offered, text streams once its start shows it is not a call; calls are
    // sent whole when the output is complete (see `tools::detect`).
    let detect = mode != ToolMode::None;
    tokio::spawn(async move {
        let chunk = |choices: Vec<w::ChunkChoice>, usage_now: Option<w::Usage>| {
            let c = w::ChatCompletionChunk {
                id: id.clone(),
                object: "chat.completion.chunk".into(),
                created,
                model: model.clone(),
                system_fingerprint: FINGERPRINT.into(),
                choices,
                usage: include_usage.then_some(usage_now),
            };
            Ok(SseEvent::default().data(serde_json::to_string(&c).unwrap_or_default()))
        };
        let delta = |index: u32, delta: w::Delta, finish: Option<String>| w::ChunkChoice { index, delta, logprobs: None, finish_reason: finish };
        // Logprobs that arrived ride on the next chunk sent: each chunk carries its tokens'.
        let with_logprobs = |mut c: w::ChunkChoice, pending: &mut Vec<TokenLogprob>| {
            if asked && !pending.is_empty() {
                c.logprobs = Some(chat_logprobs(&std::mem::take(pending)));
            }
            c
        };
        let fail = |e: ApiError| Ok(SseEvent::default().data(e.flavor(FL).body().to_string()));
        let (mut prompt_tokens, mut completion) = (0, 0);
        let mut started = Some(first);
        for i in 0..n {
            let mut s = match started.take() {
                Some(s) => s,
                None => match jobs::start(&wk, make_job(i)).await {
                    Ok(s) => s,
                    Err(e) => {
                        let _ = tx.send(fail(e)).await;
                        return;
                    }
                },
            };
            // The first delta of a choice carries the role: at once (`content: ""`) for text,
            // as OpenAI sends it; with tools, on the first thing sent, with `content: null`
            // before tool calls.
            let mut role_sent = false;
            if !detect {
                let d = with_role(&mut role_sent, w::Delta { content: Some(Some(String::new())), ..Default::default() });
                if tx.send(chunk(vec![delta(i, d, None)], None)).await.is_err() {
                    return;
                }
            }
            let mut detector = tools::detect::CallDetector::new();
            // Calls as they are generated (under `required` or a named function): each call's
            // start with its id and name, then its arguments in fragments.
            let mut scanner = tools::scan::CallScanner::new();
            let mut streamed: Vec<String> = Vec::new();
            let mut pending: Vec<TokenLogprob> = Vec::new();
            loop {
                match s.next().await {
                    Event::Logprobs(l) => pending.extend(l),
                    Event::Text(t) => {
                        let route = if detect { detector.push(&t) } else { Route::Text(t) };
                        let deltas = match route {
                            Route::Hold => vec![],
                            Route::Text(t) => vec![w::Delta { content: Some(Some(t)), ..Default::default() }],
                            Route::Call(t) => scanner.push(&t).into_iter().map(|p| call_delta(p, &mut streamed)).collect(),
                        };
                        for d in deltas {
                            let d = with_role(&mut role_sent, d);
                            if tx.send(chunk(vec![with_logprobs(delta(i, d, None), &mut pending)], None)).await.is_err() {
                                return;
                            }
                        }
                    }
                    Event::Thinking(t) => {
                        let d = with_role(&mut role_sent, w::Delta { reasoning_content: Some(t), ..Default::default() });
                        if tx.send(chunk(vec![with_logprobs(delta(i, d, None), &mut pending)], None)).await.is_err() {
                            return;
                        }
                    }
                    Event::Done(r) => {
                        let r = r.map_err(jobs::backend_error).and_then(|o| calls(&o, &mode, &tools).map(|c| (o, c)));
                        let (o, calls) = match r {
                            Ok(x) => x,
                            Err(e) => {
                                let _ = tx.send(fail(e)).await;
                                return;
                            }
                        };
                        prompt_tokens = o.prompt_tokens;
                        completion += o.eval_tokens;
                        let mut deltas = Vec::new();
                        let finish = if calls.is_empty() {
                            let rest = if detect { detector.unsent(&o.text) } else { "" };
                            if !rest.is_empty() || !role_sent {
                                deltas.push(w::Delta { content: Some(Some(rest.to_string())), ..Default::default() });
                            }
                            finish_reason(o.done_reason)
                        } else {
                            // Calls streamed already must be the ones read from the whole
                            // output; the others are sent whole.
                            let names = calls.iter().take(streamed.len()).map(|c| &c.function.name);
                            if calls.len() < streamed.len() || !names.eq(streamed.iter()) {
                                let e = ApiError::internal("the streamed tool calls differ from the calls read at the end; please report this");
                                let _ = tx.send(fail(e)).await;
                                return;
                            }
                            for (k, c) in calls.into_iter().enumerate().skip(streamed.len()) {
                                let call = w::DeltaToolCall {
                                    index: k as u32,
                                    id: Some(c.id),
                                    kind: Some(c.kind),
                                    function: w::DeltaFunction { name: Some(c.function.name), arguments: Some(c.function.arguments) },
                                };
                                deltas.push(w::Delta { tool_calls: Some(vec![call]), ..Default::default() });
                            }
                            "tool_calls"
                        };
                        for d in deltas {
                            let d = with_role(&mut role_sent, d);
                            if tx.send(chunk(vec![with_logprobs(delta(i, d, None), &mut pending)], None)).await.is_err() {
                                return;
                            }
                        }
                        // The finish reason comes alone, after the last delta, as OpenAI sends
                        // it (the SDK's stream helper closes tool calls on it).
                        let end = with_logprobs(delta(i, w::Delta::default(), Some(finish.into())), &mut pending);
                        if tx.send(chunk(vec![end], None)).await.is_err() {
                            return;
                        }
                        break;
                    }
                }
            }
        }
        if include_usage {
            let _ = tx.send(chunk(vec![], Some(usage(prompt_tokens, completion)))).await;
        }
        let _ = tx.send(Ok(SseEvent::default().data("[DONE]"))).await;
    });
    Ok(Sse::new(tokio_stream::wrappers::ReceiverStream::new(rx)).keep_alive(KeepAlive::default()).into_response())
}

/// `POST /v1/completions`.
pub async fn completions(
    State(state): State<AppState>,
    ApiJson(req, _): ApiJson<w::CompletionRequest, OpenAiApi>,
) -> Result<Response, ApiError> {
    completions_inner(state, req).await.map_err(|e| e.flavor(FL))
}

async fn completions_inner(state: AppState, req: w::CompletionRequest) -> Result<Response, ApiError> {
    let received = Instant::now();
    let cfg = state.config().clone();
    let wk = state.model(&req.model)?.clone();
    if req.suffix.as_deref().is_some_and(|s| !s.is_empty()) {
        return Err(ApiError::bad_request("suffix (insert) is not supported; send the prompt only").param("suffix"));
    }
    let prompts = match req.prompt {
        w::PromptField::One(p) => vec![p],
        w::PromptField::Many(v) if v.is_empty() => {
            return Err(ApiError::bad_request("prompt is an empty list").param("prompt"))
        }
        w::PromptField::Many(v) => v,
    };
    let n = choices(req.n, &cfg)?;
    if prompts.len() as u32 * n > cfg.max_choices {
        return Err(ApiError::bad_request(format!(
            "{} prompts x n={n} is more than the {} choices this server allows per request",
            prompts.len(),
            cfg.max_choices
        ))
        .param("n"));
    }
    // OpenAI's default max_tokens for completions is 16.
    let num_predict = jobs::num_predict(Some(i64::from(req.max_tokens.unwrap_or(16))), &cfg);
    let stop = req.stop.map(crate::wire::ollama::StopField::into_vec).unwrap_or_default();
    let echo = req.echo.unwrap_or(false);
    let logprobs = match req.logprobs {
        None => None,
        Some(n) if !(0..=5).contains(&n) => {
            return Err(ApiError::bad_request(format!("logprobs is {n}; it must be between 0 and 5")).param("logprobs"))
        }
        // OpenAI returns the prompt's logprobs too with `echo`; they are not computed here.
        Some(_) if echo => {
            return Err(ApiError::bad_request(
                "logprobs with echo (log-probabilities of the prompt tokens) is not supported; drop echo or logprobs",
            )
            .param("echo"))
        }
        Some(n) => Some(n as u8),
    };
    let id = new_id("cmpl-");
    let created = unix_now();
    let mut jobs = Vec::new();
    for p in &prompts {
        for i in 0..n {
            let sampling = Sampling {
                temperature: req.temperature,
                top_p: req.top_p,
                seed: jobs::seed(req.seed).map(|s| s.wrapping_add(u64::from(i))),
                presence_penalty: req.presence_penalty,
                frequency_penalty: req.frequency_penalty,
                ..Default::default()
            };
            let mut job = jobs::job(&cfg, received, PromptSpec::Raw(p.clone()), ConstraintRequest::None, sampling, num_predict, stop.clone(), None);
            job.logprobs = logprobs;
            jobs.push((p.clone(), job));
        }
    }
    let mut jobs = jobs.into_iter();
    let (p0, j0) = jobs.next().expect("at least one prompt and n >= 1");
    let first = jobs::start(&wk, j0).await?;
    let model_name = req.model.clone();
    let completion_obj = move |choices: Vec<w::CompletionChoice>, usage: Option<w::Usage>| w::Completion {
        id: id.clone(),
        object: "text_completion".into(),
        created,
        model: model_name.clone(),
        system_fingerprint: FINGERPRINT.into(),
        choices,
        usage,
    };
    if !req.stream.unwrap_or(false) {
        let mut out = Vec::new();
        let (mut pt, mut ct) = (0, 0);
        let mut next = Some((p0, first));
        let mut index = 0;
        loop {
            let (p, s) = match next.take() {
                Some(x) => x,
                None => match jobs.next() {
                    Some((p, j)) => (p, jobs::start(&wk, j).await?),
                    None => break,
                },
            };
            let o = jobs::collect(s).await?;
            pt += o.prompt_tokens;
            ct += o.eval_tokens;
            let text = if echo { format!("{p}{}", o.text) } else { o.text };
            let lp = logprobs.map(|_| completion_logprobs(o.logprobs.as_deref().unwrap_or_default(), &mut 0));
            out.push(w::CompletionChoice { text, index, logprobs: lp, finish_reason: Some(finish_reason(o.done_reason).into()) });
            index += 1;
        }
        return Ok(Json(completion_obj(out, Some(usage(pt, ct)))).into_response());
    }
    let include_usage = req.stream_options.is_some_and(|o| o.include_usage);
    let (tx, rx) = tokio::sync::mpsc::channel::<Result<SseEvent, Infallible>>(64);
    tokio::spawn(async move {
        let send = |c: w::Completion| Ok(SseEvent::default().data(serde_json::to_string(&c).unwrap_or_default()));
        let (mut pt, mut ct) = (0, 0);
        let mut next = Some((p0, first));
        let mut index = 0;
        loop {
            let (p, mut s) = match next.take() {
                Some(x) => x,
                None => match jobs.next() {
                    Some((p, j)) => match jobs::start(&wk, j).await {
                        Ok(s) => (p, s),
                        Err(e) => {
                            let _ = tx.send(Ok(SseEvent::default().data(e.flavor(FL).body().to_string()))).await;
                            return;
                        }
                    },
                    None => break,
                },
            };
            if echo && tx.send(send(completion_obj(vec![w::CompletionChoice { text: p, index, logprobs: None, finish_reason: None }], None))).await.is_err() {
                return;
            }
            let (mut pending, mut offset): (Vec<TokenLogprob>, u32) = (Vec::new(), 0);
            let take = |pending: &mut Vec<TokenLogprob>, offset: &mut u32| {
                (logprobs.is_some() && !pending.is_empty()).then(|| completion_logprobs(&std::mem::take(pending), offset))
            };
            loop {
                match s.next().await {
                    // Raw prompts are not given a reasoning section.
                    Event::Thinking(_) => {}
                    Event::Logprobs(l) => pending.extend(l),
                    Event::Text(t) => {
                        let c = w::CompletionChoice { text: t, index, logprobs: take(&mut pending, &mut offset), finish_reason: None };
                        if tx.send(send(completion_obj(vec![c], None))).await.is_err() {
                            return;
                        }
                    }
                    Event::Done(Ok(o)) => {
                        pt += o.prompt_tokens;
                        ct += o.eval_tokens;
                        let c = w::CompletionChoice {
                            text: String::new(),
                            index,
                            logprobs: take(&mut pending, &mut offset),
                            finish_reason: Some(finish_reason(o.done_reason).into()),
                        };
                        if tx.send(send(completion_obj(vec![c], None))).await.is_err() {
                            return;
                        }
                        break;
                    }
                    Event::Done(Err(e)) => {
                        let _ = tx.send(Ok(SseEvent::default().data(jobs::backend_error(e).flavor(FL).body().to_string()))).await;
                        return;
                    }
                }
            }
            index += 1;
        }
        if include_usage {
            let _ = tx.send(send(completion_obj(vec![], Some(usage(pt, ct))))).await;
        }
        let _ = tx.send(Ok(SseEvent::default().data("[DONE]"))).await;
    });
    Ok(Sse::new(tokio_stream::wrappers::ReceiverStream::new(rx)).keep_alive(KeepAlive::default()).into_response())
}
