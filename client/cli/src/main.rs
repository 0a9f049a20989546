//! `nimbus`: the command line of Nimbus. Parsing is in cli.rs, the work in commands/, the
//! saved login in session.rs. Exit codes: 0 ok, 1 error, 2 usage (clap).

use std::process::ExitCode;

use clap::Parser;

mod cli;
mod commands;
mod errors;
mod output;
mod session;

#[tokio::main]
async fn main() -> ExitCode {
    let cli = cli::Cli::parse();
    match commands::run(cli).await {
        Ok(()) => ExitCode::SUCCESS,
        // `nimbus ls | head`: the reader went away, which is not an error of ours.
        Err(e) if errors::is_broken_pipe(&e) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("{}", errors::render(&e));
            ExitCode::FAILURE
        }
    }
}
