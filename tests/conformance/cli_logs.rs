//! Log lines on standard error: plain text when stderr is not a terminal (a file, a pipe, CI),
//! so they can be read and searched without escape codes.

use crate::cli::{msgstream, stderr};

#[test]
fn log_lines_to_a_pipe_carry_no_colour_codes() {
    let out = msgstream(
        &["--backend", "memory", "demo"],
        &[("RUST_LOG", "msgstream=debug")],
    );
    let err = stderr(&out);
    assert!(out.status.success(), "{err}");
    assert!(err.contains("DEBUG"), "a log line is written: {err}");
    assert!(!err.contains('\u{1b}'), "escape codes in a pipe: {err:?}");
}
