//! formwork-server (see the crate docs once written).
#![deny(missing_docs)]
