//! `nimbus`: the command line of Nimbus. Parsing is in cli.rs, the work in commands/, the
//! saved login in session.rs. Exit codes: 0 ok, 1 error, 2 usage (clap).

use std::process::ExitCode;

use clap::Parser;

/// The drive frees many 4 MiB block buffers; glibc's allocator keeps them resident, mimalloc
/// gives them back (a mount's RSS stays near its cache bound). The drive that `nimbus mount`
/// starts runs without transparent huge pages (`commands::mount::DRIVE_ALLOCATOR`): in 2 MiB
/// pages freed buffers stayed resident (docs/BENCHMARKS.md).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

mod cli;
mod commands;
mod errors;
mod output;
mod session;

fn main() -> ExitCode {
    let cli = cli::Cli::parse();
    // A foreground mount runs its own runtime (and the FUSE session threads); everything
    // else shares one.
    let result = match &cli.command {
        cli::Command::Mount(args) if args.foreground => commands::mount::foreground(args),
        _ => tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()
            .map_err(anyhow::Error::from)
            .and_then(|rt| rt.block_on(commands::run(cli))),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        // `nimbus ls | head`: the reader went away, which is not an error of ours.
        Err(e) if errors::is_broken_pipe(&e) => ExitCode::SUCCESS,
        // Each failure was printed as it happened (`nimbus rm a b c`).
        Err(e) if e.is::<errors::Reported>() => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("{}", errors::render(&e));
            ExitCode::FAILURE
        }
    }
}
