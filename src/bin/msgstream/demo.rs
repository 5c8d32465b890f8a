//! `msgstream demo`: the whole story in a few seconds, checked.
//!
//! A producer writes inserts, deletes and broadcast timeticks to 4 channels while a tt consumer
//! prints each pack. Midway the consumer saves its end positions to a file and stops; a new
//! consumer loads them, seeks, and reads to the end. The demo then compares what was received
//! with what was produced and prints one line that scripts read:
//! `demo: packs=… messages=… resumed_from_pack=… lost=0 duplicated=0`.
//!
//! Its channels are its own and deleted at the end, so repeated demos leave nothing behind in a
//! durable backend. Ctrl-C or SIGTERM stops it between two packs.

mod consumers;

use std::process::ExitCode;

use crate::error::Result;
use clap::Args;
use msgstream_facade::msgstream::msg::{
    DeleteRequest, InsertRequest, MsgBase, MsgBody, MsgPack, MsgType, TsMsg,
};
use msgstream_facade::msgstream::Error as StreamError;
use msgstream_facade::Factory;

use consumers::consume;

use crate::commands::delete_own_channels;
use crate::out;
use crate::signals::Stop;

/// Options of the demo.
#[derive(Debug, Args)]
pub struct DemoArgs {
    /// Number of channels (1 to 1024).
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u16).range(1..=1024))]
    channels: u16,
    /// Timetick rounds (one pack each; 2 to 100000).
    #[arg(long, default_value_t = 24, value_parser = clap::value_parser!(u64).range(2..=100_000))]
    rounds: u64,
    /// Print only the summary line.
    #[arg(long)]
    quiet: bool,
}

/// Messages each channel gets per round: two inserts and one delete.
const PER_CHANNEL: u64 = 3;

/// Timestamps between two ticks: every message of a round gets its own timestamp below the
/// round's tick, whatever the number of channels (100 for up to 33 channels, as the README's
/// demo line shows).
fn tick_spacing(channels: u16) -> u64 {
    (u64::from(channels) * PER_CHANNEL + 1).max(100)
}

/// Messages of one round: per channel two inserts and one delete, with unique ids, all with
/// timestamps after the previous round's tick and before this round's.
fn round_messages(round: u64, channels: u16, next_id: &mut i64) -> Vec<TsMsg> {
    let spacing = tick_spacing(channels);
    let mut msgs = Vec::new();
    for c in 0..u32::from(channels) {
        for k in 0..PER_CHANNEL {
            let ts = round * spacing + 1 + u64::from(c) * PER_CHANNEL + k;
            *next_id += 1;
            let id = *next_id;
            let base = Some(MsgBase::new(0, id, ts));
            let body = if k < 2 {
                MsgBody::Insert(InsertRequest {
                    base: base.map(|b| MsgBase {
                        msg_type: MsgType::Insert as i32,
                        ..b
                    }),
                    collection_name: "demo".into(),
                    timestamps: [ts].into(),
                    row_ids: [id].into(),
                    num_rows: 1,
                    ..Default::default()
                })
            } else {
                MsgBody::Delete(DeleteRequest {
                    base: base.map(|b| MsgBase {
                        msg_type: MsgType::Delete as i32,
                        ..b
                    }),
                    collection_name: "demo".into(),
                    timestamps: vec![ts],
                    int64_primary_keys: vec![id - 1],
                    num_rows: 1,
                    ..Default::default()
                })
            };
            msgs.push(TsMsg::new(body).with_hash_keys(vec![c]));
        }
    }
    msgs
}

/// Runs the demo, then deletes its channels; exit code 1 when anything was lost or
/// duplicated, 130 when stopped.
pub async fn run(factory: &Factory, args: DemoArgs, stop: &Stop) -> Result<ExitCode> {
    let run_id = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis())
        .unwrap_or(0);
    let channels: Vec<String> = (0..args.channels)
        .map(|c| format!("demo-{run_id}-ch{c}"))
        .collect();
    let saved = std::env::temp_dir().join(format!("msgstream-demo-{run_id}.positions.json"));
    let outcome = story(factory, &args, &channels, &saved, stop).await;
    let _ = std::fs::remove_file(&saved);
    delete_own_channels(factory, &channels, "demo").await;
    outcome
}

