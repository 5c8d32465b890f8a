//! Environment overrides: which `MSGSTREAM_*` variables are settings, and reading them without
//! tripping over variables that are not UTF-8.

use crate::{Error, Result};

/// Prefix of every environment variable the configuration reads.
const ENV_PREFIX: &str = "MSGSTREAM_";

/// Sections of the file, as written in `MSGSTREAM_<SECTION>__<KEY>`; one per section field of
/// `Config`, so a section added there is added here.
const SECTIONS: [&str; 4] = ["stream", "rocksmq", "rocketmq", "nsq"];

/// `MSGSTREAM_*` variables that are not settings: the config file's name, and variables read by
/// the benchmarks and the test harnesses of other backends. They are neither read nor warned about.
const NOT_SETTINGS: [&str; 4] = ["CONFIG", "BENCH_", "ROCKETMQ_", "NSQ_"];

/// The process's `MSGSTREAM_*` variables. `std::env::vars` panics on a variable that is not
/// UTF-8, whoever set it; here only our own such variables are errors, the rest are skipped.
pub(super) fn environment() -> Result<Vec<(String, String)>> {
    let mut vars = Vec::new();
    for (name, value) in std::env::vars_os() {
        let lossy = name.to_string_lossy().into_owned();
        if !lossy.starts_with(ENV_PREFIX) {
            continue;
        }
        match (name.into_string(), value.into_string()) {
            (Ok(name), Ok(value)) => vars.push((name, value)),
            _ => {
                return Err(Error::Config {
                    origin: "environment".into(),
                    message: format!("{lossy} is not valid UTF-8 (name or value)"),
                })
            }
        }
    }
    Ok(vars)
}

/// Where an environment variable goes in the file: `Ok(None)` for variables that are not
/// settings, `Err` for one that looks like a setting but cannot be one.
pub(super) fn setting_path(name: &str) -> Result<Option<Vec<String>>, String> {
    let Some(rest) = name.strip_prefix(ENV_PREFIX) else {
        return Ok(None);
    };
    if rest == "BACKEND" {
        return Ok(Some(vec!["backend".into()]));
    }
    if let Some((section, key)) = rest.split_once("__") {
        return Ok(Some(vec![section.to_lowercase(), key.to_lowercase()]));
    }
    if NOT_SETTINGS
        .iter()
        .any(|p| rest == *p || (p.ends_with('_') && rest.starts_with(p)))
    {
        return Ok(None);
    }
    let lower = rest.to_lowercase();
    if let Some(section) = SECTIONS.iter().find(|s| lower.starts_with(*s)) {
        let key = lower[section.len()..]
            .trim_start_matches('_')
            .to_uppercase();
        return Err(format!(
            "environment variable {name} is not a setting: a section and its key are separated \
             by two underscores, e.g. {ENV_PREFIX}{}__{}",
            section.to_uppercase(),
            if key.is_empty() { "KEY" } else { &key }
        ));
    }
    tracing::warn!(variable = name, "ignoring unknown environment variable");
    Ok(None)
}
