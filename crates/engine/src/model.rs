//! The [`Model`] trait: what the generation loop needs from a backend (defined in
//! `formwork-model`, so that backends do not depend on the engine).

pub use formwork_model::{Model, ModelError, ModelInfo};
