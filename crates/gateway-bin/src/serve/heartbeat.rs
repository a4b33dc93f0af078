//! The heartbeat: a fixed tick (60 s by default) that runs the maintenance
//! jobs. Each job runs on its own blocking thread, so one that fails,
//! panics or hangs never stops the others; a job still running when it is
//! due again is skipped for that tick. Every run is recorded for
//! `GET /api/health`.
//!
//! The auto-skill lifecycle ([`auto_skills_job`]) runs here too: pending
//! candidates expire, unused generated skills turn stale and are archived.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use serde::Serialize;
use tokio::sync::watch;

/// The auto-skill lifecycle runs on ticks divisible by this (hourly at the
/// default 60 s tick) and at start.
pub(crate) const AUTO_SKILL_LIFECYCLE_TICKS: u64 = 60;

/// The auto-skill lifecycle job: expires pending candidates, marks unused
/// generated skills stale and archives them, with the catalog's usage
/// ledger as the record of use. Pinned skills are exempt; this build has
/// no scheduled jobs, so no skill is exempt for being referenced by one.
pub(crate) fn auto_skills_job(state: &Arc<super::AppState>) -> Job {
    let state = Arc::clone(state);
    Job {
        name: "auto_skill_lifecycle",
        every_ticks: AUTO_SKILL_LIFECYCLE_TICKS,
        at_start: true,
        run: Arc::new(move || {
            // Read at run time, so a settings change applies to the next run.
            let auto = state.sessions.auto_skills();
            let catalog = Arc::clone(&state.live().skills);
            let report = auto.run_lifecycle(&catalog.ledger().snapshot(), &std::collections::BTreeSet::new())?;
            if !report.archived.is_empty() || !report.archived_over_cap.is_empty() {
                catalog.invalidate();
            }
            Ok(format!(
                "{} pending expired, {} stale, {} reactivated, {} archived",
                report.expired.len(),
                report.staled.len(),
                report.reactivated.len(),
                report.archived.len() + report.archived_over_cap.len()
            ))
        }),
    }
}

/// What one job run reports: a short line for health, or why it failed.
pub(crate) type JobResult = anyhow::Result<String>;

/// A maintenance job.
pub(crate) struct Job {
    pub(crate) name: &'static str,
    /// Runs on ticks divisible by this (1: every tick).
    pub(crate) every_ticks: u64,
    /// Also runs on the first tick, right at start.
    pub(crate) at_start: bool,
    pub(crate) run: Arc<dyn Fn() -> JobResult + Send + Sync>,
}

/// The recorded state of one job.
#[derive(Debug, Clone, Default, Serialize)]
pub(crate) struct JobRecord {
    pub(crate) every_ticks: u64,
    pub(crate) runs: u64,
    pub(crate) failures: u64,
    pub(crate) skipped_busy: u64,
    pub(crate) running: bool,
    pub(crate) last_started_ms: Option<u64>,
    pub(crate) last_finished_ms: Option<u64>,
    pub(crate) last_ok: Option<bool>,
    pub(crate) last_detail: Option<String>,
    pub(crate) last_error: Option<String>,
}

/// Shared view of the heartbeat for health.
#[derive(Debug, Default, Clone)]
pub(crate) struct HeartbeatStatus {
    inner: Arc<Mutex<StatusInner>>,
}

#[derive(Debug, Default, Serialize)]
struct StatusInner {
    ticks: u64,
    period_secs: u64,
    jobs: BTreeMap<&'static str, JobRecord>,
    /// Jobs that are not scheduled, and why.
    disabled: BTreeMap<&'static str, String>,
}

impl HeartbeatStatus {
    pub(crate) fn snapshot(&self) -> serde_json::Value {
        serde_json::to_value(&*self.inner.lock()).expect("heartbeat status serialises")
    }

    /// Records a job that is not scheduled, with the reason health shows.
    pub(crate) fn disable(&self, name: &'static str, reason: impl Into<String>) {
        self.inner.lock().disabled.insert(name, reason.into());
    }

    fn update(&self, name: &'static str, change: impl FnOnce(&mut JobRecord)) {
        change(self.inner.lock().jobs.entry(name).or_default());
    }
}

fn now_ms() -> u64 {
    u64::try_from(crate::clock::now_ms()).unwrap_or(0)
}

