//! Reaching the active controller: a command runs here if this node is it, and is otherwise
//! forwarded over the controller listener, retried while there is none.

use std::time::{Duration, Instant};

use tern_protocol::error::{ApiError, ResponseError};

use super::{not_controller, Controller, COMMAND_TIMEOUT, RETRY_BACKOFF};
use crate::commands::{Command, Reply};

/// Runs `f`, which may block on the network or the disk, without stalling a tokio worker:
/// on a multi-threaded runtime the worker hands its other tasks away first.
fn blocking<T>(f: impl FnOnce() -> T) -> T {
    match tokio::runtime::Handle::try_current() {
        Ok(h) if h.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread => {
            tokio::task::block_in_place(f)
        }
        _ => f(),
    }
}

impl Controller {
    /// Runs `command` here if this node is the active controller, else forwards it to the one
    /// that is, retrying while there is none, for up to [`COMMAND_TIMEOUT`].
    pub(super) fn submit(&self, command: Command) -> Result<Reply, ApiError> {
        self.submit_within(command, COMMAND_TIMEOUT)
    }

    /// As [`Controller::submit`], looking for an active controller for up to `timeout`.
    pub(super) fn submit_within(
        &self,
        command: Command,
        timeout: Duration,
    ) -> Result<Reply, ApiError> {
        blocking(|| self.submit_blocking(&command, timeout))
    }

    fn submit_blocking(&self, command: &Command, timeout: Duration) -> Result<Reply, ApiError> {
        let deadline = Instant::now() + timeout;
        let mut last = not_controller("no active controller");
        let mut next_voter = 0usize;
        loop {
            if self.is_active() {
                match self.execute(command) {
                    Err(e) if e.error == ResponseError::NotController => last = e,
                    other => return other,
                }
            } else if let Some(client) = &self.client {
                let voters = client.voter_ids();
                let leader = self.quorum.as_ref().and_then(|q| q.status().leader);
                let own = self.quorum.as_ref().map(|q| q.status().id);
                let target = match leader {
                    Some(l) if Some(l) != own => l,
                    _ => {
                        next_voter = (next_voter + 1) % voters.len().max(1);
                        voters[next_voter % voters.len().max(1)]
                    }
                };
                if Some(target) != own {
                    // The answer comes within the deadline or not at all (a connection to a
                    // controller cut off by a partition must not hold the caller longer).
                    let wait = deadline
                        .saturating_duration_since(Instant::now())
                        .max(Duration::from_millis(500));
                    match client.forward(target, self.cluster_id_hint(), command, wait) {
                        Ok(response) => {
                            let wait = deadline.saturating_duration_since(Instant::now());
                            if !self.state.wait_for_offset(response.image_offset, wait) {
                                return Err(ApiError::new(
                                    ResponseError::RequestTimedOut,
                                    "the change was made but this node has not applied it yet",
                                ));
                            }
                            match response.result {
                                Err(e) if e.code == ResponseError::NotController.code() => {
                                    last = e.into();
                                }
                                other => return other.map_err(ApiError::from),
                            }
                        }
                        Err(e) => {
                            tracing::debug!(voter = target, error = %e, command = command.name(), "forwarding to a controller failed");
                            last = not_controller(format!("controller unreachable: {e}"));
                        }
                    }
                }
            } else if self.quorum.is_none() {
                return Err(not_controller("no controller to forward to"));
            }
            if Instant::now() >= deadline {
                return Err(last);
            }
            std::thread::sleep(RETRY_BACKOFF);
        }
    }
}
