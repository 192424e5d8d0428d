//! formwork-schema: JSON Schema to grammar IR, and final validation.
#![deny(missing_docs)]
