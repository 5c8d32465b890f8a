//! Migration between backends through the library (`msgstream_facade::migrate`): a tt consumer
//! stopped on the source resumes on the target with the same packs, a second run copies
//! nothing, and following reports catching up and lag.
//!
//! Pairs: every ordered pair of backends that seek (memory, rocksmq, RocketMQ, a Youzan NSQ
//! cluster). Upstream nsqd and a standalone Youzan nsqd have no readers: a migration from or to
//! them is `Unsupported` before anything is written (`cli_migrate_input.rs`).

use std::time::Duration;

use msgstream::testkit::{within, Harness};
use msgstream_facade::migrate::{MigrateOptions, Migration, MigrationEvent};

use crate::migrate_data::{
    assert_copied_exactly, channel_names, comparable, produce_rounds, read_packs, ROUNDS,
};

/// The property of the issue, from `source` to `target`.
async fn stopped_consumer_resumes_on_the_target(source: Harness, target: Harness) {
    let (src, dst) = (source.client(), target.client());
    let channels = channel_names("mig");
    produce_rounds(&src, &channels, 1..=ROUNDS, 3).await;
    let whole = read_packs(&src, &channels, "whole", None, ROUNDS as usize).await;
    let stopped = read_packs(&src, &channels, "stopped", None, 10).await;
    let saved = stopped[9].end_positions.clone();
    let report = Migration::prepare(
        src.clone(),
        dst.clone(),
        MigrateOptions::new(channels.clone()).with_positions(saved.clone()),
    )
    .await
    .expect("prepare")
    .run_to_end()
    .await
    .expect("migrate");
    assert!(!report.interrupted);
    assert_eq!(
        report.progress.copied(),
        ROUNDS * 4 * 4,
        "every insert and tick copied"
    );
    assert_eq!(report.positions.len(), saved.len());
    for (translated, original) in report.positions.iter().zip(&saved) {
        assert_eq!(translated.channel_name, original.channel_name);
        assert_eq!(translated.timestamp, original.timestamp);
        dst.message_id_from_bytes(translated.msg_id.as_bytes())
            .expect("a target id");
    }
    let resumed = read_packs(&dst, &channels, "resumed", Some(&report.positions), 10).await;
    assert_eq!(
        comparable(&resumed, true),
        comparable(&whole[10..], false),
        "packs 11-20 on the target are those of the source"
    );
    assert_copied_exactly(&src, &dst, &channels).await;
    let again = Migration::prepare(src, dst, MigrateOptions::new(channels.clone()))
        .await
        .expect("prepare again")
        .run_to_end()
        .await
        .expect("migrate again");
    assert_eq!(
        again.progress.copied(),
        0,
        "a finished migration copies nothing"
    );
    assert!(again.progress.channels.iter().all(|c| c.resumed));
}

