//! `nimbus-gateway describe --json` (gateway/src/describe.rs): what tools (the deployment
//! validator, the docs check) read instead of the gateway's source. Checked against the same
//! binary's `--help`, which clap renders from the definitions independently of `describe`.

use std::collections::BTreeMap;
use std::process::Command;

use nimbus_e2e::bins::{gateway_bin, gateway_describe};
use serde_json::Value;

/// One flag as `--help` shows it: its variable and default, if shown.
#[derive(Debug, Default, PartialEq)]
struct HelpFlag {
    env: Option<String>,
    default: Option<String>,
}

/// `nimbus-gateway [CMD] --help`, parsed: long flag -> what its entry shows. An entry starts on a
/// line indented less than 8 columns whose first non-blank character is `-` (the lists of
/// possible values are indented further) and runs until the next one.
fn help_flags(cmd: &[&str]) -> BTreeMap<String, HelpFlag> {
    let out = Command::new(gateway_bin().expect("gateway binary"))
        .args(cmd)
        .arg("--help")
        // A set NIMBUS_* variable would show its value instead of `NAME=`.
        .env_clear()
        .output()
        .expect("run --help");
    assert!(out.status.success(), "{cmd:?} --help: {}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8(out.stdout).expect("UTF-8 help");
    let mut flags = BTreeMap::new();
    let mut current: Option<String> = None;
    for line in text.lines() {
        let t = line.trim_start();
        if t.starts_with('-') && line.len() - t.len() < 8 {
            // `-h, --help`, `--listen <LISTEN>`, `-V, --version`
            let long = t.split([' ', ',']).find_map(|w| w.strip_prefix("--")).expect("a long flag");
            current = Some(long.to_owned());
            flags.insert(long.to_owned(), HelpFlag::default());
        }
        let Some(flag) = current.as_ref().and_then(|c| flags.get_mut(c)) else { continue };
        if let Some(rest) = t.split_once("[env: ").map(|(_, r)| r) {
            // `[env: NAME=]`, or `[env: NAME]` for a secret
            flag.env = Some(rest.split(['=', ']']).next().expect("env name").to_owned());
        }
        if let Some(rest) = t.split_once("[default: ").map(|(_, r)| r) {
            let shown = rest.rsplit_once(']').map_or(rest, |(d, _)| d);
            // An empty default shows as `""`.
            flag.default = Some(if shown == "\"\"" { String::new() } else { shown.to_owned() });
        }
    }
    flags
}

fn command<'a>(d: &'a Value, name: &str) -> &'a Value {
    d["commands"]
        .as_array()
        .expect("commands")
        .iter()
        .find(|c| c["name"] == name)
        .unwrap_or_else(|| panic!("no {name}"))
}

fn flag<'a>(c: &'a Value, long: &str) -> &'a Value {
    c["args"].as_array().expect("args").iter().find(|a| a["long"] == long).unwrap_or_else(|| panic!("no --{long}"))
}

#[test]
fn known_flags_with_their_variables_and_defaults() {
    let d = gateway_describe().expect("describe --json");
    assert_eq!(d["format"], 1);
    let serve = command(&d, "serve");
    let listen = flag(serve, "listen");
    assert_eq!(listen["env"], "NIMBUS_LISTEN");
    assert_eq!(listen["defaults"], serde_json::json!(["127.0.0.1:8080"]));
    assert_eq!(listen["takes_value"], true);
    let mem = flag(serve, "cache-mem");
    assert_eq!((&mem["env"], &mem["defaults"][0]), (&Value::from("NIMBUS_CACHE_MEM"), &Value::from("256MiB")));
    assert_eq!(flag(serve, "store")["possible_values"], serde_json::json!(["local", "s3"]));
    assert_eq!(flag(serve, "plain-http")["takes_value"], false);
    assert_eq!(flag(serve, "trusted-proxies")["env"], "NIMBUS_TRUSTED_PROXIES");
    assert_eq!(flag(serve, "s3-secret-key")["secret"], true);
    // Operator commands take serve's flags (same database and store) and their own.
    let gc = command(&d, "gc");
    assert_eq!(flag(gc, "gc-grace")["aliases"], serde_json::json!(["grace"]));
    assert_eq!(flag(gc, "json")["env"], Value::Null);
    assert_eq!(flag(command(&d, "fsck"), "repair")["takes_value"], false);
    assert!(command(&d, "migrate")["args"].as_array().expect("args").len() > 30);
    // Beside the flags.
    let env: Vec<_> = d["env"].as_array().expect("env").iter().map(|e| e["name"].clone()).collect();
    assert!(env.contains(&Value::from("NIMBUS_ADMIN_PASSWORD")), "{env:?}");
    assert_eq!(d["health"]["liveness"], "/healthz");
    assert_eq!(d["health"]["readiness"], "/readyz");
    let metric = d["metrics"].as_array().expect("metrics").iter().find(|m| m["name"] == "nimbus_logins_total");
    assert_eq!(metric.expect("nimbus_logins_total")["labels"], serde_json::json!(["result"]));
}

/// Every flag `--help` shows is described with the same variable and default, and nothing
/// visible is described that `--help` does not show, for the binary and each subcommand.
#[test]
fn every_flag_of_every_command_matches_help() {
    let d = gateway_describe().expect("describe --json");
    let mut cmds: Vec<(Vec<&str>, &Value)> = vec![(vec![], &d)];
    for c in d["commands"].as_array().expect("commands") {
        // `help` is clap's own subcommand: it has no flags and `help --help` is not help.
        if c["name"] != "help" {
            cmds.push((vec![c["name"].as_str().expect("name")], c));
        }
    }
    assert!(cmds.len() >= 6, "{cmds:?}");
    for (path, c) in cmds {
        let help = help_flags(&path);
        let described: BTreeMap<String, HelpFlag> = c["args"]
            .as_array()
            .expect("args")
            .iter()
            .filter(|a| a["hidden"] == false)
            .map(|a| {
                let long = a["long"].as_str().expect("only flags, no positional arguments").to_owned();
                let default = match a["defaults"].as_array().expect("defaults").as_slice() {
                    // clap shows no default for a switch (its implicit `false`).
                    [v] if a["takes_value"] == true => Some(v.as_str().expect("string").to_owned()),
                    [] => None,
                    [_] => None,
                    more => panic!("--{long}: several defaults {more:?}"),
                };
                (long, HelpFlag { env: a["env"].as_str().map(str::to_owned), default })
            })
            .collect();
        assert!(help.len() >= 2, "{path:?}: --help shows {help:?}");
        assert_eq!(described, help, "nimbus-gateway {path:?}: describe and --help disagree");
    }
}

/// A reader that stops early (`describe --json | head -1`) ends the output quietly: exit 0 and
/// no panic on the broken pipe.
#[test]
fn a_reader_that_stops_early_is_no_error() {
    use std::io::Read;
    // The JSON (over 200 KB) outgrows a pipe's buffer, so the writer meets the closed end.
    let mut child = Command::new(gateway_bin().expect("gateway binary"))
        .args(["describe", "--json"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("start the gateway binary");
    let mut first = [0u8; 1];
    child.stdout.take().expect("stdout").read_exact(&mut first).expect("a first byte");
    // The pipe's read end is closed here; the rest of the output has nowhere to go.
    let out = child.wait_with_output().expect("wait");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success() && !err.contains("panicked"), "{:?} {err}", out.status);
}
