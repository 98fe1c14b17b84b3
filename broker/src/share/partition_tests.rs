use super::*;

fn batch(base: i64, last: i64) -> BatchSpan {
    BatchSpan {
        base_offset: base,
        last_offset: last,
        control: false,
    }
}

fn range(first: i64, last: i64, delivery_count: i16) -> AcquiredRange {
    AcquiredRange {
        first_offset: first,
        last_offset: last,
        delivery_count,
    }
}

const LIMITS: ShareLimits = ShareLimits {
    lock_duration_ms: 1_000,
    delivery_count_limit: 3,
    max_in_flight: 100,
};

#[test]
fn acquired_records_go_to_one_member_only() {
    let mut p = SharePartition::new(0);
    let (got, used) = p.acquire("a", &[batch(0, 4), batch(5, 9)], (500, false), &LIMITS, 0);
    assert_eq!(got, vec![range(0, 9, 1)]);
    assert_eq!(used, 2);
    assert_eq!(p.next_fetch_offset(&LIMITS), Some(10));
    // Another member reading the same batches gets nothing of them.
    let (got, used) = p.acquire("b", &[batch(0, 4), batch(5, 9)], (500, false), &LIMITS, 0);
    assert!(got.is_empty());
    assert_eq!(used, 0);
    assert_eq!(p.start(), 0);
}

#[test]
fn accepting_moves_the_start_offset_past_settled_records_only() {
    let mut p = SharePartition::new(0);
    p.acquire("a", &[batch(0, 9)], (500, false), &LIMITS, 0);
    p.acknowledge("a", (3, 5), &[ack_type::ACCEPT], &LIMITS, 0)
        .unwrap();
    assert_eq!(p.start(), 0, "offsets 0-2 are still acquired");
    p.acknowledge(
        "a",
        (0, 2),
        &[ack_type::ACCEPT, ack_type::GAP, ack_type::REJECT],
        &LIMITS,
        0,
    )
    .unwrap();
    assert_eq!(p.start(), 6);
    p.acknowledge("a", (6, 9), &[ack_type::ACCEPT], &LIMITS, 0)
        .unwrap();
    assert_eq!((p.start(), p.end()), (10, 10));
}

#[test]
fn acknowledging_what_the_member_does_not_hold_changes_nothing() {
    let mut p = SharePartition::new(0);
    p.acquire("a", &[batch(0, 4)], (500, false), &LIMITS, 0);
    let e = p.acknowledge("b", (0, 4), &[ack_type::ACCEPT], &LIMITS, 0);
    assert_eq!(e, Err(ResponseError::InvalidRecordState));
    // A range reaching past what was acquired fails as a whole.
    let e = p.acknowledge("a", (3, 7), &[ack_type::ACCEPT], &LIMITS, 0);
    assert_eq!(e, Err(ResponseError::InvalidRecordState));
    assert_eq!(p.acquired_count(), 5);
    p.acknowledge("a", (0, 4), &[ack_type::ACCEPT], &LIMITS, 0)
        .unwrap();
    // Settled records before the start offset are skipped, as Kafka skips them.
    p.acknowledge("a", (0, 4), &[ack_type::ACCEPT], &LIMITS, 0)
        .unwrap();
    assert_eq!(p.start(), 5);
    // Types that do not fit the range, or unknown types, are bad requests.
    p.acquire("a", &[batch(5, 6)], (500, false), &LIMITS, 0);
    let e = p.acknowledge("a", (5, 6), &[1, 1, 1], &LIMITS, 0);
    assert_eq!(e, Err(ResponseError::InvalidRequest));
    let e = p.acknowledge("a", (5, 6), &[5], &LIMITS, 0);
    assert_eq!(e, Err(ResponseError::InvalidRequest));
}

#[test]
fn a_renewal_starts_the_lock_again_and_keeps_the_record_acquired() {
    let mut p = SharePartition::new(0);
    p.acquire("a", &[batch(0, 3)], (500, false), &LIMITS, 0);
    // At 900 ms of a 1 s lock, offsets 0-1 are renewed: they now last until 1.9 s.
    p.acknowledge("a", (0, 1), &[ack_type::RENEW], &LIMITS, 900)
        .unwrap();
    assert!(p.expire_locks(&LIMITS, 1_000), "offsets 2-3 ran out");
    assert_eq!(p.acquired_count(), 2);
    // Another member cannot renew them; their owner settles them after all.
    let e = p.acknowledge("b", (0, 1), &[ack_type::RENEW], &LIMITS, 1_000);
    assert_eq!(e, Err(ResponseError::InvalidRecordState));
    p.acknowledge("a", (0, 1), &[ack_type::ACCEPT], &LIMITS, 1_500)
        .unwrap();
    assert_eq!(p.start(), 2);
    // Offsets 2-3 went back: delivered again with count 2; a renewal keeps the count.
    let (got, _) = p.acquire("b", &[batch(0, 3)], (500, false), &LIMITS, 1_600);
    assert_eq!(got, vec![range(2, 3, 2)]);
    p.acknowledge(
        "b",
        (2, 3),
        &[ack_type::RENEW, ack_type::ACCEPT],
        &LIMITS,
        2_000,
    )
    .unwrap();
    assert!(!p.expire_locks(&LIMITS, 2_900));
    assert!(p.expire_locks(&LIMITS, 3_000));
    let (got, _) = p.acquire("c", &[batch(0, 3)], (500, false), &LIMITS, 3_000);
    assert_eq!(got, vec![range(2, 2, 3)]);
}

