//! How a pump cuts what it receives into batches (as the tt stream's runs ask), and how it
//! ends.

use super::*;
use crate::consume::queue::queue;
use crate::mem::MemoryClient;
use crate::mq::{ConsumerOptions, Delivery, Message, ProducerMessage, Properties};
use crate::msg::TsMsg;
use crate::tt::runs::{LongRuns, LONG_RUN};

/// An insert at `ts` (`tick`: a timetick at `ts`) as a received message with id `ts`.
fn received(ts: u64, tick: bool) -> Message {
    let msg = if tick {
        TsMsg::time_tick(ts)
    } else {
        crate::testkit::insert(ts as i64, ts, 0)
    };
    Message {
        topic: SharedStr::interned("ch"),
        id: MessageId::from_u64(ts),
        payload: msg.encode(),
        properties: Properties::new(),
        delivery: Delivery::default(),
    }
}

/// Messages `from..to`, a timetick at every multiple of `tick_every`.
fn run_of(from: u64, to: u64, tick_every: u64) -> Vec<Message> {
    (from..to)
        .map(|ts| received(ts, ts % tick_every == 0))
        .collect()
}

/// The context of a pump of channel "ch" taking up to `batch` messages a receive, queueing
/// into `tx`.
fn context(batch: usize, tx: Queue<<LongRuns as Runs>::Summary>) -> PumpContext<LongRuns> {
    PumpContext {
        channel: 0,
        generation: 0,
        channel_name: SharedStr::interned("ch"),
        group: SharedStr::interned("sub"),
        registry: Arc::new(DecoderRegistry::default()),
        batch,
        tx,
        signal: Arc::new(PumpSignal::default()),
        spares: Arc::new(Spares::new(1024)),
    }
}

/// A new pump's state around `consumer`.
fn parked(consumer: Box<dyn Consumer>) -> Parked<LongRuns> {
    Parked {
        consumer,
        pending: VecDeque::new(),
        first_received: None,
        runs: LongRuns::default(),
    }
}

async fn pump() -> (PumpContext<LongRuns>, Parked<LongRuns>) {
    let client = MemoryClient::new();
    client.create_producer("ch").await.expect("channel");
    let consumer = client
        .subscribe(ConsumerOptions::new("ch", "sub"))
        .await
        .expect("consumer");
    let (tx, _rx) = queue(1024);
    (context(MAX_BATCH, tx), parked(consumer))
}

/// Each pending batch as (messages, ticks, ends with a tick).
fn shapes(parked: &mut Parked<LongRuns>) -> Vec<(usize, usize, bool)> {
    parked
        .pending
        .drain(..)
        .map(|b| (b.msgs.len(), b.ticks, b.ends_with_tick()))
        .collect()
}

#[tokio::test]
async fn long_runs_are_batches_of_their_own_and_short_ones_share() {
    let (ctx, mut parked) = pump().await;
    // Ticks at 40 and 80: two long runs, each closed at its tick.
    assert!(ctx.receive(&mut parked, Ok(run_of(1, 81, 40))).is_none());
    assert_eq!(shapes(&mut parked), vec![(40, 1, true), (40, 1, true)]);
    // Ticks every 4: runs of 4 gather until a batch holds LONG_RUN messages.
    assert!(ctx.receive(&mut parked, Ok(run_of(81, 121, 4))).is_none());
    let batches = shapes(&mut parked);
    assert_eq!(batches[0], (LONG_RUN, LONG_RUN / 4, true));
    assert_eq!(batches.iter().map(|b| b.0).sum::<usize>(), 40);
}

#[tokio::test]
async fn a_run_cut_by_a_receive_ends_in_a_batch_of_its_own() {
    let (ctx, mut parked) = pump().await;
    // A run of 40 (tick at 40), then 30 messages of the next run (tick at 80) ...
    assert!(ctx.receive(&mut parked, Ok(run_of(1, 71, 40))).is_none());
    let cut = parked.pending.back().map_or(0, |b| b.msgs.capacity());
    assert!(
        cut >= 40,
        "the cut run's first block has room for all of it ({cut})"
    );
    assert_eq!(shapes(&mut parked), vec![(40, 1, true), (30, 0, false)]);
    // ... whose last 10 come with the next receive: closed at their tick, short as they are,
    // so that they do not ride with the run after them (a batch of two runs is taken apart
    // message by message).
    assert!(ctx.receive(&mut parked, Ok(run_of(71, 121, 40))).is_none());
    assert_eq!(shapes(&mut parked), vec![(10, 1, true), (40, 1, true)]);
    // A receive that ended at a tick leaves no tail: short runs share batches as always.
    assert!(ctx.receive(&mut parked, Ok(run_of(121, 131, 4))).is_none());
    assert_eq!(shapes(&mut parked), vec![(10, 2, false)]);
}

