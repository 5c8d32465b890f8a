"""Third-party throughput figures for the nsq bench (backends/nsq/benches/client.rs): pynsq
publishes N 128-byte messages with PUB, 64 unacknowledged at a time (the bench's own client
gets the same window), then consumes and FINs them with max_in_flight 200, and prints

    case=pynsq_pub msgs_per_s=…
    case=pynsq_sub msgs_per_s=…

Each clock starts before the connection opens, as the bench's client cases' do for consuming.
Exit status non-zero on a failed publish or a 120 s timeout.

Usage: nsq_thirdparty_bench.py <tcp host:port> <messages>
"""
import sys
import time

import nsq
import tornado.ioloop

TCP, N = sys.argv[1], int(sys.argv[2])
TOPIC, CHANNEL = "pynsq-bench", "bench"
BODY = b"x" * 128
WINDOW = 64

loop = tornado.ioloop.IOLoop.current()
state = {"sent": 0, "acked": 0, "received": 0, "failure": None, "start": 0.0, "rates": {}}


def fail(reason):
    state["failure"] = reason
    loop.stop()


def send_one(writer):
    state["sent"] += 1
    writer.pub(TOPIC, BODY, lambda conn, data: published(writer, data))


def published(writer, data):
    if isinstance(data, nsq.Error):
        fail(f"publish failed: {data}")
        return
    state["acked"] += 1
    if state["acked"] == N:
        state["rates"]["pub"] = N / (time.monotonic() - state["start"])
        consume()
    elif state["sent"] < N:
        send_one(writer)


def start_publishing(writer):
    if not writer.conns:
        loop.call_later(0.001, start_publishing, writer)
        return
    for _ in range(min(WINDOW, N)):
        send_one(writer)


def handler(message):
    state["received"] += 1
    if state["received"] == N:
        state["rates"]["sub"] = N / (time.monotonic() - state["start"])
        # Let the last FIN go out before stopping.
        loop.add_callback(loop.stop)
    return True


def consume():
    state["start"] = time.monotonic()
    nsq.Reader(
        message_handler=handler,
        nsqd_tcp_addresses=[TCP],
        topic=TOPIC,
        channel=CHANNEL,
        max_in_flight=200,
    )


def publish():
    state["start"] = time.monotonic()
    start_publishing(nsq.Writer([TCP]))


loop.add_callback(publish)
loop.call_later(120, fail, "timed out")
loop.start()

if state["failure"]:
    print(f"pynsq bench FAILED: {state['failure']}", file=sys.stderr)
    sys.exit(1)
for case in ("pub", "sub"):
    print(f"case=pynsq_{case} msgs_per_s={state['rates'][case]:.0f}")
