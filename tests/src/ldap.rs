//! A private OpenLDAP `slapd` per test, on a free loopback port, with a generated `slapd.conf`
//! (mdb backend, the ppolicy overlay for `pwdAccountLockedTime`, StartTLS and a second port
//! for `ldaps://`, with a certificate from a throwaway CA made by `openssl`) and the directory of
//! docs/IDENTITY.md's worked example loaded with `slapadd`: suffix `dc=example,dc=org`, the
//! service account `cn=nimbus,ou=services,...`, people `alice` (in the admin group), `bob` and
//! `carol`, and the group `cn=nimbus-admins,ou=groups,...`. Passwords are stored as `{SSHA}`
//! hashes made by `slappasswd`. The test changes the directory with `ldapadd` / `ldapmodify` /
//! `ldapdelete` as the directory's root, stops it ([`Slapd::stop`]) to make it unavailable, and
//! the process is killed when the value is dropped.
//!
//! Needs Debian's `slapd` and `ldap-utils` (infra/install-deps.sh installs them);
//! `NIMBUS_TEST_SLAPD_BIN` names another `slapd`.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use anyhow::{Context, bail, ensure};
use tokio::process::{Child, Command};

pub const SUFFIX: &str = "dc=example,dc=org";
pub const ROOT_DN: &str = "cn=admin,dc=example,dc=org";
pub const ROOT_PASSWORD: &str = "directory-root-secret";
pub const SERVICE_DN: &str = "cn=nimbus,ou=services,dc=example,dc=org";
pub const SERVICE_PASSWORD: &str = "nimbus-service-secret";
pub const PEOPLE: &str = "ou=people,dc=example,dc=org";
pub const ADMIN_GROUP: &str = "cn=nimbus-admins,ou=groups,dc=example,dc=org";

/// The password every directory person gets: `<uid>-directory-pw`.
pub fn password(uid: &str) -> String {
    format!("{uid}-directory-pw")
}

pub fn user_dn(uid: &str) -> String {
    format!("uid={uid},{PEOPLE}")
}

fn tool(name: &str) -> PathBuf {
    for dir in ["/usr/sbin", "/usr/bin", "/usr/local/sbin", "/usr/local/bin"] {
        let p = Path::new(dir).join(name);
        if p.is_file() {
            return p;
        }
    }
    PathBuf::from(name)
}

fn slapd_bin() -> PathBuf {
    std::env::var_os("NIMBUS_TEST_SLAPD_BIN")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| tool("slapd"))
}

/// `{SSHA}...` for `pw`, by `slappasswd`.
fn ssha(pw: &str) -> anyhow::Result<String> {
    let out = std::process::Command::new(tool("slappasswd"))
        .args(["-h", "{SSHA}", "-s", pw])
        .output()
        .context("cannot run slappasswd (apt-get install slapd, or run infra/install-deps.sh)")?;
    ensure!(out.status.success(), "slappasswd failed: {}", String::from_utf8_lossy(&out.stderr));
    Ok(String::from_utf8(out.stdout)?.trim().to_string())
}

/// The LDIF of a person (`inetOrgPerson`) with the password [`password`]`(uid)`.
pub fn person_ldif(uid: &str) -> anyhow::Result<String> {
    Ok(format!(
        "dn: {dn}\nobjectClass: inetOrgPerson\nuid: {uid}\ncn: {uid}\nsn: {uid}\nmail: {uid}@example.org\nuserPassword: {pw}\n",
        dn = user_dn(uid),
        pw = ssha(&password(uid))?
    ))
}

