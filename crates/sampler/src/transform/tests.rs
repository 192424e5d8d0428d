//! Tests of the logit transforms.

use super::*;

fn ids(c: &[Candidate]) -> Vec<u32> {
    c.iter().map(|c| c.id.0).collect()
}

fn close(a: f32, b: f32) -> bool {
    (a - b).abs() <= 1e-5 * (1.0 + b.abs())
}

#[test]
fn penalize_by_hand() {
    // repeat 2: positive halves, negative doubles, zero stays.
    assert_eq!(penalize(4.0, 1, 2.0, 0.0, 0.0), 2.0);
    assert_eq!(penalize(-4.0, 1, 2.0, 0.0, 0.0), -8.0);
    assert_eq!(penalize(0.0, 1, 2.0, 0.0, 0.0), 0.0);
    // presence once, frequency per count: 3.0/1.5 - (3*0.25 + 0.5) = 2 - 1.25
    assert_eq!(penalize(3.0, 3, 1.5, 0.5, 0.25), 0.75);
    assert_eq!(penalize(f32::NEG_INFINITY, 2, 1.1, 1.0, 1.0), f32::NEG_INFINITY);
}

#[test]
fn overlay_counts_distinct_allowed_in_vocab_tokens() {
    let logits = [1.0, 2.0, -1.0, 4.0, 0.5];
    let window: Vec<TokenId> = [3, 1, 3, 9, 2, 3].iter().map(|&i| TokenId(i)).collect();
    let mut mask = TokenMask::full(5);
    mask.remove(TokenId(2));
    let (mut scratch, mut out) = (Vec::new(), Vec::new());
    penalty_overlay(&logits, Some(&mask), &window, (2.0, 0.5, 0.25), &mut scratch, &mut out).unwrap();
    // token 9 is outside the vocabulary, token 2 is masked.
    assert_eq!(
        out,
        vec![
            Penalized { id: TokenId(1), count: 1, logit: 2.0 / 2.0 - 0.75 },
            Penalized { id: TokenId(3), count: 3, logit: 4.0 / 2.0 - 1.25 },
        ]
    );
    let bad = [1.0, f32::NAN];
    let e = penalty_overlay(&bad, None, &[TokenId(1)], (1.1, 0.0, 0.0), &mut scratch, &mut out);
    assert_eq!(e, Err(SampleError::NaN { index: 1 }));
}

#[test]
fn top_k_by_hand_with_ties_mask_and_overlay() {
    let logits = [1.0, 5.0, 3.0, 5.0, f32::NEG_INFINITY, 4.0, 2.0];
    let mut out = Vec::new();
    collect_top_k(&logits, None, &[], 3, &mut out).unwrap();
    assert_eq!(ids(&out), vec![1, 3, 5]); // tie 5.0: lower id first
    collect_top_k(&logits, None, &[], 1, &mut out).unwrap();
    assert_eq!(ids(&out), vec![1]);
    // k = 0 and k >= n: every finite token, id order.
    collect_top_k(&logits, None, &[], 0, &mut out).unwrap();
    assert_eq!(ids(&out), vec![0, 1, 2, 3, 5, 6]);
    collect_top_k(&logits, None, &[], 100, &mut out).unwrap();
    assert_eq!(ids(&out), vec![0, 1, 2, 3, 5, 6]);
    // mask out 1 and 5; overlay pushes 3 down to 0.5.
    let mut mask = TokenMask::full(7);
    mask.remove(TokenId(1));
    mask.remove(TokenId(5));
    let ov = [Penalized { id: TokenId(3), count: 1, logit: 0.5 }];
    collect_top_k(&logits, Some(&mask), &ov, 3, &mut out).unwrap();
    assert_eq!(ids(&out), vec![2, 6, 0]);
    assert_eq!(out[0].logit, 3.0);
    collect_top_k(&logits, Some(&mask), &ov, 0, &mut out).unwrap();
    assert_eq!(out.iter().map(|c| (c.id.0, c.logit)).collect::<Vec<_>>(), vec![
        (0, 1.0),
        (2, 3.0),
        (3, 0.5),
        (6, 2.0)
    ]);
}

#[test]
fn top_k_nan_only_counts_when_allowed() {
    let mut logits = vec![0.0f32; 200];
    logits[130] = f32::NAN;
    let mut out = Vec::new();
    assert_eq!(collect_top_k(&logits, None, &[], 5, &mut out), Err(SampleError::NaN { index: 130 }));
    let mut mask = TokenMask::full(200);
    mask.remove(TokenId(130));
    assert!(collect_top_k(&logits, Some(&mask), &[], 5, &mut out).is_ok());
}

#[test]
fn top_k_short_and_long_masks() {
    let logits: Vec<f32> = (0..150).map(|i| i as f32).collect();
    let mut out = Vec::new();
    // Mask over 100 tokens: 100..150 are disallowed.
    collect_top_k(&logits, Some(&TokenMask::full(100)), &[], 2, &mut out).unwrap();
    assert_eq!(ids(&out), vec![99, 98]);
    // Mask over 300 tokens: extra bits ignored.
    collect_top_k(&logits, Some(&TokenMask::full(300)), &[], 2, &mut out).unwrap();
    assert_eq!(ids(&out), vec![149, 148]);
}

