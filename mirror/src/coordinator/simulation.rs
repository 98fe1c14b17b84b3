//! A seeded simulation of one mirror partition: the state machine against a fake source
//! (appends, leader moves with new epochs, retention, topic recreation, outages), a fake
//! coordinator (writes that fail, transitions checked as the real one checks them), a fake
//! fetcher, destination restarts, and an operator who pauses, resumes, fails over and
//! restarts. After every step it checks what must always hold; at the end, with the faults
//! gone, that the mirror catches up and fails over cleanly.
//!
//! Every failure names its seed. `TERN_SIM_SEED=n` replays one seed, `TERN_SIM_SEEDS=n` runs
//! that many (default 300).

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use super::*;

/// One record: which topic generation wrote it (0 = written on the destination after a
/// failover), its sequence number there, and its batch leader epoch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Rec {
    generation: u32,
    seq: i64,
    epoch: i32,
}

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        // splitmix64
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn chance(&mut self, p: f64) -> bool {
        (self.next() % 1_000_000) as f64 / 1_000_000.0 < p
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

/// The source partition.
struct Source {
    generation: u32,
    start: i64,
    leader: i32,
    epoch: i32,
    reachable: bool,
}

/// The destination's local log of the partition.
struct Local {
    start: i64,
    records: VecDeque<Rec>,
    /// The partition's own leader epoch.
    epoch: i32,
}

impl Local {
    fn end(&self) -> i64 {
        self.start + self.records.len() as i64
    }

    fn truncate_to(&mut self, to: i64) {
        if to <= self.start {
            self.start = to;
            self.records.clear();
        } else {
            self.records.truncate((to - self.start) as usize);
        }
    }
}

struct World {
    rng: Rng,
    t0: Instant,
    now: Instant,
    source: Source,
    /// Every record each source topic generation ever held, by offset (index 0 unused).
    histories: Vec<Vec<Rec>>,
    /// The generation the mirror topic was created from.
    mirrored_generation: u32,
    local: Local,
    /// What the coordinator holds.
    coordinator: StoredState,
    /// The source leader a fetcher has the partition for.
    fetching_from: Option<i32>,
    /// The source metadata cached by the mirror: (leader, when looked up).
    metadata: Option<(i32, Instant)>,
    desired: DesiredState,
    events: Vec<String>,
    policy: RetryPolicy,
}

impl World {
    fn new(seed: u64) -> Self {
        let t0 = Instant::now();
        World {
            rng: Rng(seed),
            t0,
            now: t0,
            histories: vec![Vec::new(), Vec::new()],
            source: Source {
                generation: 1,
                start: 0,
                leader: 1,
                epoch: 0,
                reachable: true,
            },
            mirrored_generation: 1,
            local: Local {
                start: 0,
                records: VecDeque::new(),
                epoch: 0,
            },
            coordinator: StoredState::default(),
            fetching_from: None,
            metadata: None,
            desired: DesiredState::Mirroring,
            events: Vec::new(),
            policy: RetryPolicy {
                max_attempts: 1000,
                initial_backoff: Duration::from_millis(100),
                max_backoff: Duration::from_millis(2000),
            },
        }
    }

    fn log(&mut self, what: String) {
        let at = self.now.duration_since(self.t0).as_millis();
        self.events.push(format!("{at:>7} ms  {what}"));
        if self.events.len() > 80 {
            self.events.remove(0);
        }
    }

    fn history(&self) -> &Vec<Rec> {
        &self.histories[self.source.generation as usize]
    }

    fn observed(&self) -> Observed {
        Observed {
            log: Some(LocalLog {
                start: self.local.start,
                end: self.local.end(),
            }),
            fetching: self.fetching_from.is_some(),
            source: true,
        }
    }

    /// The fake coordinator's side of a write: the transitions the real one allows.
    fn persist(
        &mut self,
        record: &PartitionStateRecord,
        lmo: Option<i64>,
        faults: bool,
    ) -> Outcome {
        if faults && self.rng.chance(0.03) {
            return Outcome::Failed("the coordinator is unavailable".into());
        }
        let cur = self.coordinator.state();
        assert!(
            cur.can_become(record.state),
            "the machine asked for {} -> {}, which the coordinator refuses",
            cur.name(),
            record.state.name()
        );
        if matches!(
            record.state,
            MirrorPartitionState::Paused
                | MirrorPartitionState::Stopping
                | MirrorPartitionState::Stopped
        ) {
            assert!(
                self.fetching_from.is_none(),
                "{} persisted while a fetcher still has the partition",
                record.state.name()
            );
        }
        self.coordinator.record = Some(record.clone());
        if lmo.is_some() {
            self.coordinator.last_mirrored_offset = lmo;
        }
        Outcome::Done
    }

    fn execute(&mut self, action: &Action, faults: bool) -> Outcome {
        match action {
            Action::Persist {
                record,
                last_mirrored_offset,
            } => self.persist(record, *last_mirrored_offset, faults),
            Action::StopFetching => {
                self.fetching_from = None;
                Outcome::Done
            }
            Action::AskRemoteOffset => {
                if !self.source.reachable {
                    return Outcome::Failed("the source is unreachable".into());
                }
                // An Apache Kafka source knows nothing of mirroring.
                Outcome::RemoteOffset(RemoteOffset::Unknown)
            }
            Action::Truncate { to } => {
                self.local.truncate_to(*to);
                Outcome::Done
            }
            Action::AwaitFollowers { .. } => {
                // Followers catch up with the truncation after a fetch or two.
                if self.rng.chance(0.6) {
                    Outcome::Done
                } else {
                    Outcome::Skipped
                }
            }
            Action::Assign { refresh_metadata } => {
                if !self.source.reachable {
                    self.metadata = None;
                    return Outcome::Failed("source metadata: unreachable".into());
                }
                if self.source.generation != self.mirrored_generation {
                    // The driver stops a mirror topic whose source topic was recreated.
                    self.desired = DesiredState::Stopped;
                    return Outcome::Skipped;
                }
                let fresh = self
                    .metadata
                    .is_some_and(|(_, at)| self.now.duration_since(at) < Duration::from_secs(5));
                if *refresh_metadata || !fresh {
                    self.metadata = Some((self.source.leader, self.now));
                }
                self.fetching_from = self.metadata.map(|(leader, _)| leader);
                Outcome::Done
            }
            Action::PrepareStop => {
                let max = self.local.records.iter().map(|r| r.epoch).max();
                if let Some(max) = max {
                    self.local.epoch = self.local.epoch.max(max + 1);
                }
                Outcome::Stopped {
                    last_mirrored_offset: self.local.end(),
                }
            }
        }
    }

    /// One fetch by the fake fetcher, if it has the partition; returns the event for the
    /// machine.
    fn fetch(&mut self, machine: &mut PartitionMachine) {
        let Some(leader) = self.fetching_from else {
            return;
        };
        if !self.source.reachable {
            self.fetching_from = None;
            machine.on_fetch_failed(self.now, "fetching: unreachable".into());
            return;
        }
        if leader != self.source.leader || self.source.generation != self.mirrored_generation {
            self.fetching_from = None;
            machine.on_needs_leader(self.now, "the source leader moved".into());
            return;
        }
        let end = self.history().len() as i64;
        let offset = self.local.end();
        if offset < self.source.start || offset > end {
            // Out of range: the real fetcher restarts the local log at the source's start.
            self.local.truncate_to(self.source.start);
        }
        let from = self.local.end();
        let n = (self.rng.below(64) as i64).min(end - from);
        for o in from..from + n {
            let rec = self.history()[o as usize];
            self.local.epoch = self.local.epoch.max(rec.epoch);
            self.local.records.push_back(rec);
        }
        machine.on_fetch_succeeded();
    }

    /// What must always hold.
    fn check(&self) {
        let state = self.coordinator.state();
        let stopped_at = self.coordinator.last_mirrored_offset;
        for (i, rec) in self.local.records.iter().enumerate() {
            let offset = self.local.start + i as i64;
            assert!(
                rec.epoch <= self.local.epoch,
                "offset {offset} holds epoch {} above the partition's {}",
                rec.epoch,
                self.local.epoch
            );
            if rec.generation == 0 {
                // Written here after a failover: never below the last mirrored offset (the
                // other side of a failback trusts it), gone before mirroring resumes.
                assert!(
                    stopped_at.is_some_and(|s| offset >= s),
                    "a record written after the failover is at {offset}, below the last mirrored offset {stopped_at:?}"
                );
                assert_ne!(
                    state,
                    MirrorPartitionState::Mirroring,
                    "a record written after the failover is still at {offset} while mirroring"
                );
                continue;
            }
            assert_eq!(
                rec.generation, self.mirrored_generation,
                "offset {offset} holds a record of a recreated source topic"
            );
            let want = self.source_record(rec.generation, offset);
            assert_eq!(Some(*rec), want, "offset {offset} differs from the source");
        }
        if self.fetching_from.is_some() {
            assert_eq!(
                state,
                MirrorPartitionState::Mirroring,
                "a fetcher has a partition in {}",
                state.name()
            );
        }
        let attempts = self.coordinator.record.as_ref().map(|r| r.retry_attempt);
        assert!(
            attempts.unwrap_or(0) <= self.policy.max_attempts,
            "retry attempts {attempts:?} past the maximum"
        );
    }

    fn source_record(&self, generation: u32, offset: i64) -> Option<Rec> {
        self.histories
            .get(generation as usize)
            .and_then(|h| h.get(offset as usize))
            .copied()
    }

    /// What happens in the world during one tick of 100 ms, faults included if `faults`.
    fn tick(&mut self, machine: &mut Option<PartitionMachine>, faults: bool) {
        self.now += Duration::from_millis(100);
        // The source takes writes.
        let n = self.rng.below(4);
        let generation = self.source.generation;
        for _ in 0..n {
            let seq = self.histories[generation as usize].len() as i64;
            let epoch = self.source.epoch;
            self.histories[generation as usize].push(Rec {
                generation,
                seq,
                epoch,
            });
        }
        if faults {
            if self.rng.chance(0.03) {
                self.source.leader = 1 + (self.source.leader % 3);
                self.source.epoch += 1 + self.rng.below(3) as i32;
                let (l, e) = (self.source.leader, self.source.epoch);
                self.log(format!("source leader moves to {l}, epoch {e}"));
            }
            if self.rng.chance(0.02) {
                let end = self.history().len() as i64;
                let start = (self.source.start + self.rng.below(40) as i64).min(end);
                self.source.start = start;
                self.log(format!("source retention: log start {start}"));
            }
            if self.source.reachable && self.rng.chance(0.01) {
                self.source.reachable = false;
                self.log("source unreachable".into());
            } else if !self.source.reachable && self.rng.chance(0.05) {
                self.source.reachable = true;
                self.log("source reachable".into());
            }
            if self.rng.chance(0.0005) {
                self.source.generation += 1;
                self.histories.push(Vec::new());
                self.source.start = 0;
                self.log("source topic deleted and recreated".into());
            }
            if self.rng.chance(0.01) {
                // The broker dies (or leadership moves): the machine and the fetcher go, the
                // log and the coordinator's state stay.
                *machine = None;
                self.fetching_from = None;
                self.metadata = None;
                self.log("destination restart".into());
            }
            self.operator();
        }
        // A failed-over topic takes writes of its own.
        if self.coordinator.state() == MirrorPartitionState::Stopped
            && self.desired == DesiredState::Stopped
            && self.rng.chance(0.2)
        {
            let seq = self.local.end();
            let epoch = self.local.epoch;
            self.local.records.push_back(Rec {
                generation: 0,
                seq,
                epoch,
            });
        }
    }

    /// The operator pauses, resumes, fails over and starts mirroring again.
    fn operator(&mut self) {
        let recreated = self.source.generation != self.mirrored_generation;
        let next = match self.desired {
            DesiredState::Mirroring if self.rng.chance(0.01) => DesiredState::Paused,
            DesiredState::Mirroring if self.rng.chance(0.003) => DesiredState::Stopped,
            DesiredState::Paused if self.rng.chance(0.05) => DesiredState::Mirroring,
            DesiredState::Paused if self.rng.chance(0.005) => DesiredState::Stopped,
            DesiredState::Stopped
                if !recreated
                    && self.coordinator.state() == MirrorPartitionState::Stopped
                    && self.rng.chance(0.02) =>
            {
                DesiredState::Mirroring
            }
            d => d,
        };
        if next != self.desired {
            self.log(format!("operator: {:?} -> {next:?}", self.desired));
            self.desired = next;
        }
    }

    /// One pass of the driver: events of the fetcher, then the machine's actions.
    fn drive(&mut self, machine: &mut Option<PartitionMachine>, faults: bool, seed: u64) {
        let m = machine.get_or_insert_with(|| {
            PartitionMachine::new(self.coordinator.clone(), self.policy, seed)
        });
        self.fetch(m);
        for _ in 0..8 {
            let Some(action) = m.poll(self.now, self.desired, self.observed()) else {
                break;
            };
            let outcome = self.execute(&action, faults);
            self.events
                .push(format!("        {action:?} -> {outcome:?}"));
            m.on_outcome(self.now, outcome);
            if m.is_stale() {
                *machine = None;
                break;
            }
        }
    }
}

fn run(seed: u64) {
    let mut world = World::new(seed);
    let mut machine = None;
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        for _ in 0..3000 {
            world.tick(&mut machine, true);
            world.drive(&mut machine, true, seed);
            world.check();
        }
        // The faults stop: the mirror catches up, or stays stopped if its source topic went.
        world.source.reachable = true;
        let recreated = world.source.generation != world.mirrored_generation;
        world.desired = if recreated {
            DesiredState::Stopped
        } else {
            DesiredState::Mirroring
        };
        world.log(format!("quiet: {:?}", world.desired));
        for _ in 0..300 {
            world.tick(&mut machine, false);
            world.drive(&mut machine, false, seed);
        }
        // Writes stop; a few passes to drain.
        for _ in 0..100 {
            world.now += Duration::from_millis(100);
            world.drive(&mut machine, false, seed);
        }
        world.check();
        let state = world.coordinator.state();
        if !recreated {
            assert_eq!(
                state,
                MirrorPartitionState::Mirroring,
                "mirroring again after the faults"
            );
            assert_eq!(
                world.local.end(),
                world.history().len() as i64,
                "caught up with the source"
            );
            let attempts = world.coordinator.record.as_ref().map(|r| r.retry_attempt);
            assert_eq!(attempts, Some(0), "retries start over once fetches succeed");
            world.desired = DesiredState::Stopped;
            for _ in 0..20 {
                world.now += Duration::from_millis(100);
                world.drive(&mut machine, false, seed);
            }
        }
        assert_eq!(
            world.coordinator.state(),
            MirrorPartitionState::Stopped,
            "failed over"
        );
        let lmo = world.coordinator.last_mirrored_offset;
        let end = world.local.end();
        let local_writes = world
            .local
            .records
            .iter()
            .filter(|r| r.generation == 0)
            .count() as i64;
        if !recreated {
            assert_eq!(
                lmo,
                Some(end - local_writes),
                "the last mirrored offset is where mirroring ended"
            );
        }
        assert!(
            world.fetching_from.is_none(),
            "no fetcher after the failover"
        );
        let max = world
            .local
            .records
            .iter()
            .filter(|r| r.generation != 0)
            .map(|r| r.epoch)
            .max();
        assert!(
            max.is_none_or(|m| world.local.epoch > m),
            "the failed-over partition's epoch {} is above every mirrored batch's {max:?}",
            world.local.epoch
        );
    }));
    if let Err(panic) = result {
        let why = panic
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
            .unwrap_or_default();
        panic!(
            "simulation seed {seed} failed (replay with TERN_SIM_SEED={seed}): {why}\nstate {:?}, desired {:?}, local {}..{} epoch {}, source start {} end {} leader {} epoch {} reachable {}\nlast events:\n{}",
            world.coordinator,
            world.desired,
            world.local.start,
            world.local.end(),
            world.local.epoch,
            world.source.start,
            world.history().len(),
            world.source.leader,
            world.source.epoch,
            world.source.reachable,
            world.events.join("\n")
        );
    }
}

#[test]
fn seeded_simulation_of_a_mirror_partition() {
    if let Some(seed) = std::env::var("TERN_SIM_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
    {
        run(seed);
        return;
    }
    let seeds: u64 = std::env::var("TERN_SIM_SEEDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(300);
    let base = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    for i in 0..seeds {
        run(base.wrapping_mul(1000).wrapping_add(i));
    }
}
