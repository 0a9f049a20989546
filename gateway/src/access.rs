//! Where a caller's path leads: into their own space, or through `/Shared with me/<name>` into
//! the space of a user who shared a file or folder with them, with that share's permission.
//!
//! A path inside a share maps to the shared node's path in the owner's space plus the rest of
//! the caller's path, component by component (`RemotePath` holds no `..`), so it cannot leave
//! the shared subtree. Answers name paths as the caller sees them ([`Place::show`]): nothing of
//! the owner's space above the shared node is ever shown. `Shared with me` itself is a virtual
//! folder, listed from the caller's incoming shares; nothing can be written there.

use nimbus_proto::RemotePath;
use nimbus_proto::names::{SHARED_WITH_ME, is_shared_with_me, name_key};

use crate::error::{ApiError, ApiResult};
use crate::meta::{Grant, Meta, NewAudit, SharePermission, SpaceId};

/// Where a path leads.
#[derive(Debug, Clone)]
pub enum Place {
    /// In the caller's own space.
    Own { space: SpaceId, path: RemotePath },
    /// `/Shared with me` itself.
    SharedIndex,
    /// Inside a share: `path` is in the owner's space.
    Shared { grant: Box<Grant>, path: RemotePath },
}

/// A check that what let an upload in still holds, made once its body is in and just before
/// its commit ([`crate::space::PutOptions`]). Built lazily by the door from what it checked at
/// the start (see [`still_writable`]); an error refuses the commit and nothing changes.
pub type StillAllowed = futures::future::BoxFuture<'static, ApiResult<()>>;

/// Signs the caller in again as the door did at the start of the request (same credentials,
/// same rules: a revoked token or key, a disabled user, a withdrawn link fail) and returns the
/// space the caller acts from.
pub type SignInAgain = futures::future::BoxFuture<'static, ApiResult<SpaceId>>;

/// [`StillAllowed`] for a write the caller asked for at `asked` (their own view) that the
/// door sent to `target`: the caller still signs in, and `asked` still leads to `target`
/// with write permission (a share withdrawn, turned read-only, or its folder moved meanwhile
/// refuses the commit instead of writing into the owner's space).
pub fn still_writable(
    meta: Meta,
    again: SignInAgain,
    asked: RemotePath,
    target: (SpaceId, RemotePath),
) -> StillAllowed {
    Box::pin(async move {
        let caller = again.await?;
        let place = locate_new(&meta, caller, &asked).await?;
        let now = place.target(Want::Write).map_err(|e| place.scrub(e))?;
        if now != target {
            return Err(ApiError::Conflict(format!(
                "`{asked}` no longer leads where this upload began (a shared folder moved or changed meanwhile); \
                 nothing was saved, send the file again"
            )));
        }
        Ok(())
    })
}

/// Who acts through a share, for the audit log.
#[derive(Debug, Clone, Copy)]
pub struct Actor<'a> {
    pub id: i64,
    pub name: &'a str,
    /// The client's address, for the audit log.
    pub ip: Option<std::net::IpAddr>,
}

/// What the caller means to do at a place.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Want {
    Read,
    Write,
}

impl Place {
    /// The space and the path in it, for a read or a write (a write through a read-only share,
    /// or into `Shared with me` itself, is refused with 403).
    pub fn target(&self, want: Want) -> ApiResult<(SpaceId, RemotePath)> {
        match self {
            Place::Own { space, path } => Ok((*space, path.clone())),
            Place::SharedIndex => Err(index_is_read_only()),
            Place::Shared { grant, path } => {
                if want == Want::Write && grant.permission != SharePermission::Write {
                    return Err(ApiError::Forbidden(format!(
                        "`{}` is shared with you read-only by {}; ask them for write access",
                        grant.name, grant.owner_name
                    )));
                }
                Ok((grant.owner, path.clone()))
            }
        }
    }

