//! # formwork-engine: the generation loop
//!
//! Turns a chat request into tokens: renders the model's chat template, runs the decode
//! loop with the sampler, applies the grammar constraint, stops on end-of-turn / stop
//! strings / token budget, and reports timings. It defines the [`Model`] trait that
//! backends (`formwork-llama`) implement; tests use a scripted fake model.
#![deny(missing_docs)]
#![forbid(unsafe_code)]

mod model;

pub use model::{Model, ModelError, ModelInfo};
