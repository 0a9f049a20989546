//! The saved login: `<config dir>/nimbus/session.json`, readable only by its owner (the token
//! in it is as good as the password until it expires or is revoked). The config dir is
//! `$NIMBUS_CONFIG_DIR` if set, else the platform's (`~/.config` on Linux).

use std::fs;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, anyhow};
use nimbus_client::private_file::write_private;
use nimbus_client::{Client, ClientOptions};
use serde::{Deserialize, Serialize};

#[derive(Clone, Serialize, Deserialize)]
pub struct Session {
    pub url: String,
    pub token: String,
    pub username: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ca_cert: Option<PathBuf>,
    #[serde(default)]
    pub insecure: bool,
}

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Session").field("url", &self.url).field("username", &self.username).finish_non_exhaustive()
    }
}

impl Session {
    pub fn client(&self) -> Result<Client> {
        let opts = ClientOptions {
            base_url: self.url.clone(),
            token: Some(self.token.clone()),
            ca_cert: self.ca_cert.clone(),
            danger_accept_invalid_certs: self.insecure,
            user_agent: Some(user_agent()),
        };
        Client::new(opts).with_context(|| {
            format!("the saved session for {} is unusable; run `nimbus login {}` again", self.url, self.url)
        })
    }
}

pub fn user_agent() -> String {
    format!("nimbus-cli/{}", env!("CARGO_PKG_VERSION"))
}

pub fn config_dir() -> Result<PathBuf> {
    let base = match std::env::var_os("NIMBUS_CONFIG_DIR") {
        Some(d) if !d.is_empty() => PathBuf::from(d),
        _ => {
            dirs::config_dir().ok_or_else(|| anyhow!("cannot find a configuration directory; set NIMBUS_CONFIG_DIR"))?
        }
    };
    Ok(base.join("nimbus"))
}

pub fn session_path() -> Result<PathBuf> {
    Ok(config_dir()?.join("session.json"))
}

/// The saved session, if any.
pub fn load() -> Result<Option<Session>> {
    load_from(&session_path()?)
}

fn load_from(path: &Path) -> Result<Option<Session>> {
    let text = match fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e).with_context(|| format!("cannot read the session file `{}`", path.display())),
    };
    let session = serde_json::from_str(&text)
        .with_context(|| format!("the session file `{}` is damaged; run `nimbus login URL` again", path.display()))?;
    Ok(Some(session))
}

/// The saved session, or an error telling the user to log in.
pub fn require() -> Result<Session> {
    load()?.ok_or_else(|| {
        anyhow!("not logged in: run `nimbus login URL` (e.g. `nimbus login https://nimbus.example.com:8443`)")
    })
}

/// Saves atomically (temp file + rename), mode 0600 in a 0700 directory.
pub fn save(session: &Session) -> Result<PathBuf> {
    save_in(&config_dir()?, session)
}

fn save_in(dir: &Path, session: &Session) -> Result<PathBuf> {
    let path = dir.join("session.json");
    let mut json = serde_json::to_vec_pretty(session)?;
    json.push(b'\n');
    write_private(&path, &json)
        .map_err(|(at, e)| anyhow!(e).context(format!("cannot save the session to `{}`", at.display())))?;
    Ok(path)
}

/// Deletes the session file; `false` if there was none.
pub fn remove() -> Result<bool> {
    let path = session_path()?;
    match fs::remove_file(&path) {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(e).with_context(|| format!("cannot delete the session file `{}`", path.display())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn saves_privately_and_loads_back() -> Result<()> {
        let tmp = tempfile::tempdir()?;
        let dir = tmp.path().join("cfg").join("nimbus");
        let s = Session {
            url: "https://h:8443".into(),
            token: "t0k".into(),
            username: "alice".into(),
            ca_cert: None,
            insecure: true,
        };
        let path = save_in(&dir, &s)?;
        let back = load_from(&path)?.ok_or_else(|| anyhow!("session not found"))?;
        assert_eq!(
            (back.url.as_str(), back.token.as_str(), back.username.as_str(), back.insecure),
            ("https://h:8443", "t0k", "alice", true)
        );
        // Saving again replaces the file.
        save_in(&dir, &Session { token: "new".into(), ..s })?;
        assert_eq!(load_from(&path)?.map(|s| s.token).as_deref(), Some("new"));
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            assert_eq!(fs::metadata(&path)?.permissions().mode() & 0o777, 0o600);
            assert_eq!(fs::metadata(&dir)?.permissions().mode() & 0o777, 0o700);
        }
        assert!(load_from(&dir.join("absent.json"))?.is_none());
        Ok(())
    }

    #[test]
    fn debug_hides_the_token() {
        let s = Session {
            url: "u".into(),
            token: "secret-token".into(),
            username: "a".into(),
            ca_cert: None,
            insecure: false,
        };
        assert!(!format!("{s:?}").contains("secret-token"));
    }
}