#[test]
fn record_limit_mode_acquires_exactly_the_limit_inside_a_batch() {
    let mut p = SharePartition::new(0);
    let batches = [batch(0, 4), batch(5, 9)];
    let (got, used) = p.acquire("a", &batches, (3, true), &LIMITS, 0);
    assert_eq!((got, used), (vec![range(0, 2, 1)], 1));
    // The rest of the batch is next, then into the second one.
    let (got, used) = p.acquire("b", &batches, (4, true), &LIMITS, 0);
    assert_eq!((got, used), (vec![range(3, 6, 1)], 2));
    // Batch-optimized mode rounds up to the batch's end instead.
    let (got, _) = p.acquire("c", &batches[1..], (1, false), &LIMITS, 0);
    assert_eq!(got, vec![range(7, 9, 1)]);
}

#[test]
fn released_and_expired_records_are_delivered_again_until_the_limit() {
    let mut p = SharePartition::new(0);
    p.acquire("a", &[batch(0, 1)], (500, false), &LIMITS, 0);
    p.acknowledge("a", (0, 1), &[ack_type::RELEASE], &LIMITS, 0)
        .unwrap();
    assert_eq!(p.next_fetch_offset(&LIMITS), Some(0));
    let (got, _) = p.acquire("b", &[batch(0, 1)], (500, false), &LIMITS, 10);
    assert_eq!(got, vec![range(0, 1, 2)]);
    // The lock runs out: available again, to anyone.
    assert!(!p.expire_locks(&LIMITS, 500));
    assert!(p.expire_locks(&LIMITS, 1_010));
    let (got, _) = p.acquire("a", &[batch(0, 1)], (500, false), &LIMITS, 1_100);
    assert_eq!(got, vec![range(0, 1, 3)]);
    // The third delivery was the last: released once more, the records are archived.
    p.release_member("a", &LIMITS);
    assert_eq!((p.start(), p.end()), (2, 2));
    assert_eq!(p.next_fetch_offset(&LIMITS), Some(2));
}

#[test]
fn acquisition_stops_at_whole_batches_past_max_records() {
    let mut p = SharePartition::new(0);
    let batches = [batch(0, 2), batch(3, 5), batch(6, 8)];
    let (got, used) = p.acquire("a", &batches, (4, false), &LIMITS, 0);
    assert_eq!(got, vec![range(0, 5, 1)]);
    assert_eq!(used, 2);
    let (got, used) = p.acquire("a", &batches[2..], (4, false), &LIMITS, 0);
    assert_eq!(got, vec![range(6, 8, 1)]);
    assert_eq!(used, 1);
}

#[test]
fn the_in_flight_limit_bounds_new_acquisitions() {
    let limits = ShareLimits {
        max_in_flight: 4,
        ..LIMITS
    };
    let mut p = SharePartition::new(0);
    let (got, _) = p.acquire("a", &[batch(0, 9)], (500, false), &limits, 0);
    assert_eq!(got, vec![range(0, 3, 1)]);
    assert_eq!(p.next_fetch_offset(&limits), None);
    p.acknowledge("a", (0, 1), &[ack_type::ACCEPT], &limits, 0)
        .unwrap();
    assert_eq!(p.next_fetch_offset(&limits), Some(4));
}

#[test]
fn control_batches_and_compaction_gaps_are_never_delivered() {
    let mut p = SharePartition::new(0);
    let marker = BatchSpan {
        base_offset: 3,
        last_offset: 3,
        control: true,
    };
    let (got, used) = p.acquire(
        "a",
        &[batch(0, 2), marker, batch(7, 8)],
        (500, false),
        &LIMITS,
        0,
    );
    assert_eq!(got, vec![range(0, 2, 1), range(7, 8, 1)]);
    assert_eq!(used, 3);
    p.acknowledge("a", (0, 2), &[ack_type::ACCEPT], &LIMITS, 0)
        .unwrap();
    assert_eq!(p.start(), 7, "the marker and the gap 4-6 are settled");
}

#[test]
fn records_the_log_dropped_are_skipped() {
    let mut p = SharePartition::new(0);
    p.acquire("a", &[batch(0, 9)], (500, false), &LIMITS, 0);
    p.skip_to(6);
    assert_eq!(p.start(), 6);
    assert_eq!(p.acquired_count(), 4);
    let mut q = SharePartition::new(0);
    q.skip_to(50);
    assert_eq!((q.start(), q.end()), (50, 50));
}
