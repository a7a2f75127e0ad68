//! A record's states (`idem_status`) and a claim's outcomes (`idem_outcome`), in the SQL
//! enums' order.

use core::ffi::CStr;

/// `idem_status`, in the enum's order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Status {
    Processing,
    Succeeded,
    FailedRetryable,
    FailedFinal,
}

impl Status {
    pub const ALL: [Status; 4] = [
        Status::Processing,
        Status::Succeeded,
        Status::FailedRetryable,
        Status::FailedFinal,
    ];

    pub fn label(self) -> &'static CStr {
        match self {
            Status::Processing => c"processing",
            Status::Succeeded => c"succeeded",
            Status::FailedRetryable => c"failed_retryable",
            Status::FailedFinal => c"failed_final",
        }
    }

    /// Position in `idem_status`.
    pub fn index(self) -> usize {
        self as usize
    }

    /// The status whose label is `label`.
    pub fn parse(label: &[u8]) -> Option<Self> {
        Status::ALL
            .into_iter()
            .find(|s| s.label().to_bytes() == label)
    }
}

/// `idem_outcome`, in the enum's order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Outcome {
    NewClaim,
    ReplaySuccess,
    ProcessingActive,
    ProcessingStale,
    RetryableFailure,
    FinalFailure,
}

impl Outcome {
    pub const ALL: [Outcome; 6] = [
        Outcome::NewClaim,
        Outcome::ReplaySuccess,
        Outcome::ProcessingActive,
        Outcome::ProcessingStale,
        Outcome::RetryableFailure,
        Outcome::FinalFailure,
    ];

    pub fn label(self) -> &'static CStr {
        match self {
            Outcome::NewClaim => c"new_claim",
            Outcome::ReplaySuccess => c"replay_success",
            Outcome::ProcessingActive => c"processing_active",
            Outcome::ProcessingStale => c"processing_stale",
            Outcome::RetryableFailure => c"retryable_failure",
            Outcome::FinalFailure => c"final_failure",
        }
    }

    /// Position in `idem_outcome`.
    pub fn index(self) -> usize {
        self as usize
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_are_the_sql_enums_in_order() {
        let statuses: Vec<_> = Status::ALL
            .iter()
            .map(|s| s.label().to_str().unwrap())
            .collect();
        assert_eq!(
            statuses,
            [
                "processing",
                "succeeded",
                "failed_retryable",
                "failed_final"
            ]
        );
        let outcomes: Vec<_> = Outcome::ALL
            .iter()
            .map(|o| o.label().to_str().unwrap())
            .collect();
        assert_eq!(
            outcomes,
            [
                "new_claim",
                "replay_success",
                "processing_active",
                "processing_stale",
                "retryable_failure",
                "final_failure"
            ]
        );
        for (i, s) in Status::ALL.into_iter().enumerate() {
            assert_eq!(s.index(), i);
            assert_eq!(Status::parse(s.label().to_bytes()), Some(s));
        }
        for (i, o) in Outcome::ALL.into_iter().enumerate() {
            assert_eq!(o.index(), i);
        }
        assert_eq!(Status::parse(b"Processing"), None);
    }
}
