use rocksdb::statistics::Ticker;
use rocksdb::{ColumnFamilyDescriptor, Options, DB};

use super::*;
use crate::keys::COLUMN_FAMILIES;
use crate::store::{column_family_options, database_options};
use crate::{Rocksmq, RocksmqOptions};

const TOPICS: usize = 40;
const BIG: usize = 4 * 1024 * 1024;

/// Loading the topics of a database where one topic's newest message is big reads that
/// message's block at most for its own topic, never for the topics next to it in key order.
#[tokio::test]
async fn loading_topics_never_reads_a_neighbours_big_message() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut options = RocksmqOptions::new(dir.path());
    options.retention_interval = None;
    let mq = Rocksmq::open(options).expect("open");
    for topic in 0..TOPICS {
        mq.create_topic(&format!("t{topic:02}")).expect("topic");
    }
    let big: Vec<u8> = b"0123456789abcdef"
        .iter()
        .copied()
        .cycle()
        .take(BIG)
        .collect();
    let middle = format!("t{:02}", TOPICS / 2);
    let message = msgstream::mq::ProducerMessage::new(big);
    mq.produce(&middle, vec![message]).await.expect("big");
    mq.close();

    let mut db_options = database_options();
    db_options.enable_statistics();
    let families = COLUMN_FAMILIES
        .iter()
        .map(|name| ColumnFamilyDescriptor::new(*name, column_family_options()));
    let db = DB::open_cf_descriptors(&db_options, dir.path(), families).expect("raw open");
    for name in COLUMN_FAMILIES {
        db.flush_cf(db.cf_handle(name).expect("cf"))
            .expect("flush into a table");
    }
    let write_options = rocksdb::WriteOptions::default();
    let before = db_options.get_ticker_count(Ticker::BytesDecompressedTo);
    let topics = Topics::load(&Db {
        db: &db,
        write_options: &write_options,
    })
    .expect("load");
    let decompressed = db_options.get_ticker_count(Ticker::BytesDecompressedTo) - before;
    assert!(
        decompressed < BIG as u64 / 4,
        "{decompressed} bytes decompressed to load {TOPICS} topics"
    );
    assert_eq!(topics.all().len(), TOPICS);
    for topic in topics.all() {
        let expected = if topic.name == middle { 2 } else { 1 };
        assert_eq!(topic.tail().next_id, expected, "{}", topic.name);
    }
}

#[test]
fn the_first_key_index_option_parses() {
    assert!(Options::default()
        .get_options_from_string(crate::store::FIRST_KEY_INDEX)
        .is_ok());
}
