//! The change feed: `GET /api/v1/changes?cursor=&wait=&limit=`, the namespace changes of the
//! caller's space in commit order, with long polling. The desktop mount keeps its directory
//! and attribute caches fresh with it.

use std::time::Duration;

use axum::extract::State;
use nimbus_proto::wire::{Change, ChangeList, ChangeOp, EntryKind};
use serde::Deserialize;
use tokio::time::Instant;
use utoipa::IntoParams;

use super::{Json, MAX_PAGE, Query, page_limit, rfc3339};
use crate::auth::AuthUser;
use crate::error::{ApiError, ApiResult};
use crate::meta::{ChangeRow, FeedShare, SpaceId};
use crate::state::AppState;

/// The longest `?wait=` (seconds). The route's timeout is this plus a margin (see `router`).
pub const MAX_WAIT_SECS: u64 = 60;

/// While waiting, the database is asked again this often: a change committed by another
/// gateway on the same database wakes no one in this process.
const POLL: Duration = Duration::from_secs(1);

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct ChangesQuery {
    /// The `cursor` of the previous answer. Without it: no changes and the latest cursor (start
    /// from now). Not a non-negative integer: 400. Beyond the space's latest change: `reset: true`.
    pub cursor: Option<String>,
    /// Long poll: seconds (0-60, default 0) to hold the request while nothing follows the cursor.
    pub wait: Option<i64>,
    /// Most changes returned (1-1000, default 1000); the rest come next call.
    pub limit: Option<i64>,
}

/// Most shares a cursor may follow (a cursor is a query parameter: keep it bounded).
const MAX_CURSOR_SHARES: usize = 1000;

/// Where a reader of the feed is: the seq of their own space's journal, and for each share
/// given to them the seq of its owner's journal up to which it was read.
///
/// Written `<own>` while the caller has no shares (as before sharing existed), else
/// `<own>.<share>-<seq>.<share>-<seq>...`: seqs are ordered within one space only (a later seq
/// of another space may commit first), so each journal keeps its own position.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Cursor {
    own: i64,
    shares: Vec<(i64, i64)>,
}

impl Cursor {
    fn parse(raw: &str) -> ApiResult<Cursor> {
        let bad = || {
            ApiError::BadRequest(format!(
                "invalid cursor `{}`: it must be a cursor this endpoint returned; start again without one",
                raw.chars().take(40).collect::<String>()
            ))
        };
        let num = |s: &str| -> ApiResult<i64> {
            if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
                return Err(bad());
            }
            s.parse::<i64>().map_err(|_| bad())
        };
        let mut parts = raw.split('.');
        let own = num(parts.next().unwrap_or(""))?;
        let mut shares = Vec::new();
        for p in parts {
            let (id, seq) = p.split_once('-').ok_or_else(bad)?;
            shares.push((num(id)?, num(seq)?));
            if shares.len() > MAX_CURSOR_SHARES {
                return Err(bad());
            }
        }
        Ok(Cursor { own, shares })
    }

    fn share(&self, id: i64) -> Option<i64> {
        self.shares.iter().find(|(s, _)| *s == id).map(|(_, seq)| *seq)
    }
}

impl std::fmt::Display for Cursor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.own)?;
        for (id, seq) in &self.shares {
            write!(f, ".{id}-{seq}")?;
        }
        Ok(())
    }
}

fn wait_secs(wait: Option<i64>) -> ApiResult<u64> {
    match wait {
        None => Ok(0),
        Some(w) if (0..=MAX_WAIT_SECS as i64).contains(&w) => Ok(w as u64),
        Some(_) => Err(ApiError::BadRequest(format!("wait must be between 0 and {MAX_WAIT_SECS} seconds"))),
    }
}

