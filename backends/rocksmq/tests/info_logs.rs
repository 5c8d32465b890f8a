//! RocksDB's info logs are bounded: each open rolls `LOG` over to a `LOG.old.*` file, and
//! before the bound every open of a long-lived database left one more behind.

use msgstream_rocksmq::{Rocksmq, RocksmqOptions, INFO_LOG_FILES};

#[test]
fn reopening_keeps_a_few_info_logs() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut options = RocksmqOptions::new(dir.path());
    options.retention_interval = None;
    for _ in 0..12 {
        Rocksmq::open(options.clone()).expect("open").close();
    }
    let logs: Vec<String> = std::fs::read_dir(dir.path())
        .expect("read dir")
        .map(|entry| {
            entry
                .expect("entry")
                .file_name()
                .to_string_lossy()
                .into_owned()
        })
        .filter(|name| name.starts_with("LOG"))
        .collect();
    assert!(logs.iter().any(|name| name == "LOG"), "{logs:?}");
    assert!(logs.len() <= INFO_LOG_FILES, "{logs:?}");
}
