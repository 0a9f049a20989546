//! The command line grammar (clap derive). Parsing only: commands/ does the work.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};

#[derive(Debug, Parser)]
#[command(
    name = "nimbus",
    version,
    about = "Nimbus private cloud storage from the command line",
    long_about = "Nimbus private cloud storage from the command line.\n\n\
                  Start with `nimbus login https://your-gateway:8443`. Remote paths are absolute \
                  inside your space (`/docs/report.pdf`); a leading `/` is optional, a trailing \
                  `/` names a folder (`nimbus rm /docs/report.pdf/` refuses: not a directory).",
    propagate_version = true
)]
pub struct Cli {
    /// Print machine-readable JSON instead of text (ls, whoami, versions, trash, put, get, share, link, admin).
    #[arg(long, global = true)]
    pub json: bool,

    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Log in to a gateway and remember the session.
    Login(LoginArgs),
    /// Sign this device out (revokes its token on the server) and forget the session.
    Logout,
    /// Show who you are logged in as, and your storage use.
    Whoami,
    /// List a directory (all of it).
    Ls {
        /// Remote directory (default `/`).
        path: Option<String>,
        /// Show size, modification time (UTC) and version.
        #[arg(short = 'l', long = "long")]
        long: bool,
    },
    /// Create a directory (and its parents).
    Mkdir { path: String },
    /// Upload a file. Only blocks the server does not hold are sent, so running it again
    /// after an interruption resumes.
    Put {
        /// Local file.
        local: PathBuf,
        /// Remote path (default `/<file name>`). Ending in `/`, or an existing directory:
        /// upload into it.
        remote: Option<String>,
        /// Overwrite the remote file even if it changed on the server since you last saw it.
        #[arg(long)]
        force: bool,
    },
    /// Download a file, verifying every block.
    Get {
        /// Remote file.
        remote: String,
        /// Local file or directory (default: the file's name in the current directory).
        /// `-` writes the content to standard output.
        local: Option<String>,
    },
    /// Move or rename a file or directory.
    Mv {
        from: String,
        /// Target path; ending in `/`, or an existing directory: move into it.
        to: String,
        /// Replace an existing file at the target.
        #[arg(long)]
        overwrite: bool,
    },
    /// Copy a file or directory (no content is copied on the server, it is shared).
    Cp {
        from: String,
        /// Target path; ending in `/`, or an existing directory: copy into it.
        to: String,
        /// Replace an existing file at the target.
        #[arg(long)]
        overwrite: bool,
    },
    /// Move files or directories to the trash.
    ///
    /// Every path is tried, as rm(1) does: each one that cannot be removed gets an error line
    /// saying why, the others still go to the trash, and the exit code is 1 if any failed.
    Rm {
        #[arg(required = true)]
        paths: Vec<String>,
    },
    /// List the trash, restore from it or purge it.
    Trash(TrashArgs),
    /// List the versions of a file, or restore one.
    Versions {
        path: String,
        /// Make this version current again (as a new version).
        #[arg(long, value_name = "VERSION")]
        restore: Option<i64>,
    },
    /// List the devices logged in to your account, or sign one out.
    Tokens(TokensArgs),
    /// Your S3 access keys (for aws-cli, rclone, backup tools): create, list, revoke.
    Keys(KeysArgs),
    /// Share a file or folder with another user (read or write), list and change the shares you
    /// gave, list those given to you (under `/Shared with me`), revoke or leave one.
    Share(ShareArgs),
    /// Public links to a file or folder, for anyone who has the link: create (a download, or a
    /// file drop with `--mode upload`), list, change, revoke.
    Link(LinkArgs),
    /// Manage users (administrators only).
    #[command(subcommand)]
    Admin(AdminCommand),
    /// Mount your space as a drive: a folder on Linux and macOS (`nimbus mount ~/Nimbus`), a
    /// drive letter on Windows (`nimbus mount Z:`). Runs in the background unless --foreground.
    Mount(MountArgs),
    /// Unmount a drive mounted with `nimbus mount`, after uploading every pending write.
    Unmount {
        /// The mount point (folder or drive letter) given to `nimbus mount`.
        mountpoint: PathBuf,
    },
    /// Show mounted drives: online or offline, uploads pending, conflicts, cache use, and the
    /// changes the server refused (quota, someone else's lock, a name taken) with what to do.
    Status,
    /// Resolve a change the server refused (listed by `nimbus status`): `retry` sends it again,
    /// `save-copy` uploads your version under a new name next to the file and gives the file
    /// back the server's version, `discard` throws your change away.
    Resolve {
        /// The file: its path on the drive (`~/Nimbus/docs/a.txt`, `Z:\docs\a.txt`) or in your
        /// space (`/docs/a.txt`).
        file: PathBuf,
        /// retry, save-copy or discard.
        #[arg(value_parser = ["retry", "save-copy", "discard"])]
        action: String,
        /// Discard without asking.
        #[arg(short, long)]
        yes: bool,
    },
    /// Measure throughput, IOPS and latency of the store, the gateway (cached and not), a
    /// mounted drive and the local disk, on the same data; writes report.json and report.html.
    Bench(BenchArgs),
}

