//! [`SamplerOptions`]: the knobs, their defaults (Ollama's) and their validation.

use crate::SampleError;

/// Sampling options. [`Default`] gives Ollama's defaults.
///
/// | field | default | disabled by | meaning |
/// |---|---|---|---|
/// | `temperature` | 0.8 | `<= 0` means greedy | logits are divided by it before the softmax |
/// | `top_k` | 40 | `0` (or `>=` vocabulary size) | keep only the `k` highest logits |
/// | `top_p` | 0.9 | `>= 1` | keep the smallest prefix (by probability) whose mass exceeds `p` |
/// | `min_p` | 0.0 | `<= 0` | drop tokens with probability `< min_p * max probability` |
/// | `repeat_penalty` | 1.1 | `1.0` | recent tokens: positive logits divided, negative multiplied |
/// | `repeat_last_n` | 64 | `0` | how many of the most recent history tokens the penalties look at (`usize::MAX`: all) |
/// | `presence_penalty` | 0.0 | `0.0` | subtracted once from every recent token's logit |
/// | `frequency_penalty` | 0.0 | `0.0` | subtracted `count` times from every recent token's logit |
/// | `seed` | `None` | — | `None` draws a random seed (see [`Sampler::seed`](crate::Sampler::seed)) |
#[derive(Debug, Clone, PartialEq)]
pub struct SamplerOptions {
    /// Softmax temperature; `<= 0` selects greedy decoding (argmax).
    pub temperature: f32,
    /// Keep the `top_k` highest logits; `0` means no limit.
    pub top_k: usize,
    /// Nucleus sampling threshold in `[0, 1]`; values `>= 1` disable it.
    pub top_p: f32,
    /// Minimum probability relative to the most likely token, in `[0, 1]`; `<= 0` disables it.
    pub min_p: f32,
    /// Repetition penalty (`> 0`); `1.0` disables it.
    pub repeat_penalty: f32,
    /// Number of most recent history tokens the penalties consider; `0` disables all penalties.
    pub repeat_last_n: usize,
    /// Subtracted once from the logit of each token present in the window.
    pub presence_penalty: f32,
    /// Subtracted `count` times from the logit of each token present in the window.
    pub frequency_penalty: f32,
    /// RNG seed; `None` picks a random one.
    pub seed: Option<u64>,
}

impl Default for SamplerOptions {
    fn default() -> Self {
        SamplerOptions {
            temperature: 0.8,
            top_k: 40,
            top_p: 0.9,
            min_p: 0.0,
            repeat_penalty: 1.1,
            repeat_last_n: 64,
            presence_penalty: 0.0,
            frequency_penalty: 0.0,
            seed: None,
        }
    }
}

impl SamplerOptions {
    /// Greedy decoding (temperature 0) with every other option at its default.
    pub fn greedy() -> Self {
        SamplerOptions { temperature: 0.0, ..Self::default() }
    }

    /// Checks every field; the error names the field, the bad value and the accepted range.
    pub fn validate(&self) -> Result<(), SampleError> {
        fn bad(msg: String) -> Result<(), SampleError> {
            Err(SampleError::InvalidOption(msg))
        }
        if self.temperature.is_nan() || self.temperature.is_infinite() {
            return bad(format!(
                "temperature is {}; use a finite value (0 for greedy, 0.8 is the default)",
                self.temperature
            ));
        }
        if self.top_p.is_nan() || self.top_p < 0.0 {
            return bad(format!("top_p is {}; use a value in [0, 1] (1 disables top-p)", self.top_p));
        }
        if self.min_p.is_nan() || self.min_p > 1.0 {
            return bad(format!("min_p is {}; use a value in [0, 1] (0 disables min-p)", self.min_p));
        }
        if !self.repeat_penalty.is_finite() || self.repeat_penalty <= 0.0 {
            return bad(format!(
                "repeat_penalty is {}; use a finite value > 0 (1.0 disables it)",
                self.repeat_penalty
            ));
        }
        if !self.presence_penalty.is_finite() {
            return bad(format!(
                "presence_penalty is {}; use a finite value (0 disables it)",
                self.presence_penalty
            ));
        }
        if !self.frequency_penalty.is_finite() {
            return bad(format!(
                "frequency_penalty is {}; use a finite value (0 disables it)",
                self.frequency_penalty
            ));
        }
        Ok(())
    }

    /// True when temperature selects greedy decoding.
    #[inline]
    pub fn is_greedy(&self) -> bool {
        self.temperature <= 0.0
    }

    /// True when some penalty would change a logit.
    #[inline]
    pub fn has_penalties(&self) -> bool {
        self.repeat_last_n > 0
            && (self.repeat_penalty != 1.0 || self.presence_penalty != 0.0 || self.frequency_penalty != 0.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_ollamas() {
        let o = SamplerOptions::default();
        assert_eq!(
            (o.temperature, o.top_k, o.top_p, o.min_p, o.repeat_penalty, o.repeat_last_n),
            (0.8, 40, 0.9, 0.0, 1.1, 64)
        );
        assert_eq!((o.presence_penalty, o.frequency_penalty, o.seed), (0.0, 0.0, None));
        assert!(o.validate().is_ok());
        assert!(o.has_penalties() && !o.is_greedy());
        assert!(SamplerOptions::greedy().is_greedy());
    }

    #[test]
    fn validation_names_the_field() {
        let cases: Vec<(SamplerOptions, &str)> = vec![
            (SamplerOptions { temperature: f32::NAN, ..Default::default() }, "temperature"),
            (SamplerOptions { temperature: f32::INFINITY, ..Default::default() }, "temperature"),
            (SamplerOptions { top_p: -0.1, ..Default::default() }, "top_p"),
            (SamplerOptions { top_p: f32::NAN, ..Default::default() }, "top_p"),
            (SamplerOptions { min_p: 1.5, ..Default::default() }, "min_p"),
            (SamplerOptions { min_p: f32::NAN, ..Default::default() }, "min_p"),
            (SamplerOptions { repeat_penalty: 0.0, ..Default::default() }, "repeat_penalty"),
            (SamplerOptions { repeat_penalty: -1.0, ..Default::default() }, "repeat_penalty"),
            (SamplerOptions { presence_penalty: f32::NAN, ..Default::default() }, "presence_penalty"),
            (SamplerOptions { frequency_penalty: f32::INFINITY, ..Default::default() }, "frequency_penalty"),
        ];
        for (o, field) in cases {
            match o.validate() {
                Err(SampleError::InvalidOption(m)) => assert!(m.starts_with(field), "{m}"),
                other => panic!("{field}: expected InvalidOption, got {other:?}"),
            }
        }
        // Lenient, documented: negative temperature is greedy, top_p > 1 and min_p < 0 disable.
        for o in [
            SamplerOptions { temperature: -1.0, ..Default::default() },
            SamplerOptions { top_p: 2.0, ..Default::default() },
            SamplerOptions { min_p: -0.5, ..Default::default() },
        ] {
            assert!(o.validate().is_ok(), "{o:?}");
        }
    }
}
