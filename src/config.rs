//! Configuration: one TOML file plus environment overrides (DESIGN.md §5).
//!
//! ```toml
//! backend = "rocksmq"            # rocksmq | rocketmq | nsq | memory
//!
//! [stream]
//! buffer = 1024                  # queue capacity per channel, in messages (1 ..= 1048576)
//! retry_attempts = 5             # attempts when creating producers and consumers
//! timestamps = "opaque"          # opaque | hybrid (Milvus: physical_ms << 18 | logical)
//! clock_slack_ms = 1000          # hybrid: how far their clock may run ahead of a broker's
//!
//! [rocksmq]
//! path = "./data/rocksmq"
//! retention_minutes = 4320
//! retention_size_mb = 8192
//! page_size_mb = 64
//! sync = "buffered"              # buffered | sync_data | sync_all
//! ignore_groups_idle_minutes = 0 # retention ignores groups idle this long (0: never)
//! ack_group_ms = 0               # 0: each ack written before it returns; N: acks grouped, written within N ms
//! recovery = "report"            # report | strict: what opening does when the WAL lost records
//!
//! [rocketmq]
//! name_servers = ["127.0.0.1:9876"]
//! namespace = ""
//! group_prefix = ""
//! send_timeout_ms = 3000
//! poll_batch = 32
//! persist_interval_ms = 1000
//! heartbeat_interval_ms = 10000  # a dead broker connection is closed within heartbeat + 2 × probe
//! probe_timeout_ms = 3000
//! compress_over_bytes = 4096
//! max_message_bytes = 4194304
//!
//! [nsq]
//! nsqd = ["127.0.0.1:4150"]
//! nsqd_http = []                 # HTTP address of each nsqd: seek, list, delete, latest
//! lookupd = []
//! max_in_flight = 256
//! max_attempts = 0
//! requeue_delay_ms = 1000
//! extensions = "none"            # none (upstream nsqd) | partitions (offsets, seek)
//! partition = 0
//! spool_dir = "./data/nsq-spool" # FINed, unacked messages of one-in-flight consumers
//! spool_sync = "buffered"        # buffered | sync_data
//! output_buffer_timeout_ms = 0   # nsqd's flush interval for consumers; 0: unbuffered
//! ```
//!
//! **Environment overrides**: `MSGSTREAM_BACKEND=memory` sets `backend`;
//! `MSGSTREAM_<SECTION>__<KEY>=value` (double underscore between section and key, any case) sets
//! `[section] key`, e.g. `MSGSTREAM_ROCKSMQ__PATH=/var/lib/q`. Values are read as TOML values when
//! they parse as one (`42`, `true`, `"x"`), else as strings.
//!
//! Unknown keys, wrong types, out-of-range values and missing required values are errors naming
//! the key and the file; so is a variable that names a section with one underscore
//! (`MSGSTREAM_ROCKSMQ_PATH`) and a `MSGSTREAM_` variable that is not UTF-8.

use std::path::{Path, PathBuf};

use serde::Deserialize;

use crate::{Error, Result};

mod brokers;
mod env;
mod ranges;
#[cfg(feature = "nsq")]
pub use brokers::{NsqExtensions, NsqSpoolSync};
pub use brokers::{NsqSection, RocketmqSection, RocksmqSection};
#[cfg(feature = "rocksmq")]
pub use brokers::{RecoveryMode, SyncMode, MAX_ACK_GROUP_MS};
use env::{environment, setting_path};

/// Which backend the factory wires.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum BackendKind {
    /// The embedded RocksDB queue (the zero-setup default).
    #[default]
    Rocksmq,
    /// A RocketMQ cluster.
    Rocketmq,
    /// NSQ-protocol servers.
    Nsq,
    /// The in-memory backend (process lifetime only; tests and trials).
    Memory,
}

impl BackendKind {
    /// The name used in config files and on the command line.
    pub fn name(self) -> &'static str {
        match self {
            BackendKind::Rocksmq => "rocksmq",
            BackendKind::Rocketmq => "rocketmq",
            BackendKind::Nsq => "nsq",
            BackendKind::Memory => "memory",
        }
    }

    /// Parses a backend name.
    pub fn parse(name: &str) -> Result<Self> {
        match name {
            "rocksmq" => Ok(BackendKind::Rocksmq),
            "rocketmq" => Ok(BackendKind::Rocketmq),
            "nsq" => Ok(BackendKind::Nsq),
            "memory" => Ok(BackendKind::Memory),
            other => Err(Error::Config {
                origin: "--backend".into(),
                message: format!(
                    "unknown backend {other:?}; known: rocksmq, rocketmq, nsq, memory"
                ),
            }),
        }
    }
}

