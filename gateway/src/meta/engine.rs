//! The small engine abstraction the metadata layer is written over.
//!
//! Every query is written once, in the SQL SQLite and PostgreSQL share (`$N` parameters,
//! `RETURNING`, partial indexes, times as Unix ms BIGINT), built with [`sql`] or [`scalar`],
//! given engine-neutral arguments ([`Arg`]) and run on a [`Conn`]: the pool ([`Db`]) or a
//! transaction ([`Tx`]). The match on the engine happens here, once per query, so the rest of
//! `meta` is ordinary functions compiled once (`sqlx::Any` cannot decode SQLite's booleans and
//! timestamps reliably, hence our own small seam rather than sqlx's).

use std::marker::PhantomData;

use sqlx::postgres::PgRow;
use sqlx::sqlite::SqliteRow;
use sqlx::{Database, Decode, Executor, FromRow, PgConnection, Postgres, Sqlite};
use sqlx::{PgPool, SqlSafeStr, SqlStr, SqlitePool, Transaction, Type};

/// A row type both engines can decode (`sqlx::FromRow` derives and tuples of plain values).
pub(crate) trait Row:
    for<'r> FromRow<'r, SqliteRow> + for<'r> FromRow<'r, PgRow> + Send + Unpin + 'static
{
}
impl<T> Row for T where T: for<'r> FromRow<'r, SqliteRow> + for<'r> FromRow<'r, PgRow> + Send + Unpin + 'static {}

/// A single column value both engines can decode (for [`scalar`] queries).
pub(crate) trait Value:
    for<'r> Decode<'r, Sqlite> + Type<Sqlite> + for<'r> Decode<'r, Postgres> + Type<Postgres> + Send + Unpin + 'static
{
}
impl<T> Value for T where
    T: for<'r> Decode<'r, Sqlite>
        + Type<Sqlite>
        + for<'r> Decode<'r, Postgres>
        + Type<Postgres>
        + Send
        + Unpin
        + 'static
{
}

/// A bound parameter. Typed even when null, so PostgreSQL infers each `$N` as it would from
/// the Rust type.
#[derive(Debug, Clone)]
pub(crate) enum Arg {
    Int(Option<i64>),
    Text(Option<String>),
    Bool(Option<bool>),
    /// BLOB in SQLite, BYTEA in PostgreSQL.
    Bytes(Option<Vec<u8>>),
}

/// What [`Sql::bind`] accepts.
pub(crate) trait IntoArg {
    fn into_arg(self) -> Arg;
}

impl IntoArg for i64 {
    fn into_arg(self) -> Arg {
        Arg::Int(Some(self))
    }
}
impl IntoArg for Option<i64> {
    fn into_arg(self) -> Arg {
        Arg::Int(self)
    }
}
impl IntoArg for bool {
    fn into_arg(self) -> Arg {
        Arg::Bool(Some(self))
    }
}
impl IntoArg for Option<bool> {
    fn into_arg(self) -> Arg {
        Arg::Bool(self)
    }
}
impl IntoArg for Vec<u8> {
    fn into_arg(self) -> Arg {
        Arg::Bytes(Some(self))
    }
}
impl IntoArg for &i64 {
    fn into_arg(self) -> Arg {
        Arg::Int(Some(*self))
    }
}
impl IntoArg for String {
    fn into_arg(self) -> Arg {
        Arg::Text(Some(self))
    }
}
impl IntoArg for Option<String> {
    fn into_arg(self) -> Arg {
        Arg::Text(self)
    }
}
impl IntoArg for &str {
    fn into_arg(self) -> Arg {
        Arg::Text(Some(self.to_owned()))
    }
}
impl IntoArg for Option<&str> {
    fn into_arg(self) -> Arg {
        Arg::Text(self.map(str::to_owned))
    }
}
impl IntoArg for &String {
    fn into_arg(self) -> Arg {
        Arg::Text(Some(self.clone()))
    }
}
impl IntoArg for Option<&String> {
    fn into_arg(self) -> Arg {
        Arg::Text(self.cloned())
    }
}
impl IntoArg for &Option<String> {
    fn into_arg(self) -> Arg {
        Arg::Text(self.clone())
    }
}

