//! Handlers with a concurrency level on top of a [`Consumer`], answering automatically:
//! `Ok` → FIN, `Err` → REQ with the automatic delay (and a backoff signal), unless the handler
//! took the message over with [`Message::disable_auto_response`].

use std::future::Future;
use std::sync::Arc;

use tokio::task::JoinHandle;

use crate::consumer::Consumer;
use crate::message::Message;

/// Runs `handler` on `concurrency` tasks until the consumer stops; every task ends after the
/// consumer's last message. The handler's error is only logged: the REQ is the response.
pub fn spawn_handlers<F, Fut, E>(
    consumer: &Arc<Consumer>,
    concurrency: usize,
    handler: F,
) -> Vec<JoinHandle<()>>
where
    F: Fn(Arc<Message>) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<(), E>> + Send + 'static,
    E: std::fmt::Display + Send + 'static,
{
    let handler = Arc::new(handler);
    (0..concurrency.max(1))
        .map(|_| {
            let consumer = consumer.clone();
            let handler = handler.clone();
            tokio::spawn(async move {
                while let Some(message) = consumer.recv().await {
                    let message = Arc::new(message);
                    let outcome = handler(message.clone()).await;
                    if !message.auto_response() {
                        continue;
                    }
                    let answered = match outcome {
                        Ok(()) => message.finish().await,
                        Err(e) => {
                            tracing::debug!("handler failed, requeueing: {e}");
                            message.requeue(None).await
                        }
                    };
                    if let Err(e) = answered {
                        tracing::debug!("response not sent: {e}");
                    }
                }
            })
        })
        .collect()
}