#[tokio::test]
async fn batches_are_built_on_the_vectors_handed_back() {
    let (ctx, mut parked) = pump().await;
    // Two runs: the second batch is made once the run length is known, with a whole run's
    // room, so the spares keep its vectors. (A spare too small is dropped: freed, its block
    // may well be what the allocator hands out next, so only a kept one can be told apart.)
    assert!(ctx.receive(&mut parked, Ok(run_of(1, 81, 40))).is_none());
    let second = parked.pending.pop_back().expect("a batch");
    parked.pending.clear();
    let block = second.msgs.as_slices().0.as_ptr();
    let mut msgs = Vec::from(second.msgs);
    msgs.clear();
    let mut ends = Vec::from(second.ends);
    ends.clear();
    ctx.spares.give_back(msgs, ends);
    assert!(ctx.receive(&mut parked, Ok(run_of(81, 121, 40))).is_none());
    let next = parked.pending.pop_front().expect("a batch");
    assert_eq!(
        next.msgs.as_slices().0.as_ptr(),
        block,
        "the block came round"
    );
    assert_eq!(next.msgs.len(), 40);
}

/// A pump hands over a batch, then lets the runtime's other tasks run before it reads the
/// next: on a one-thread runtime, a task spawned after the pump finds one batch queued, not
/// the whole backlog the pump could have read and queued without waiting.
#[tokio::test]
async fn a_pump_lets_other_tasks_run_between_its_batches() {
    const BATCH: usize = 8;
    let client = MemoryClient::new();
    let producer = client.create_producer("ch").await.expect("channel");
    let consumer = client
        .subscribe(ConsumerOptions::new("ch", "sub"))
        .await
        .expect("consumer");
    let backlog: Vec<_> = (1..=8 * BATCH as u64)
        .map(|ts| ProducerMessage::new(crate::testkit::insert(ts as i64, ts, 0).encode()))
        .collect();
    producer.send_batch(backlog).await.expect("backlog");
    let (tx, mut rx) = queue(1024);
    let running = task::spawn(parked(consumer), context(BATCH, tx), "ch".into());
    let SlotState::Running { stop, handle } = running else {
        panic!("a spawned pump runs");
    };
    let queued = tokio::spawn(async move {
        let mut queued = 0;
        while let Some(batch) = rx.try_next() {
            queued += batch.len();
        }
        queued
    })
    .await
    .expect("the other task");
    assert_eq!(
        queued, BATCH,
        "one batch was queued before the other task ran"
    );
    let _ = stop.send(());
    handle.await.expect("the pump stops");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_panicked_pump_stops_without_waiting_for_room() {
    // Two inserts fill the queue of two, then the decoder panics on the third message: the
    // channel's ending waits for room no one will give, since nothing reads the queue.
    let (client, options) = crate::stream::panic_tests::setup(2, 2).await;
    let consumer = client
        .subscribe(ConsumerOptions::new("a", "sub"))
        .await
        .expect("consumer");
    let mut pumps = Pumps::<LongRuns>::new(client.as_ref(), &options);
    let (tx, _rx) = queue(2);
    let (index, _) = pumps.add(consumer, tx);
    let signal = pumps.signal(index).expect("signal").clone();
    let wait = std::time::Duration::from_secs(10);
    tokio::time::timeout(wait, signal.wait_for_tick_or_end_after(u64::MAX))
        .await
        .expect("the pump panicked");
    tokio::time::timeout(wait, pumps.close())
        .await
        .expect("close waited for the panicked pump to find room");
}

/// Received inserts are checked in the pump and decoded on first access, to the body sent; an
/// insert that does not decode is still the batch's failure in its place (after the messages
/// before it).
#[tokio::test]
async fn inserts_are_checked_on_receipt_and_decoded_on_access() {
    let (ctx, mut parked) = pump().await;
    let mut batch = run_of(1, 4, 100);
    // Message 3 looks like an insert (its header says so) and breaks off mid-row.
    let whole = batch[2].payload.clone();
    batch[2].payload = whole.slice(..whole.len() - 1);
    assert!(ctx.receive(&mut parked, Ok(batch)).is_none());
    let pending = parked.pending.pop_front().expect("a batch");
    assert_eq!(pending.msgs.len(), 2, "the messages before the bad one");
    for (msg, id) in pending.msgs.iter().zip(1..) {
        assert!(!msg.is_decoded(), "not decoded by the pump");
        assert_eq!((msg.id(), msg.begin_ts()), (id, id as u64));
        assert_eq!(msg.body(), crate::testkit::insert(id, id as u64, 0).body());
        assert!(msg.is_decoded());
    }
    let failure = pending.failure.as_ref().map(|(error, _)| error.to_string());
    assert!(
        failure.as_deref().is_some_and(|e| e.contains("message")),
        "{failure:?}"
    );
}
