// The console's names for the gateway's JSON. Every shape comes from generated.ts, which ts-rs
// writes from proto/src/wire.rs (a Rust test fails when it is stale), so nothing is copied by
// hand; this file only gives a few of them the names the pages use.
export type * from './generated';
export type { WarmStatus as WarmJob } from './generated';
