use super::*;

fn body(config: &ConnConfig, msg_timeout: Option<Duration>) -> serde_json::Value {
    serde_json::from_str(&identify_body(config, msg_timeout)).expect("IDENTIFY body is JSON")
}

fn negotiated(msg_timeout_s: u64, max_msg_timeout_s: u64) -> Negotiated {
    Negotiated {
        max_rdy_count: 2500,
        msg_timeout: Duration::from_secs(msg_timeout_s),
        max_msg_timeout: Duration::from_secs(max_msg_timeout_s),
        auth_required: false,
        version: String::new(),
    }
}

#[test]
fn the_body_asks_for_feature_negotiation_and_the_configured_settings() {
    let config = ConnConfig {
        client_id: "c1".into(),
        heartbeat_interval: Duration::from_secs(5),
        ..ConnConfig::default()
    };
    let sent = body(&config, Some(Duration::from_millis(1500)));
    assert_eq!(sent["client_id"], "c1");
    assert_eq!(sent["feature_negotiation"], true);
    assert_eq!(sent["heartbeat_interval"], 5000);
    assert_eq!(sent["msg_timeout"], 1500);
    assert_eq!(
        body(&config, None)["msg_timeout"],
        0,
        "0 asks for the default"
    );
}

#[test]
fn the_output_buffer_maps_to_nsqd_fields() {
    let fields = |output_buffer| {
        let sent = body(
            &ConnConfig {
                output_buffer,
                ..ConnConfig::default()
            },
            None,
        );
        (
            sent["output_buffer_size"].clone(),
            sent["output_buffer_timeout"].clone(),
        )
    };
    assert_eq!(fields(OutputBuffer::ServerDefault), (0.into(), 0.into()));
    assert_eq!(fields(OutputBuffer::Off), ((-1).into(), (-1).into()));
    let every = |d| fields(OutputBuffer::FlushEvery(d));
    assert_eq!(every(Duration::from_millis(30)), (0.into(), 30.into()));
    // Below a millisecond would read as "the server's setting": asks for the shortest instead.
    assert_eq!(every(Duration::from_micros(10)), (0.into(), 1.into()));
}

#[test]
fn a_json_reply_is_what_the_server_granted_and_missing_fields_take_defaults() {
    let reply = br#"{"max_rdy_count":100,"msg_timeout":30000,"max_msg_timeout":600000,"auth_required":true,"version":"1.2.1"}"#;
    let granted = parse_identify("a", reply).expect("parses");
    assert_eq!(granted.max_rdy_count, 100);
    assert_eq!(granted.msg_timeout, Duration::from_secs(30));
    assert_eq!(granted.max_msg_timeout, Duration::from_secs(600));
    assert!(granted.auth_required);
    assert_eq!(granted.version, "1.2.1");
    let sparse = parse_identify("a", b"{}").expect("parses");
    assert_eq!(sparse.max_rdy_count, 2500);
    assert!(!sparse.auth_required);
}

#[test]
fn a_bare_ok_is_a_server_without_feature_negotiation() {
    let granted = parse_identify("a", b"OK").expect("parses");
    assert_eq!(granted, negotiated(60, 15 * 60));
}

#[test]
fn a_reply_that_is_neither_ok_nor_json_is_a_protocol_error() {
    let err = parse_identify("host:4150", b"{not json").expect_err("refused");
    assert!(
        matches!(&err, Error::Protocol { addr, what } if addr == "host:4150" && what.starts_with("IDENTIFY reply")),
        "{err:?}"
    );
}

#[test]
fn only_a_bad_body_naming_the_msg_timeout_is_a_refused_timeout() {
    let error = |code: &str, text: &str| ServerError {
        code: code.into(),
        text: text.into(),
    };
    assert!(refuses_msg_timeout(&error(
        "E_BAD_BODY",
        "IDENTIFY msg timeout (900000000) is invalid"
    )));
    assert!(!refuses_msg_timeout(&error(
        "E_BAD_BODY",
        "IDENTIFY heartbeat interval"
    )));
    assert!(!refuses_msg_timeout(&error("E_INVALID", "msg timeout")));
}

#[test]
fn after_a_refusal_the_client_asks_for_the_maximum_once_and_only_when_above_it() {
    let asked = Duration::from_secs(1200);
    assert_eq!(
        after_refusal(asked, &negotiated(60, 600)),
        AfterRefusal::AskFor(Duration::from_secs(600))
    );
    assert_eq!(
        after_refusal(asked, &negotiated(600, 600)),
        AfterRefusal::KeepProbe
    );
    // Not above the maximum: refused for another reason (below the minimum).
    assert_eq!(
        after_refusal(Duration::from_millis(10), &negotiated(60, 600)),
        AfterRefusal::Refused
    );
    assert_eq!(
        after_refusal(asked, &negotiated(60, 1200)),
        AfterRefusal::Refused
    );
    // No maximum reported: nothing to cap at.
    assert_eq!(
        after_refusal(asked, &negotiated(60, 0)),
        AfterRefusal::Refused
    );
}
