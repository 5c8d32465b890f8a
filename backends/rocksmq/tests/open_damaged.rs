//! Recovery scenario: a database directory whose RocksDB files were removed or damaged, one
//! file at a time. Opening must fail with an error naming the path and leave every data file
//! exactly as it was (before, a missing `CURRENT` made the first open create an empty database
//! there, and the next open then deleted the old tables: every message gone). RocksDB itself may
//! add its `LOCK` and info `LOG` files when it gets as far as trying; those are ignored. A
//! missing or empty directory is where a database is created.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use msgstream::mq::ProducerMessage;
use msgstream_rocksmq::{Rocksmq, RocksmqOptions};

fn options(path: &Path) -> RocksmqOptions {
    let mut options = RocksmqOptions::new(path);
    options.retention_interval = None;
    options
}

/// Every file of the directory with its bytes.
fn snapshot(dir: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    std::fs::read_dir(dir)
        .expect("read dir")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.is_file())
        .filter(|p| {
            let name = p.file_name().map(|n| n.to_string_lossy().into_owned());
            name.is_some_and(|n| n != "LOCK" && !n.starts_with("LOG"))
        })
        .map(|p| {
            let bytes = std::fs::read(&p).expect("read file");
            (p, bytes)
        })
        .collect()
}

/// A database of 200 messages, flushed into tables (so it has .sst files) and closed.
async fn filled(dir: &Path) {
    let mq = Rocksmq::open(options(dir)).expect("create");
    mq.create_topic("t").expect("topic");
    let batch = (0..200)
        .map(|i| ProducerMessage::new(format!("m{i}").into_bytes()))
        .collect();
    mq.produce("t", batch).await.expect("produce");
    mq.close();
    let db = rocksdb::DB::open_cf(
        &rocksdb::Options::default(),
        dir,
        rocksdb::DB::list_cf(&rocksdb::Options::default(), dir).expect("list cf"),
    )
    .expect("raw open");
    for cf in rocksdb::DB::list_cf(&rocksdb::Options::default(), dir).expect("list cf") {
        let handle = db.cf_handle(&cf).expect("cf");
        db.flush_cf(handle).expect("flush");
    }
}

#[tokio::test]
async fn a_missing_or_empty_directory_gets_a_new_database() {
    let dir = tempfile::tempdir().expect("tempdir");
    let missing = dir.path().join("new");
    Rocksmq::open(options(&missing)).expect("created").close();
    let empty = dir.path().join("empty");
    std::fs::create_dir(&empty).expect("mkdir");
    Rocksmq::open(options(&empty)).expect("created").close();
}

#[tokio::test]
async fn a_directory_that_is_not_a_database_is_left_alone() {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(dir.path().join("notes.txt"), b"mine").expect("write");
    let before = snapshot(dir.path());
    match Rocksmq::open(options(dir.path())) {
        Err(msgstream::Error::Backend { message, .. }) => {
            assert!(
                message.contains(&dir.path().display().to_string()),
                "{message}"
            )
        }
        other => panic!("expected an error, got {:?}", other.map(|_| ())),
    }
    assert_eq!(
        snapshot(dir.path()),
        before,
        "nothing was created or changed"
    );
}

#[tokio::test]
async fn each_removed_or_damaged_file_fails_the_open_and_changes_nothing() {
    let template = tempfile::tempdir().expect("tempdir");
    filled(template.path()).await;
    let names: Vec<String> = snapshot(template.path())
        .keys()
        .filter_map(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
        .filter(|n| n == "CURRENT" || n.starts_with("MANIFEST") || n.ends_with(".sst"))
        .collect();
    assert!(
        names.iter().any(|n| n.ends_with(".sst")),
        "tables exist: {names:?}"
    );
    for name in &names {
        for damage in ["removed", "truncated"] {
            let dir = tempfile::tempdir().expect("tempdir");
            for (path, bytes) in snapshot(template.path()) {
                let target = dir.path().join(path.file_name().expect("name"));
                std::fs::write(target, bytes).expect("copy");
            }
            let victim = dir.path().join(name);
            match damage {
                "removed" => std::fs::remove_file(&victim).expect("remove"),
                _ => std::fs::write(&victim, b"").expect("truncate"),
            }
            let before = snapshot(dir.path());
            let opened = Rocksmq::open(options(dir.path()));
            match &opened {
                Err(e) => {
                    let text = e.to_string();
                    assert!(
                        text.contains(&dir.path().display().to_string()),
                        "{name} {damage}: the error names the path: {text}"
                    );
                }
                Ok(mq) => {
                    // RocksDB may open without this file only if nothing was lost.
                    let mut reader = mq.reader("t", 0).expect("reader");
                    let held = reader.read(usize::MAX).expect("read").len();
                    assert_eq!(held, 200, "{name} {damage}: opened, but lost messages");
                }
            }
            if let Ok(mq) = opened {
                mq.close();
            } else {
                assert_eq!(
                    snapshot(dir.path()),
                    before,
                    "{name} {damage}: a failed open changed files"
                );
                let again = Rocksmq::open(options(dir.path()));
                assert!(
                    again.is_err(),
                    "{name} {damage}: a second open still refuses"
                );
            }
        }
    }
}

#[tokio::test]
async fn a_current_file_with_control_bytes_is_named_without_printing_them() {
    let dir = tempfile::tempdir().expect("tempdir");
    filled(dir.path()).await;
    let current = dir.path().join("CURRENT");
    let mut bytes = std::fs::read(&current).expect("read CURRENT");
    let newline = bytes.pop();
    assert_eq!(newline, Some(b'\n'));
    bytes.extend_from_slice(b"\0\0\x1b[2J\n");
    std::fs::write(&current, bytes).expect("damage CURRENT");
    let message = match Rocksmq::open(options(dir.path())) {
        Err(e) => e.to_string(),
        Ok(_) => panic!("a damaged CURRENT opened"),
    };
    assert!(
        !message.chars().any(char::is_control),
        "no raw control byte: {message:?}"
    );
    assert!(
        message.contains("CURRENT") && message.contains("\\0"),
        "{message}"
    );
}
