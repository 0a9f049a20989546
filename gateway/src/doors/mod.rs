//! Doors onto the same spaces besides the REST API: thin adapters over the same namespace,
//! blocks, auth, quotas and cache.

pub mod dav;
