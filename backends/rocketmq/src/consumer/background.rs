//! The consumer's periodic work: persisting offsets, heartbeats, and rebalancing (on an
//! interval, on request, and when a broker says the group's membership changed).

use std::sync::Arc;

use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio::time::MissedTickBehavior;

use super::{Inner, Mode};
use crate::remoting::backoff::{log_failure, Streak};
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
    let mut failures = Streak::default();
    loop {
        tick.tick().await;
        match inner.offsets.persist(&inner.admin, &inner.group).await {
            Ok(()) => recovered(&mut failures, "rocketmq offset persist", &inner.group),
            Err(e) => {
                log_failure!(failures, "rocketmq offset persist (retried next interval)", group = %inner.group, error = %e)
            }
        }
    }
}

async fn heartbeat_loop(inner: Arc<Inner>) {
    let mut tick = interval(inner.options.heartbeat_interval);
    let mut failures = Streak::default();
    loop {
        tick.tick().await;
        match inner.heartbeat().await {
            Ok(()) => recovered(&mut failures, "rocketmq consumer heartbeat", &inner.group),
            Err(e) => {
                log_failure!(failures, "rocketmq consumer heartbeat", group = %inner.group, error = %e)
            }
        }
    }
}

async fn rebalance_loop(
    inner: Arc<Inner>,
    mut notices: Option<mpsc::UnboundedReceiver<ServerRequest>>,
) {
    let mut tick = interval(inner.options.rebalance_interval);
    let mut failures = Streak::default();
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
        match inner.rebalance().await {
            Ok(()) => recovered(&mut failures, "rocketmq rebalance", &inner.group),
            Err(e) => {
                log_failure!(failures, "rocketmq rebalance (retried next interval)", group = %inner.group, error = %e)
            }
        }
    }
}

/// Ends a failure streak, saying so at warn if its failures were.
pub(super) fn recovered(failures: &mut Streak, what: &str, group: &str) {
    let streak = failures.succeeded();
    if streak >= crate::remoting::backoff::QUIET_FAILURES {
        tracing::warn!(%group, failures = streak, "{what} works again");
    }
}
