//! Brokers' lifecycle on the active controller: registration (a second live process with a
//! node id is refused), heartbeats, fencing after `broker.session.timeout.ms` or at a
//! controlled shutdown (partition leaderships handed to other live in-sync replicas), the
//! cluster id, and DescribeQuorum's view.

use std::collections::HashMap;
use std::time::Instant;

use tern_protocol::error::{ApiError, ResponseError};
use uuid::Uuid;

use super::partitions::{elect_leaders_for_returning, fence_records};
use super::{unexpected, Controller};
use crate::commands::{BrokerRegistration, Command, QuorumDescription, ReplicaDescription, Reply};
use crate::image::{BrokerInfo, MetadataImage};
use crate::quorum::QuorumHandle;
use crate::records::MetadataRecord;
use crate::start::node_id;

/// The registration of broker `broker_id` if `incarnation_id` is its current process, else
/// why not.
pub(super) fn current_registration(
    image: &MetadataImage,
    broker_id: i32,
    incarnation_id: Uuid,
) -> Result<&BrokerInfo, String> {
    let Some(b) = image.brokers.get(&broker_id) else {
        return Err(format!("Broker {broker_id} is not registered"));
    };
    if b.incarnation_id != Some(incarnation_id) {
        return Err(format!(
            "Broker {broker_id} registered again with another incarnation"
        ));
    }
    Ok(b)
}

/// Heartbeats the active controller has seen (kept in memory, as Kafka's
/// BrokerHeartbeatManager does: a new active controller starts everyone's clock anew).
#[derive(Debug, Default)]
pub(super) struct Liveness {
    /// When this node became the active controller.
    pub(super) active_since: Option<Instant>,
    /// Last heartbeat or registration per broker, with its incarnation.
    pub(super) last_seen: HashMap<i32, (Uuid, Instant)>,
}

impl Controller {
    /// The quorum as the active controller sees it.
    pub fn describe_quorum(&self) -> Result<QuorumDescription, ApiError> {
        match self.submit(Command::DescribeQuorum)? {
            Reply::Quorum(q) => Ok(q),
            other => Err(unexpected(other)),
        }
    }

