//! Claims in real concurrent sessions: races, waits, `idem_call`, the direct write path.

mod call;
mod call_site;
mod generations_path;
mod race;
mod sessions;
mod wait;
mod write_path;
