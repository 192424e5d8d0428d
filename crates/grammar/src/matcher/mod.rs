//! The matcher: compiled grammars and per-request token-mask state.
