//! GBNF parse → print → parse must give back the same grammar, and nothing may panic.
//!
//! Run: `cargo +nightly fuzz run gbnf_roundtrip -- -dict=fuzz/gbnf.dict`. Crashes found
//! here become ordinary tests in `crates/grammar/src/gbnf/tests/roundtrip.rs`.
#![no_main]

use formwork_grammar::{gbnf, Limits};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let limits = Limits::default();
    let Ok(g) = gbnf::parse(text, &limits) else { return };
    let printed = gbnf::print(&g);
    let back = match gbnf::parse(&printed, &limits) {
        Ok(back) => back,
        Err(e) => panic!("printed grammar does not parse: {e}\ninput: {text:?}\nprinted:\n{printed}"),
    };
    assert!(back == g, "round trip changed the grammar\ninput: {text:?}\nprinted:\n{printed}");
    // Printing is idempotent.
    assert_eq!(gbnf::print(&back), printed);
});