/// A throwaway CA and a server certificate for 127.0.0.1 signed by it (openssl), in `dir`.
fn make_certificates(dir: &Path) -> anyhow::Result<()> {
    std::fs::write(
        dir.join("leaf.ext"),
        "subjectAltName=IP:127.0.0.1\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n",
    )?;
    let ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"];
    let steps: [Vec<&str>; 3] = [
        [
            &["req", "-x509"][..],
            &ec,
            &["-keyout", "ca.key", "-out", "ca.pem", "-subj", "/CN=nimbus-e2e-ca", "-days", "2"],
        ]
        .concat(),
        [&["req"][..], &ec, &["-keyout", "key.pem", "-out", "leaf.csr", "-subj", "/CN=127.0.0.1"]].concat(),
        vec![
            "x509",
            "-req",
            "-in",
            "leaf.csr",
            "-CA",
            "ca.pem",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-out",
            "cert.pem",
            "-days",
            "2",
            "-extfile",
            "leaf.ext",
        ],
    ];
    for args in steps {
        let out = std::process::Command::new("openssl")
            .args(&args)
            .current_dir(dir)
            .output()
            .context("cannot run openssl")?;
        ensure!(out.status.success(), "openssl {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    }
    Ok(())
}

pub struct Slapd {
    dir: tempfile::TempDir,
    port: u16,
    /// `ldaps://` (TLS from the first byte) with the same certificate as StartTLS.
    tls_port: u16,
    child: Mutex<Option<Child>>,
}

impl Slapd {
    /// Writes the configuration, loads the example directory and starts slapd.
    pub async fn start() -> anyhow::Result<Slapd> {
        let bin = slapd_bin();
        if !bin.is_file() {
            bail!("no slapd at {} (run ./infra/install-deps.sh: apt slapd, ldap-utils)", bin.display());
        }
        let dir = tempfile::Builder::new().prefix("nimbus-e2e-slapd-").tempdir()?;
        let d = dir.path();
        std::fs::create_dir_all(d.join("db"))?;
        make_certificates(d)?;
        let conf = format!(
            "include /etc/ldap/schema/core.schema\n\
             include /etc/ldap/schema/cosine.schema\n\
             include /etc/ldap/schema/inetorgperson.schema\n\
             pidfile {pid}\n\
             TLSCACertificateFile {dir}/ca.pem\n\
             TLSCertificateFile {dir}/cert.pem\n\
             TLSCertificateKeyFile {dir}/key.pem\n\
             modulepath /usr/lib/ldap\n\
             moduleload back_mdb\n\
             moduleload ppolicy\n\
             database mdb\n\
             maxsize 16777216\n\
             suffix \"{SUFFIX}\"\n\
             rootdn \"{ROOT_DN}\"\n\
             rootpw {rootpw}\n\
             directory {db}\n\
             overlay ppolicy\n\
             access to attrs=userPassword by self =xw by anonymous auth by * none\n\
             access to * by dn.exact=\"{SERVICE_DN}\" read by self read by * none\n",
            pid = d.join("slapd.pid").display(),
            dir = d.display(),
            db = d.join("db").display(),
            rootpw = ssha(ROOT_PASSWORD)?,
        );
        std::fs::write(d.join("slapd.conf"), conf)?;
        let mut ldif = format!(
            "dn: {SUFFIX}\nobjectClass: dcObject\nobjectClass: organization\no: Example\ndc: example\n\n\
             dn: ou=people,{SUFFIX}\nobjectClass: organizationalUnit\nou: people\n\n\
             dn: ou=groups,{SUFFIX}\nobjectClass: organizationalUnit\nou: groups\n\n\
             dn: ou=services,{SUFFIX}\nobjectClass: organizationalUnit\nou: services\n\n\
             dn: {SERVICE_DN}\nobjectClass: organizationalRole\nobjectClass: simpleSecurityObject\ncn: nimbus\n\
             userPassword: {}\n\n",
            ssha(SERVICE_PASSWORD)?
        );
        for uid in ["alice", "bob", "carol"] {
            ldif.push_str(&person_ldif(uid)?);
            ldif.push('\n');
        }
        ldif.push_str(&format!(
            "dn: {ADMIN_GROUP}\nobjectClass: groupOfNames\ncn: nimbus-admins\nmember: {}\n",
            user_dn("alice")
        ));
        std::fs::write(d.join("init.ldif"), &ldif)?;
        let out = std::process::Command::new(tool("slapadd"))
            .arg("-f")
            .arg(d.join("slapd.conf"))
            .arg("-l")
            .arg(d.join("init.ldif"))
            .output()
            .context("cannot run slapadd")?;
        ensure!(out.status.success(), "slapadd failed: {}", String::from_utf8_lossy(&out.stderr));
        std::fs::write(d.join("bind.pw"), format!("{SERVICE_PASSWORD}\n"))?;
        let s = Slapd {
            dir,
            port: crate::minio::free_port()?,
            tls_port: crate::minio::free_port()?,
            child: Mutex::new(None),
        };
        s.spawn_and_wait().await?;
        Ok(s)
    }

    /// The CA (PEM) that issued slapd's certificate (for `127.0.0.1`), for `--ldap-ca-file`.
    pub fn ca_file(&self) -> PathBuf {
        self.dir.path().join("ca.pem")
    }

    /// Another throwaway CA (that did not issue slapd's certificate), for a gateway that must
    /// refuse the directory.
    pub fn other_ca_file(&self) -> anyhow::Result<PathBuf> {
        let d = self.dir.path().join("other-ca");
        std::fs::create_dir_all(&d)?;
        make_certificates(&d)?;
        Ok(d.join("ca.pem"))
    }

    /// `ldap://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("ldap://127.0.0.1:{}", self.port)
    }

    /// `ldaps://127.0.0.1:PORT` (another port).
    pub fn ldaps_url(&self) -> String {
        format!("ldaps://127.0.0.1:{}", self.tls_port)
    }

    /// The gateway flags of the worked example (docs/IDENTITY.md), without the sync interval.
    pub fn gateway_args(&self) -> Vec<String> {
        [
            "--ldap-url",
            &self.url(),
            "--ldap-bind-dn",
            SERVICE_DN,
            "--ldap-bind-password-file",
            &self.dir.path().join("bind.pw").display().to_string(),
            "--ldap-user-base",
            PEOPLE,
            "--ldap-admin-group",
            ADMIN_GROUP,
        ]
        .iter()
        .map(|s| s.to_string())
        .collect()
    }

    pub fn log_path(&self) -> PathBuf {
        self.dir.path().join("slapd.log")
    }

    pub fn log_tail(&self, lines: usize) -> String {
        crate::gateway::tail_file(&self.log_path(), lines)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Option<Child>> {
        self.child.lock().unwrap_or_else(|e| e.into_inner())
    }

    async fn spawn_and_wait(&self) -> anyhow::Result<()> {
        let log = std::fs::OpenOptions::new().create(true).append(true).open(self.log_path())?;
        // -d: stay in the foreground (killed with the test), logging connections and operations.
        let child = Command::new(slapd_bin())
            .arg("-f")
            .arg(self.dir.path().join("slapd.conf"))
            .arg("-h")
            .arg(format!("{}/ {}/", self.url(), self.ldaps_url()))
            .args(["-d", "256"])
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log)
            .kill_on_drop(true)
            .spawn()
            .context("cannot start slapd")?;
        *self.lock() = Some(child);
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if self.ldap("ldapsearch", &["-b", SUFFIX, "-s", "base", "(objectClass=*)", "dn"], None).await.is_ok() {
                return Ok(());
            }
            let exited = self.lock().as_mut().and_then(|c| c.try_wait().ok().flatten());
            if let Some(status) = exited {
                bail!("slapd exited during start-up ({status}); log:\n{}", self.log_tail(30));
            }
            if Instant::now() > deadline {
                bail!("slapd did not answer within 30 s; log:\n{}", self.log_tail(30));
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Runs an ldap-utils command as the directory's root, `input` on stdin.
    async fn ldap(&self, cmd: &str, args: &[&str], input: Option<&str>) -> anyhow::Result<String> {
        use tokio::io::AsyncWriteExt;
        let mut child = Command::new(tool(cmd))
            .args(["-x", "-H", &self.url(), "-D", ROOT_DN, "-w", ROOT_PASSWORD])
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .with_context(|| format!("cannot run {cmd} (apt-get install ldap-utils)"))?;
        let mut stdin = child.stdin.take().context("stdin")?;
        if let Some(text) = input {
            stdin.write_all(text.as_bytes()).await?;
        }
        drop(stdin);
        let out = tokio::time::timeout(Duration::from_secs(30), child.wait_with_output()).await??;
        ensure!(out.status.success(), "{cmd} {args:?}: {}", String::from_utf8_lossy(&out.stderr));
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }

    /// Adds entries (LDIF).
    pub async fn add(&self, ldif: &str) -> anyhow::Result<()> {
        self.ldap("ldapadd", &[], Some(ldif)).await.map(|_| ())
    }

    /// Adds a person `uid` with the password [`password`]`(uid)`.
    pub async fn add_person(&self, uid: &str) -> anyhow::Result<()> {
        self.add(&person_ldif(uid)?).await
    }

    /// Applies changes (LDIF with `changetype:`).
    pub async fn modify(&self, ldif: &str) -> anyhow::Result<()> {
        self.ldap("ldapmodify", &[], Some(ldif)).await.map(|_| ())
    }

    pub async fn delete(&self, dn: &str) -> anyhow::Result<()> {
        self.ldap("ldapdelete", &[dn], None).await.map(|_| ())
    }

    /// Stops slapd: the directory is down until [`Slapd::start_again`].
    pub async fn stop(&self) {
        let child = self.lock().take();
        if let Some(mut c) = child {
            let _ = c.start_kill();
            let _ = c.wait().await;
        }
    }

    /// Starts slapd again on the same port and database.
    pub async fn start_again(&self) -> anyhow::Result<()> {
        self.stop().await;
        self.spawn_and_wait().await
    }
}

impl Drop for Slapd {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!("---- slapd log (last 20 lines) ----\n{}", self.log_tail(20));
        }
        if let Some(c) = self.lock().as_mut() {
            let _ = c.start_kill();
        }
    }
}