#[derive(Debug, Args)]
pub struct LoginArgs {
    /// Gateway address, e.g. https://nimbus.example.com:8443
    pub url: String,
    /// Username (asked for if missing).
    #[arg(short, long)]
    pub username: Option<String>,
    /// Name of this device in `nimbus tokens` (default: "nimbus-cli on <hostname>").
    #[arg(long)]
    pub device: Option<String>,
    /// Two-factor code (or a recovery code) for an account with two-factor sign-in; asked for
    /// when needed if missing (or taken from NIMBUS_TOTP).
    #[arg(long, value_name = "CODE")]
    pub totp: Option<String>,
    /// Trust this PEM certificate (a gateway with a self-signed certificate).
    #[arg(long, value_name = "PEM")]
    pub ca_cert: Option<PathBuf>,
    /// Do not check the gateway's certificate at all (testing only: traffic can be read).
    #[arg(long)]
    pub insecure: bool,
    /// Sign in through your organisation's identity provider (single sign-on) in the system
    /// browser instead of with a password.
    #[arg(long, conflicts_with = "username")]
    pub sso: bool,
    /// With `--sso`: do not start a browser; print the address to open instead (also when
    /// `NIMBUS_NO_BROWSER` is set).
    #[arg(long, requires = "sso")]
    pub no_browser: bool,
}

#[derive(Debug, Args)]
pub struct TrashArgs {
    #[command(subcommand)]
    pub action: Option<TrashAction>,
}

#[derive(Debug, Subcommand)]
pub enum TrashAction {
    /// List what is in the trash (the default).
    List,
    /// Put an item back where it was, or somewhere else.
    Restore {
        /// Id from `nimbus trash`.
        id: i64,
        /// Restore to this path instead of the original one; ending in `/` (or `/` itself): into
        /// that folder under the item's name, as for `nimbus mv` (a file there: not a directory).
        #[arg(long)]
        to: Option<String>,
    },
    /// Delete an item for good; without ID, empty the whole trash.
    Purge {
        /// Id from `nimbus trash`.
        id: Option<i64>,
        /// Do not ask for confirmation.
        #[arg(short, long)]
        yes: bool,
    },
}

#[derive(Debug, Args)]
pub struct TokensArgs {
    #[command(subcommand)]
    pub action: Option<TokensAction>,
}

#[derive(Debug, Subcommand)]
pub enum TokensAction {
    /// List your tokens (the default).
    List,
    /// Sign a device out.
    Revoke { id: i64 },
}

#[derive(Debug, Args)]
pub struct KeysArgs {
    #[command(subcommand)]
    pub action: Option<KeysAction>,
}

#[derive(Debug, Subcommand)]
pub enum KeysAction {
    /// List your S3 access keys (the default); secrets are never shown again.
    List,
    /// Create a key; its secret is printed once.
    Create {
        /// A label, e.g. the tool or machine that will use it.
        #[arg(long)]
        name: Option<String>,
    },
    /// Revoke a key: it stops working at once.
    Revoke { id: i64 },
}

