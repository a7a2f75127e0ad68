//! Why a complete, fail or checkpoint changed nothing (it changes the current attempt only,
//! [`crate::Record::is_current`]): a harmless repeat ([`is_repeat`]), a stale attempt, or no
//! processing record ([`diagnose`]).

use crate::record::{Record, Repr};
use crate::state::Status;

/// A finishing call, as far as the repeat rule looks at it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Finish {
    Complete,
    /// A failure into this status (`failed_retryable` or `failed_final`).
    Fail(Status),
    Checkpoint,
}

/// Does `call` repeat what a record of status `stored` holds? `same` says whether the call's
/// values equal the stored ones (the response by jsonb equality; the failure code and message
/// byte for byte, NULL equal to NULL). A repeat of a completion or of the same failure is
/// accepted as a no-op; a checkpoint is never a repeat.
pub fn is_repeat(call: Finish, stored: Status, same: bool) -> bool {
    match call {
        Finish::Complete => stored == Status::Succeeded && same,
        Finish::Fail(status) => stored == status && same,
        Finish::Checkpoint => false,
    }
}

/// The explanation of a finish that changed nothing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Diagnosis {
    /// The call repeats what is stored (the same response, the same failure): accepted.
    Repeat,
    /// The caller's attempt is not the record's: another claim took the key over.
    Stale { given: i32, current: i32 },
    /// There is no record, or it is not processing.
    NotProcessing,
}

/// Diagnose a finish by `attempt` (if the caller gave one) of the record as it is now
/// (`found`; `None`: no record). `is_repeat` says whether the call repeats what is stored.
pub fn diagnose<R: Repr, E>(
    found: Option<&Record<R>>,
    attempt: Option<i32>,
    is_repeat: impl FnOnce(&Record<R>) -> Result<bool, E>,
) -> Result<Diagnosis, E> {
    if let (Some(state), Some(given)) = (found, attempt)
        && state.attempt != given
    {
        return Ok(Diagnosis::Stale {
            given,
            current: state.attempt,
        });
    }
    Ok(match found {
        Some(state) if is_repeat(state)? => Diagnosis::Repeat,
        _ => Diagnosis::NotProcessing,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plain::sample;
    use crate::state::Status;

    fn yes(_: &Record<crate::plain::Plain>) -> Result<bool, ()> {
        Ok(true)
    }

    fn no(_: &Record<crate::plain::Plain>) -> Result<bool, ()> {
        Ok(false)
    }

    #[test]
    fn a_repeat_is_the_same_values_in_the_state_the_call_would_leave() {
        use Status::*;
        for stored in [Processing, Succeeded, FailedRetryable, FailedFinal] {
            for same in [false, true] {
                assert_eq!(
                    is_repeat(Finish::Complete, stored, same),
                    stored == Succeeded && same
                );
                for into in [FailedRetryable, FailedFinal] {
                    assert_eq!(
                        is_repeat(Finish::Fail(into), stored, same),
                        stored == into && same
                    );
                }
                assert!(!is_repeat(Finish::Checkpoint, stored, same));
            }
        }
    }

    #[test]
    fn another_attempt_is_stale_before_anything_else() {
        let ok = sample(Status::Succeeded, 3);
        assert_eq!(
            diagnose(Some(&ok), Some(2), yes),
            Ok(Diagnosis::Stale {
                given: 2,
                current: 3
            })
        );
        assert_eq!(
            diagnose(Some(&ok), Some(4), no),
            Ok(Diagnosis::Stale {
                given: 4,
                current: 3
            })
        );
    }

    #[test]
    fn a_repeat_is_accepted_and_anything_else_is_not_processing() {
        let ok = sample(Status::Succeeded, 3);
        assert_eq!(diagnose(Some(&ok), Some(3), yes), Ok(Diagnosis::Repeat));
        assert_eq!(diagnose(Some(&ok), None, yes), Ok(Diagnosis::Repeat));
        assert_eq!(diagnose(Some(&ok), None, no), Ok(Diagnosis::NotProcessing));
        assert_eq!(diagnose(None, Some(1), yes), Ok(Diagnosis::NotProcessing));
        assert_eq!(
            diagnose::<crate::plain::Plain, ()>(None, None, yes),
            Ok(Diagnosis::NotProcessing)
        );
        assert_eq!(diagnose(Some(&ok), None, |_| Err(7)), Err(7));
    }
}
