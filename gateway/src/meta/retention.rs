//! How long history is kept: older versions of live files and trash items.
//!
//! Two ways history goes, both in transactions holding the space lock:
//! - by policy ([`Meta::apply_retention`], run by the gateway's maintenance worker and by
//!   `nimbus-gateway gc`): `--version-retention` thins each file's older versions (by default
//!   every version for 24 h, then one a day up to 30 days, then one a week up to a year, then
//!   none) and `--trash-retention` purges trash items deleted longer ago (default 30 days);
//! - to make room ([`make_room`], from [`super::usage`]): a write that would pass
//!   the quota expires the space's oldest older versions and trash items, oldest first, as
//!   Nextcloud does, so history never makes a save fail.
//!
//! A current version is never expired. What goes frees its usage at once; the blocks nothing
//! references any more are reclaimed by garbage collection like purged data.

use std::collections::HashSet;
use std::fmt;
use std::time::Duration;

use super::SpaceId;
use super::engine::{Conn, TxConn, scalar, sql};
use super::journal::{Change, journal};
use super::usage::{Usage, apply_usage};
use super::{Meta, MetaError, MetaResult, now_ms};

/// One step of a version policy: versions younger than `max_age` are kept, all of them
/// (`every` None) or the newest of each `every`-long slot of time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct VersionRule {
    pub max_age: Duration,
    pub every: Option<Duration>,
}

/// Which older versions of a file are kept.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum VersionPolicy {
    /// Every version, forever.
    Forever,
    /// Versions older than the last rule's age go; an empty list keeps no older version.
    Rules(Vec<VersionRule>),
}

/// The retention settings of a gateway (`--version-retention`, `--trash-retention`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Retention {
    pub versions: VersionPolicy,
    /// None: trash items stay until purged.
    pub trash: Option<Duration>,
}

pub const DEFAULT_VERSION_RETENTION: &str = "24h:all,30d:1d,365d:7d";
pub const DEFAULT_TRASH_RETENTION: &str = "30d";

impl Default for Retention {
    fn default() -> Self {
        Retention {
            versions: parse_version_policy(DEFAULT_VERSION_RETENTION).unwrap_or(VersionPolicy::Forever),
            trash: parse_trash_retention(DEFAULT_TRASH_RETENTION).unwrap_or(None),
        }
    }
}

/// `forever`, `none`, or comma-separated `AGE:all` / `AGE:EVERY` steps with growing ages, e.g.
/// `24h:all,30d:1d,365d:7d` (durations as in `90s`, `30m`, `24h`, `7d`).
pub fn parse_version_policy(s: &str) -> Result<VersionPolicy, String> {
    let s = s.trim();
    match s {
        "forever" => return Ok(VersionPolicy::Forever),
        "none" => return Ok(VersionPolicy::Rules(Vec::new())),
        _ => {}
    }
    let mut rules: Vec<VersionRule> = Vec::new();
    for step in s.split(',') {
        let (age, every) = step.trim().split_once(':').ok_or_else(|| {
            format!("`{step}` is not a retention step: write AGE:all or AGE:EVERY, e.g. {DEFAULT_VERSION_RETENTION} (or `forever`, `none`)")
        })?;
        let max_age = positive(age)?;
        let every = match every.trim() {
            "all" => None,
            e => Some(positive(e)?),
        };
        if let Some(prev) = rules.last()
            && prev.max_age >= max_age
        {
            return Err(format!("retention steps must have growing ages: `{step}` follows {}", human(prev.max_age)));
        }
        rules.push(VersionRule { max_age, every });
    }
    Ok(VersionPolicy::Rules(rules))
}

/// `forever` or a duration (`30d`).
pub fn parse_trash_retention(s: &str) -> Result<Option<Duration>, String> {
    match s.trim() {
        "forever" => Ok(None),
        d => positive(d).map(Some),
    }
}

fn positive(s: &str) -> Result<Duration, String> {
    let d = crate::timefmt::parse_duration(s)?;
    if d.is_zero() {
        return Err(format!("`{s}` must be longer than 0"));
    }
    Ok(d)
}

/// A duration in its largest exact unit, as the flags take it (an age of one day reads `24h`,
/// as in the default policy).
fn human(d: Duration) -> String {
    human_unit(d, true)
}

