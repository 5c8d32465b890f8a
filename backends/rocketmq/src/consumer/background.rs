//! The consumer's periodic work: persisting offsets, heartbeats, and rebalancing (on an
//! interval, on request, and when a broker says the group's membership changed).

use std::sync::Arc;

use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio::time::MissedTickBehavior;

use super::{Inner, Mode};
use crate::remoting::ServerRequest;

pub(super) fn spawn(
    inner: &Arc<Inner>,
    mode: Mode,
    notices: Option<mpsc::UnboundedReceiver<ServerRequest>>,
) -> Vec<JoinHandle<()>> {
    let mut tasks = vec![tokio::spawn(persist_loop(inner.clone()))];
    if mode == Mode::Subscribe {
        tasks.push(tokio::spawn(heartbeat_loop(inner.clone())));
        tasks.push(tokio::spawn(rebalance_loop(inner.clone(), notices)));
    }
    tasks
}

fn interval(period: std::time::Duration) -> tokio::time::Interval {
    let mut interval = tokio::time::interval_at(tokio::time::Instant::now() + period, period);
    interval.set_missed_tick_behavior(MissedTickBehavior::Delay);
    interval
}

async fn persist_loop(inner: Arc<Inner>) {
    let mut tick = interval(inner.options.persist_interval);
    loop {
        tick.tick().await;
        if let Err(e) = inner.offsets.persist(&inner.admin, &inner.group).await {
            tracing::debug!(error = %e, "rocketmq offset persist failed; retried next interval");
        }
    }
}

async fn heartbeat_loop(inner: Arc<Inner>) {
    let mut tick = interval(inner.options.heartbeat_interval);
    loop {
        tick.tick().await;
        if let Err(e) = inner.heartbeat().await {
            tracing::debug!(error = %e, "rocketmq heartbeat failed");
        }
    }
}

async fn rebalance_loop(
    inner: Arc<Inner>,
    mut notices: Option<mpsc::UnboundedReceiver<ServerRequest>>,
) {
    let mut tick = interval(inner.options.rebalance_interval);
    loop {
        let notice = async {
            match notices.as_mut() {
                Some(rx) => rx.recv().await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            _ = tick.tick() => {}
            _ = inner.rebalance_now.notified() => {}
            notice = notice => match notice {
                Some(ServerRequest::ConsumerIdsChanged { group }) if group == inner.group || group.is_empty() => {}
                Some(_) => continue,
                None => notices = None,
            },
        }
        if let Err(e) = inner.rebalance().await {
            tracing::debug!(error = %e, "rocketmq rebalance failed; retried next interval");
        }
    }
}