    /// The caller's view of `canon`, a canonical path in the target space: the same path in
    /// their own space, or `/Shared with me/<name>/...` for a path under a share's node.
    pub fn show(&self, canon: &RemotePath) -> ApiResult<RemotePath> {
        match self {
            Place::Own { .. } => Ok(canon.clone()),
            Place::SharedIndex => Ok(shared_root()),
            Place::Shared { grant, .. } => {
                let base = grant.root.components();
                let all = canon.components();
                let inside = all.len() >= base.len() && all.iter().zip(base).all(|(a, b)| name_key(a) == name_key(b));
                if !inside {
                    // A concurrent move took it out of the share: never show the owner's path.
                    return Err(ApiError::not_found());
                }
                let mut shown = shared_root().join(&grant.name)?;
                for c in &all[base.len()..] {
                    shown = shown.join(c)?;
                }
                Ok(shown)
            }
        }
    }

    /// `e` as the caller may read it: through a share, a message names paths as the caller
    /// sees them (never the owner's folders above the shared node), and a full space is the
    /// owner's, without their figures.
    pub fn scrub(&self, e: impl Into<ApiError>) -> ApiError {
        let e = e.into();
        let Place::Shared { grant, .. } = self else { return e };
        let from = format!("`{}", grant.root);
        let to = format!("`{}/{}", shared_root(), grant.name);
        let fix = |m: String| m.replace(&from, &to);
        match e {
            ApiError::QuotaExceeded(_) => ApiError::QuotaExceeded(format!(
                "the space of {} (who shared `{}` with you) is full; ask them to make room",
                grant.owner_name, grant.name
            )),
            ApiError::BadRequest(m) => ApiError::BadRequest(fix(m)),
            ApiError::Forbidden(m) => ApiError::Forbidden(fix(m)),
            ApiError::NotFound(m) => ApiError::NotFound(fix(m)),
            ApiError::Conflict(m) => ApiError::Conflict(fix(m)),
            ApiError::AlreadyExists(m) => ApiError::AlreadyExists(fix(m)),
            ApiError::NotADirectory(m) => ApiError::NotADirectory(fix(m)),
            ApiError::IsADirectory(m) => ApiError::IsADirectory(fix(m)),
            ApiError::PayloadTooLarge(m) => ApiError::PayloadTooLarge(fix(m)),
            ApiError::PreconditionFailed(m) => ApiError::PreconditionFailed(fix(m)),
            ApiError::Locked(m) => ApiError::Locked(fix(m)),
            ApiError::HashMismatch(m) => ApiError::HashMismatch(fix(m)),
            ApiError::MissingBlocks(m) => ApiError::MissingBlocks(fix(m)),
            other => other,
        }
    }

    /// Whether a share is involved: the caller's own space is `Own`.
    pub fn is_shared(&self) -> bool {
        !matches!(self, Place::Own { .. })
    }

    /// Records what a recipient did through a share (`share_access`, in the owner's and the
    /// administrators' audit log): a file's content read, or a change (`what`), at `shown`, the
    /// path as the recipient sees it. Listings and stats are not recorded. Nothing for the
    /// caller's own space.
    pub async fn audit_access(&self, meta: &Meta, actor: &Actor<'_>, what: &str, shown: &RemotePath) -> ApiResult<()> {
        self.audit_detail(meta, actor, || format!("{what} {shown}")).await
    }

    /// [`Place::audit_access`] with the whole description given (`copy A to B`, for the share
    /// a copy across its edge took from). `what` is called only when something is recorded:
    /// every read of one's own files comes through here.
    pub async fn audit_detail(&self, meta: &Meta, actor: &Actor<'_>, what: impl FnOnce() -> String) -> ApiResult<()> {
        let Place::Shared { grant, .. } = self else { return Ok(()) };
        meta.audit(NewAudit {
            actor_id: Some(actor.id),
            actor: Some(actor.name.to_string()),
            action: "share_access".into(),
            target: Some(format!("share:{}", grant.share_id)),
            detail: Some(format!("{} (shared by {})", what(), grant.owner_name)),
            ip: actor.ip.map(|i| i.to_string()),
        })
        .await?;
        Ok(())
    }

