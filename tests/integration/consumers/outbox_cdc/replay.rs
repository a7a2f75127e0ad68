//! The consumer that crashes: `pg_recvlogical` killed mid-stream and restarted, every delivery
//! replayed through `idem_inbox_accept`, one effect per committed message.

use super::*;

pub(super) fn recvlogical(db: &str, slot: &str, out: &Path) -> Child {
    Command::new(logical().bindir.join("pg_recvlogical"))
        .args([
            "-h",
            "127.0.0.1",
            "-p",
            &logical().port.to_string(),
            "-U",
            "postgres",
        ])
        .args([
            "-d",
            db,
            "--slot",
            slot,
            "--start",
            "--status-interval",
            "3600",
        ])
        .args(["--fsync-interval", "100", "-f"])
        .arg(out)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start pg_recvlogical")
}

/// The outbox messages in pg_recvlogical's file so far (test_decoding's text form).
pub(super) fn delivered(out: &Path) -> Vec<String> {
    std::fs::read_to_string(out)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.split_once("prefix: idempotency.outbox, sz: "))
        .filter_map(|(_, rest)| rest.split_once(" content:").map(|(_, c)| c.to_string()))
        .collect()
}

/// The consumer: each delivery in its own transaction, deduplicated by idem_inbox_accept on
/// the message_id, the effect written only for a first delivery.
fn consume(sink: &mut Client, deliveries: &[String]) {
    for content in deliveries {
        let mut tx = sink.transaction().expect("begin");
        tx.execute(
            "WITH m AS (SELECT $1::text::jsonb AS doc)
             INSERT INTO effects (message_id, n)
             SELECT (doc->>'message_id')::uuid, (doc->'payload'->>'n')::int FROM m
             WHERE idem_inbox_accept('sink', doc->>'message_id', idem_hash(doc->'payload'))",
            &[content],
        )
        .expect("apply");
        tx.commit().expect("commit");
    }
}

on_both_editions! {
    /// End to end: pg_recvlogical streams the messages to a file; it is killed mid-stream and
    /// started again (the slot redelivers what it had not confirmed), and the consumer crashes and
    /// replays the file from the start. Every committed message has exactly one effect; a rolled
    /// back one none.
    #[cfg_attr(idem_no_test_decoding, ignore = "contrib's test_decoding is not installed")]
    fn a_crashed_consumer_replays_and_each_message_has_one_effect => a_crashed_consumer_replays_and_each_message_has_one_effect_in;
}

fn a_crashed_consumer_replays_and_each_message_has_one_effect_in(edition: &str) {
    let mut db = database(edition, "cdc_e2e");
    let name = format!("cdc_e2e_{edition}");
    db.batch_execute(&format!(
        "SELECT pg_create_logical_replication_slot('{name}', 'test_decoding')"
    ))
    .expect("slot");
    db.batch_execute(&format!(
        "CREATE TABLE effects (message_id uuid NOT NULL, n int NOT NULL);
         ALTER DATABASE {name} SET idempotency.outbox_delivery = cdc_message;"
    ))
    .expect("set-up");
    let dir = std::env::temp_dir().join(format!("idem-cdc-{}-{edition}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    let out = dir.join("stream.txt");
    let mut producer = logical().connect(&name);
    let put = |p: &mut Client, from: i32, to: i32, commit: bool| {
        let mut tx = p.transaction().expect("begin");
        for n in from..to {
            tx.execute(
                "SELECT idem_outbox_put('orders', jsonb_build_object('n', $1::int))",
                &[&n],
            )
            .expect("put");
        }
        if commit { tx.commit() } else { tx.rollback() }.expect("end");
    };
    let mut stream = recvlogical(&name, &name, &out);
    put(&mut producer, 0, 50, true);
    put(&mut producer, 1000, 1010, false);
    put(&mut producer, 50, 100, true);
    wait_for("the first 100 delivered", Duration::from_secs(60), || {
        delivered(&out).len() >= 100
    });
    // The stream's consumer dies without a goodbye; more is committed while it is down.
    stream.kill().expect("kill");
    stream.wait().expect("reap");
    put(&mut producer, 100, 150, true);
    let mut stream = recvlogical(&name, &name, &out);
    wait_for(
        "all delivered after the restart",
        Duration::from_secs(60),
        || delivered(&out).len() >= 250,
    );
    stream.kill().expect("kill");
    stream.wait().expect("reap");
    let deliveries = delivered(&out);
    // The application consumer crashes after 120 deliveries, then replays from the start.
    let mut sink = logical().connect(&name);
    consume(&mut sink, &deliveries[..120]);
    drop(sink);
    let mut sink = logical().connect(&name);
    consume(&mut sink, &deliveries);
    let mut effects: HashMap<i32, i64> = HashMap::new();
    for row in sink
        .query("SELECT n, count(*) FROM effects GROUP BY n", &[])
        .expect("effects")
    {
        effects.insert(row.get(0), row.get(1));
    }
    assert_eq!(effects.len(), 150, "every committed message has an effect");
    assert!(
        effects.values().all(|&c| c == 1),
        "one effect each: {effects:?}"
    );
    assert!(
        effects.keys().all(|&n| n < 1000),
        "a rolled-back put was delivered"
    );
    assert!(
        deliveries.len() > 150,
        "the restarted stream redelivered ({} deliveries)",
        deliveries.len()
    );
    let _ = std::fs::remove_dir_all(&dir);
}
