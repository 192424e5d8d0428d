//! `formwork serve`.

/// Flags of `formwork serve`.
#[derive(clap::Args, Debug)]
pub struct Args {}

/// Runs `formwork serve`.
pub fn main(_args: Args) -> anyhow::Result<()> {
    anyhow::bail!("`formwork serve` is not built yet")
}
