use clap::Parser;
use nimbus_gateway::config::{Cli, Command};

// glibc's allocator keeps freed multi-MiB block buffers in per-thread arenas, so a long
// transfer leaves hundreds of MiB resident; mimalloc hands them back.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    let mut runtime = tokio::runtime::Builder::new_multi_thread();
    runtime.enable_all();
    if let Command::Serve(_) = &cli.command {
        // One worker: it serves the first listener and runs the background work; further
        // request threads each get a runtime of their own (server.rs, `spawn_request_threads`).
        runtime.worker_threads(1);
    }
    match runtime.build() {
        Ok(rt) => rt.block_on(run(cli)),
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}

async fn run(cli: Cli) -> std::process::ExitCode {
    let result = match cli.command {
        Command::Serve(args) => {
            tracing_subscriber::fmt()
                .with_env_filter(nimbus_gateway::config::log_filter(&args.log))
                .with_writer(std::io::stderr)
                // Colour codes are for a terminal; in a log file they are noise (and formatting
                // them into every request's span cost CPU on the hot path).
                .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
                .fmt_fields(nimbus_gateway::logfmt::Fields)
                .init();
            nimbus_gateway::server::run(*args, shutdown_signal()).await
        }
        Command::Gc(args) => return exit(nimbus_gateway::ops::gc_command(&args).await),
        Command::Fsck(args) => return exit(nimbus_gateway::ops::fsck_command(&args).await),
        Command::Migrate(args) => return exit(nimbus_gateway::ops::migrate_command(&args).await),
        Command::Describe(args) => return describe(args.json),
        Command::LdapSync(args) => return exit(nimbus_gateway::ops::ldap_sync_command(&args).await),
    };
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            // The chain of causes, for people; no debug dump.
            eprintln!("error: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}

fn describe(json: bool) -> std::process::ExitCode {
    let d = nimbus_gateway::describe::describe();
    if !json {
        return print_out(&nimbus_gateway::describe::table(&d));
    }
    match serde_json::to_string_pretty(&d) {
        Ok(s) => print_out(&(s + "\n")),
        Err(e) => {
            eprintln!("error: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}

/// Writes `text` to standard output. A reader that stopped early (`| head`) ends the output
/// quietly, as for any command-line tool, instead of `print!`'s panic on the broken pipe.
fn print_out(text: &str) -> std::process::ExitCode {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: cannot write the output: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}

/// Operator commands decide their own exit code (fsck: 1 while problems remain).
fn exit(result: anyhow::Result<std::process::ExitCode>) -> std::process::ExitCode {
    result.unwrap_or_else(|e| {
        eprintln!("error: {e:#}");
        std::process::ExitCode::from(2)
    })
}

async fn shutdown_signal() {
    let ctrl_c = tokio::signal::ctrl_c();
    let mut term = match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
        Ok(s) => s,
        Err(_) => return ctrl_c.await.unwrap_or(()),
    };
    tokio::select! {
        _ = ctrl_c => {}
        _ = term.recv() => {}
    }
    tracing::info!("shutting down");
}