fn human_unit(d: Duration, one_day: bool) -> String {
    let s = d.as_secs();
    for (unit, n) in [("d", 86_400), ("h", 3600), ("m", 60)] {
        if s.is_multiple_of(n) && (unit != "d" || one_day || s > n) {
            return format!("{}{unit}", s / n);
        }
    }
    format!("{s}s")
}

impl fmt::Display for VersionPolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            VersionPolicy::Forever => f.write_str("forever"),
            VersionPolicy::Rules(r) if r.is_empty() => f.write_str("none"),
            VersionPolicy::Rules(rules) => {
                let steps: Vec<String> = rules
                    .iter()
                    .map(|r| format!("{}:{}", human_unit(r.max_age, false), r.every.map_or("all".to_string(), human)))
                    .collect();
                f.write_str(&steps.join(","))
            }
        }
    }
}

impl Retention {
    pub fn trash_spec(&self) -> String {
        self.trash.map_or("forever".to_string(), human)
    }
}

fn ms(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}

impl VersionPolicy {
    /// Of one file's older versions `(id, created_at_ms)`, newest first, the ids that go.
    /// Slots are fixed in time (multiples of `every` since the epoch), so a version kept as the
    /// newest of its slot stays kept as it ages through the same step.
    pub fn doomed(&self, versions: &[(i64, i64)], now_ms: i64) -> Vec<i64> {
        let VersionPolicy::Rules(rules) = self else { return Vec::new() };
        let mut seen: HashSet<(usize, i64)> = HashSet::new();
        let mut out = Vec::new();
        for &(id, at) in versions {
            let age = now_ms.saturating_sub(at).max(0);
            match rules.iter().enumerate().find(|(_, r)| age < ms(r.max_age)) {
                None => out.push(id),
                Some((_, VersionRule { every: None, .. })) => {}
                Some((i, VersionRule { every: Some(e), .. })) => {
                    if !seen.insert((i, at.div_euclid(ms(*e).max(1)))) {
                        out.push(id);
                    }
                }
            }
        }
        out
    }

    /// Versions younger than this are kept whatever else the policy says.
    fn keeps_all_younger_than(&self) -> Option<Duration> {
        match self {
            VersionPolicy::Forever => None,
            VersionPolicy::Rules(r) => {
                Some(r.first().filter(|r| r.every.is_none()).map_or(Duration::ZERO, |r| r.max_age))
            }
        }
    }
}

/// What a retention run expired.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct Expired {
    pub versions: u64,
    pub trash_items: u64,
    pub bytes: u64,
}

/// Every node of the subtree under `$1`, trashed ones included (what deleting `$1` takes).
const WHOLE_SUBTREE: &str = "WITH RECURSIVE sub(id) AS (\
        SELECT id FROM nodes WHERE id = $1 \
        UNION ALL SELECT n.id FROM nodes n JOIN sub s ON n.parent_id = s.id)";

/// Is node `$1` in the trash, itself or through an ancestor?
const IN_TRASH: &str = "WITH RECURSIVE up(id, parent_id, trashed_at) AS (\
        SELECT id, parent_id, trashed_at FROM nodes WHERE id = $1 \
        UNION ALL SELECT n.id, n.parent_id, n.trashed_at FROM nodes n JOIN up ON n.id = up.parent_id) \
     SELECT COUNT(*) FROM up WHERE trashed_at IS NOT NULL";

/// Expires the space's oldest older versions and trash items until `need` bytes are freed or
/// nothing is left to expire, in a transaction holding the space lock. Returns the bytes freed.
pub(crate) async fn make_room(c: &mut impl TxConn, space: i64, need: i64) -> MetaResult<i64> {
    let now = now_ms();
    let mut freed = 0;
    let mut cursor = 0i64;
    while freed < need {
        // The oldest older version of a live file after `cursor`...
        let mut version: Option<(i64, i64, i64)> = None;
        loop {
            let v: Option<(i64, i64, i64)> =
                sql("SELECT v.id, v.node_id, v.created_at FROM versions v JOIN nodes n ON n.id = v.node_id \
                     WHERE v.space_id = $1 AND v.id > $2 AND v.id <> COALESCE(n.version_id, 0) ORDER BY v.id LIMIT 1")
                .bind(space)
                .bind(cursor)
                .fetch_optional(c)
                .await?;
            match v {
                Some((id, node, at)) => {
                    if is_live(c, node).await? {
                        version = Some((id, node, at));
                        break;
                    }
                    cursor = id;
                }
                None => break,
            }
        }
        // ... and the oldest trash item: whichever is older goes first.
        let item: Option<(i64, i64)> =
            sql("SELECT id, deleted_at FROM trash WHERE space_id = $1 ORDER BY deleted_at, id LIMIT 1")
                .bind(space)
                .fetch_optional(c)
                .await?;
        let version_first = match (version, item) {
            (Some((_, _, at)), Some((_, deleted))) => at <= deleted,
            (Some(_), None) => true,
            (None, _) => false,
        };
        if let (true, Some((id, _, _))) = (version_first, version) {
            freed += expire_version(c, space, id).await?;
            cursor = id;
        } else if let Some((item, _)) = item {
            freed += purge_item(c, space, item, now).await?.unwrap_or(0);
        } else {
            break;
        }
    }
    if freed > 0 {
        metrics::counter!("nimbus_quota_room_made_bytes_total").increment(freed as u64);
        tracing::info!(space, need, freed, "expired history to make room within the quota");
    }
    Ok(freed)
}

