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
use crate::meta::ChangeRow;
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

/// Cursors are journal seqs in decimal; anything else is refused (not treated as "from now").
fn parse_cursor(raw: &str) -> ApiResult<i64> {
    let bad = || {
        ApiError::BadRequest(format!(
            "invalid cursor `{}`: it must be a cursor this endpoint returned (a non-negative integer); \
             start again without one",
            raw.chars().take(40).collect::<String>()
        ))
    };
    if raw.is_empty() || !raw.bytes().all(|b| b.is_ascii_digit()) {
        return Err(bad());
    }
    raw.parse::<i64>().map_err(|_| bad())
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

#[utoipa::path(
    get,
    path = "/api/v1/changes",
    tag = "changes",
    summary = "Namespace changes of your space in commit order, long-polled",
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
    let Some(raw) = q.cursor else {
        // No cursor: start from now (the client has just listed what it needs).
        let latest = st.meta.latest_change(user.space).await?;
        return Ok(Json(ChangeList { changes: Vec::new(), cursor: latest.to_string(), reset: false }));
    };
    let cursor = parse_cursor(&raw)?;
    let deadline = Instant::now() + Duration::from_secs(wait);
    // Registered before the first query, so a change committed between a query and the wait
    // below still wakes it.
    let mut watch = st.meta.watch_changes(user.space);
    loop {
        // Each query takes a pooled connection and gives it back: none is held while waiting.
        let (rows, latest) = st.meta.changes_after(user.space, cursor, limit).await?;
        if cursor > latest {
            return Ok(Json(ChangeList { changes: Vec::new(), cursor: latest.to_string(), reset: true }));
        }
        if let Some(last) = rows.last().map(|r| r.seq) {
            let changes = rows.into_iter().map(change).collect::<ApiResult<Vec<_>>>()?;
            return Ok(Json(ChangeList { changes, cursor: last.to_string(), reset: false }));
        }
        let now = Instant::now();
        if now >= deadline {
            return Ok(Json(ChangeList { changes: Vec::new(), cursor: cursor.to_string(), reset: false }));
        }
        tokio::select! {
            _ = watch.changed() => {}
            _ = tokio::time::sleep((deadline - now).min(POLL)) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cursors_are_non_negative_integers() {
        assert_eq!(parse_cursor("0").ok(), Some(0));
        assert_eq!(parse_cursor("42").ok(), Some(42));
        for bad in ["", "-1", "+1", "1.5", "abc", " 1", "99999999999999999999"] {
            assert!(parse_cursor(bad).is_err(), "{bad:?} accepted");
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