    /// `/Shared with me` itself or a share's own entry in it: the recipient leaves a share
    /// rather than deleting, moving or replacing the owner's file or folder.
    pub fn is_share_entry(&self) -> bool {
        match self {
            Place::Own { .. } => false,
            Place::SharedIndex => true,
            Place::Shared { grant, path } => path.components().len() == grant.root.components().len(),
        }
    }
}

/// An error of a copy or move from `from` to `to` in the caller's words (see
/// [`Place::scrub`]). The room is the destination's: a full space there is never blamed on
/// the owner of a share the content came from.
pub fn scrub_across(from: &Place, to: &Place, e: impl Into<ApiError>) -> ApiError {
    let e = e.into();
    if matches!(e, ApiError::QuotaExceeded(_)) {
        return to.scrub(e);
    }
    to.scrub(from.scrub(e))
}

/// `share_access` for a move or copy (`op`) on each end that is a share, in every door: at the
/// destination what was put there, and at a source in another share what was taken from it.
/// `from` and `to` are each where a path leads and the path as the caller named it.
pub async fn audit_transfer(
    meta: &Meta,
    actor: &Actor<'_>,
    op: &str,
    (from_place, from): (&Place, &RemotePath),
    (to_place, to): (&Place, &RemotePath),
) -> ApiResult<()> {
    let same_share = matches!((from_place, to_place),
        (Place::Shared { grant: a, .. }, Place::Shared { grant: b, .. }) if a.share_id == b.share_id);
    let what = || format!("{op} {from} to {to}");
    to_place.audit_detail(meta, actor, what).await?;
    if !same_share {
        from_place.audit_detail(meta, actor, what).await?;
    }
    Ok(())
}

/// The old and new names when a move of `from` to `to` renames an entry of `/Shared with me`
/// (both directly in it): the recipient's own mount point of a share, renamed in every door
/// that moves (the owner's node keeps its name).
pub fn share_entry_rename(from: &RemotePath, to: &RemotePath) -> Option<(String, String)> {
    let index = |p: &RemotePath| -> Option<String> {
        match p.components() {
            [top, name] if is_shared_with_me(top) => Some(name.clone()),
            _ => None,
        }
    };
    Some((index(from)?, index(to)?))
}

/// `/Shared with me`.
pub fn shared_root() -> RemotePath {
    RemotePath::root().join(SHARED_WITH_ME).unwrap_or_else(|_| RemotePath::root())
}

/// Where `path` leads for the caller whose space is `caller`. A share that does not exist (or
/// was revoked, or whose node is in the trash) is NotFound, as any missing path.
pub async fn locate(meta: &Meta, caller: SpaceId, path: &RemotePath) -> ApiResult<Place> {
    let comps = path.components();
    if comps.first().is_none_or(|c| !is_shared_with_me(c)) {
        return Ok(Place::Own { space: caller, path: path.clone() });
    }
    let Some(name) = comps.get(1) else { return Ok(Place::SharedIndex) };
    let grant = meta.shared_grant(caller, name).await?.ok_or_else(ApiError::not_found)?;
    let mut target = grant.root.clone();
    for c in &comps[2..] {
        target = target.join(c)?;
    }
    Ok(Place::Shared { grant: Box::new(grant), path: target })
}

/// [`locate`] for a path about to be created: a new name directly in `/Shared with me` is
/// refused as a write there (403), not reported missing.
pub async fn locate_new(meta: &Meta, caller: SpaceId, path: &RemotePath) -> ApiResult<Place> {
    match locate(meta, caller, path).await {
        Err(ApiError::NotFound(_)) if path.components().len() == 2 => Err(index_is_read_only()),
        other => other,
    }
}

fn index_is_read_only() -> ApiError {
    ApiError::Forbidden(format!("`/{SHARED_WITH_ME}` lists what others shared with you; nothing can be stored there"))
}
