"""Third-party faithfulness check of msgstream-nsq-testd: pynsq publishes (PUB, MPUB, DPUB),
consumes, FINs, REQs and TOUCHes against it, then the server's /stats must show every message
finished and nothing left in flight. Exit status 0 on success; any failure or a 60 s timeout
exits non-zero with the reason.

Usage: nsq_thirdparty.py <tcp host:port> <http host:port>
"""
import json
import sys
import time
import urllib.request

import nsq
import tornado.ioloop

TCP, HTTP = sys.argv[1], sys.argv[2]
TOPIC, CHANNEL = "pynsq", "check"
EXPECTED = {"fin-me", "req-me", "touch-me", "batch-1", "batch-2", "deferred"}

state = {"finished": set(), "req_attempts": None, "touch_attempts": None, "failure": None}
loop = tornado.ioloop.IOLoop.current()


def fail(reason):
    state["failure"] = reason
    loop.stop()


def stats():
    with urllib.request.urlopen(f"http://{HTTP}/stats?format=json&topic={TOPIC}") as reply:
        data = json.load(reply)
    for topic in data["topics"] or []:  # null when the topic is gone, as on nsqd
        if topic["topic_name"] == TOPIC:
            for channel in topic["channels"]:
                if channel["channel_name"] == CHANNEL:
                    return channel
    return None


def finish_touched(message):
    state["touch_attempts"] = message.attempts
    message.finish()
    state["finished"].add("touch-me")
    check_done()


def touch_for(message, remaining):
    """Touches every 300 ms for 2.4 s (the message timeout is 1 s), then FINs."""
    if remaining == 0:
        finish_touched(message)
        return
    message.touch()
    loop.call_later(0.3, touch_for, message, remaining - 1)


def handler(message):
    body = message.body.decode()
    if body == "req-me" and message.attempts == 1:
        message.requeue(delay=0, backoff=False)
        return None
    if body == "req-me":
        state["req_attempts"] = message.attempts
    if body == "touch-me":
        if message.attempts != 1:
            fail(f"touch-me was redelivered (attempts {message.attempts}) despite TOUCH")
            return None
        message.enable_async()
        touch_for(message, 8)
        return None
    state["finished"].add(body)
    loop.add_callback(check_done)
    return True


def check_done():
    if state["finished"] != EXPECTED:
        return
    channel = stats()
    if channel is None:
        fail("the channel is missing from /stats")
    elif channel["in_flight_count"] != 0 or channel["depth"] != 0:
        loop.call_later(0.05, check_done)
    else:
        loop.stop()


reader = nsq.Reader(
    message_handler=handler,
    nsqd_tcp_addresses=[TCP],
    topic=TOPIC,
    channel=CHANNEL,
    max_in_flight=5,
    msg_timeout=1,  # seconds in pynsq
    heartbeat_interval=1,
)
writer = nsq.Writer([TCP])


def published(conn, data):
    if isinstance(data, nsq.Error):
        fail(f"publish failed: {data}")


def publish():
    if not writer.conns:
        loop.call_later(0.05, publish)
        return
    writer.pub(TOPIC, b"fin-me", published)
    writer.pub(TOPIC, b"req-me", published)
    writer.pub(TOPIC, b"touch-me", published)
    writer.mpub(TOPIC, [b"batch-1", b"batch-2"], published)
    writer.dpub(TOPIC, 200, b"deferred", published)


def wait_for_reader():
    # Publish only once the channel exists, so it sees every message.
    if not reader.conns:
        loop.call_later(0.05, wait_for_reader)
        return
    publish()


loop.call_later(0.05, wait_for_reader)
loop.call_later(60, fail, f"timed out; finished so far: {sorted(state['finished'])}")
started = time.monotonic()
loop.start()

if state["failure"]:
    print(f"pynsq check FAILED: {state['failure']}")
    sys.exit(1)
if state["req_attempts"] != 2:
    print(f"pynsq check FAILED: req-me came back with attempts {state['req_attempts']}")
    sys.exit(1)
print(f"pynsq check OK: {len(EXPECTED)} messages (PUB, MPUB, DPUB; FIN, REQ, TOUCH) in "
      f"{time.monotonic() - started:.1f}s against {TCP}")