/// Purges trash item `item` (its node, and what was trashed inside it before) for good.
/// Returns the bytes freed, or None if the item is gone already.
pub(crate) async fn purge_item(c: &mut impl TxConn, space: i64, item: i64, now: i64) -> MetaResult<Option<i64>> {
    let row: Option<(i64, String, String)> =
        sql("SELECT t.node_id, t.original_path, n.kind FROM trash t JOIN nodes n ON n.id = t.node_id \
             WHERE t.id = $1 AND t.space_id = $2")
        .bind(item)
        .bind(space)
        .fetch_optional(c)
        .await?;
    let Some((node, path, kind)) = row else { return Ok(None) };
    // Items trashed inside this one before it go with it (their rows cascade).
    let text = format!(
        "{WHOLE_SUBTREE} SELECT CAST(COALESCE(SUM(current_bytes + versions_bytes), 0) AS BIGINT) \
             FROM trash WHERE node_id IN (SELECT id FROM sub)"
    );
    let bytes: i64 = scalar(sqlx::AssertSqlSafe(text)).bind(node).fetch_one(c).await?;
    sql("DELETE FROM nodes WHERE id = $1").bind(node).execute(c).await?;
    apply_usage(c, space, Usage { trash: -bytes, ..Default::default() }, true, 0i64).await?;
    journal(c, space, now, Change { node, op: "purge", kind: &kind, path: &path, from: None }).await?;
    Ok(Some(bytes))
}

/// Deletes one older version. Returns its size.
pub(crate) async fn expire_version(c: &mut impl Conn, space: i64, version: i64) -> MetaResult<i64> {
    let size: Option<i64> = scalar("DELETE FROM versions WHERE id = $1 AND space_id = $2 RETURNING size")
        .bind(version)
        .bind(space)
        .fetch_optional(c)
        .await?;
    let size = size.ok_or(MetaError::NotFound)?;
    apply_usage(c, space, Usage { versions: -size, ..Default::default() }, true, 0i64).await?;
    Ok(size)
}

/// Is the node live (neither it nor an ancestor in the trash)?
pub(crate) async fn is_live(c: &mut impl Conn, node: i64) -> MetaResult<bool> {
    let n: i64 = scalar(IN_TRASH).bind(node).fetch_one(c).await?;
    Ok(n == 0)
}