#[derive(Debug, Args)]
pub struct ShareArgs {
    #[command(subcommand)]
    pub action: Option<ShareAction>,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum PermissionArg {
    /// List, read and download.
    Read,
    /// Also create, change, rename and delete inside.
    Write,
}

#[derive(Debug, Subcommand)]
pub enum ShareAction {
    /// List the shares you gave (the default).
    Ls,
    /// Share a file or folder of your space with a user, or with a group (`--group`).
    Add {
        /// The file or folder (not the whole space).
        path: String,
        /// Who to share it with.
        #[arg(required_unless_present = "group")]
        user: Option<String>,
        /// Share with this group instead of a user: each member (but you) gets it.
        #[arg(long, conflicts_with = "user")]
        group: Option<String>,
        #[arg(long, value_enum, default_value = "read")]
        permission: PermissionArg,
    },
    /// List the shares given to you; each is at `/Shared with me/<name>`.
    Incoming,
    /// Change the permission of a share you gave.
    Set {
        /// Id from `nimbus share ls`.
        id: i64,
        #[arg(long, value_enum)]
        permission: PermissionArg,
    },
    /// Revoke a share you gave, or leave one given to you (ids from `ls` or `incoming`).
    Rm { id: i64 },
}

#[derive(Debug, Args)]
pub struct LinkArgs {
    #[command(subcommand)]
    pub action: Option<LinkAction>,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum LinkModeArg {
    /// Download the file, or browse and download the folder.
    View,
    /// A file drop on a folder: visitors add files and never see any.
    Upload,
}

#[derive(Debug, Subcommand)]
pub enum LinkAction {
    /// List your links (the default).
    Ls,
    /// Create a link; prints its address.
    Create {
        /// The file or folder (a file drop needs a folder).
        path: String,
        #[arg(long, value_enum, default_value = "view")]
        mode: LinkModeArg,
        /// Read the link's password from this file (first line; `-` for standard input).
        #[arg(long, value_name = "FILE")]
        password_file: Option<PathBuf>,
        /// When it stops working: a time (RFC 3339, `2026-12-31T18:00:00Z`) or from now
        /// (`30m`, `12h`, `7d`).
        #[arg(long, value_name = "WHEN")]
        expires: Option<String>,
        /// Downloads allowed (view links).
        #[arg(long, value_name = "N")]
        max_downloads: Option<u64>,
    },
    /// Change a link; what you do not give stays as it is.
    Set {
        /// Id from `nimbus link ls`.
        id: i64,
        #[arg(long, value_enum)]
        mode: Option<LinkModeArg>,
        /// A new password, read from this file (first line; `-` for standard input).
        #[arg(long, value_name = "FILE", conflicts_with = "no_password")]
        password_file: Option<PathBuf>,
        /// Remove the password.
        #[arg(long)]
        no_password: bool,
        /// A new expiry (as for `create`).
        #[arg(long, value_name = "WHEN", conflicts_with = "no_expiry")]
        expires: Option<String>,
        /// Remove the expiry.
        #[arg(long)]
        no_expiry: bool,
        /// A new download limit.
        #[arg(long, value_name = "N", conflicts_with = "no_limit")]
        max_downloads: Option<u64>,
        /// Remove the download limit.
        #[arg(long)]
        no_limit: bool,
    },
    /// Revoke a link: it answers 404 at once.
    Rm { id: i64 },
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum RoleArg {
    User,
    Admin,
}

#[derive(Debug, Subcommand)]
pub enum AdminCommand {
    /// List users.
    Users {
        /// Only users whose name contains this.
        #[arg(short, long)]
        query: Option<String>,
    },
    /// Create a user. Without --password-stdin the server generates a password, shown once.
    UserAdd {
        username: String,
        /// Quota: bytes or a size such as 500M, 10GiB, 1TB (K/M/G/T and KiB.. are 1024-based,
        /// KB/MB/GB/TB 1000-based), or `unlimited`. Default: the server's default.
        #[arg(long, value_name = "SIZE")]
        quota: Option<String>,
        /// Make the user an administrator.
        #[arg(long)]
        admin: bool,
        /// Read the password from the first line of standard input.
        #[arg(long)]
        password_stdin: bool,
    },
    /// Change a user: quota, enabled/disabled, role, password.
    UserSet {
        /// Username or id.
        user: String,
        /// New quota (see user-add), or `unlimited`.
        #[arg(long, value_name = "SIZE")]
        quota: Option<String>,
        /// Disable the account (signs out all its devices).
        #[arg(long, conflicts_with = "enable")]
        disable: bool,
        /// Enable the account again.
        #[arg(long)]
        enable: bool,
        #[arg(long, value_enum)]
        role: Option<RoleArg>,
        /// Set a new random password and print it (signs out all their devices).
        #[arg(long, conflicts_with = "password_stdin")]
        reset_password: bool,
        /// Set the password read from the first line of standard input.
        #[arg(long)]
        password_stdin: bool,
    },
    /// Delete a user with all their files, for good.
    UserDel {
        /// Username or id.
        user: String,
        /// Confirm: everything the user stored is deleted and cannot be restored.
        #[arg(long)]
        yes: bool,
    },
    /// List groups with their members.
    Groups,
    /// Create a group (names follow the rules of usernames).
    GroupAdd {
        name: String,
        /// Members to add at once (usernames).
        #[arg(long = "member", value_name = "USER")]
        members: Vec<String>,
    },
    /// Change a group: rename it, add or take out members. Taken-out members lose the group's
    /// shares at once.
    GroupSet {
        /// Group name or id.
        group: String,
        /// A new name.
        #[arg(long, value_name = "NAME")]
        rename: Option<String>,
        /// Add this user (repeatable).
        #[arg(long, value_name = "USER")]
        add: Vec<String>,
        /// Take this user out (repeatable).
        #[arg(long, value_name = "USER")]
        remove: Vec<String>,
    },
    /// Delete a group: its shares end for every member.
    GroupDel {
        /// Group name or id.
        group: String,
    },
    /// Show the audit log, newest first.
    Audit {
        /// Only events of this user.
        #[arg(long)]
        user: Option<String>,
        /// Only this action.
        #[arg(long)]
        action: Option<String>,
        /// How many events (1-1000).
        #[arg(long, default_value_t = 50)]
        limit: u32,
    },
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn grammar_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn parses_typical_lines() {
        let ok = |args: &[&str]| Cli::try_parse_from(args).is_ok();
        assert!(ok(&["nimbus", "ls", "-l", "/docs"]));
        assert!(ok(&["nimbus", "--json", "whoami"]));
        assert!(ok(&["nimbus", "put", "a.txt", "/docs/", "--force"]));
        assert!(ok(&["nimbus", "trash"]));
        assert!(ok(&["nimbus", "trash", "purge", "--yes"]));
        assert!(ok(&["nimbus", "trash", "restore", "3", "--to", "/x"]));
        assert!(ok(&["nimbus", "versions", "/a", "--restore", "4"]));
        assert!(ok(&["nimbus", "admin", "user-set", "bob", "--quota", "unlimited", "--disable"]));
        assert!(!ok(&["nimbus", "admin", "user-set", "bob", "--disable", "--enable"]));
        assert!(!ok(&["nimbus", "rm"]));
        assert!(ok(&["nimbus", "resolve", "/a.txt", "save-copy"]));
        assert!(ok(&["nimbus", "resolve", "/a.txt", "discard", "--yes"]));
        assert!(!ok(&["nimbus", "resolve", "/a.txt", "delete"]));
        assert!(!ok(&["nimbus", "resolve", "/a.txt"]));
    }
}

#[derive(Debug, Args)]
pub struct MountArgs {
    /// Where to mount: an empty folder (Linux, macOS) or a free drive letter (`Z:`, Windows).
    pub mountpoint: PathBuf,
    /// Stay in the foreground (logs on stderr; Ctrl-C uploads pending writes, then unmounts).
    #[arg(long)]
    pub foreground: bool,
    /// Local cache and write-back journal (default: the user cache dir, one per mount point).
    #[arg(long, value_name = "DIR")]
    pub cache_dir: Option<PathBuf>,
    /// Size bound of the local block cache (e.g. 10GiB, 500MB).
    #[arg(long, value_name = "SIZE", default_value = "10GiB")]
    pub cache_size: String,
    /// Memory used to hold recently read blocks (e.g. 64MiB).
    #[arg(long, value_name = "SIZE", default_value = "64MiB")]
    pub cache_mem: String,
    /// Seconds a closed file waits before its upload starts (0 to 3600, fractions allowed). A
    /// file saved again meanwhile is uploaded once; fsync and unmount never wait for it.
    #[arg(long, value_name = "SECONDS", default_value = "1")]
    pub upload_delay: String,
}

#[derive(Debug, Args)]
pub struct BenchArgs {
    /// A preset: `quick` (under a minute) or `full` (the matrix). Default: quick.
    #[arg(long, conflicts_with = "job")]
    pub preset: Option<String>,
    /// A JSON job file with a custom matrix (see docs/BENCH-REPORT.md).
    #[arg(long, value_name = "FILE")]
    pub job: Option<PathBuf>,
    /// Where report.json and report.html go.
    #[arg(long, value_name = "DIR", default_value = ".")]
    pub output: PathBuf,
    /// Also bench the object store directly (credentials from AWS_ACCESS_KEY_ID and
    /// AWS_SECRET_ACCESS_KEY, region from AWS_REGION, path-style addressing).
    #[arg(long, value_name = "URL", requires = "s3_bucket")]
    pub s3_endpoint: Option<String>,
    #[arg(long, value_name = "NAME", requires = "s3_endpoint")]
    pub s3_bucket: Option<String>,
    /// A mounted Nimbus drive of the same user: adds the mount-cold and mount-warm targets.
    #[arg(long, value_name = "PATH")]
    pub mount: Option<PathBuf>,
    /// Local directory for the disk ceiling (default: the user cache dir).
    #[arg(long, value_name = "DIR")]
    pub disk_dir: Option<PathBuf>,
    /// Folder in your space for the bench data (one subfolder per run, removed at the end).
    #[arg(long, default_value = "/.nimbus-bench")]
    pub path: String,
    /// Run even if the bench folders already hold other files.
    #[arg(long)]
    pub force: bool,
    /// No progress bars.
    #[arg(long)]
    pub no_progress: bool,
}
