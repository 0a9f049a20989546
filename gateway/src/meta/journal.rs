//! The change journal of each space: what the change feed (`/api/v1/changes`) and the drive
//! read to follow a space. Every namespace change appends to it in its own transaction.

use super::MetaResult;
use super::engine::{TxConn, sql};

/// One entry of the change journal.
pub(crate) struct Change<'a> {
    pub node: i64,
    pub op: &'a str,
    /// "file" or "dir".
    pub kind: &'a str,
    pub path: &'a str,
    /// The old path of a move.
    pub from: Option<&'a str>,
}

/// Appends to the space's change journal. Takes the space's journal lock first
/// ([`TxConn::lock_space`]), so no writer can forget it: within a space, seq order is commit
/// order.
pub(crate) async fn journal(c: &mut impl TxConn, space: i64, now: i64, change: Change<'_>) -> MetaResult<()> {
    c.lock_space(space).await?;
    sql("INSERT INTO changes (space_id, node_id, op, path, from_path, kind, at) VALUES ($1, $2, $3, $4, $5, $6, $7)")
        .bind(space)
        .bind(change.node)
        .bind(change.op)
        .bind(change.path)
        .bind(change.from)
        .bind(change.kind)
        .bind(now)
        .execute(c)
        .await?;
    Ok(())
}
