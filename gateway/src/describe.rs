//! `nimbus-gateway describe [--json]`: what this binary accepts, read from its own clap
//! definitions (every subcommand's flags, their `NIMBUS_*` variables, defaults, whether they take
//! a value, help), plus the variables read outside clap, the health routes and the metrics. Tools
//! (the deployment validator in infra/deploy/validate, the docs check in tests/) read this
//! instead of scraping the source, so it cannot drift from what the binary does.

use clap::CommandFactory;
use serde::Serialize;

use crate::config::Cli;
use crate::metrics::MetricInfo;

/// Bumped when a field changes meaning or goes away (new fields may appear at any time).
pub const FORMAT: u32 = 1;

#[derive(Debug, Serialize)]
pub struct Description {
    pub format: u32,
    pub version: String,
    /// The binary itself: its own flags and its subcommands.
    #[serde(flatten)]
    pub command: CommandInfo,
    /// Variables read outside the flags (a flag's variable is in its `env`).
    pub env: Vec<EnvInfo>,
    pub health: Health,
    pub metrics: &'static [MetricInfo],
}

#[derive(Debug, Serialize)]
pub struct CommandInfo {
    pub name: String,
    pub about: Option<String>,
    pub args: Vec<ArgInfo>,
    pub commands: Vec<CommandInfo>,
}

#[derive(Debug, Serialize)]
pub struct ArgInfo {
    /// clap's id (the field name).
    pub id: String,
    /// `--long` without the dashes; None for a positional argument.
    pub long: Option<String>,
    pub short: Option<char>,
    /// Other accepted long names, hidden ones included (`--grace` for `--gc-grace`).
    pub aliases: Vec<String>,
    pub env: Option<String>,
    /// False for a switch (`--json`); a switch's variable takes `true` / `false`.
    pub takes_value: bool,
    pub value_name: Option<String>,
    pub defaults: Vec<String>,
    /// The only values accepted, when the flag has a fixed set (`--store`: local, s3).
    pub possible_values: Vec<String>,
    pub required: bool,
    pub positional: bool,
    /// The value is a secret (not shown in `--help`).
    pub secret: bool,
    pub hidden: bool,
    pub help: Option<String>,
}

#[derive(Debug, Serialize)]
pub struct EnvInfo {
    pub name: &'static str,
    pub commands: &'static [&'static str],
    pub secret: bool,
    pub help: &'static str,
}

#[derive(Debug, Serialize)]
pub struct Health {
    pub liveness: &'static str,
    pub readiness: &'static str,
}

pub fn describe() -> Description {
    let mut cmd = Cli::command();
    // Adds what clap generates (`--help`, `--version`, the `help` subcommand) as parsing does.
    cmd.build();
    Description {
        format: FORMAT,
        version: cmd.get_version().unwrap_or_default().to_owned(),
        command: command_info(&cmd),
        env: vec![EnvInfo {
            name: crate::config::ADMIN_PASSWORD_ENV,
            commands: &["serve"],
            secret: true,
            help: "The first administrator's password, used when the database has no user yet \
                   (otherwise one is generated and printed once).",
        }],
        health: Health { liveness: crate::api::LIVENESS_PATH, readiness: crate::api::READINESS_PATH },
        metrics: crate::metrics::METRICS,
    }
}

fn command_info(cmd: &clap::Command) -> CommandInfo {
    CommandInfo {
        name: cmd.get_name().to_owned(),
        about: cmd.get_long_about().or(cmd.get_about()).map(|s| s.to_string()),
        args: cmd.get_arguments().map(arg_info).collect(),
        commands: cmd.get_subcommands().map(command_info).collect(),
    }
}

