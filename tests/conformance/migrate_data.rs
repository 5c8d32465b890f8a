//! What the migration tests write and compare: rounds of a tt stream, its packs as they must
//! match across backends, and each channel's messages at both ends.

use std::sync::Arc;

use msgstream::mq::{Client, InitialPosition, Message, ReaderOptions};
use msgstream::msg::{MsgPack, MsgPosition, TsMsg};
use msgstream::stream::StreamOptions;
use msgstream::testkit::{insert, unique, within};
use msgstream::tt::TtMsgStream;
use msgstream_facade::migrate::SOURCE_ID_PROPERTY;

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
                    let mut copy = m.clone();
                    (copy.position, copy.properties) = (None, properties);
                    copy
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

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
