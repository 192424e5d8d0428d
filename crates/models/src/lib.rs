//! formwork-models: the model cache, named models and `pull`.
#![deny(missing_docs)]