impl Meta {
    /// Applies `retention` to one space: purges trash items past the trash retention and thins
    /// the older versions of its live files by the version policy.
    pub async fn apply_retention(&self, space: SpaceId, retention: &Retention) -> MetaResult<Expired> {
        let space = space.get();
        let now = now_ms();
        let mut out = Expired::default();
        if let Some(keep) = retention.trash {
            let cutoff = now.saturating_sub(ms(keep));
            {
                let mut tx = self.begin_space(space).await?;
                let items: Vec<i64> =
                    scalar("SELECT id FROM trash WHERE space_id = $1 AND deleted_at < $2 ORDER BY deleted_at, id")
                        .bind(space)
                        .bind(cutoff)
                        .fetch_all(&mut tx)
                        .await?;
                for item in items {
                    if let Some(bytes) = purge_item(&mut tx, space, item, now).await? {
                        out.trash_items += 1;
                        out.bytes += bytes.max(0) as u64;
                    }
                }
                tx.commit().await?;
            };
        }
        if let Some(young) = retention.versions.keeps_all_younger_than() {
            let cutoff = now.saturating_sub(ms(young));
            {
                let mut tx = self.begin_space(space).await?;
                let rows: Vec<(i64, i64, i64)> =
                    sql("SELECT v.id, v.node_id, v.created_at FROM versions v JOIN nodes n ON n.id = v.node_id \
                     WHERE v.space_id = $1 AND v.id <> COALESCE(n.version_id, 0) AND v.created_at < $2 \
                     ORDER BY v.node_id, v.created_at DESC, v.id DESC")
                    .bind(space)
                    .bind(cutoff)
                    .fetch_all(&mut tx)
                    .await?;
                // Younger versions are all kept, so they take no slot from these.
                let mut i = 0;
                while i < rows.len() {
                    let node = rows[i].1;
                    let j = rows[i..].iter().position(|r| r.1 != node).map_or(rows.len(), |n| i + n);
                    if is_live(&mut tx, node).await? {
                        let of_file: Vec<(i64, i64)> = rows[i..j].iter().map(|r| (r.0, r.2)).collect();
                        for id in retention.versions.doomed(&of_file, now) {
                            out.bytes += expire_version(&mut tx, space, id).await?.max(0) as u64;
                            out.versions += 1;
                        }
                    }
                    i = j;
                }
                tx.commit().await?;
            };
        }
        if out != Expired::default() {
            self.invalidate(super::notify::Invalidate::Space(space)).await;
            metrics::counter!("nimbus_retention_versions_expired_total").increment(out.versions);
            metrics::counter!("nimbus_retention_trash_expired_total").increment(out.trash_items);
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const H: i64 = 3_600_000;
    const D: i64 = 24 * H;

    #[test]
    fn default_policy_round_trips() {
        let p = parse_version_policy(DEFAULT_VERSION_RETENTION).expect("parses");
        assert_eq!(p.to_string(), DEFAULT_VERSION_RETENTION);
        assert_eq!(parse_version_policy("forever"), Ok(VersionPolicy::Forever));
        assert_eq!(parse_version_policy("none").map(|p| p.to_string()), Ok("none".to_string()));
        assert_eq!(parse_version_policy("86400s:all,720h:1d").map(|p| p.to_string()), Ok("24h:all,30d:1d".into()));
        assert_eq!(parse_trash_retention("30d"), Ok(Some(Duration::from_secs(30 * 86_400))));
        assert_eq!(parse_trash_retention("forever"), Ok(None));
        assert_eq!(Retention::default().trash_spec(), "30d");
    }

    #[test]
    fn bad_policies_say_what_to_write() {
        for bad in ["", "24h", "24h:sometimes", "30d:1d,24h:all", "0s:all", "1d:0", "x:all", "30d:1d,30d:7d"] {
            let e = parse_version_policy(bad).expect_err(bad);
            assert!(!e.is_empty(), "{bad}");
        }
        assert!(parse_trash_retention("0").is_err());
        assert!(parse_trash_retention("soon").is_err());
    }

    #[test]
    fn default_policy_keeps_recent_then_daily_then_weekly() {
        let p = Retention::default().versions;
        let now = 1000 * D + 12 * H;
        // Newest first: three within the day, two on one day a week ago, two in one week half a
        // year ago, one two years ago.
        let versions = [
            (10, now - H),
            (9, now - 2 * H),
            (8, now - 3 * H),
            (7, 993 * D + 5 * H),
            (6, 993 * D + 2 * H),
            (5, 820 * D + 3 * H),
            (4, 820 * D + 2 * H),
            (3, now - 730 * D),
        ];
        let mut doomed = p.doomed(&versions, now);
        doomed.sort();
        // Week slots are multiples of 7 days since the epoch: 820 days fall in one.
        assert_eq!(doomed, vec![3, 4, 6]);
        assert!(VersionPolicy::Forever.doomed(&versions, now).is_empty());
        assert_eq!(VersionPolicy::Rules(vec![]).doomed(&versions, now).len(), versions.len());
    }

    #[test]
    fn kept_versions_stay_kept_as_they_age_within_a_step() {
        let p = parse_version_policy("30d:1d").expect("parses");
        let versions = [(2, 10 * D + 5 * H), (1, 10 * D + H)];
        for now in [11 * D, 20 * D, 39 * D] {
            assert_eq!(p.doomed(&versions, now), vec![1], "at {now}");
        }
        assert_eq!(p.doomed(&versions, 41 * D), vec![2, 1]);
    }
}
