//! The README's capability table says what `capabilities()` says, for every backend.

use msgstream::mq::{Capabilities, Ordering};

fn readme_table() -> Vec<Vec<String>> {
    let readme = include_str!("../../README.md");
    let start = readme
        .find("<!-- capabilities -->")
        .expect("README has a capability table marker");
    readme[start..]
        .lines()
        .skip(1)
        .take_while(|l| l.starts_with('|'))
        .map(|l| {
            l.trim_matches('|')
                .split('|')
                .map(|c| c.trim().to_string())
                .collect()
        })
        .collect()
}

fn expected(caps: &Capabilities, row: &str) -> &'static str {
    let yes = |b: bool| if b { "yes" } else { "no" };
    match row {
        "seek" => yes(caps.seek),
        "readers" => yes(caps.readers),
        "latest message id" => yes(caps.latest_id),
        "durable subscriptions" => yes(caps.durable_subscriptions),
        "delete subscriptions" => yes(caps.delete_subscriptions),
        "delete channels" => yes(caps.delete_topics),
        "seek by time" => yes(caps.seek_time),
        "per-channel order" => match caps.ordering {
            Ordering::Strict => "strict",
            Ordering::BestEffort => "best effort",
        },
        other => panic!("unknown capability row {other:?}"),
    }
}

/// The rows the table must have, in order: one per field of `Capabilities`.
const ROWS: [&str; 8] = [
    "seek",
    "readers",
    "latest message id",
    "durable subscriptions",
    "delete subscriptions",
    "delete channels",
    "seek by time",
    "per-channel order",
];

#[tokio::test]
async fn readme_capability_table_matches_capabilities() {
    let table = readme_table();
    let rows: Vec<&str> = table[2..].iter().map(|r| r[0].as_str()).collect();
    assert_eq!(
        rows, ROWS,
        "the README's capability rows, one per capability"
    );
    let header = &table[0];
    let mut checked = 0;
    let backends = crate::harness::all().await;
    let expected_cells = backends.len() * (table.len() - 2);
    for (name, harness) in backends {
        let column = header
            .iter()
            .position(|h| h == name)
            .unwrap_or_else(|| panic!("README capability table has no {name} column"));
        let caps = harness.client().capabilities();
        for row in &table[2..] {
            let cell = row[column].split_whitespace().next().unwrap_or("");
            let cell = if row[0] == "per-channel order" {
                row[column].as_str()
            } else {
                cell
            };
            assert_eq!(cell, expected(&caps, &row[0]), "{name}: {}", row[0]);
            checked += 1;
        }
    }
    assert_eq!(
        checked, expected_cells,
        "every row checked for every backend"
    );
}
