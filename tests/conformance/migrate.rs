//! Migration between backends through the library (`msgstream_facade::migrate`): a tt consumer
//! stopped on the source resumes on the target with the same packs, a second run copies
//! nothing, and following reports catching up and lag.
//!
//! Pairs: every ordered pair of backends that seek (memory, rocksmq, RocketMQ, a Youzan NSQ
//! cluster). Upstream nsqd and a standalone Youzan nsqd have no readers: a migration from or to
//! them is `Unsupported` before anything is written (`cli_migrate.rs` holds that too).

use std::sync::Arc;
use std::time::Duration;

use msgstream::mq::{Client, InitialPosition, Message, ReaderOptions};
use msgstream::msg::{MsgPack, MsgPosition, TsMsg};
use msgstream::stream::StreamOptions;
use msgstream::testkit::{insert, unique, within, Harness};
use msgstream::tt::TtMsgStream;
use msgstream_facade::migrate::{MigrateOptions, Migration, MigrationEvent, SOURCE_ID_PROPERTY};

/// Rounds written; a round is one pack.
pub const ROUNDS: u64 = 20;

/// Four channels with names no other test uses.
pub fn channel_names(prefix: &str) -> Vec<String> {
    (0..4).map(|i| unique(&format!("{prefix}{i}"))).collect()
}

/// Writes rounds `rounds` to `channels` through a tt stream: per round and channel,
/// `per_round` inserts (the second with a property; the last, but in the last round, with a
/// timestamp of the next round, so positions name buffered inserts as well as ticks), then a
/// tick at `10 × round`.
pub async fn produce_rounds(
    client: &Arc<dyn Client>,
    channels: &[String],
    rounds: std::ops::RangeInclusive<u64>,
    per_round: u64,
) {
    let names: Vec<&str> = channels.iter().map(String::as_str).collect();
    let mut out = TtMsgStream::new(client.clone(), StreamOptions::default());
    out.as_producer(&names).await.expect("as_producer");
    for round in rounds {
        let end = round * 10;
        let mut msgs = Vec::new();
        for channel in 0..names.len() as u32 {
            for n in 0..per_round {
                let late = n + 1 == per_round && round < ROUNDS;
                let ts = if late { end + 4 } else { end - 6 + n % 5 };
                let id = (round * 100_000 + u64::from(channel) * 1000 + n) as i64;
                let mut msg = insert(id, ts, channel);
                if n == 1 {
                    msg.properties.insert("round".into(), round.to_string());
                }
                msgs.push(msg);
            }
            msgs.push(TsMsg::time_tick(end).with_hash_keys(vec![channel]));
        }
        out.produce(&MsgPack {
            msgs,
            ..MsgPack::default()
        })
        .await
        .expect("produce");
    }
    out.close().await;
}

/// `count` packs of a new tt subscription `subscription`, seeking to `from` first if given.
pub async fn read_packs(
    client: &Arc<dyn Client>,
    channels: &[String],
    subscription: &str,
    from: Option<&[MsgPosition]>,
    count: usize,
) -> Vec<MsgPack> {
    let names: Vec<&str> = channels.iter().map(String::as_str).collect();
    let mut stream = TtMsgStream::new(client.clone(), StreamOptions::default());
    stream
        .as_consumer(&names, subscription, InitialPosition::Earliest)
        .await
        .expect("as_consumer");
    if let Some(from) = from {
        stream.seek(from).await.expect("seek");
    }
    let mut packs = Vec::with_capacity(count);
    while packs.len() < count {
        let pack = within("a tt pack", stream.next_pack())
            .await
            .expect("stream open")
            .expect("pack");
        packs.push(pack);
    }
    stream.close().await;
    packs
}

/// What must be equal between a run on the source and one on the target: the pack bounds and
/// each message as produced (positions are backends' own; the source-id property is the
/// migration's, and must be there on the target).
pub fn comparable(packs: &[MsgPack], migrated: bool) -> Vec<(u64, u64, Vec<TsMsg>)> {
    packs
        .iter()
        .map(|p| {
            let msgs = p
                .msgs
                .iter()
                .map(|m| {
                    let mut properties = m.properties.clone();
                    assert_eq!(
                        properties.remove(SOURCE_ID_PROPERTY).is_some(),
                        migrated,
                        "the source-id property is on migrated messages only"
                    );
                    TsMsg {
                        position: None,
                        properties,
                        ..m.clone()
                    }
                })
                .collect();
            (p.begin_ts, p.end_ts, msgs)
        })
        .collect()
}

/// Every message of `channel`, read from the start.
pub async fn read_all(client: &Arc<dyn Client>, channel: &str) -> Vec<Message> {
    let mut reader = client
        .create_reader(ReaderOptions {
            topic: channel.to_string(),
            start: client.earliest_message_id(),
            inclusive: true,
        })
        .await
        .expect("reader");
    let mut all = Vec::new();
    while within("has_next", reader.has_next())
        .await
        .expect("has_next")
    {
        all.push(within("next", reader.next()).await.expect("next"));
    }
    reader.close().await;
    all
}

/// The first `count` messages of `channel` (waiting for each: a broker may make a message
/// readable a moment after acknowledging it), and any that follow at once.
async fn read_copies(client: &Arc<dyn Client>, channel: &str, count: usize) -> Vec<Message> {
    let mut reader = client
        .create_reader(ReaderOptions {
            topic: channel.to_string(),
            start: client.earliest_message_id(),
            inclusive: true,
        })
        .await
        .expect("reader");
    let mut all = Vec::new();
    while all.len() < count {
        all.push(
            within("a copied message", reader.next())
                .await
                .expect("next"),
        );
    }
    while within("has_next", reader.has_next())
        .await
        .expect("has_next")
    {
        all.push(within("next", reader.next()).await.expect("next"));
    }
    reader.close().await;
    all
}

/// The target holds each source message once, in order, with its payload and properties, and
/// naming its source id.
pub async fn assert_copied_exactly(
    source: &Arc<dyn Client>,
    target: &Arc<dyn Client>,
    channels: &[String],
) {
    for channel in channels {
        let from = read_all(source, channel).await;
        let to = read_copies(target, channel, from.len()).await;
        let source_ids: Vec<String> = to
            .iter()
            .map(|m| {
                m.properties
                    .get(SOURCE_ID_PROPERTY)
                    .cloned()
                    .unwrap_or_default()
            })
            .collect();
        let around = |i: usize| &source_ids[i.saturating_sub(4)..(i + 4).min(source_ids.len())];
        if let Some(i) = from
            .iter()
            .zip(&source_ids)
            .position(|(f, t)| hex(f.id.as_bytes()) != *t)
        {
            panic!(
                "{channel}: target message {i} is not source message {i}; the target's source \
                 ids around it: {:?}",
                around(i)
            );
        }
        assert_eq!(
            to.len(),
            from.len(),
            "{channel}: as many messages at the target; the source's last id: {:?}, the \
             target's last source ids: {:?}",
            from.last().map(|m| hex(m.id.as_bytes())),
            around(source_ids.len().saturating_sub(4))
        );
        for (i, (f, t)) in from.iter().zip(&to).enumerate() {
            let mut properties = t.properties.clone();
            let source_id = properties.remove(SOURCE_ID_PROPERTY);
            assert_eq!(
                source_id,
                Some(hex(f.id.as_bytes())),
                "{channel} message {i}: its source id"
            );
            assert_eq!(t.payload, f.payload, "{channel} message {i}: payload");
            assert_eq!(
                properties, f.properties,
                "{channel} message {i}: properties"
            );
        }
    }
}

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

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
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
