//! Request and response codes used by this client (Java `RequestCode` / `ResponseCode`).

/// GET_ROUTEINFO_BY_TOPIC (name server).
pub const GET_ROUTE: i32 = 105;
/// GET_BROKER_CLUSTER_INFO (name server).
pub const GET_CLUSTER_INFO: i32 = 106;
/// GET_ALL_TOPIC_LIST_FROM_NAMESERVER.
pub const GET_ALL_TOPICS: i32 = 206;
/// DELETE_TOPIC_IN_NAMESRV.
pub const DELETE_TOPIC_IN_NAMESRV: i32 = 216;
/// UPDATE_AND_CREATE_TOPIC (broker).
pub const CREATE_TOPIC: i32 = 17;
/// DELETE_TOPIC_IN_BROKER.
pub const DELETE_TOPIC_IN_BROKER: i32 = 215;
/// UPDATE_AND_CREATE_SUBSCRIPTIONGROUP.
pub const CREATE_SUBSCRIPTION_GROUP: i32 = 200;
/// DELETE_SUBSCRIPTIONGROUP.
pub const DELETE_SUBSCRIPTION_GROUP: i32 = 207;
/// PULL_MESSAGE.
pub const PULL_MESSAGE: i32 = 11;
/// QUERY_CONSUMER_OFFSET.
pub const QUERY_CONSUMER_OFFSET: i32 = 14;
/// UPDATE_CONSUMER_OFFSET.
pub const UPDATE_CONSUMER_OFFSET: i32 = 15;
/// SEARCH_OFFSET_BY_TIMESTAMP.
pub const SEARCH_OFFSET_BY_TIMESTAMP: i32 = 29;
/// GET_MAX_OFFSET.
pub const GET_MAX_OFFSET: i32 = 30;
/// GET_MIN_OFFSET.
pub const GET_MIN_OFFSET: i32 = 31;
/// HEART_BEAT.
pub const HEART_BEAT: i32 = 34;
/// UNREGISTER_CLIENT.
pub const UNREGISTER_CLIENT: i32 = 35;
/// CONSUMER_SEND_MSG_BACK.
pub const CONSUMER_SEND_MSG_BACK: i32 = 36;
/// GET_CONSUMER_LIST_BY_GROUP.
pub const GET_CONSUMER_LIST_BY_GROUP: i32 = 38;
/// NOTIFY_CONSUMER_IDS_CHANGED (server → client, oneway).
pub const NOTIFY_CONSUMER_IDS_CHANGED: i32 = 40;
/// QUERY_TOPIC_CONSUME_BY_WHO.
pub const QUERY_TOPIC_CONSUME_BY_WHO: i32 = 300;
/// SEND_MESSAGE_V2 (short header field names).
pub const SEND_MESSAGE_V2: i32 = 310;
/// SEND_BATCH_MESSAGE.
pub const SEND_BATCH_MESSAGE: i32 = 320;

/// SUCCESS.
pub const SUCCESS: i32 = 0;
/// SYSTEM_BUSY.
pub const SYSTEM_BUSY: i32 = 2;
/// REQUEST_CODE_NOT_SUPPORTED.
pub const REQUEST_CODE_NOT_SUPPORTED: i32 = 3;
/// FLUSH_DISK_TIMEOUT (stored, but not yet flushed as the broker's policy wants).
pub const FLUSH_DISK_TIMEOUT: i32 = 10;
/// SLAVE_NOT_AVAILABLE.
pub const SLAVE_NOT_AVAILABLE: i32 = 11;
/// FLUSH_SLAVE_TIMEOUT.
pub const FLUSH_SLAVE_TIMEOUT: i32 = 12;
/// SERVICE_NOT_AVAILABLE.
pub const SERVICE_NOT_AVAILABLE: i32 = 14;
/// TOPIC_NOT_EXIST.
pub const TOPIC_NOT_EXIST: i32 = 17;
/// PULL_NOT_FOUND: nothing new at this offset.
pub const PULL_NOT_FOUND: i32 = 19;
/// PULL_RETRY_IMMEDIATELY: the tag filter skipped everything; continue at nextBeginOffset.
pub const PULL_RETRY_IMMEDIATELY: i32 = 20;
/// PULL_OFFSET_MOVED: the offset is out of range; continue at nextBeginOffset.
pub const PULL_OFFSET_MOVED: i32 = 21;
/// QUERY_NOT_FOUND.
pub const QUERY_NOT_FOUND: i32 = 22;
/// FLOW_CONTROL.
pub const FLOW_CONTROL: i32 = 215;

/// Whether a response code means "try again (maybe elsewhere)" rather than "this is wrong".
pub fn is_transient(code: i32) -> bool {
    matches!(
        code,
        SYSTEM_BUSY
            | SERVICE_NOT_AVAILABLE
            | FLOW_CONTROL
            | FLUSH_DISK_TIMEOUT
            | SLAVE_NOT_AVAILABLE
            | FLUSH_SLAVE_TIMEOUT
    )
}
