//! The demo's two consumers and what they received.

use std::collections::{BTreeMap, HashMap};

use crate::error::Result;
use msgstream_facade::msgstream::mq::InitialPosition;
use msgstream_facade::msgstream::msg::{MsgBody, MsgPack};
use msgstream_facade::msgstream::tt::TtMsgStream;
use msgstream_facade::msgstream::Error as StreamError;
use msgstream_facade::{positions, Factory};

use super::tick_spacing;
use crate::signals::Stop;

fn describe(index: usize, pack: &MsgPack) -> String {
    let mut per_channel: BTreeMap<&str, (usize, usize)> = BTreeMap::new();
    for position in &pack.end_positions {
        per_channel
            .entry(position.channel_name.as_str())
            .or_default();
    }
    for msg in &pack.msgs {
        let channel = msg
            .position
            .as_ref()
            .map_or("?", |p| p.channel_name.as_str());
        let entry = per_channel.entry(channel).or_default();
        match msg.body() {
            MsgBody::Delete(_) => entry.1 += 1,
            _ => entry.0 += 1,
        }
    }
    let counts: Vec<String> = per_channel
        .iter()
        .map(|(c, (i, d))| format!("{}:{i}i+{d}d", c.rsplit('-').next().unwrap_or(c)))
        .collect();
    format!(
        "pack {index:>3}  ts {:>5} → {:<5}  {:>3} msgs  [{}]",
        pack.begin_ts,
        pack.end_ts,
        pack.msgs.len(),
        counts.join(" ")
    )
}

async fn consumer(factory: &Factory, channels: &[String]) -> Result<TtMsgStream> {
    let mut stream = factory.tt_msg_stream();
    let refs: Vec<&str> = channels.iter().map(String::as_str).collect();
    stream
        .as_consumer(&refs, "demo", InitialPosition::Earliest)
        .await?;
    Ok(stream)
}

/// The next pack, or `None` once a stop was asked for.
async fn next(stream: &mut TtMsgStream, stop: &Stop) -> Result<Option<MsgPack>> {
    tokio::select! {
        () = stop.wait() => Ok(None),
        pack = stream.next_pack() => Ok(Some(pack.ok_or(StreamError::Closed("tt stream"))??)),
    }
}

/// What the consumers received: count per message id, and packs.
#[derive(Default)]
pub struct Received {
    pub per_id: HashMap<i64, usize>,
    pub packs: usize,
}

impl Received {
    fn take(&mut self, pack: &MsgPack) -> String {
        self.packs += 1;
        for msg in &pack.msgs {
            *self.per_id.entry(msg.id()).or_default() += 1;
        }
        describe(self.packs, pack)
    }
}

/// The two consumers: the first stops midway and saves its end positions, the second resumes
/// from them and reads to the last tick. `None` when stopped; streams are closed either way.
pub async fn consume(
    factory: &Factory,
    channels: &[String],
    rounds: u64,
    saved: &std::path::Path,
    stop: &Stop,
    say: &impl Fn(String) -> Result<()>,
) -> Result<Option<Received>> {
    let last_end = rounds * tick_spacing(channels.len() as u16);
    let stop_after = (rounds / 2) as usize;
    let mut received = Received::default();

    let mut first = consumer(factory, channels).await?;
    let outcome: Result<bool> = async {
        while received.packs < stop_after {
            let Some(pack) = next(&mut first, stop).await? else {
                return Ok(false);
            };
            say(received.take(&pack))?;
            if received.packs == stop_after {
                positions::save(saved, &pack.end_positions)?;
            }
        }
        Ok(true)
    }
    .await;
    first.close().await;
    if !outcome? {
        return Ok(None);
    }
    say(format!(
        "-- stopped after pack {stop_after}; end positions saved to {}",
        saved.display()
    ))?;

    let mut second = consumer(factory, channels).await?;
    let outcome: Result<bool> = async {
        second.seek(&positions::load(saved)?).await?;
        say("-- a new consumer resumed from the saved positions".into())?;
        loop {
            let Some(pack) = next(&mut second, stop).await? else {
                return Ok(false);
            };
            say(received.take(&pack))?;
            if pack.end_ts >= last_end {
                return Ok(true);
            }
        }
    }
    .await;
    second.close().await;
    Ok(outcome?.then_some(received))
}