#[test]
fn temperature_and_softmax_by_hand() {
    let mut c = vec![
        Candidate { id: TokenId(0), logit: 2.0 },
        Candidate { id: TokenId(1), logit: 1.0 },
        Candidate { id: TokenId(2), logit: 0.0 },
    ];
    apply_temperature(&mut c, 0.5);
    assert_eq!(c.iter().map(|c| c.logit).collect::<Vec<_>>(), vec![4.0, 2.0, 0.0]);
    let mut p = Vec::new();
    softmax(&c, &mut p);
    let z = 1.0 + (-2.0f32).exp() + (-4.0f32).exp();
    for (got, want) in p.iter().zip([1.0 / z, (-2.0f32).exp() / z, (-4.0f32).exp() / z]) {
        assert!(close(*got, want), "{got} vs {want}");
    }
    // Stable with huge logits; +inf shares the mass.
    let big = [Candidate { id: TokenId(0), logit: 1e30 }, Candidate { id: TokenId(1), logit: 1e30 }];
    softmax(&big, &mut p);
    assert_eq!(p, vec![0.5, 0.5]);
    let inf = [
        Candidate { id: TokenId(0), logit: f32::INFINITY },
        Candidate { id: TokenId(1), logit: 3.0 },
        Candidate { id: TokenId(2), logit: f32::INFINITY },
    ];
    softmax(&inf, &mut p);
    assert_eq!(p, vec![0.5, 0.0, 0.5]);
}

#[test]
fn top_p_by_hand() {
    let p = [0.5, 0.3, 0.15, 0.05];
    assert_eq!(top_p(&p, 0.4), 1); // 0.5 > 0.4
    assert_eq!(top_p(&p, 0.7), 2); // 0.8 > 0.7
    assert_eq!(top_p(&p, 0.9), 3); // 0.95 > 0.9
    assert_eq!(top_p(&p, 0.0), 1);
    assert_eq!(top_p(&p, 1.0), 4);
    assert_eq!(top_p(&p, 0.999), 4);
}

#[test]
fn min_p_by_hand() {
    let mut c: Vec<Candidate> = (0..4).map(|i| Candidate { id: TokenId(i), logit: 0.0 }).collect();
    let mut p = vec![0.1, 0.5, 0.3, 0.1];
    min_p(&mut c, &mut p, 0.5); // cut = 0.25
    assert_eq!(ids(&c), vec![1, 2]);
    assert_eq!(p, vec![0.5, 0.3]);
    min_p(&mut c, &mut p, 0.0);
    assert_eq!(ids(&c), vec![1, 2]);
    min_p(&mut c, &mut p, 1.0);
    assert_eq!(ids(&c), vec![1]);
}

#[test]
fn exp_nonpositive_matches_libm() {
    let mut worst = 0.0f64;
    for i in 0..=200_000 {
        let x = -(i as f32) * 87.0 / 200_000.0;
        let want = (x as f64).exp();
        let got = exp_nonpositive(x) as f64;
        worst = worst.max((got - want).abs() / want);
    }
    assert!(worst < 3e-7, "worst relative error {worst}");
    assert_eq!(exp_nonpositive(0.0), 1.0);
    assert_eq!(exp_nonpositive(-100.0), 0.0);
    assert_eq!(exp_nonpositive(f32::NEG_INFINITY), 0.0);
    assert!(exp_nonpositive(f32::NAN).is_nan());
}

#[test]
fn sum_matches_serial_sum() {
    for n in [0, 1, 7, 8, 9, 100, 1001] {
        let v: Vec<f32> = (0..n).map(|i| (i % 13) as f32 * 0.37).collect();
        let serial: f64 = v.iter().map(|&x| x as f64).sum();
        assert!((sum(&v) - serial).abs() < 1e-9, "{n}");
    }
}

#[test]
fn draw_by_hand() {
    let w = [0.2, 0.0, 0.5, 0.3];
    assert_eq!(draw(&w, 0.0), 0);
    assert_eq!(draw(&w, 0.19), 0);
    assert_eq!(draw(&w, 0.21), 2);
    assert_eq!(draw(&w, 0.69), 2);
    assert_eq!(draw(&w, 0.71), 3);
    assert_eq!(draw(&w, 0.999_999_9), 3);
    // Unnormalised weights, zero weight never picked even at u = 0.
    assert_eq!(draw(&[0.0, 2.0, 2.0], 0.0), 1);
    assert_eq!(draw(&[2.0, 2.0, 0.0], 0.75), 1);
}

#[test]
fn block_max_sees_every_lane_and_nan() {
    for len in [1, 7, 8, 9, 63, 64] {
        for hot in 0..len {
            let mut v = vec![-1.0f32; len];
            v[hot] = 3.0;
            assert_eq!(block_max(&v), (3.0, false));
            v[hot] = f32::NAN;
            let rest = if len > 1 { -1.0 } else { f32::NEG_INFINITY };
            assert_eq!(block_max(&v), (rest, true));
            if let Ok(full) = <[f32; BLOCK]>::try_from(&v[..]) {
                assert_eq!(block_max_full(&full), (rest, true));
                v[hot] = 3.0;
                let full: [f32; BLOCK] = v[..].try_into().unwrap();
                assert_eq!(block_max_full(&full), (3.0, false));
            }
        }
    }
}
