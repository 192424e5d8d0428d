//! Tests of the automaton.

use super::*;
use crate::Limits;

/// Continuation bytes to try in `a..=b`: all of them for the last level of a 2- or
/// 3-byte character, else the ends and the middle.
fn samples(a: u8, b: u8, all: bool) -> Vec<u8> {
    if all {
        (a..=b).collect()
    } else {
        vec![a, a + (b - a) / 2, b]
    }
}

/// `char_step`'s answer, wherever it gives one, is the state that stepping every valid
/// character byte by byte reaches (and it answers for the plain string classes, which is
/// what it is for).
#[test]
fn char_step_agrees_with_byte_steps() {
    let cases: &[(&str, &[&[u8]])] = &[
        // (grammar, inputs whose end states are checked)
        (r#"root ::= "\"" [^"\\]* "\"""#, &[b"", b"\"", "\"é".as_bytes()]),
        (r#"root ::= [^é]* "x""#, &[b"", "ab".as_bytes()]),
        (r#"root ::= [a-zé-ü]{0,5} ";""#, &[b"", "é".as_bytes(), "éé".as_bytes()]),
        (r#"root ::= ([Ā-࿿] | "ab")* "!""#, &[b"", "Ā".as_bytes()]),
        (r#"root ::= ("a" [^\n]) | ("b" [😀-😏]*)"#, &[b"a", b"b"]),
    ];
    let limits = Limits::default();
    let mut answered = 0;
    for (src, inputs) in cases {
        let g = crate::gbnf::parse(src, &limits).unwrap();
        let flat = super::super::lower::lower(&g, None, &limits).unwrap();
        let (aut, start) = Automaton::new(flat, None, limits.max_stacks, limits.max_states).unwrap();
        for input in inputs.iter() {
            let s = aut.steps(start, input);
            assert!(s != DEAD && s != OVERFLOW, "{src}: {input:?} is a prefix");
            for &((lo, hi), rest) in UTF8_SEQUENCES {
                for lead in lo..=hi {
                    let fast = aut.stepper().char_step(s, lead, rest);
                    let Some(fast) = fast else { continue };
                    answered += 1;
                    // Every sampled character, byte by byte.
                    let mut chars: Vec<Vec<u8>> = vec![vec![lead]];
                    for (level, &(a, b)) in rest.iter().enumerate() {
                        let all = level + 1 == rest.len() && rest.len() <= 2;
                        chars = chars
                            .into_iter()
                            .flat_map(|c| samples(a, b, all).into_iter().map(move |x| [c.clone(), vec![x]].concat()))
                            .collect();
                    }
                    for c in chars {
                        let slow = aut.steps(s, &c);
                        let slow = if slow == OVERFLOW { DEAD } else { slow };
                        assert_eq!(fast, slow, "{src}: after {input:?}, character {c:x?}");
                    }
                }
            }
        }
    }
    assert!(answered > 100, "char_step answered only {answered} times");
}

/// A class is one stack however many UTF-8 forms it has (a dispatch rule), and filling in
/// all of a state's transitions at once agrees with stepping each byte on its own.
#[test]
fn classes_are_one_stack_and_step_all_agrees_with_step() {
    let limits = Limits::default();
    let cases: &[(&str, &[&[u8]])] = &[
        (r#"root ::= "\"" ([^"\\] | "\\" ["\\/bfnrtu])* "\"""#, &[b"\"", "\"aé".as_bytes(), b"\"\\"]),
        (r#"root ::= [a-zé-ü]{0,5} ";" | [^x]+ "!""#, &[b"", "é".as_bytes(), b"ab"]),
        (r#"root ::= ([Ā-࿿] | "ab")* "!" | "a" [😀-😏]"#, &[b"", b"a", "Ā".as_bytes()]),
    ];
    for (src, inputs) in cases {
        let g = crate::gbnf::parse(src, &limits).unwrap();
        let lowered = || super::super::lower::lower(&g, None, &limits).unwrap();
        let (one, s1) = Automaton::new(lowered(), None, limits.max_stacks, limits.max_states).unwrap();
        let (all, s2) = Automaton::new(lowered(), None, limits.max_stacks, limits.max_states).unwrap();
        for input in inputs.iter() {
            let (a, b) = (one.steps(s1, input), all.steps(s2, input));
            assert!(a != DEAD && b != DEAD, "{src}: {input:?} is a prefix");
            all.stepper().step_all(b);
            for byte in 0..=255u8 {
                let (x, y) = (one.step(a, byte), all.step(b, byte));
                assert_eq!(one.info(x).stacks.len(), all.info(y).stacks.len(), "{src}: {input:?} then {byte:#x}");
                assert_eq!(one.info(x).first, all.info(y).first, "{src}: {input:?} then {byte:#x}");
                assert_eq!(one.info(x).accepting, all.info(y).accepting, "{src}: {input:?} then {byte:#x}");
            }
        }
    }
    // Inside a JSON-style string: the character class, the escape's backslash and the
    // closing quote.
    let g = crate::gbnf::parse(r#"root ::= "\"" ([^"\\] | "\\" ["\\/bfnrtu])* "\"""#, &limits).unwrap();
    let (aut, s) = Automaton::new(super::super::lower::lower(&g, None, &limits).unwrap(), None, limits.max_stacks, limits.max_states).unwrap();
    let s = aut.steps(s, "\"é".as_bytes());
    assert_eq!(aut.info(s).stacks.len(), 3);
    assert!(aut.info(s).first.contains(0xC3) && aut.info(s).first.contains(b'a') && !aut.info(s).first.contains(0x80));
}
