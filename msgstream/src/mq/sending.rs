//! [`Sending`]: the future [`Producer::send`](super::Producer::send) returns.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use super::MessageId;
use crate::{Error, Result};

/// A send in progress: resolves to the message's id once the backend has acknowledged it, or
/// to the error that kept it from being written.
///
/// Either ready when returned or a boxed future. A backend that knows the answer at once (the
/// embedded queue writes an uncontended message before `send` returns) hands it over ready, so
/// the commonest send of all allocates nothing for its future; one that must wait boxes the
/// rest of its work, as an `async fn` in a trait object would.
///
/// Like any future it is polled to completion by `.await`; polled again after that, it returns
/// `Error::Closed` rather than panicking.
#[must_use = "a send's outcome (its id or its error) is in this future"]
pub struct Sending<'a>(State<'a>);

enum State<'a> {
    Ready(Option<Result<MessageId>>),
    Pending(Pin<Box<dyn Future<Output = Result<MessageId>> + Send + 'a>>),
}

impl<'a> Sending<'a> {
    /// A send already decided: written (its id) or failed.
    pub fn ready(outcome: Result<MessageId>) -> Sending<'a> {
        Sending(State::Ready(Some(outcome)))
    }

    /// A send that completes when `future` does.
    pub fn new(future: impl Future<Output = Result<MessageId>> + Send + 'a) -> Sending<'a> {
        Sending(State::Pending(Box::pin(future)))
    }
}

impl Future for Sending<'_> {
    type Output = Result<MessageId>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<MessageId>> {
        match &mut self.get_mut().0 {
            State::Ready(outcome) => Poll::Ready(
                outcome
                    .take()
                    .unwrap_or(Err(Error::Closed("a send polled after it completed"))),
            ),
            State::Pending(future) => future.as_mut().poll(cx),
        }
    }
}

impl std::fmt::Debug for Sending<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let state = match &self.0 {
            State::Ready(Some(_)) => "ready",
            State::Ready(None) => "completed",
            State::Pending(_) => "pending",
        };
        f.debug_tuple("Sending").field(&state).finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn ready_and_pending_sends_resolve_to_their_outcome() {
        let id = MessageId::from_u64(7);
        assert_eq!(Sending::ready(Ok(id.clone())).await.ok(), Some(id.clone()));
        let later = Sending::new(async {
            tokio::task::yield_now().await;
            Ok(MessageId::from_u64(8))
        });
        assert_eq!(later.await.ok(), Some(MessageId::from_u64(8)));
        let failed = Sending::ready(Err(Error::ProduceDisabled));
        assert!(matches!(failed.await, Err(Error::ProduceDisabled)));
    }

    #[test]
    fn a_ready_send_polled_again_is_an_error_not_a_panic() {
        let mut sending = Sending::ready(Ok(MessageId::from_u64(1)));
        let waker = std::task::Waker::noop();
        let mut cx = Context::from_waker(waker);
        assert!(matches!(
            Pin::new(&mut sending).poll(&mut cx),
            Poll::Ready(Ok(_))
        ));
        assert!(matches!(
            Pin::new(&mut sending).poll(&mut cx),
            Poll::Ready(Err(Error::Closed(_)))
        ));
    }
}