/// Stream settings shared by every backend.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct StreamSection {
    /// Queue capacity per channel, in messages.
    pub buffer: usize,
    /// Attempts (the first included) when creating producers and consumers.
    pub retry_attempts: usize,
    /// What message timestamps are: `opaque` numbers (the default), or Milvus `hybrid`
    /// timestamps (`physical_ms << 18 | logical`). Hybrid lets brokers that index their own
    /// clock seek by time (RocketMQ) and lets the CLI take dates (`consume --from-time`).
    pub timestamps: TimestampKind,
    /// With hybrid timestamps: how far the clock they come from may run ahead of a broker's
    /// clock, ms. A broker's time search starts this much earlier, then reads forward.
    pub clock_slack_ms: u64,
}

impl Default for StreamSection {
    fn default() -> Self {
        StreamSection {
            buffer: 1024,
            retry_attempts: 5,
            timestamps: TimestampKind::Opaque,
            clock_slack_ms: DEFAULT_CLOCK_SLACK_MS,
        }
    }
}

/// The default `[stream] clock_slack_ms`: a second, well above what NTP keeps clocks apart.
pub const DEFAULT_CLOCK_SLACK_MS: u64 = 1000;

/// `[stream] timestamps`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TimestampKind {
    /// Opaque numbers: nothing relates them to a clock.
    #[default]
    Opaque,
    /// Milvus hybrid timestamps.
    Hybrid,
}

impl StreamSection {
    /// The timestamps setting as the mq layer takes it.
    pub fn timestamps(&self) -> msgstream::mq::Timestamps {
        match self.timestamps {
            TimestampKind::Opaque => msgstream::mq::Timestamps::Opaque,
            TimestampKind::Hybrid => msgstream::mq::Timestamps::Hybrid {
                clock_slack_ms: self.clock_slack_ms,
            },
        }
    }
}

/// The whole configuration.
#[derive(Debug, Clone, PartialEq, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// The backend to wire.
    #[serde(default)]
    pub backend: BackendKind,
    /// Stream settings.
    #[serde(default)]
    pub stream: StreamSection,
    /// Settings of the rocksmq backend.
    #[serde(default)]
    pub rocksmq: RocksmqSection,
    /// Settings of the rocketmq backend.
    #[serde(default)]
    pub rocketmq: RocketmqSection,
    /// Settings of the nsq backend.
    #[serde(default)]
    pub nsq: NsqSection,
}

/// The file looked for when none is named.
pub const DEFAULT_FILE: &str = "msgstream.toml";

/// The largest `[stream] buffer`: queues are sized by it up front (a semaphore and a channel per
/// stream), so an absurd value would abort the process instead of failing here.
pub const MAX_BUFFER: usize = 1 << 20;

impl Config {
    /// Loads `file` (or `$MSGSTREAM_CONFIG`, or `./msgstream.toml` if it exists, or nothing) and
    /// applies the process environment's overrides.
    pub fn load(file: Option<&Path>) -> Result<Config> {
        let file = file
            .map(Path::to_path_buf)
            .or_else(|| std::env::var_os("MSGSTREAM_CONFIG").map(PathBuf::from))
            .or_else(|| Some(PathBuf::from(DEFAULT_FILE)).filter(|p| p.exists()));
        let (text, origin) = match &file {
            Some(path) => (
                std::fs::read_to_string(path).map_err(|source| Error::Io {
                    path: path.clone(),
                    source,
                })?,
                path.display().to_string(),
            ),
            None => (String::new(), "(defaults)".to_string()),
        };
        Self::parse(&text, &origin, environment()?)
    }