/// A query: its text and arguments. Made by [`sql`] (rows) or [`scalar`] (one column).
#[must_use = "a query does nothing until it is run on a connection"]
pub(crate) struct Sql {
    text: SqlStr,
    args: Vec<Arg>,
}

/// A query of rows (`T: Row`), or of nothing (`execute`).
pub(crate) fn sql(text: impl SqlSafeStr) -> Sql {
    Sql { text: text.into_sql_str(), args: Vec::new() }
}

/// A query of one column of type `T`.
pub(crate) fn scalar<T: Value>(text: impl SqlSafeStr) -> Scalar<T> {
    Scalar { sql: sql(text), _t: PhantomData }
}

/// See [`scalar`].
#[must_use = "a query does nothing until it is run on a connection"]
pub(crate) struct Scalar<T> {
    sql: Sql,
    _t: PhantomData<fn() -> T>,
}

impl Sql {
    pub(crate) fn bind(mut self, value: impl IntoArg) -> Sql {
        self.args.push(value.into_arg());
        self
    }

    /// Runs the statement; returns the number of rows it changed.
    pub(crate) async fn execute<C: Conn + ?Sized>(self, c: &mut C) -> Result<u64, sqlx::Error> {
        c.run(self).await
    }

    pub(crate) async fn fetch_all<T: Row, C: Conn + ?Sized>(self, c: &mut C) -> Result<Vec<T>, sqlx::Error> {
        c.rows(self).await
    }

    pub(crate) async fn fetch_optional<T: Row, C: Conn + ?Sized>(self, c: &mut C) -> Result<Option<T>, sqlx::Error> {
        c.row(self).await
    }

    pub(crate) async fn fetch_one<T: Row, C: Conn + ?Sized>(self, c: &mut C) -> Result<T, sqlx::Error> {
        c.row(self).await?.ok_or(sqlx::Error::RowNotFound)
    }
}

impl<T: Value> Scalar<T> {
    pub(crate) fn bind(self, value: impl IntoArg) -> Scalar<T> {
        Scalar { sql: self.sql.bind(value), _t: PhantomData }
    }

    pub(crate) async fn fetch_all<C: Conn + ?Sized>(self, c: &mut C) -> Result<Vec<T>, sqlx::Error> {
        Ok(c.rows::<(T,)>(self.sql).await?.into_iter().map(|(v,)| v).collect())
    }

    pub(crate) async fn fetch_optional<C: Conn + ?Sized>(self, c: &mut C) -> Result<Option<T>, sqlx::Error> {
        Ok(c.row::<(T,)>(self.sql).await?.map(|(v,)| v))
    }

    pub(crate) async fn fetch_one<C: Conn + ?Sized>(self, c: &mut C) -> Result<T, sqlx::Error> {
        self.fetch_optional(c).await?.ok_or(sqlx::Error::RowNotFound)
    }
}

/// Somewhere queries run: the pool ([`Db`]) or a transaction ([`Tx`]).
pub(crate) trait Conn: Send {
    fn run(&mut self, q: Sql) -> impl Future<Output = Result<u64, sqlx::Error>> + Send;
    fn rows<T: Row>(&mut self, q: Sql) -> impl Future<Output = Result<Vec<T>, sqlx::Error>> + Send;
    fn row<T: Row>(&mut self, q: Sql) -> impl Future<Output = Result<Option<T>, sqlx::Error>> + Send;
}