async fn story(
    factory: &Factory,
    args: &DemoArgs,
    channels: &[String],
    saved: &std::path::Path,
    stop: &Stop,
) -> Result<ExitCode> {
    let (channels_n, rounds) = (args.channels, args.rounds);
    let say = |line: String| {
        if args.quiet {
            Ok(())
        } else {
            out::line(line)
        }
    };
    say(format!(
        "demo on the {} backend: {channels_n} channels, {rounds} timetick rounds",
        factory.backend().name()
    ))?;

    // The producer runs concurrently with the consumers.
    let mut producer = factory.tt_msg_stream();
    let refs: Vec<&str> = channels.iter().map(String::as_str).collect();
    producer.as_producer(&refs).await?;
    let spacing = tick_spacing(channels_n);
    let mut produced_task = tokio::spawn(async move {
        let mut next_id = 0;
        let mut produced = Vec::new();
        for round in 0..rounds {
            let msgs = round_messages(round, channels_n, &mut next_id);
            produced.extend(msgs.iter().map(TsMsg::id));
            producer
                .produce(&MsgPack {
                    msgs,
                    ..MsgPack::default()
                })
                .await?;
            let tick = TsMsg::time_tick((round + 1) * spacing);
            producer
                .broadcast(&MsgPack {
                    msgs: vec![tick],
                    ..MsgPack::default()
                })
                .await?;
        }
        producer.close().await;
        Ok::<_, StreamError>(produced)
    });
    let consumed = consume(factory, channels, rounds, saved, stop, &say).await;
    if !matches!(consumed, Ok(Some(_))) {
        // Stopped or failed: the producer must be gone before its channels are deleted.
        produced_task.abort();
        let _ = (&mut produced_task).await;
    }
    let Some(received) = consumed? else {
        eprintln!("interrupted");
        return Ok(ExitCode::from(130));
    };
    let produced = produced_task
        .await
        .map_err(|e| StreamError::backend_source("demo", e.to_string(), false, e))??;
    let lost = produced
        .iter()
        .filter(|id| !received.per_id.contains_key(id))
        .count();
    let duplicated: usize = received.per_id.values().map(|n| n.saturating_sub(1)).sum();
    let messages: usize = received.per_id.values().sum();
    out::line(format_args!(
        "demo: packs={} messages={messages} resumed_from_pack={} lost={lost} duplicated={duplicated}",
        received.packs,
        rounds / 2
    ))?;
    Ok(
        if lost == 0 && duplicated == 0 && messages == produced.len() {
            ExitCode::SUCCESS
        } else {
            ExitCode::FAILURE
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_message_of_a_round_is_before_its_tick() {
        for channels in [1u16, 4, 33, 34, 1024] {
            let spacing = tick_spacing(channels);
            let mut next_id = 0;
            for round in [0u64, 1, 99_999] {
                for msg in round_messages(round, channels, &mut next_id) {
                    let ts = msg.end_ts();
                    assert!(
                        ts > round * spacing && ts < (round + 1) * spacing,
                        "{channels} channels, round {round}: ts {ts}"
                    );
                }
            }
        }
    }

    #[tokio::test]
    async fn a_run_checks_itself_and_leaves_no_channel_behind() {
        let config = msgstream_facade::Config {
            backend: msgstream_facade::BackendKind::Memory,
            ..msgstream_facade::Config::default()
        };
        let factory = Factory::new(&config).await.expect("factory");
        let args = DemoArgs {
            channels: 34,
            rounds: 4,
            quiet: true,
        };
        let stop = Stop::listen().expect("signals");
        let code = run(&factory, args, &stop).await.expect("demo");
        assert_eq!(code, ExitCode::SUCCESS);
        let left = factory.client().list_topics().await.expect("list");
        assert!(left.is_empty(), "{left:?}");
    }
}