/// One test per ordered pair of seeking backends (`from`, `to`), built when both are
/// compiled in.
macro_rules! pairs {
    ($($name:ident: $from:ident ($($ffeat:literal)?) -> $to:ident ($($tfeat:literal)?);)*) => {$(
        $(#[cfg(feature = $ffeat)])?
        $(#[cfg(feature = $tfeat)])?
        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn $name() {
            stopped_consumer_resumes_on_the_target(
                crate::harness::$from().await,
                crate::harness::$to().await,
            )
            .await;
        }
    )*};
}

pairs! {
    memory_to_rocksmq: memory () -> rocksmq ("rocksmq");
    memory_to_rocketmq: memory () -> rocketmq ("rocketmq");
    memory_to_nsq_cluster: memory () -> nsq_cluster ("nsq");
    rocksmq_to_memory: rocksmq ("rocksmq") -> memory ();
    rocksmq_to_rocketmq: rocksmq ("rocksmq") -> rocketmq ("rocketmq");
    rocksmq_to_nsq_cluster: rocksmq ("rocksmq") -> nsq_cluster ("nsq");
    rocketmq_to_memory: rocketmq ("rocketmq") -> memory ();
    rocketmq_to_rocksmq: rocketmq ("rocketmq") -> rocksmq ("rocksmq");
    rocketmq_to_nsq_cluster: rocketmq ("rocketmq") -> nsq_cluster ("nsq");
    nsq_cluster_to_memory: nsq_cluster ("nsq") -> memory ();
    nsq_cluster_to_rocksmq: nsq_cluster ("nsq") -> rocksmq ("rocksmq");
    nsq_cluster_to_rocketmq: nsq_cluster ("nsq") -> rocketmq ("rocketmq");
}

/// Following: the run reports catching up with what the source had, copies what is produced
/// later, reports a lag, and ends on the stop request with everything copied.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn follow_copies_until_stopped() {
    let (source, target) = (
        crate::harness::memory().await,
        crate::harness::memory().await,
    );
    let (src, dst) = (source.client(), target.client());
    let channels = channel_names("migf");
    produce_rounds(&src, &channels, 1..=5, 2).await;
    let migration = Migration::prepare(
        src.clone(),
        dst.clone(),
        MigrateOptions::new(channels.clone())
            .following()
            .with_progress_every(Duration::from_millis(20)),
    )
    .await
    .expect("prepare");
    let (events, mut seen) = tokio::sync::mpsc::unbounded_channel();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let run = tokio::spawn(migration.run(
        async {
            let _ = stopped.await;
        },
        move |event| {
            let _ = match event {
                MigrationEvent::CaughtUp(p) => events.send((true, p.copied(), p.lag())),
                MigrationEvent::Progress(p) => events.send((false, p.copied(), p.lag())),
                _ => Ok(()),
            };
        },
    ));
    within("caught up with 5 rounds", caught_up(&mut seen, 5 * 4 * 3)).await;
    // Nothing is produced now: the next progress report says no lag, all copied.
    let (_, copied, lag) = within("a progress report", async {
        loop {
            let event = seen.recv().await.expect("events");
            if !event.0 {
                return event;
            }
        }
    })
    .await;
    assert_eq!((copied, lag), (5 * 4 * 3, Some(Duration::ZERO)));
    produce_rounds(&src, &channels, 6..=8, 2).await;
    within("caught up with 8 rounds", caught_up(&mut seen, 8 * 4 * 3)).await;
    let _ = stop.send(());
    let report = within("the end of a followed run", run)
        .await
        .expect("run task")
        .expect("run");
    assert!(!report.interrupted);
    assert_eq!(report.progress.copied(), 8 * 4 * 3);
    assert_copied_exactly(&src, &dst, &channels).await;
}

/// Waits for the caught-up event (`true`) with `copied` messages copied; it reports no lag.
async fn caught_up(
    seen: &mut tokio::sync::mpsc::UnboundedReceiver<(bool, u64, Option<Duration>)>,
    copied: u64,
) {
    loop {
        let (caught_up, n, lag) = seen.recv().await.expect("events");
        if caught_up && n == copied {
            assert_eq!(lag, Some(Duration::ZERO), "caught up: no lag");
            return;
        }
    }
}

/// A target with readers but no latest id (a Youzan cluster reached through its lookupd only,
/// without nsqd's HTTP API) is read from its start to find where each channel ends: a second
/// run copies only what is new.
#[cfg(feature = "nsq")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_target_without_latest_id_is_scanned() {
    use msgstream_facade::config::NsqExtensions;
    use msgstream_facade::{BackendKind, Config, Factory};
    let server = crate::harness::nsq_cluster_server().await;
    let mut config = Config {
        backend: BackendKind::Nsq,
        ..Config::default()
    };
    (config.nsq.nsqd, _, config.nsq.lookupd) = server.config_addresses();
    config.nsq.extensions = NsqExtensions::Partitions;
    config.nsq.cluster = true;
    config.nsq.partitions = 2;
    config.nsq.partition = 1;
    let spool = tempfile::tempdir().expect("tempdir");
    config.nsq.spool_dir = spool.path().to_path_buf();
    let target = Factory::new(&config).await.expect("factory");
    let dst = target.client();
    let capabilities = dst.capabilities();
    assert!(
        capabilities.readers && !capabilities.latest_id,
        "{capabilities:?}"
    );
    let source = crate::harness::memory().await;
    let src = source.client();
    let channels = channel_names("migs");
    produce_rounds(&src, &channels, 1..=2, 2).await;
    let migrate = || async {
        Migration::prepare(
            src.clone(),
            dst.clone(),
            MigrateOptions::new(channels.clone()),
        )
        .await
        .expect("prepare")
        .run_to_end()
        .await
        .expect("migrate")
        .progress
    };
    assert_eq!(migrate().await.copied(), 2 * 4 * 3);
    produce_rounds(&src, &channels, 3..=4, 2).await;
    let second = migrate().await;
    assert_eq!(second.copied(), 2 * 4 * 3, "only what is new");
    assert!(second.channels.iter().all(|c| c.resumed));
    assert_copied_exactly(&src, &dst, &channels).await;
    target.close().await;
}