/// A transaction that changes a space's namespace can serialise its journal writers
/// ([`Tx::lock_space`]); only transactions can, so a journal write outside one does not compile.
pub(crate) trait TxConn: Conn {
    /// Serialises the journal writers of one space until the transaction ends, so that within
    /// a space `changes.seq` order is commit order and a feed reader that has seen seq N never
    /// sees a smaller seq commit later. PostgreSQL hands out identity values at insert time and
    /// concurrent transactions may commit them out of order, hence a transaction-scoped
    /// advisory lock keyed by the space; SQLite's `BEGIN IMMEDIATE` already serialises every
    /// writer. Taking it again in the same transaction is cheap and harmless (it stacks).
    fn lock_space(&mut self, space: i64) -> impl Future<Output = Result<(), sqlx::Error>> + Send;
}

/// The database pool of either engine; cheap to clone. Each query takes a connection for
/// itself, as sqlx does on a pool.
#[derive(Clone)]
pub(crate) enum Db {
    Sqlite(SqlitePool),
    Postgres(PgPool),
}

/// A transaction of either engine. Dropped without [`Tx::commit`], it rolls back.
pub(crate) enum Tx {
    Sqlite(Transaction<'static, Sqlite>),
    Postgres(Transaction<'static, Postgres>),
}

impl Db {
    /// A transaction that will write. SQLite must take the write lock up front (`BEGIN
    /// IMMEDIATE`): a deferred transaction that reads and then writes can fail with
    /// SQLITE_BUSY instead of waiting, which would turn a plain race into an error.
    pub(crate) async fn begin_write(&self) -> Result<Tx, sqlx::Error> {
        Ok(match self {
            Db::Sqlite(p) => Tx::Sqlite(p.begin_with("BEGIN IMMEDIATE").await?),
            Db::Postgres(p) => Tx::Postgres(p.begin().await?),
        })
    }

    /// A transaction that changes the namespace of `space` (and so writes its journal): a write
    /// transaction that takes the space's lock ([`TxConn::lock_space`]) before anything else.
    /// Taking it first, not only at the journal insert, keeps the lock order the same in every
    /// such transaction (space lock, then rows), so two of them cannot deadlock.
    pub(crate) async fn begin_space(&self, space: i64) -> Result<Tx, sqlx::Error> {
        let mut tx = self.begin_write().await?;
        tx.lock_space(space).await?;
        Ok(tx)
    }

    pub(crate) async fn close(&self) {
        match self {
            Db::Sqlite(p) => p.close().await,
            Db::Postgres(p) => p.close().await,
        }
    }
}

impl Tx {
    pub(crate) async fn commit(self) -> Result<(), sqlx::Error> {
        match self {
            Tx::Sqlite(t) => t.commit().await,
            Tx::Postgres(t) => t.commit().await,
        }
    }
}

impl Conn for Db {
    async fn run(&mut self, q: Sql) -> Result<u64, sqlx::Error> {
        match self {
            Db::Sqlite(p) => run_on::<Sqlite, _>(&*p, q).await,
            Db::Postgres(p) => run_on::<Postgres, _>(&*p, q).await,
        }
    }

    async fn rows<T: Row>(&mut self, q: Sql) -> Result<Vec<T>, sqlx::Error> {
        match self {
            Db::Sqlite(p) => rows_on::<Sqlite, _, T>(&*p, q).await,
            Db::Postgres(p) => rows_on::<Postgres, _, T>(&*p, q).await,
        }
    }

    async fn row<T: Row>(&mut self, q: Sql) -> Result<Option<T>, sqlx::Error> {
        match self {
            Db::Sqlite(p) => row_on::<Sqlite, _, T>(&*p, q).await,
            Db::Postgres(p) => row_on::<Postgres, _, T>(&*p, q).await,
        }
    }
}

impl Conn for Tx {
    async fn run(&mut self, q: Sql) -> Result<u64, sqlx::Error> {
        match self {
            Tx::Sqlite(t) => run_on::<Sqlite, _>(&mut **t, q).await,
            Tx::Postgres(t) => run_on::<Postgres, _>(&mut **t, q).await,
        }
    }

    async fn rows<T: Row>(&mut self, q: Sql) -> Result<Vec<T>, sqlx::Error> {
        match self {
            Tx::Sqlite(t) => rows_on::<Sqlite, _, T>(&mut **t, q).await,
            Tx::Postgres(t) => rows_on::<Postgres, _, T>(&mut **t, q).await,
        }
    }

    async fn row<T: Row>(&mut self, q: Sql) -> Result<Option<T>, sqlx::Error> {
        match self {
            Tx::Sqlite(t) => row_on::<Sqlite, _, T>(&mut **t, q).await,
            Tx::Postgres(t) => row_on::<Postgres, _, T>(&mut **t, q).await,
        }
    }
}

impl TxConn for Tx {
    async fn lock_space(&mut self, space: i64) -> Result<(), sqlx::Error> {
        match self {
            Tx::Sqlite(_) => Ok(()),
            Tx::Postgres(t) => lock_pg(t, space).await,
        }
    }
}

async fn lock_pg(c: &mut PgConnection, space: i64) -> Result<(), sqlx::Error> {
    sqlx::query("SELECT pg_advisory_xact_lock($1)").bind(space).execute(c).await?;
    Ok(())
}

/// The bounds a concrete engine meets; spelled once, for the three functions below.
trait Engine: Database {
    fn query(q: Sql) -> sqlx::query::Query<'static, Self, <Self as Database>::Arguments>;
}

impl Engine for Sqlite {
    fn query(q: Sql) -> sqlx::query::Query<'static, Sqlite, <Sqlite as Database>::Arguments> {
        q.args.into_iter().fold(sqlx::query(q.text), |query, a| match a {
            Arg::Int(v) => query.bind(v),
            Arg::Text(v) => query.bind(v),
            Arg::Bool(v) => query.bind(v),
            Arg::Bytes(v) => query.bind(v),
        })
    }
}

impl Engine for Postgres {
    fn query(q: Sql) -> sqlx::query::Query<'static, Postgres, <Postgres as Database>::Arguments> {
        q.args.into_iter().fold(sqlx::query(q.text), |query, a| match a {
            Arg::Int(v) => query.bind(v),
            Arg::Text(v) => query.bind(v),
            Arg::Bool(v) => query.bind(v),
            Arg::Bytes(v) => query.bind(v),
        })
    }
}

