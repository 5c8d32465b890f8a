//! Whether two configurations name one store, so that `msgstream migrate` refuses to copy a
//! channel onto itself before it opens anything.

use crate::config::{BackendKind, Config};

/// Why `a` and `b` name the same store, or `None` when they name two. Two rocksmq paths are
/// one store when they resolve to one directory; two RocketMQ configs when they share a name
/// server and a namespace; two NSQ configs when they share an nsqd or a lookupd. Two memory
/// backends are two stores (each lives in its own process or client).
pub fn same_store(a: &Config, b: &Config) -> Option<String> {
    match (a.backend, b.backend) {
        #[cfg(feature = "rocksmq")]
        (BackendKind::Rocksmq, BackendKind::Rocksmq) => {
            let (pa, pb) = (canonical(&a.rocksmq.path), canonical(&b.rocksmq.path));
            (pa == pb).then(|| format!("rocksmq at {}", pa.display()))
        }
        #[cfg(feature = "rocketmq")]
        (BackendKind::Rocketmq, BackendKind::Rocketmq) => {
            let shared = a
                .rocketmq
                .name_servers
                .iter()
                .find(|s| b.rocketmq.name_servers.contains(s))?;
            (a.rocketmq.namespace == b.rocketmq.namespace).then(|| {
                format!(
                    "rocketmq name server {shared}, namespace {:?}",
                    a.rocketmq.namespace
                )
            })
        }
        #[cfg(feature = "nsq")]
        (BackendKind::Nsq, BackendKind::Nsq) => a
            .nsq
            .nsqd
            .iter()
            .find(|s| b.nsq.nsqd.contains(s))
            .map(|s| format!("nsqd {s}"))
            .or_else(|| {
                a.nsq
                    .lookupd
                    .iter()
                    .find(|s| b.nsq.lookupd.contains(s))
                    .map(|s| format!("nsqlookupd {s}"))
            }),
        _ => None,
    }
}

/// The directory a rocksmq path resolves to, also before it exists (its parent resolved).
#[cfg(feature = "rocksmq")]
fn canonical(path: &std::path::Path) -> std::path::PathBuf {
    if let Ok(resolved) = path.canonicalize() {
        return resolved;
    }
    match (path.parent(), path.file_name()) {
        (Some(parent), Some(name)) => {
            let parent = if parent.as_os_str().is_empty() {
                std::path::Path::new(".")
            } else {
                parent
            };
            parent
                .canonicalize()
                .map(|p| p.join(name))
                .unwrap_or_else(|_| path.to_path_buf())
        }
        _ => path.to_path_buf(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[cfg(feature = "rocksmq")]
    #[test]
    fn rocksmq_paths_resolve_before_comparing() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut a = Config::default();
        a.rocksmq.path = dir.path().join("db");
        let mut b = a.clone();
        b.rocksmq.path = dir.path().join("x").join("..").join("db");
        std::fs::create_dir(dir.path().join("x")).expect("mkdir");
        assert!(same_store(&a, &b).is_some(), "one directory, two spellings");
        b.rocksmq.path = dir.path().join("other");
        assert_eq!(same_store(&a, &b), None);
    }

    #[cfg(all(feature = "rocketmq", feature = "nsq"))]
    #[test]
    fn brokers_shared_or_not() {
        let mut a = Config {
            backend: BackendKind::Rocketmq,
            ..Config::default()
        };
        a.rocketmq.name_servers = vec!["10.0.0.1:9876".into(), "10.0.0.2:9876".into()];
        let mut b = a.clone();
        b.rocketmq.name_servers = vec!["10.0.0.2:9876".into()];
        assert!(same_store(&a, &b).is_some(), "a shared name server");
        b.rocketmq.namespace = "other".into();
        assert_eq!(same_store(&a, &b), None, "another namespace");
        let mut n = Config {
            backend: BackendKind::Nsq,
            ..Config::default()
        };
        n.nsq.nsqd = vec!["10.0.0.3:4150".into()];
        assert_eq!(same_store(&a, &n), None, "two backends");
        let mut m = n.clone();
        m.nsq.nsqd = vec!["10.0.0.4:4150".into()];
        assert_eq!(same_store(&n, &m), None);
        m.nsq.nsqd.push("10.0.0.3:4150".into());
        assert!(same_store(&n, &m).is_some());
    }
}