fn change(row: ChangeRow) -> ApiResult<Change> {
    let op = ChangeOp::parse(&row.op)
        .ok_or_else(|| ApiError::internal(anyhow::anyhow!("unknown op `{}` in change {}", row.op, row.seq)))?;
    // Rows journaled before kinds were recorded, whose node is gone: most nodes are files.
    let kind = if row.kind.as_deref() == Some("dir") { EntryKind::Dir } else { EntryKind::File };
    Ok(Change {
        seq: row.seq,
        op,
        path: row.path.unwrap_or_default(),
        from: if op == ChangeOp::Move { row.from_path } else { None },
        kind,
        node_id: row.node_id,
        at: rfc3339(row.at),
    })
}

/// One read of everything the caller follows after `cursor`: their own journal and each
/// share's part of its owner's. Returns the changes (oldest first, at most `limit`), the
/// cursor after them, and whether the cursor is one the database never issued (`reset`).
async fn read(
    st: &AppState,
    user: &AuthUser,
    shares: &[FeedShare],
    cursor: &Cursor,
    limit: i64,
) -> ApiResult<(Vec<ChangeRow>, Cursor, bool)> {
    let (own_rows, own_latest) = st.meta.changes_after(user.space, cursor.own, limit).await?;
    if cursor.own > own_latest {
        return Ok((Vec::new(), Cursor { own: own_latest, shares: cursor.shares.clone() }, true));
    }
    // (source, row): source None is the caller's own journal, Some(i) share i.
    let mut all: Vec<(Option<usize>, ChangeRow)> = own_rows.into_iter().map(|r| (None, r)).collect();
    let mut reached = Vec::with_capacity(shares.len());
    let mut reset = false;
    for (i, share) in shares.iter().enumerate() {
        let latest = st.meta.latest_change(share.owner).await?;
        let Some(after) = cursor.share(share.share_id) else {
            // A share this cursor has not followed yet: from now on. Its entry's appearance is
            // in the caller's own journal; whoever lists it then sees its content as it is.
            reached.push((share.share_id, latest, false));
            continue;
        };
        if after > latest {
            reset = true;
            reached.push((share.share_id, latest, false));
            continue;
        }
        let rows = st.meta.share_changes_after(share, after, latest, limit).await?;
        // Read to `latest` unless the page was full: then up to its last row.
        let full = rows.len() as i64 >= limit;
        let upto = if full { rows.last().map_or(after, |r| r.seq) } else { latest };
        reached.push((share.share_id, upto, full));
        all.extend(rows.into_iter().map(|r| (Some(i), r)));
    }
    if reset {
        let shares = reached.iter().map(|(id, seq, _)| (*id, *seq)).collect();
        return Ok((Vec::new(), Cursor { own: own_latest, shares }, true));
    }
    all.sort_by_key(|(_, r)| r.seq);
    let dropped = all.split_off(all.len().min(limit as usize));
    let mut next = Cursor { own: cursor.own, shares: Vec::with_capacity(shares.len()) };
    if let Some(last) = all.iter().filter(|(src, _)| src.is_none()).map(|(_, r)| r.seq).next_back() {
        next.own = last;
    }
    for (i, (id, upto, _)) in reached.iter().enumerate() {
        // A share with rows left out of this page resumes after its last one sent.
        let cut = dropped.iter().any(|(src, _)| *src == Some(i));
        let seq = if cut {
            all.iter()
                .filter(|(src, _)| *src == Some(i))
                .map(|(_, r)| r.seq)
                .next_back()
                .unwrap_or_else(|| cursor.share(*id).unwrap_or(0))
        } else {
            *upto
        };
        next.shares.push((*id, seq));
    }
    let mut rows = Vec::with_capacity(all.len());
    for (src, r) in all {
        match src {
            None => rows.push(r),
            Some(i) => rows.extend(shares[i].as_recipient(r)),
        }
    }
    Ok((rows, next, false))
}