async fn run_on<'c, DB: Engine, E: Executor<'c, Database = DB>>(ex: E, q: Sql) -> Result<u64, sqlx::Error>
where
    DB::Arguments: sqlx::IntoArguments<DB>,
    DB::QueryResult: RowsAffected,
{
    Ok(DB::query(q).execute(ex).await?.rows())
}

async fn rows_on<'c, DB: Engine, E: Executor<'c, Database = DB>, T>(ex: E, q: Sql) -> Result<Vec<T>, sqlx::Error>
where
    DB::Arguments: sqlx::IntoArguments<DB>,
    T: for<'r> FromRow<'r, DB::Row>,
{
    DB::query(q).fetch_all(ex).await?.iter().map(T::from_row).collect()
}

async fn row_on<'c, DB: Engine, E: Executor<'c, Database = DB>, T>(ex: E, q: Sql) -> Result<Option<T>, sqlx::Error>
where
    DB::Arguments: sqlx::IntoArguments<DB>,
    T: for<'r> FromRow<'r, DB::Row>,
{
    DB::query(q).fetch_optional(ex).await?.as_ref().map(T::from_row).transpose()
}

/// `rows_affected()` is an inherent method of each engine's query result.
trait RowsAffected {
    fn rows(&self) -> u64;
}

impl RowsAffected for sqlx::sqlite::SqliteQueryResult {
    fn rows(&self) -> u64 {
        self.rows_affected()
    }
}

impl RowsAffected for sqlx::postgres::PgQueryResult {
    fn rows(&self) -> u64 {
        self.rows_affected()
    }
}
