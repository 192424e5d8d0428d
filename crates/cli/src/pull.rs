//! `formwork pull`.

/// Flags of `formwork pull`.
#[derive(clap::Args, Debug)]
pub struct Args {}

/// Runs `formwork pull`.
pub fn main(_args: Args) -> anyhow::Result<()> {
    anyhow::bail!("`formwork pull` is not built yet")
}
