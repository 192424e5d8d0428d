//! `formwork run`.

/// Flags of `formwork run`.
#[derive(clap::Args, Debug)]
pub struct Args {}

/// Runs `formwork run`.
pub fn main(_args: Args) -> anyhow::Result<()> {
    anyhow::bail!("`formwork run` is not built yet")
}
