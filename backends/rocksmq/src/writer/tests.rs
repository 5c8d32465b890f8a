//! Tests of the group-committing writer.

use super::*;
use crate::topics::Topics;
use crate::Durability;

/// A store in `dir` with `durability`, and its topic `t`.
fn store_with_topic(
    dir: &tempfile::TempDir,
    durability: Durability,
) -> (Arc<Store>, Arc<TopicState>) {
    let store = Arc::new(Store::open(dir.path(), durability).expect("open"));
    let topics = store.with(Topics::load).expect("topics");
    let topic = store
        .with(|db| topics.get_or_create(db, "t"))
        .expect("topic");
    (store, topic)
}

/// A leader that unwinds (its commit panicked) hands the leadership back and answers every
/// queued producer with an error: nobody waits forever, and the next producer leads.
#[tokio::test]
async fn a_leader_that_unwinds_answers_the_queued_producers() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (store, topic) = store_with_topic(&dir, Durability::Buffered);
    let writer = Writer::new(1 << 20, false);
    let batch = || Batch::One(ProducerMessage::new("x"));
    let Ok(Role::Lead(_own)) = writer.enqueue(&topic, batch()) else {
        panic!("the first caller leads");
    };
    let Ok(Role::Follow(answer)) = writer.enqueue(&topic, batch()) else {
        panic!("the second caller follows");
    };
    // What unwinding out of `lead` does: the guard is dropped without finishing.
    drop(LeaderGuard {
        writer: &writer,
        done: false,
    });
    let answered = answer.await.expect("answered, not dropped");
    assert!(
        matches!(&answered, Err(Error::Backend { message, .. }) if message.contains("panicked")),
        "{answered:?}"
    );
    let Ok(Role::Lead(own)) = writer.enqueue(&topic, batch()) else {
        panic!("the next caller leads again");
    };
    assert_eq!(writer.lead(&store, &topic, &own).expect("written"), 1..2);
}

/// Batches that queue up while a write is in progress go out together in the next one.
#[tokio::test(flavor = "multi_thread", worker_threads = 3)]
#[expect(
    clippy::await_holding_lock,
    reason = "holding the commit lock while producers queue up is what this test does"
)]
async fn queued_batches_share_one_write() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (store, topic) = store_with_topic(&dir, Durability::Buffered);
    let writer = Arc::new(Writer::new(1 << 20, false));
    let blocked = writer.exclusive();
    let spawn = |n: usize| {
        let (writer, store, topic) = (writer.clone(), store.clone(), topic.clone());
        let messages = Batch::Many((0..n).map(|_| ProducerMessage::new("x")).collect());
        tokio::spawn(async move {
            match writer.enqueue(&topic, messages)? {
                Role::Done(range) => Ok(range),
                Role::Follow(answer) => answer.await.map_err(|_| Error::Closed("writer"))?,
                Role::Lead(own) => writer.lead(&store, &topic, &own),
            }
        })
    };
    // The first caller leads and waits for the commit lock; the others queue behind it.
    let leader = spawn(1);
    while writer.state.load(Ordering::Acquire) & LEADING == 0 {
        tokio::task::yield_now().await;
    }
    let followers = [spawn(2), spawn(3)];
    while lock(&writer.queue).pending.len() < 2 {
        tokio::task::yield_now().await;
    }
    drop(blocked);
    assert_eq!(leader.await.expect("join").expect("append"), 1..2);
    let mut ranges = Vec::new();
    for follower in followers {
        ranges.push(follower.await.expect("join").expect("append"));
    }
    ranges.sort_by_key(|r| r.start);
    assert_eq!(ranges.iter().map(|r| r.end - r.start).sum::<u64>(), 5);
    assert_eq!(
        (ranges[0].start, ranges[1].end),
        (2, 7),
        "consecutive, no gap"
    );
    assert_eq!(
        writer.stats(),
        WriteStats {
            writes: 2,
            batches: 3
        }
    );
}

/// Under synced writes the leader's own caller is answered once its group is durable (the
/// leader goes on lingering), and producers that come back while the leader lingers share one
/// write with those that were already queued.
#[tokio::test]
async fn a_synced_leader_answers_early_and_lingers_for_the_answered() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (store, topic) = store_with_topic(&dir, Durability::SyncData);
    // Long enough that only an arrival ends the first linger; the last one times out.
    let writer = Arc::new(Writer::new(1 << 20, true).with_linger_bound(Duration::from_secs(1)));
    let batch = || Batch::One(ProducerMessage::new("x"));
    let Ok(Role::Lead(first)) = writer.enqueue(&topic, batch()) else {
        panic!("the first caller leads");
    };
    let (reply, own) = oneshot::channel();
    let followers: Vec<_> = (0..2)
        .map(|_| match writer.enqueue(&topic, batch()) {
            Ok(Role::Follow(answer)) => answer,
            _ => panic!("later callers follow"),
        })
        .collect();
    let leader = {
        let (writer, store, topic) = (writer.clone(), store.clone(), topic.clone());
        std::thread::spawn(move || writer.lead_elsewhere(&store, topic, first, reply))
    };
    // Answered while the leader waits for the two queued batches and this one's next.
    assert_eq!(own.await.expect("answered").expect("written"), 1..2);
    let Ok(Role::Follow(again)) = writer.enqueue(&topic, batch()) else {
        panic!("the leader is still leading");
    };
    let mut ranges = Vec::new();
    for answer in followers.into_iter().chain([again]) {
        ranges.push(answer.await.expect("answered").expect("written"));
    }
    ranges.sort_by_key(|r| r.start);
    assert_eq!(ranges, [2..3, 3..4, 4..5]);
    leader.join().expect("leader thread");
    assert_eq!(
        writer.stats(),
        WriteStats {
            writes: 2,
            batches: 4
        },
        "the three queued batches went out in one write"
    );
}