/// Runs `jobs` every `period` until `stop` turns true.
pub(crate) async fn run(jobs: Vec<Job>, period: Duration, status: HeartbeatStatus, mut stop: watch::Receiver<bool>) {
    {
        let mut inner = status.inner.lock();
        inner.period_secs = period.as_secs();
        for job in &jobs {
            inner.jobs.insert(job.name, JobRecord { every_ticks: job.every_ticks, ..JobRecord::default() });
        }
    }
    let mut interval = tokio::time::interval(period);
    interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut tick: u64 = 0;
    loop {
        tokio::select! {
            _ = interval.tick() => {}
            _ = stop.changed() => return,
        }
        if *stop.borrow() {
            return;
        }
        status.inner.lock().ticks = tick;
        for job in &jobs {
            let due = if tick == 0 { job.at_start } else { tick.is_multiple_of(job.every_ticks.max(1)) };
            if due {
                launch(job, &status);
            }
        }
        tick += 1;
    }
}

fn launch(job: &Job, status: &HeartbeatStatus) {
    let name = job.name;
    let mut busy = false;
    status.update(name, |record| {
        if record.running {
            record.skipped_busy += 1;
            busy = true;
        } else {
            record.running = true;
            record.last_started_ms = Some(now_ms());
        }
    });
    if busy {
        tracing::debug!(job = name, "heartbeat job still running; skipped this tick");
        return;
    }
    let run = Arc::clone(&job.run);
    let status = status.clone();
    tokio::spawn(async move {
        let outcome = tokio::task::spawn_blocking(move || run()).await;
        let (ok, detail, error) = match outcome {
            Ok(Ok(detail)) => (true, Some(detail), None),
            Ok(Err(error)) => (false, None, Some(cairn_guard::redact_all(&format!("{error:#}")).into_owned())),
            Err(join_error) => (false, None, Some(format!("the job panicked: {join_error}"))),
        };
        if let Some(error) = &error {
            tracing::warn!(job = name, %error, "heartbeat job failed");
        }
        status.update(name, |record| {
            record.running = false;
            record.runs += 1;
            record.failures += u64::from(!ok);
            record.last_finished_ms = Some(now_ms());
            record.last_ok = Some(ok);
            record.last_detail = detail;
            record.last_error = error;
        });
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU64, Ordering};

    fn job(
        name: &'static str,
        every_ticks: u64,
        at_start: bool,
        run: impl Fn() -> JobResult + Send + Sync + 'static,
    ) -> Job {
        Job { name, every_ticks, at_start, run: Arc::new(run) }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn failing_and_panicking_jobs_do_not_stop_the_others() {
        let counted = Arc::new(AtomicU64::new(0));
        let seen = Arc::clone(&counted);
        let jobs = vec![
            job("counter", 1, true, move || Ok(format!("run {}", seen.fetch_add(1, Ordering::SeqCst)))),
            job("failing", 1, true, || anyhow::bail!("disk on fire")),
            job("panicking", 1, true, || panic!("bug")),
            // Due on no tick a test can reach, however slow the machine.
            job("rare", u64::MAX, false, || Ok("never due".to_owned())),
        ];
        let status = HeartbeatStatus::default();
        let (stop_tx, stop) = watch::channel(false);
        let heartbeat = tokio::spawn(run(jobs, Duration::from_millis(5), status.clone(), stop));
        // Wait (without a deadline on speed) until every job has finished at least once.
        let finished =
            |snapshot: &serde_json::Value, name: &str| snapshot["jobs"][name]["runs"].as_u64().unwrap_or(0) >= 1;
        loop {
            let snapshot = status.snapshot();
            if counted.load(Ordering::SeqCst) >= 5 && finished(&snapshot, "failing") && finished(&snapshot, "panicking")
            {
                break;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        stop_tx.send(true).unwrap();
        heartbeat.await.unwrap();
        let snapshot = status.snapshot();
        let jobs = &snapshot["jobs"];
        assert!(jobs["counter"]["runs"].as_u64().unwrap() >= 5, "{snapshot}");
        assert_eq!(jobs["counter"]["last_ok"], true);
        assert!(jobs["failing"]["failures"].as_u64().unwrap() >= 1, "{snapshot}");
        assert_eq!(jobs["failing"]["last_error"], "disk on fire");
        assert!(jobs["panicking"]["last_error"].as_str().unwrap().contains("panicked"));
        assert_eq!(jobs["rare"]["runs"], 0);
    }
}
