//! Configuration: one TOML file plus environment overrides (DESIGN.md §5).
//!
//! ```toml
//! backend = "rocksmq"            # rocksmq | memory
//!
//! [stream]
//! buffer = 1024                  # queue capacity per channel, in messages
//! retry_attempts = 5             # attempts when creating producers and consumers
//!
//! [rocksmq]
//! path = "./data/rocksmq"
//! retention_minutes = 4320
//! retention_size_mb = 8192
//! page_size_mb = 64
//! sync = "buffered"              # buffered | sync_data | sync_all
//! ```
//!
//! **Environment overrides**: `MSGSTREAM_BACKEND=memory` sets `backend`;
//! `MSGSTREAM_<SECTION>__<KEY>=value` (double underscore between section and key, any case) sets
//! `[section] key`, e.g. `MSGSTREAM_ROCKSMQ__PATH=/var/lib/q`. Values are read as TOML values when
//! they parse as one (`42`, `true`, `"x"`), else as strings.
//!
//! Unknown keys, wrong types and missing required values are errors naming the key and the file.

use std::path::{Path, PathBuf};

use serde::Deserialize;

use crate::{Error, Result};

/// Which backend the factory wires.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum BackendKind {
    /// The embedded RocksDB queue (the zero-setup default).
    #[default]
    Rocksmq,
    /// The in-memory backend (process lifetime only; tests and trials).
    Memory,
}

impl BackendKind {
    /// The name used in config files and on the command line.
    pub fn name(self) -> &'static str {
        match self {
            BackendKind::Rocksmq => "rocksmq",
            BackendKind::Memory => "memory",
        }
    }

    /// Parses a backend name.
    pub fn parse(name: &str) -> Result<Self> {
        match name {
            "rocksmq" => Ok(BackendKind::Rocksmq),
            "memory" => Ok(BackendKind::Memory),
            other => Err(Error::Config {
                origin: "--backend".into(),
                message: format!("unknown backend {other:?}; known: rocksmq, memory"),
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
}

impl Default for StreamSection {
    fn default() -> Self {
        StreamSection {
            buffer: 1024,
            retry_attempts: 5,
        }
    }
}

/// What an acknowledged rocksmq write survives (see `msgstream_rocksmq::Durability`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SyncMode {
    /// WAL written, not synced: survives a process crash, not a power loss.
    #[default]
    Buffered,
    /// WAL `fdatasync`ed per write group.
    SyncData,
    /// WAL `fsync`ed per write group.
    SyncAll,
}

/// `[rocksmq]`: the embedded queue.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RocksmqSection {
    /// Database directory, created if missing.
    pub path: PathBuf,
    /// Acknowledged pages older than this are deleted.
    pub retention_minutes: u64,
    /// A topic above this size loses its oldest acknowledged pages.
    pub retention_size_mb: u64,
    /// Page size, the granularity of retention.
    pub page_size_mb: u64,
    /// Durability of acknowledged writes.
    pub sync: SyncMode,
}

impl Default for RocksmqSection {
    fn default() -> Self {
        RocksmqSection {
            path: PathBuf::from("./data/rocksmq"),
            retention_minutes: 4320,
            retention_size_mb: 8192,
            page_size_mb: 64,
            sync: SyncMode::Buffered,
        }
    }
}

/// The whole configuration.
#[derive(Debug, Clone, PartialEq, Eq, Default, Deserialize)]
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
}

/// The file looked for when none is named.
pub const DEFAULT_FILE: &str = "msgstream.toml";

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
        Self::parse(&text, &origin, std::env::vars())
    }

    /// Parses TOML `text` from `origin`, then applies overrides from `env` (only variables named
    /// `MSGSTREAM_BACKEND` or `MSGSTREAM_<SECTION>__<KEY>` are read).
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
            let Some(rest) = name.strip_prefix("MSGSTREAM_") else {
                continue;
            };
            let path: Vec<String> = if rest == "BACKEND" {
                vec!["backend".into()]
            } else if let Some((section, key)) = rest.split_once("__") {
                vec![section.to_lowercase(), key.to_lowercase()]
            } else {
                continue;
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
        if overridden.is_empty() {
            return toml::from_str(text).map_err(|e| de_error(origin, text, e));
        }
        overridden.sort();
        let origin = format!("{origin} with environment {}", overridden.join(", "));
        let merged = toml::to_string(&table).map_err(|e| error(&origin, &e))?;
        toml::from_str(&merged).map_err(|e| de_error(&origin, &merged, e))
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
    }

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
}
