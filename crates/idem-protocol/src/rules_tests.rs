use core::cell::RefCell;

use super::*;
use crate::plain::sample;
use crate::state::Status;

/// Facts that record the order they were asked in.
struct Facts {
    values: [bool; 4],
    isolation: Isolation,
    asked: RefCell<Vec<&'static str>>,
}

impl Facts {
    fn new(values: [bool; 4], isolation: Isolation) -> Facts {
        Facts {
            values,
            isolation,
            asked: RefCell::default(),
        }
    }

    fn ask(&self, name: &'static str, i: usize) -> bool {
        self.asked.borrow_mut().push(name);
        self.values[i]
    }
}

impl ReadFacts for Facts {
    fn shape_readable(&self) -> bool {
        self.ask("shape", 0)
    }
    fn distributed(&self) -> bool {
        self.ask("distributed", 1)
    }
    fn citus_assumed(&self) -> bool {
        self.ask("assumed", 2)
    }
    fn rls_applies(&self) -> bool {
        self.ask("rls", 3)
    }
}

impl WriteFacts for Facts {
    fn shape_writable(&self) -> bool {
        self.ask("shape", 0)
    }
    fn read_only(&self) -> bool {
        self.ask("read_only", 1)
    }
    fn isolation(&self) -> Isolation {
        self.asked.borrow_mut().push("isolation");
        self.isolation
    }
}

#[test]
fn a_direct_read_needs_the_shape_no_citus_and_no_rls() {
    let rc = Isolation::ReadCommitted;
    let all = Facts::new([true, false, false, false], rc);
    assert!(may_read(&all));
    assert_eq!(
        *all.asked.borrow(),
        ["shape", "distributed", "assumed", "rls"]
    );
    for (i, v) in [false, true, true, true].into_iter().enumerate() {
        let mut values = [true, false, false, false];
        values[i] = v;
        let f = Facts::new(values, rc);
        assert!(!may_read(&f), "{values:?}");
        // A refusal asks nothing further: RLS is checked only where it decides.
        assert_eq!(f.asked.borrow().len(), i + 1);
    }
}

#[test]
fn a_direct_write_needs_the_shape_a_writable_transaction_and_read_committed() {
    use Isolation::*;
    assert!(may_write(&Facts::new(
        [true, false, false, false],
        ReadCommitted
    )));
    assert!(may_write(&Facts::new(
        [true, false, false, false],
        ReadUncommitted
    )));
    for iso in [RepeatableRead, Serializable] {
        assert!(
            !may_write(&Facts::new([true, false, false, false], iso)),
            "{iso:?}"
        );
    }
    assert!(!may_write(&Facts::new(
        [false, false, false, false],
        ReadCommitted
    )));
    assert!(!may_write(&Facts::new(
        [true, true, false, false],
        ReadCommitted
    )));
}

#[test]
fn a_locked_write_needs_an_unchanged_table_and_the_privilege() {
    assert!(may_write_locked(false, || true));
    assert!(!may_write_locked(false, || false));
    assert!(!may_write_locked(true, || panic!(
        "not asked once the table changed"
    )));
}

#[test]
fn only_a_record_claimed_before_the_transaction_is_updated_directly() {
    let p = sample(Status::Processing, 2);
    assert!(may_update(&p, p.created_at));
    assert!(may_update(&p, p.created_at + 1));
    assert!(!may_update(&p, p.created_at - 1));
    assert!(may_change_directly(&p, Some(2), p.created_at));
    assert!(may_change_directly(&p, None, p.created_at));
    assert!(!may_change_directly(&p, Some(1), p.created_at));
    assert!(!may_change_directly(&p, Some(2), p.created_at - 1));
    let ok = sample(Status::Succeeded, 2);
    assert!(!may_change_directly(&ok, Some(2), ok.created_at));
}

#[test]
fn intervals_are_bounded_at_one_hundred_years() {
    assert_eq!(MAX_INTERVAL_MICROS, 36_000 * 86_400 * 1_000_000);
    assert_eq!(check_interval(1), Ok(()));
    assert_eq!(check_interval(MAX_INTERVAL_MICROS), Ok(()));
    assert_eq!(
        check_interval(MAX_INTERVAL_MICROS + 1),
        Err(OutOfBounds::TooLong)
    );
    assert_eq!(check_interval(0), Err(OutOfBounds::NotPositive));
    assert_eq!(check_interval(-1), Err(OutOfBounds::NotPositive));
}

#[test]
fn the_reclaim_cutoff_is_the_grace_in_milliseconds_before_now() {
    assert_eq!(reclaim_cutoff(10_000_000, 500), 9_500_000);
    assert_eq!(reclaim_cutoff(10_000_000, 0), 10_000_000);
    assert_eq!(reclaim_cutoff(i64::MIN + 1, i32::MAX), i64::MIN);
}