    /// Parses TOML `text` from `origin`, then applies overrides from `env`: `MSGSTREAM_BACKEND`
    /// and `MSGSTREAM_<SECTION>__<KEY>`. A `MSGSTREAM_` variable that names a section without the
    /// double underscore (`MSGSTREAM_ROCKSMQ_PATH`) is an error, as an unknown key in the file
    /// is; other unknown `MSGSTREAM_` variables are logged as warnings and ignored.
    pub fn parse(
        text: &str,
        origin: &str,
        env: impl IntoIterator<Item = (String, String)>,
    ) -> Result<Config> {
        let error = |origin: &str, e: &dyn std::fmt::Display| Error::Config {
            origin: origin.to_string(),
            message: e.to_string().trim_end().to_string(),
        };
        let de_error = |origin: &str, text: &str, e: toml::de::Error| Error::Config {
            origin: origin.to_string(),
            message: one_line(text, &e),
        };
        let mut table: toml::Table = toml::from_str(text).map_err(|e| de_error(origin, text, e))?;
        let mut overridden = Vec::new();
        for (name, raw) in env {
            let path = match setting_path(&name) {
                Ok(Some(path)) => path,
                Ok(None) => continue,
                Err(message) => return Err(error(origin, &message)),
            };
            let value = toml::from_str::<toml::Table>(&format!("v = {raw}"))
                .ok()
                .and_then(|mut t| t.remove("v"))
                .unwrap_or(toml::Value::String(raw));
            match path.as_slice() {
                [key] => {
                    table.insert(key.clone(), value);
                }
                [section, key] => {
                    let entry = table
                        .entry(section.clone())
                        .or_insert_with(|| toml::Value::Table(toml::Table::new()));
                    let toml::Value::Table(section_table) = entry else {
                        return Err(error(origin, &format!("{section} is not a section")));
                    };
                    section_table.insert(key.clone(), value);
                }
                _ => continue,
            }
            overridden.push(name);
        }
        let (config, origin): (Config, String) = if overridden.is_empty() {
            let config = toml::from_str(text).map_err(|e| de_error(origin, text, e))?;
            (config, origin.to_string())
        } else {
            overridden.sort();
            let origin = format!("{origin} with environment {}", overridden.join(", "));
            let merged = toml::to_string(&table).map_err(|e| error(&origin, &e))?;
            let config = toml::from_str(&merged).map_err(|e| de_error(&origin, &merged, e))?;
            (config, origin)
        };
        config.validate(&origin)?;
        Ok(config)
    }

    /// Range checks serde cannot express (see `ranges`).
    fn validate(&self, origin: &str) -> Result<()> {
        match ranges::out_of_range(self) {
            Some(message) => Err(Error::Config {
                origin: origin.to_string(),
                message,
            }),
            None => Ok(()),
        }
    }
}