/// A batch whose topic is destroyed while it waits in the queue fails on its own (the leader's
/// batch is written) and consumes no id.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[expect(
    clippy::await_holding_lock,
    reason = "holding the commit lock while a follower queues up is what this test does"
)]
async fn a_queued_batch_of_a_destroyed_topic_fails_alone() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = Arc::new(Store::open(dir.path(), Durability::Buffered).expect("open"));
    let topics = store.with(Topics::load).expect("topics");
    let (keep, gone) = store
        .with(|db| {
            Ok((
                topics.get_or_create(db, "keep")?,
                topics.get_or_create(db, "gone")?,
            ))
        })
        .expect("topics");
    let writer = Arc::new(Writer::new(1 << 20, false));
    let blocked = writer.exclusive();
    let leader = {
        let (writer, store, keep) = (writer.clone(), store.clone(), keep.clone());
        std::thread::spawn(move || {
            let Ok(Role::Lead(own)) = writer.enqueue(&keep, Batch::One(ProducerMessage::new("k")))
            else {
                panic!("the first caller leads");
            };
            writer.lead(&store, &keep, &own)
        })
    };
    while writer.state.load(Ordering::Acquire) & LEADING == 0 {
        tokio::task::yield_now().await;
    }
    let Ok(Role::Follow(answer)) = writer.enqueue(&gone, Batch::One(ProducerMessage::new("g")))
    else {
        panic!("the second caller follows");
    };
    gone.destroyed.store(true, Ordering::Release);
    drop(blocked);
    assert_eq!(leader.join().expect("leader").expect("written"), 1..2);
    assert!(matches!(
        answer.await.expect("answered"),
        Err(Error::InvalidArgument(_))
    ));
    assert_eq!(gone.tail().next_id, 1, "no id consumed");
}

/// Producers on several threads at once, through the lock-free hand-over of the leadership:
/// every batch is answered and the ids handed out are exactly `1..=n`, each once. A request
/// queued behind a leader that had just stepped down would never be answered (this test would
/// hang); two leaders at once would hand out an id twice.
#[test]
fn concurrent_producers_get_every_id_exactly_once() {
    const THREADS: usize = 4;
    const SENDS: usize = 2_000;
    let dir = tempfile::tempdir().expect("tempdir");
    let (store, topic) = store_with_topic(&dir, Durability::Buffered);
    let writer = Arc::new(Writer::new(1 << 20, false));
    let (done, results) = std::sync::mpsc::channel();
    for _ in 0..THREADS {
        let (writer, store, topic) = (writer.clone(), store.clone(), topic.clone());
        let done = done.clone();
        std::thread::spawn(move || {
            let ranges = (0..SENDS)
                .map(|_| {
                    let message = Batch::One(ProducerMessage::new("x"));
                    match writer.enqueue(&topic, message).expect("enqueue") {
                        Role::Done(range) => range,
                        Role::Follow(answer) => {
                            answer.blocking_recv().expect("answered").expect("written")
                        }
                        Role::Lead(own) => writer.lead(&store, &topic, &own).expect("written"),
                    }
                })
                .collect::<Vec<_>>();
            drop(done.send(ranges));
        });
    }
    // A stranded producer fails the test instead of hanging it.
    let mut ids: Vec<u64> = (0..THREADS)
        .flat_map(|_| {
            results
                .recv_timeout(std::time::Duration::from_secs(60))
                .expect("every producer thread is answered")
        })
        .flatten()
        .collect();
    ids.sort_unstable();
    let expected: Vec<u64> = (1..=(THREADS * SENDS) as u64).collect();
    assert_eq!(ids, expected);
    assert_eq!(topic.tail().next_id, (THREADS * SENDS) as u64 + 1);
    assert_eq!(
        writer.state.load(Ordering::Acquire),
        0,
        "nobody leads at rest"
    );
    let stats = writer.stats();
    assert_eq!(stats.batches, (THREADS * SENDS) as u64);
    assert!(stats.writes <= stats.batches);
}
