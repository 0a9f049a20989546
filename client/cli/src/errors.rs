//! Turns any error into a message that says what to do next. Commands handle the cases
//! specific to them (a 409 on `put`, a 401 on `login`); the hints here apply to every
//! command: an expired session, an unreachable gateway, an untrusted certificate, quota.

use std::io;

use nimbus_client::Error as ClientError;

use crate::session;

/// An error the command has already shown (`nimbus rm` names each path that failed as it goes):
/// only the exit code is left to give.
#[derive(Debug)]
pub struct Reported;

impl std::fmt::Display for Reported {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("failed (see the messages above)")
    }
}

impl std::error::Error for Reported {}

pub fn is_broken_pipe(err: &anyhow::Error) -> bool {
    let broken = |e: &io::Error| e.kind() == io::ErrorKind::BrokenPipe;
    err.chain().any(|e| {
        e.downcast_ref::<io::Error>().is_some_and(broken)
            || e.downcast_ref::<ClientError>().and_then(ClientError::io_error).is_some_and(broken)
    })
}

/// `error: ...` followed by hint lines.
pub fn render(err: &anyhow::Error) -> String {
    let mut out = format!("error: {err:#}");
    for hint in hints(err) {
        out.push_str("\n  ");
        out.push_str(&hint);
    }
    out
}

/// The gateway the failed request went to: the saved session's URL, unless the request went
/// elsewhere (`nimbus login` to a new address).
fn gateway_url(ce: &ClientError) -> String {
    let saved = session::load().ok().flatten().map(|s| s.url);
    let origin = match ce {
        ClientError::Transport(e) => e.url().map(|u| u.origin().ascii_serialization()),
        _ => None,
    };
    match (saved, origin) {
        (Some(saved), Some(origin)) if !saved.starts_with(&origin) => origin,
        (Some(saved), _) => saved,
        (None, Some(origin)) => origin,
        (None, None) => "URL".into(),
    }
}

fn hints(err: &anyhow::Error) -> Vec<String> {
    let Some(ce) = err.chain().find_map(|e| e.downcast_ref::<ClientError>()) else {
        return Vec::new();
    };
    let url = gateway_url(ce);
    let mut hints = Vec::new();
    if ce.is_unauthorized() {
        hints.push(format!("your session expired or was revoked: run `nimbus login {url}`"));
    } else if ce.is_forbidden() {
        hints.push("your account is not allowed to do this; ask an administrator".into());
    } else if ce.is_quota_exceeded() {
        hints.push(
            "free space by emptying the trash (`nimbus trash purge`) or ask your administrator for a larger quota"
                .into(),
        );
    } else if ce.is_too_many_requests() {
        let wait =
            ce.retry_after().map(|d| format!("in {} seconds", d.as_secs())).unwrap_or_else(|| "in a moment".into());
        hints.push(format!("the gateway is throttling requests: try again {wait}"));
    } else if ce.status().is_some_and(|s| s >= 500) {
        hints.push("the gateway failed; try again later, and tell your administrator if it persists".into());
    } else if ce.is_certificate_problem() {
        hints.push(format!(
            "the gateway's TLS certificate is not trusted: run `nimbus login {url} --ca-cert FILE` with the \
             gateway's certificate (or, for a test setup only, with `--insecure`)"
        ));
    } else if ce.is_transport() && ce.to_string().contains("InvalidContentType") {
        hints.push("the server does not speak TLS on this port: try http:// instead of https://".into());
    } else if ce.is_transport() {
        hints.push("check the address, and that the gateway is running and reachable from here".into());
    }
    hints
}

#[cfg(test)]
mod tests {
    use super::*;
    use anyhow::Context;

    #[test]
    fn server_errors_get_a_hint() {
        let e = ClientError::Api {
            status: 401,
            code: "unauthorized".into(),
            message: "token expired".into(),
            retry_after: None,
        };
        let e = Err::<(), _>(e).context("listing failed").err().map(|e| render(&e)).unwrap_or_default();
        assert!(e.starts_with("error: listing failed: token expired"), "{e}");
        assert!(e.contains("nimbus login"), "{e}");
    }

    #[test]
    fn broken_pipes_are_recognised() {
        let e = anyhow::Error::new(io::Error::from(io::ErrorKind::BrokenPipe)).context("writing");
        assert!(is_broken_pipe(&e));
        assert!(!is_broken_pipe(&anyhow::anyhow!("other")));
        let io = io::Error::from(io::ErrorKind::BrokenPipe);
        let e = anyhow::Error::new(ClientError::Io { context: "writing".into(), err: io });
        assert!(is_broken_pipe(&e));
    }
}
