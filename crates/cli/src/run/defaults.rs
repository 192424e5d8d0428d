//! A model's own settings as defaults of `formwork run`: an alias's (or an Ollama model's)
//! system prompt and parameters fill the flags not given; every flag given wins.

use super::Args;
use anyhow::Result;
use formwork_models::{Cache, Defaults, LocalModel, Progress};

/// The model `--model` names, when it is on this machine (an alias whose base is a known
/// model not yet pulled is pulled here, to learn its defaults); `None` leaves resolving (and
/// pulling) to the caller as before.
pub(super) fn find(model: &str) -> Result<Option<LocalModel>> {
    let cache = Cache::from_env()?;
    Ok(match cache.find(model) {
        Ok(found) => found,
        Err(_) if cache.alias(model)?.is_some() => Some(cache.resolve_model(model, Progress::Stderr)?),
        Err(e) => return Err(e.into()),
    })
}

/// Fills the flags `args` leaves unset from `d` (`--system` only when not `--raw`).
pub(super) fn apply(args: &mut Args, d: &Defaults) {
    let p = &d.parameters;
    if !args.raw && args.system.is_none() {
        args.system = d.system.clone();
    }
    args.temperature = args.temperature.or(p.temperature);
    args.top_k = args.top_k.or(p.top_k.map(|k| k as usize));
    args.top_p = args.top_p.or(p.top_p);
    args.min_p = args.min_p.or(p.min_p);
    args.repeat_penalty = args.repeat_penalty.or(p.repeat_penalty);
    args.repeat_last_n = args.repeat_last_n.or(p.repeat_last_n.map(|n| n as usize));
    args.seed = args.seed.or(p.seed);
    args.num_predict = args.num_predict.or(p.num_predict.map(|n| n as usize));
    args.ctx_size = args.ctx_size.or(p.num_ctx.map(|n| n as usize));
    if args.stop.is_empty() {
        args.stop = p.stop.clone();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;
    use formwork_models::Parameters;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        args: Args,
    }

    fn args(flags: &[&str]) -> Args {
        Cli::parse_from(["run"].iter().chain(flags)).args
    }

    #[test]
    fn flags_given_win_over_the_model_defaults() {
        let d = Defaults {
            system: Some("You are a pirate.".into()),
            template: None,
            parameters: Parameters { temperature: Some(0.2), top_k: Some(5), num_ctx: Some(1024), stop: vec!["END".into()], ..Default::default() },
        };
        let mut a = args(&["--temperature", "0.9", "hi"]);
        apply(&mut a, &d);
        assert_eq!(a.system.as_deref(), Some("You are a pirate."));
        assert_eq!((a.temperature, a.top_k, a.ctx_size), (Some(0.9), Some(5), Some(1024)));
        assert_eq!(a.stop, ["END"]);

        let mut a = args(&["--system", "Be brief.", "--stop", "X", "hi"]);
        apply(&mut a, &d);
        assert_eq!((a.system.as_deref(), a.stop.as_slice()), (Some("Be brief."), &["X".to_string()][..]));

        let mut a = args(&["--raw", "hi"]);
        apply(&mut a, &d);
        assert_eq!(a.system, None, "a raw prompt gets no system prompt");
    }
}
