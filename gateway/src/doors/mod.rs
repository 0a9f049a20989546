//! The other doors onto the same spaces: thin protocol adapters over the namespace (`meta`),
//! the content path (`space`), auth and the cache, so every rule (names, quotas, isolation,
//! locks) has one implementation whatever door a request comes through.

pub mod dav;
pub mod s3;
