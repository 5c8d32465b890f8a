//! Which nsqd the tests run against: an already running one named by `MSGSTREAM_NSQ_*`, or
//! (when those are unset) the in-process test server. Read here once for the backend's tests
//! and the workspace's conformance harness, so both accept and refuse the same values.

use std::net::{SocketAddr, ToSocketAddrs};

use crate::Extensions;

/// The already running server of `MSGSTREAM_NSQ_*`.
#[derive(Debug, Clone)]
pub struct ExternalServer {
    /// `MSGSTREAM_NSQ_NSQD`: nsqd TCP addresses.
    pub nsqd: Vec<SocketAddr>,
    /// `MSGSTREAM_NSQ_NSQD_HTTP`: their HTTP addresses, same order (empty when unset).
    pub nsqd_http: Vec<SocketAddr>,
    /// `MSGSTREAM_NSQ_LOOKUPD`: nsqlookupd HTTP addresses (empty when unset).
    pub lookupd: Vec<SocketAddr>,
    /// `MSGSTREAM_NSQ_EXTENSIONS`: what the server speaks (`none` when unset).
    pub extensions: Extensions,
    /// `MSGSTREAM_NSQ_CLUSTER=true`: the nsqds form a Youzan cluster with its coordinator
    /// (needs `MSGSTREAM_NSQ_EXTENSIONS=partitions` and `MSGSTREAM_NSQ_LOOKUPD`): topics are
    /// created through the lookupd, by the client's own code.
    pub cluster: bool,
}

impl ExternalServer {
    /// Reads the variables: `Ok(None)` when `MSGSTREAM_NSQ_NSQD` is unset and so are the
    /// others; otherwise the server, or a message naming the variable that is malformed
    /// (not UTF-8, an entry that is no `host:port`, an unknown extensions value, a
    /// `MSGSTREAM_NSQ_NSQD_HTTP` that does not pair with `MSGSTREAM_NSQ_NSQD`, one set without
    /// `MSGSTREAM_NSQ_NSQD`, a cluster without partitions or lookupd).
    pub fn from_env() -> Result<Option<ExternalServer>, String> {
        let nsqd = variable("MSGSTREAM_NSQ_NSQD")?;
        let nsqd_http = variable("MSGSTREAM_NSQ_NSQD_HTTP")?;
        let lookupd = variable("MSGSTREAM_NSQ_LOOKUPD")?;
        let extensions = variable("MSGSTREAM_NSQ_EXTENSIONS")?;
        let cluster = variable("MSGSTREAM_NSQ_CLUSTER")?;
        let Some(nsqd) = nsqd else {
            for (name, value) in [
                ("MSGSTREAM_NSQ_NSQD_HTTP", &nsqd_http),
                ("MSGSTREAM_NSQ_LOOKUPD", &lookupd),
                ("MSGSTREAM_NSQ_EXTENSIONS", &extensions),
                ("MSGSTREAM_NSQ_CLUSTER", &cluster),
            ] {
                if value.is_some() {
                    return Err(format!(
                        "{name} is set but MSGSTREAM_NSQ_NSQD is not: name the running nsqd's \
                         TCP address(es) in MSGSTREAM_NSQ_NSQD, or unset {name}"
                    ));
                }
            }
            return Ok(None);
        };
        let list = |name: &str, value: &Option<String>| match value {
            Some(value) => addresses(name, value),
            None => Ok(Vec::new()),
        };
        let server = ExternalServer {
            nsqd: addresses("MSGSTREAM_NSQ_NSQD", &nsqd)?,
            nsqd_http: list("MSGSTREAM_NSQ_NSQD_HTTP", &nsqd_http)?,
            lookupd: list("MSGSTREAM_NSQ_LOOKUPD", &lookupd)?,
            extensions: match extensions.as_deref() {
                None | Some("none") => Extensions::None,
                Some("partitions") => Extensions::Partitions,
                Some(other) => {
                    return Err(format!(
                        "MSGSTREAM_NSQ_EXTENSIONS={other:?}: expected none or partitions"
                    ))
                }
            },
            cluster: match cluster.as_deref() {
                None | Some("false") => false,
                Some("true") => true,
                Some(other) => {
                    return Err(format!(
                        "MSGSTREAM_NSQ_CLUSTER={other:?}: expected true or false"
                    ))
                }
            },
        };
        if server.cluster
            && (server.extensions != Extensions::Partitions || server.lookupd.is_empty())
        {
            return Err(
                "MSGSTREAM_NSQ_CLUSTER=true needs MSGSTREAM_NSQ_EXTENSIONS=partitions \
                        and the cluster's lookupd in MSGSTREAM_NSQ_LOOKUPD"
                    .to_string(),
            );
        }
        if nsqd_http.is_some() && server.nsqd_http.len() != server.nsqd.len() {
            return Err(format!(
                "MSGSTREAM_NSQ_NSQD_HTTP names {} address(es) but MSGSTREAM_NSQ_NSQD {}: one \
                 HTTP address per nsqd, in the same order",
                server.nsqd_http.len(),
                server.nsqd.len()
            ));
        }
        Ok(Some(server))
    }
}

/// A variable's value: `None` when unset, a failure when it is not UTF-8.
fn variable(name: &str) -> Result<Option<String>, String> {
    match std::env::var(name) {
        Ok(value) => Ok(Some(value)),
        Err(std::env::VarError::NotPresent) => Ok(None),
        Err(std::env::VarError::NotUnicode(_)) => Err(format!("{name} is not valid UTF-8")),
    }
}

/// A comma-separated list of `host:port`, each resolved to its first address.
fn addresses(name: &str, value: &str) -> Result<Vec<SocketAddr>, String> {
    value
        .split(',')
        .map(str::trim)
        .map(|entry| {
            let resolved = entry
                .to_socket_addrs()
                .map_err(|e| e.to_string())
                .and_then(|mut all| all.next().ok_or_else(|| "no address".to_string()));
            resolved.map_err(|e| {
                format!("{name}={value:?}: {entry:?} is not a host:port address ({e})")
            })
        })
        .collect()
}
