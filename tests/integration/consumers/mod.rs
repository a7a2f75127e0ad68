//! The consumers (inbox, versions, outbox) in concurrent sessions, and the outbox for CDC.

mod outbox_cdc;
mod sessions;
