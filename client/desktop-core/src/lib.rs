//! Nimbus Drive's logic, without a UI toolkit: the Tauri shell (client/desktop) is a thin
//! layer of commands and events over [`Desktop`], and the tests drive [`Desktop`] directly
//! against a real gateway and a real FUSE mount.
//!
//! - [`api`]: the command/event types, exported to TypeScript ([`bindings`]);
//! - [`token`]: the device token in the OS keychain, or a 0600 file where none runs;
//! - [`Desktop`]: sign-in (a self-signed certificate is trusted only by its fingerprint, see
//!   `nimbus_client::tls`) and single sign-on in the system browser (`nimbus_client::sso`,
//!   shared with the CLI), the mount manager (an in-process `nimbus_mount::session::Mounted`),
//!   the status snapshot and its change stream, sign-out (revokes the token; refuses while
//!   uploads are pending unless forced).

pub mod api;
pub mod bindings;
mod desktop;
mod error;
pub mod token;

pub use desktop::{Desktop, DesktopConfig};
pub use error::DesktopError;
/// What the app gives [`Desktop::sign_in_sso`] to open the system browser.
pub use nimbus_client::sso::open_browser;
