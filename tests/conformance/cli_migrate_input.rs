//! `msgstream migrate` refuses bad input before it writes anything.

use std::path::Path;

use msgstream::mq::ProducerMessage;
use msgstream_facade::positions as positions_file;

use crate::cli::{msgstream, stderr};
use crate::cli_migrate::{migrate_args, rocksmq_store, write_config, Store};
use crate::migrate_data::{channel_names, produce_rounds, read_all};

/// Each bad input is a clear error, and the target gets no channel.
#[cfg(feature = "rocksmq")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_writes_nothing() {
    use msgstream::mq::MessageId;
    use msgstream::msg::MsgPosition;
    let dir = tempfile::tempdir().expect("tempdir");
    let source = rocksmq_store(dir.path(), "source");
    let target = rocksmq_store(dir.path(), "target");
    let channels = channel_names("migb");
    {
        let factory = source.factory().await;
        produce_rounds(&factory.client(), &channels, 1..=2, 1).await;
        factory.close().await;
    }
    let list = channels.join(",");
    let unknown = format!("{},no-such-channel", channels[0]);
    let other_positions = dir.path().join("other.json");
    positions_file::save(
        &other_positions,
        &[MsgPosition {
            channel_name: "not-migrated".into(),
            msg_id: MessageId::from_u64(1),
            ..MsgPosition::default()
        }],
    )
    .expect("save");
    let not_held = dir.path().join("not-held.json");
    positions_file::save(
        &not_held,
        &[MsgPosition {
            channel_name: channels[0].as_str().into(),
            msg_id: MessageId::from_u64(999_999),
            ..MsgPosition::default()
        }],
    )
    .expect("save");
    let corrupt = dir.path().join("corrupt.json");
    std::fs::write(&corrupt, "[{\"channel\":").expect("write");
    let same_db = write_config(
        dir.path(),
        "same.toml",
        &format!(
            "backend = \"rocksmq\"\n[rocksmq]\npath = {:?}\n",
            dir.path().join(".").join("source-db").display().to_string()
        ),
    );
    let out = dir.path().join("out.json");
    let (src, dst, same) = (
        source.config.to_str().expect("utf-8"),
        target.config.to_str().expect("utf-8"),
        same_db.to_str().expect("utf-8"),
    );
    let with_positions = |file: &Path| {
        vec![
            "migrate".to_string(),
            "--from".into(),
            src.into(),
            "--to".into(),
            dst.into(),
            "--channels".into(),
            list.clone(),
            "--positions".into(),
            file.display().to_string(),
            "--positions-out".into(),
            out.display().to_string(),
        ]
    };
    let as_strings = |args: &[&str]| args.iter().map(|a| a.to_string()).collect::<Vec<_>>();
    let cases: Vec<(&str, Vec<String>, &str)> = vec![
        (
            "unknown channel",
            as_strings(&[
                "migrate",
                "--from",
                src,
                "--to",
                dst,
                "--channels",
                &unknown,
            ]),
            "channel \"no-such-channel\" does not exist at the migration source",
        ),
        (
            "one file twice",
            as_strings(&["migrate", "--from", src, "--to", src, "--channels", &list]),
            "same store",
        ),
        (
            "two files, one store",
            as_strings(&["migrate", "--from", same, "--to", src, "--channels", &list]),
            "same store",
        ),
        (
            "positions of another channel",
            with_positions(&other_positions),
            "\"not-migrated\", which is not migrated",
        ),
        (
            "a position the source does not hold",
            with_positions(&not_held),
            "which the source does not hold",
        ),
        (
            "corrupt positions",
            with_positions(&corrupt),
            "positions file",
        ),
    ];
    for (case, args, expected) in cases {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let result = tokio::task::block_in_place(|| msgstream(&args, &[]));
        assert_eq!(result.status.code(), Some(1), "{case}: {}", stderr(&result));
        assert!(
            stderr(&result).contains(expected),
            "{case}: {expected:?} in {}",
            stderr(&result)
        );
        assert!(!out.exists(), "{case}: no positions written");
        let factory = target.factory().await;
        let topics = factory.client().list_topics().await.expect("topics");
        assert!(
            channels.iter().all(|c| !topics.contains(c)),
            "{case}: nothing written at the target: {topics:?}"
        );
        factory.close().await;
    }
    // A target channel that already holds a message of its own.
    {
        let factory = target.factory().await;
        let producer = factory
            .client()
            .create_producer(&channels[1])
            .await
            .expect("producer");
        producer
            .send(ProducerMessage::new(&b"not migrated"[..]))
            .await
            .expect("send");
        factory.close().await;
    }
    let result =
        tokio::task::block_in_place(|| msgstream(&migrate_args(&source, &target, &list), &[]));
    assert_eq!(result.status.code(), Some(1), "{}", stderr(&result));
    assert!(
        stderr(&result).contains("ends with a message that no migration copied"),
        "{}",
        stderr(&result)
    );
    // Looking where each target channel ends may create the others, empty.
    let factory = target.factory().await;
    for (i, channel) in channels.iter().enumerate() {
        assert_eq!(
            read_all(&factory.client(), channel).await.len(),
            usize::from(i == 1),
            "{channel}: nothing copied, the channel in use left as it was"
        );
    }
    factory.close().await;
}

/// A backend without readers can be neither end of a migration: `Unsupported`, before anything
/// is written.
#[cfg(all(feature = "nsq", feature = "rocksmq"))]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn backends_without_readers_are_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = crate::harness::nsq_server(false).await;
    let upstream = Store {
        config: write_config(
            dir.path(),
            "upstream.toml",
            &format!(
                "backend = \"nsq\"\n[nsq]\nnsqd = [{:?}]\nnsqd_http = [{:?}]\nspool_dir = {:?}\n",
                server.tcp_addr().to_string(),
                server.http_addr().to_string(),
                dir.path().join("spool").display().to_string(),
            ),
        ),
        _keep: Box::new(server),
    };
    let rocksmq = rocksmq_store(dir.path(), "embedded");
    let channels = channel_names("migu");
    for store in [&upstream, &rocksmq] {
        let factory = store.factory().await;
        produce_rounds(&factory.client(), &channels, 1..=1, 1).await;
        factory.close().await;
    }
    let list = channels.join(",");
    for (from, to, expected) in [
        (
            &upstream,
            &rocksmq,
            "being a migration source without readers",
        ),
        (
            &rocksmq,
            &upstream,
            "being a migration target without readers",
        ),
    ] {
        let result = tokio::task::block_in_place(|| msgstream(&migrate_args(from, to, &list), &[]));
        assert_eq!(result.status.code(), Some(1), "{}", stderr(&result));
        assert!(
            stderr(&result).contains(expected),
            "{expected:?} in {}",
            stderr(&result)
        );
    }
    let factory = rocksmq.factory().await;
    for channel in &channels {
        assert_eq!(
            read_all(&factory.client(), channel).await.len(),
            2,
            "{channel}: nothing copied to the embedded queue"
        );
    }
    factory.close().await;
}
