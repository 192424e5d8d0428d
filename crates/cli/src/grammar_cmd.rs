//! `formwork grammar` subcommands.

/// Subcommands.
#[derive(clap::Subcommand, Debug)]
pub enum Command {}

/// Runs a subcommand.
pub fn main(c: Command) -> anyhow::Result<()> {
    match c {}
}