#[utoipa::path(
    get,
    path = "/api/v1/changes",
    tag = "changes",
    summary = "Namespace changes of your space and of the shares given to you, in commit order, long-polled",
    params(ChangesQuery),
    responses((status = 200, description = "success", body = ChangeList))
)]
pub async fn list(
    State(st): State<AppState>,
    user: AuthUser,
    Query(q): Query<ChangesQuery>,
) -> ApiResult<Json<ChangeList>> {
    let limit = page_limit(q.limit, MAX_PAGE)?;
    let wait = wait_secs(q.wait)?;
    let cursor = match q.cursor.as_deref().map(Cursor::parse).transpose()? {
        Some(c) => c,
        None => {
            // No cursor: start from now (the client has just listed what it needs).
            let own = st.meta.latest_change(user.space).await?;
            let mut shares = Vec::new();
            for s in st.meta.feed_shares(user.space).await? {
                shares.push((s.share_id, st.meta.latest_change(s.owner).await?));
            }
            let c = Cursor { own, shares };
            return Ok(Json(ChangeList { changes: Vec::new(), cursor: c.to_string(), reset: false }));
        }
    };
    // The shares are read once per request: a share given, changed or ended meanwhile is a
    // change of the caller's own journal, which ends the wait.
    let shares = st.meta.feed_shares(user.space).await?;
    let deadline = Instant::now() + Duration::from_secs(wait);
    // Registered before the first query, so a change committed between a query and the wait
    // below still wakes it: the caller's space and each owner's.
    let mut owners: Vec<SpaceId> = shares.iter().map(|s| s.owner).collect();
    owners.sort_unstable();
    owners.dedup();
    let mut watches = vec![st.meta.watch_changes(user.space)];
    watches.extend(owners.into_iter().map(|o| st.meta.watch_changes(o)));
    let mut cursor = cursor;
    loop {
        // Each query takes a pooled connection and gives it back: none is held while waiting.
        let (rows, next, reset) = read(&st, &user, &shares, &cursor, limit).await?;
        if reset {
            return Ok(Json(ChangeList { changes: Vec::new(), cursor: next.to_string(), reset: true }));
        }
        // Share cursors move past an owner's changes outside the share even when nothing is
        // reported: the next read starts after them.
        cursor = next;
        if !rows.is_empty() {
            let changes = rows.into_iter().map(change).collect::<ApiResult<Vec<_>>>()?;
            return Ok(Json(ChangeList { changes, cursor: cursor.to_string(), reset: false }));
        }
        let now = Instant::now();
        // Shutting down: answer as when the wait is over, so the drain is not held to its limit
        // and the client simply polls again (on another gateway).
        if now >= deadline || st.shutdown.is_cancelled() {
            return Ok(Json(ChangeList { changes: Vec::new(), cursor: cursor.to_string(), reset: false }));
        }
        let woken = futures::future::select_all(watches.iter_mut().map(|w| Box::pin(w.changed())));
        tokio::select! {
            _ = woken => {}
            _ = tokio::time::sleep((deadline - now).min(POLL)) => {}
            _ = st.shutdown.cancelled() => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cursors_are_non_negative_integers_with_share_positions() {
        let own = |n| Cursor { own: n, shares: vec![] };
        assert_eq!(Cursor::parse("0").ok(), Some(own(0)));
        assert_eq!(Cursor::parse("42").ok(), Some(own(42)));
        let c = Cursor { own: 42, shares: vec![(7, 100), (9, 0)] };
        assert_eq!(c.to_string(), "42.7-100.9-0");
        assert_eq!(Cursor::parse(&c.to_string()).ok(), Some(c));
        for bad in ["", "-1", "+1", "1.5", "abc", " 1", "99999999999999999999", "1.", "1.7", "1.7-", "1.-3", "1.7-3-4"]
        {
            assert!(Cursor::parse(bad).is_err(), "{bad:?} accepted");
        }
    }

    #[test]
    fn waits_are_bounded() {
        assert_eq!(wait_secs(None).ok(), Some(0));
        assert_eq!(wait_secs(Some(60)).ok(), Some(60));
        assert!(wait_secs(Some(61)).is_err());
        assert!(wait_secs(Some(-1)).is_err());
    }
}
