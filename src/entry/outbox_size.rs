//! The outbox's size cap, `idempotency.outbox_max_bytes`: a message whose payload and headers
//! are longer than that as JSON text is refused with 54000 before anything is written or
//! emitted, in every delivery. A CDC pipeline stalls on a message past its limits (Kafka's
//! broker default `message.max.bytes` is 1,048,588); the default, 1,000,000, leaves room for
//! a connector's envelope. Measured as text because that is what a pipeline carries, and
//! because a jsonb's binary size bounds its text neither way (`1e1000` is 1,001 digits).

use pgrx::pg_sys::{self, Datum};

use crate::base::errors::{self, IdemError, Result};
use crate::base::settings;

/// The length of a jsonb datum's text (`jsonb::text`).
fn text_len(value: Datum) -> usize {
    // SAFETY: a jsonb datum, detoasted; JsonbToCString writes into a fresh StringInfo, freed
    // with the call's memory context (and here at once).
    unsafe {
        let jsonb = pg_sys::pg_detoast_datum(value.cast_mut_ptr()) as *mut pg_sys::Jsonb;
        let out = pg_sys::makeStringInfo();
        pg_sys::JsonbToCString(out, &mut (*jsonb).root, 0);
        let len = (*out).len as usize;
        pg_sys::pfree((*out).data.cast());
        pg_sys::pfree(out.cast());
        len
    }
}

/// 54000 when `payload` and `headers` as JSON text are longer than the setting.
pub fn check(payload: Datum, headers: Option<Datum>) -> Result<()> {
    let limit = usize::try_from(settings::OUTBOX_MAX_BYTES.get()).unwrap_or(0);
    let total = text_len(payload).saturating_add(headers.map_or(0, text_len));
    if total <= limit {
        return Ok(());
    }
    Err(IdemError::new(
        errors::PROGRAM_LIMIT_EXCEEDED,
        format!(
            "the outbox message is {total} bytes of JSON (payload and headers), more than idempotency.outbox_max_bytes ({limit})"
        ),
    )
    .hint(
        "A CDC pipeline refuses messages past its limits: put a reference to the data in the message, or raise idempotency.outbox_max_bytes together with the pipeline's limits.",
    ))
}