    pub(super) fn do_describe_quorum(&self) -> QuorumDescription {
        let Some(status) = self.quorum.as_ref().map(QuorumHandle::status) else {
            // Only the active controller executes commands, and it votes.
            return QuorumDescription {
                leader_id: -1,
                leader_epoch: -1,
                high_watermark: -1,
                voters: Vec::new(),
                observers: Vec::new(),
            };
        };
        let now = Instant::now();
        let now_ms = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as i64);
        let at = |t: Option<Instant>| {
            t.map_or(-1, |t| {
                now_ms - now.saturating_duration_since(t).as_millis() as i64
            })
        };
        let voters = status
            .progress
            .iter()
            .map(|p| {
                let contact = at(p.last_contact);
                ReplicaDescription {
                    node_id: node_id(p.id),
                    log_end_offset: p.matched as i64,
                    last_fetch_timestamp: contact,
                    last_caught_up_timestamp: if p.matched >= status.commit_index {
                        contact
                    } else {
                        -1
                    },
                }
            })
            .collect();
        let voter_ids: Vec<i32> = status.voters.iter().copied().map(node_id).collect();
        let fetched = self.state.observers();
        let observers = self
            .image()
            .brokers
            .keys()
            .filter(|id| !voter_ids.contains(id))
            .map(|id| {
                let (index, ts) = fetched
                    .get(id)
                    .copied()
                    .map_or((-1, -1), |(i, t)| (i as i64, t));
                ReplicaDescription {
                    node_id: *id,
                    log_end_offset: index,
                    last_fetch_timestamp: ts,
                    last_caught_up_timestamp: if index >= status.commit_index as i64 {
                        ts
                    } else {
                        -1
                    },
                }
            })
            .collect();
        QuorumDescription {
            leader_id: node_id(status.id),
            leader_epoch: status.term as i32,
            high_watermark: status.commit_index as i64,
            voters,
            observers,
        }
    }

    pub(super) fn do_register_broker(&self, r: &BrokerRegistration) -> Result<(), ApiError> {
        let image = self.image();
        let now = Instant::now();
        if let Some(b) = image.brokers.get(&r.broker_id) {
            // Only a process that has heartbeated to this active controller within its session
            // counts, as in Kafka: after a controller change (or a restart of a single node)
            // the new registration wins.
            let heard = self
                .liveness
                .lock()
                .last_seen
                .get(&r.broker_id)
                .is_some_and(|(inc, t)| {
                    *inc != r.incarnation_id
                        && now.saturating_duration_since(*t) < self.session_timeout
                });
            let live_elsewhere =
                !b.fenced && b.incarnation_id.is_some_and(|i| i != r.incarnation_id) && heard;
            if live_elsewhere {
                return Err(ApiError::new(
                    ResponseError::DuplicateBrokerRegistration,
                    format!(
                        "Another broker is registered with node id {} and still heartbeats",
                        r.broker_id
                    ),
                ));
            }
        }
        let first = r.endpoints.first();
        let unchanged = image.brokers.get(&r.broker_id).is_some_and(|b| {
            !b.fenced
                && b.endpoints == r.endpoints
                && b.rack == r.rack
                && b.incarnation_id == Some(r.incarnation_id)
        });
        self.liveness
            .lock()
            .last_seen
            .insert(r.broker_id, (r.incarnation_id, now));
        if unchanged {
            return Ok(());
        }
        // A new process of a broker the cluster still counts as live (it died and came back
        // within its session) is fenced first: it leaves every ISR and leads nothing, since
        // its log may miss what it had acknowledged as a follower.
        let mut records = Vec::new();
        let mut registered_on = (*image).clone();
        if let Some(b) = image.brokers.get(&r.broker_id) {
            if !b.fenced && b.incarnation_id != Some(r.incarnation_id) {
                records.extend(fence_records(
                    &image,
                    r.broker_id,
                    self.unclean_default(&image),
                ));
                for record in &records {
                    registered_on.apply(record);
                }
            }
        }
        let register = MetadataRecord::RegisterBroker {
            broker_id: r.broker_id,
            host: first.map(|e| e.host.clone()).unwrap_or_default(),
            port: first.map(|e| e.port).unwrap_or(0),
            rack: r.rack.clone(),
            endpoints: r.endpoints.clone(),
            incarnation_id: Some(r.incarnation_id),
        };
        // Registered, a restarted broker's replicas are no longer offline: it may lead again.
        registered_on.apply(&register);
        records.push(register);
        records.extend(elect_leaders_for_returning(&registered_on, r.broker_id));
        self.commit(records)
    }

    fn seen_within_session(&self, broker_id: i32, now: Instant) -> bool {
        let l = self.liveness.lock();
        let last = l
            .last_seen
            .get(&broker_id)
            .map(|(_, t)| *t)
            .or(l.active_since);
        last.is_some_and(|t| now.saturating_duration_since(t) < self.session_timeout)
    }

    pub(super) fn do_heartbeat(
        &self,
        broker_id: i32,
        incarnation_id: Uuid,
    ) -> Result<(), ApiError> {
        let image = self.image();
        let b = current_registration(&image, broker_id, incarnation_id)
            .map_err(|why| ApiError::new(ResponseError::StaleBrokerEpoch, why))?;
        self.liveness
            .lock()
            .last_seen
            .insert(broker_id, (incarnation_id, Instant::now()));
        if b.fenced {
            let mut records = vec![MetadataRecord::UnfenceBroker { broker_id }];
            records.extend(elect_leaders_for_returning(&image, broker_id));
            self.commit(records)?;
        }
        Ok(())
    }

    pub(super) fn do_controlled_shutdown(
        &self,
        broker_id: i32,
        incarnation_id: Uuid,
    ) -> Result<(), ApiError> {
        let image = self.image();
        // A process the controller does not know (any more) has nothing to hand over.
        match current_registration(&image, broker_id, incarnation_id) {
            Ok(b) if !b.fenced => {}
            _ => return Ok(()),
        }
        self.liveness.lock().last_seen.remove(&broker_id);
        self.commit(fence_records(
            &image,
            broker_id,
            self.unclean_default(&image),
        ))
    }

    /// Active-controller housekeeping, run every few hundred milliseconds: writes the cluster
    /// id once, and fences brokers whose heartbeats stopped.
    pub fn maintain(&self) {
        if !self.is_active() {
            self.liveness.lock().active_since = None;
            return;
        }
        let _one_at_a_time = self.command_lock.lock();
        if !self.is_active() {
            return;
        }
        let now = Instant::now();
        self.liveness.lock().active_since.get_or_insert(now);
        let image = self.image();
        if image.cluster_id.is_none() {
            let cluster_id = self
                .configured_cluster_id
                .clone()
                .unwrap_or_else(crate::new_cluster_id);
            match self.commit(vec![MetadataRecord::ClusterId {
                cluster_id: cluster_id.clone(),
            }]) {
                Ok(()) => tracing::info!(%cluster_id, "wrote the cluster id"),
                Err(e) => tracing::warn!(error = %e, "cannot write the cluster id"),
            }
        }
        let image = self.image();
        // This node's own broker is alive: this code runs in its process.
        let own = self.quorum.as_ref().map(|q| node_id(q.status().id));
        for b in image
            .brokers
            .values()
            .filter(|b| !b.fenced && Some(b.id) != own)
        {
            if !self.seen_within_session(b.id, now) {
                tracing::warn!(
                    broker = b.id,
                    timeout_ms = self.session_timeout.as_millis() as u64,
                    "broker missed its heartbeats; fencing it"
                );
                if let Err(e) = self.commit(fence_records(
                    &self.image(),
                    b.id,
                    self.unclean_default(&image),
                )) {
                    tracing::warn!(broker = b.id, error = %e, "cannot fence broker");
                }
            }
        }
        self.maintain_partitions(now);
    }
}