/// A TOML error on one line: `line N (`the line`): message`.
fn one_line(text: &str, e: &toml::de::Error) -> String {
    match e.span() {
        Some(span) => {
            let line_no = text[..span.start.min(text.len())].matches('\n').count() + 1;
            let line = text.lines().nth(line_no - 1).unwrap_or("").trim();
            format!("line {line_no} (`{line}`): {}", e.message().trim())
        }
        None => e.message().trim().to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str, env: &[(&str, &str)]) -> Result<Config> {
        Config::parse(
            text,
            "test.toml",
            env.iter().map(|(k, v)| (k.to_string(), v.to_string())),
        )
    }

    #[cfg(all(feature = "rocksmq", feature = "nsq"))]
    #[test]
    fn defaults_and_full_file() {
        assert_eq!(parse("", &[]).expect("empty"), Config::default());
        let config = parse(
            "backend = \"memory\"\n[stream]\nbuffer = 8\n[rocksmq]\npath = \"/tmp/q\"\nsync = \"sync_data\"\n",
            &[],
        )
        .expect("valid");
        assert_eq!(config.backend, BackendKind::Memory);
        assert_eq!(config.stream.buffer, 8);
        assert_eq!(config.rocksmq.path, PathBuf::from("/tmp/q"));
        assert_eq!(config.rocksmq.sync, SyncMode::SyncData);
        assert_eq!(config.rocksmq.retention_minutes, 4320);
        let config = parse(
            "[nsq]\nspool_dir = \"/var/lib/spool\"\nspool_sync = \"sync_data\"\n",
            &[],
        )
        .expect("nsq spool");
        assert_eq!(config.nsq.spool_dir, PathBuf::from("/var/lib/spool"));
        assert_eq!(config.nsq.spool_sync, NsqSpoolSync::SyncData);
        let wrong = parse("[nsq]\nspool_sync = \"always\"\n", &[])
            .expect_err("unknown sync mode")
            .to_string();
        assert!(wrong.contains("spool_sync"), "{wrong}");
    }

    #[cfg(feature = "rocksmq")]
    #[test]
    fn errors_name_the_key_and_the_file() {
        for (text, key) in [
            ("[rocksmq]\npth = \"x\"\n", "pth"),
            (
                "[rocksmq]\nretention_minutes = \"soon\"\n",
                "retention_minutes",
            ),
            ("backend = \"kafka\"\n", "backend"),
            ("[kafka]\nbrokers = 1\n", "kafka"),
        ] {
            let message = parse(text, &[]).expect_err(text).to_string();
            assert!(message.contains("test.toml"), "{message}");
            assert!(message.contains(key), "{message}");
        }
    }

    #[cfg(feature = "rocksmq")]
    #[test]
    fn environment_overrides() {
        let config = parse(
            "[rocksmq]\npath = \"/a\"\n",
            &[
                ("MSGSTREAM_BACKEND", "memory"),
                ("MSGSTREAM_ROCKSMQ__PATH", "/b"),
                ("MSGSTREAM_STREAM__BUFFER", "16"),
                ("MSGSTREAM_CONFIG", "ignored.toml"),
                ("HOME", "/root"),
            ],
        )
        .expect("valid");
        assert_eq!(config.backend, BackendKind::Memory);
        assert_eq!(config.rocksmq.path, PathBuf::from("/b"));
        assert_eq!(config.stream.buffer, 16);
        let message = parse("", &[("MSGSTREAM_ROCKSMQ__PTH", "/b")])
            .expect_err("unknown key")
            .to_string();
        assert!(
            message.contains("MSGSTREAM_ROCKSMQ__PTH") && message.contains("pth"),
            "{message}"
        );
    }

    #[test]
    fn buffer_is_bounded_before_anything_allocates_it() {
        for bad in ["0", "1048577", "4611686018427387904"] {
            let message = parse(&format!("[stream]\nbuffer = {bad}\n"), &[])
                .expect_err(bad)
                .to_string();
            assert!(
                message.contains("buffer") && message.contains("1048576"),
                "{message}"
            );
        }
        let message = parse("", &[("MSGSTREAM_STREAM__BUFFER", "4611686018427387904")])
            .expect_err("env")
            .to_string();
        assert!(message.contains("MSGSTREAM_STREAM__BUFFER"), "{message}");
        assert_eq!(
            parse("[stream]\nbuffer = 1048576\n", &[])
                .expect("largest")
                .stream
                .buffer,
            MAX_BUFFER
        );
    }

    #[cfg(feature = "rocksmq")]
    #[test]
    fn ack_grouping_is_bounded() {
        assert_eq!(
            Config::default().rocksmq.ack_group_ms,
            0,
            "immediate acks by default"
        );
        let grouped = parse("[rocksmq]\nack_group_ms = 5\n", &[]).expect("grouped");
        assert_eq!(grouped.rocksmq.ack_group_ms, 5);
        let message = parse("[rocksmq]\nack_group_ms = 60001\n", &[])
            .expect_err("above a minute")
            .to_string();
        assert!(
            message.contains("ack_group_ms") && message.contains("60000"),
            "{message}"
        );
        let from_env = parse("", &[("MSGSTREAM_ROCKSMQ__ACK_GROUP_MS", "2")]).expect("env");
        assert_eq!(from_env.rocksmq.ack_group_ms, 2);
    }

    /// Each section is the backend's own type: a key it does not declare is refused wherever it
    /// is set, and every key it declares is read (the RocketMQ connection's too, such as
    /// `write_timeout_ms`, which the facade did not offer while it re-declared the section).
    #[cfg(all(feature = "rocketmq", feature = "nsq"))]
    #[test]
    fn backend_sections_take_their_backends_keys_and_refuse_others() {
        for (text, key) in [
            ("[rocketmq]\nname_server = [\"a:1\"]\n", "name_server"),
            ("[rocketmq]\nheartbeat_ms = 500\n", "heartbeat_ms"),
            ("[nsq]\nnsqds = []\n", "nsqds"),
        ] {
            let message = parse(text, &[]).expect_err(text).to_string();
            assert!(
                message.contains("test.toml") && message.contains(key),
                "{message}"
            );
        }
        let config = parse(
            "[rocketmq]\nname_servers = [\"a:1\"]\nheartbeat_interval_ms = 500\nwrite_timeout_ms = 700\n\
             [nsq]\nmax_in_flight = 9\n",
            &[("MSGSTREAM_ROCKETMQ__PROBE_TIMEOUT_MS", "200")],
        )
        .expect("valid");
        assert_eq!(config.rocketmq.name_servers, ["a:1"]);
        assert_eq!(config.rocketmq.connection.heartbeat_interval_ms, 500);
        assert_eq!(config.rocketmq.connection.probe_timeout_ms, 200);
        assert_eq!(config.rocketmq.connection.write_timeout_ms, 700);
        assert_eq!(config.nsq.max_in_flight, 9);
        let message = parse("", &[("MSGSTREAM_ROCKETMQ__HEARTBEAT_MS", "1")])
            .expect_err("unknown key from the environment")
            .to_string();
        assert!(
            message.contains("MSGSTREAM_ROCKETMQ__HEARTBEAT_MS")
                && message.contains("heartbeat_ms"),
            "{message}"
        );
    }

    #[cfg(feature = "nsq")]
    #[test]
    fn every_numeric_setting_out_of_range_is_refused_by_name() {
        for (section, key, bad) in [
            ("stream", "retry_attempts", "4294967296"),
            ("stream", "retry_attempts", "0"),
            ("rocksmq", "page_size_mb", "0"),
            ("rocksmq", "page_size_mb", "4097"),
            ("rocksmq", "retention_minutes", "52560001"),
            ("rocksmq", "retention_size_mb", "1073741825"),
            ("rocksmq", "ignore_groups_idle_minutes", "52560001"),
            ("rocketmq", "send_timeout_ms", "0"),
            ("rocketmq", "poll_batch", "0"),
            ("rocketmq", "poll_batch", "1025"),
            ("rocketmq", "persist_interval_ms", "0"),
            ("rocketmq", "heartbeat_interval_ms", "0"),
            ("rocketmq", "probe_timeout_ms", "3600001"),
            ("rocketmq", "compress_over_bytes", "1073741825"),
            ("rocketmq", "max_message_bytes", "0"),
            ("nsq", "max_in_flight", "0"),
            ("nsq", "requeue_delay_ms", "3600001"),
            ("nsq", "partition", "65536"),
            ("nsq", "partitions", "0"),
            ("nsq", "replicas", "0"),
            ("nsq", "leader_wait_ms", "3600001"),
        ] {
            let text = format!("[{section}]\n{key} = {bad}\n");
            let error = parse(&text, &[]).expect_err(&text);
            assert!(matches!(error, Error::Config { .. }), "{error:?}");
            let message = error.to_string();
            assert!(
                message.contains(&format!("[{section}] {key} = {bad}"))
                    && message.contains("out of range"),
                "{message}"
            );
        }
        let from_env = parse("", &[("MSGSTREAM_ROCKSMQ__PAGE_SIZE_MB", "0")])
            .expect_err("env")
            .to_string();
        assert!(
            from_env.contains("page_size_mb")
                && from_env.contains("MSGSTREAM_ROCKSMQ__PAGE_SIZE_MB"),
            "{from_env}"
        );
    }

    #[test]
    fn recovery_is_report_or_strict() {
        assert_eq!(Config::default().rocksmq.recovery, RecoveryMode::Report);
        let strict = parse("[rocksmq]\nrecovery = \"strict\"\n", &[]).expect("strict");
        assert_eq!(strict.rocksmq.recovery, RecoveryMode::Strict);
        let message = parse("[rocksmq]\nrecovery = \"lenient\"\n", &[])
            .expect_err("unknown")
            .to_string();
        assert!(message.contains("recovery"), "{message}");
    }

    #[test]
    fn misspelt_variables_are_refused_and_foreign_ones_left_alone() {
        for typo in [
            "MSGSTREAM_ROCKSMQ_PATH",
            "MSGSTREAM_STREAM_BUFFER",
            "MSGSTREAM_ROCKSMQPATH",
        ] {
            let message = parse("", &[(typo, "/b")]).expect_err(typo).to_string();
            assert!(
                message.contains(typo) && message.contains("__"),
                "{message}"
            );
        }
        let config = parse(
            "",
            &[
                ("MSGSTREAM_BENCH_QUICK", "1"),
                ("MSGSTREAM_ROCKETMQ_NAMESRV", "127.0.0.1:9876"),
                ("MSGSTREAM_NSQ_NSQD", "x"),
                ("MSGSTREAM_CONFIG", "read by Config::load, not a setting"),
                ("MSGSTREAM_SOMETHING", "warned, not read"),
            ],
        )
        .expect("not settings");
        assert_eq!(config, Config::default());
        let message = parse("", &[("MSGSTREAM_NSQ__ADDR", "x")])
            .expect_err("a setting of a section this build does not have")
            .to_string();
        assert!(
            message.contains("nsq") && message.contains("addr"),
            "names the section and the key: {message}"
        );
    }
}