fn arg_info(arg: &clap::Arg) -> ArgInfo {
    let strings = |v: &[clap::builder::OsStr]| v.iter().map(|s| s.to_string_lossy().into_owned()).collect();
    ArgInfo {
        id: arg.get_id().to_string(),
        long: arg.get_long().map(str::to_owned),
        short: arg.get_short(),
        aliases: arg.get_all_aliases().unwrap_or_default().into_iter().map(str::to_owned).collect(),
        env: arg.get_env().map(|e| e.to_string_lossy().into_owned()),
        takes_value: arg.get_action().takes_values(),
        value_name: arg.get_value_names().map(|n| n.iter().map(|s| s.as_str()).collect::<Vec<_>>().join(" ")),
        defaults: strings(arg.get_default_values()),
        possible_values: arg
            .get_possible_values()
            .iter()
            .filter(|v| !v.is_hide_set())
            .map(|v| v.get_name().to_owned())
            .collect(),
        required: arg.is_required_set(),
        positional: arg.is_positional(),
        secret: arg.is_hide_env_values_set(),
        hidden: arg.is_hide_set(),
        help: arg.get_long_help().or(arg.get_help()).map(|s| s.to_string()),
    }
}

/// The table `describe` prints without `--json`: one line per flag of each subcommand.
pub fn table(d: &Description) -> String {
    use std::fmt::Write;
    let mut out = String::new();
    fn walk(out: &mut String, path: &str, c: &CommandInfo) {
        let _ = writeln!(out, "{path}");
        for a in c.args.iter().filter(|a| !a.hidden) {
            let name = a.long.as_deref().map_or_else(|| a.id.clone(), |l| format!("--{l}"));
            let default = match a.defaults.as_slice() {
                [] => String::new(),
                [d] if d.is_empty() => "  (default \"\")".to_owned(),
                d => format!("  (default {})", d.join(",")),
            };
            let _ = writeln!(out, "  {name:<28} {:<30}{default}", a.env.as_deref().unwrap_or(""));
        }
        for s in &c.commands {
            walk(out, &format!("{path} {}", s.name), s);
        }
    }
    walk(&mut out, &d.command.name, &d.command);
    let _ = writeln!(out, "other variables");
    for e in &d.env {
        let _ = writeln!(out, "  {:<28} {}", e.name, e.commands.join(","));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn find<'a>(d: &'a Description, cmd: &str, long: &str) -> &'a ArgInfo {
        let c = d.command.commands.iter().find(|c| c.name == cmd).unwrap_or_else(|| panic!("no command {cmd}"));
        c.args.iter().find(|a| a.long.as_deref() == Some(long)).unwrap_or_else(|| panic!("{cmd}: no --{long}"))
    }

    #[test]
    fn known_flags() {
        let d = describe();
        let listen = find(&d, "serve", "listen");
        assert_eq!(listen.env.as_deref(), Some("NIMBUS_LISTEN"));
        assert_eq!(listen.defaults, ["127.0.0.1:8080"]);
        assert!(listen.takes_value);
        let store = find(&d, "serve", "store");
        assert_eq!(store.possible_values, ["local", "s3"]);
        assert!(!find(&d, "serve", "plain-http").takes_value);
        assert!(find(&d, "serve", "s3-secret-key").secret);
        // Flattened serve flags reach the operator commands, with the hidden alias.
        let grace = find(&d, "gc", "gc-grace");
        assert_eq!(grace.aliases, ["grace"]);
        assert_eq!(grace.defaults, ["24h"]);
        assert!(!find(&d, "fsck", "repair").takes_value);
        assert_eq!(find(&d, "fsck", "sample").env, None);
    }

    #[test]
    fn every_env_name_once_per_command() {
        let d = describe();
        for c in &d.command.commands {
            let mut env: Vec<_> = c.args.iter().filter_map(|a| a.env.as_deref()).collect();
            let n = env.len();
            env.sort_unstable();
            env.dedup();
            assert_eq!(env.len(), n, "{}: a variable names two flags", c.name);
            assert!(env.iter().all(|e| e.starts_with("NIMBUS_")), "{}: {env:?}", c.name);
        }
        let json = serde_json::to_value(&d).expect("serializes");
        assert_eq!(json["health"]["readiness"], "/readyz");
        assert_eq!(json["format"], FORMAT);
        assert!(table(&d).contains("NIMBUS_CACHE_MEM"));
    }
}
