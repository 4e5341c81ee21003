//! What one instance answered lately, for its status page: the last refusals and errors
//! (newest last, with the client that got them), and each registry's last answers, from which
//! the page reads that registry's health. Bounded rings, per instance like the counters.

use std::collections::{HashMap, VecDeque};
use std::net::SocketAddr;
use std::sync::Mutex;

/// Refusals and errors the page lists (the oldest is dropped first).
pub(crate) const RECENT_REFUSALS: usize = 32;
/// Answers remembered per registry for its health.
pub(crate) const RECENT_PER_REGISTRY: usize = 64;
/// Registries remembered (names come from the config; a bound all the same).
const MAX_REGISTRIES: usize = 256;

/// One answer, as the page shows it.
#[derive(Clone, Debug)]
pub(crate) struct Answer {
    /// Unix seconds.
    pub(crate) at: u64,
    /// The request kind (`forward`, `connect`, `registry`, ...).
    pub(crate) kind: &'static str,
    /// The registry it was for, if any.
    pub(crate) registry: Option<String>,
    /// The stable code (`loopback_address`, `digest_mismatch`, ...), or `-`.
    pub(crate) code: &'static str,
    /// The HTTP status answered.
    pub(crate) status: u16,
    /// The redacted locator.
    pub(crate) locator: String,
    /// The client it went to.
    pub(crate) client: SocketAddr,
}

/// The recent answers of one instance.
#[derive(Debug, Default)]
pub(crate) struct Recent {
    refusals: Mutex<VecDeque<Answer>>,
    registries: Mutex<HashMap<String, VecDeque<Answer>>>,
}

impl Recent {
    /// True if [`Recent::note`] may keep an answer with these facts: one not `routine`, for a
    /// registry or of status 400 and above. Others need not be built.
    pub(crate) fn keeps(&self, for_registry: bool, status: u16, routine: bool) -> bool {
        !routine && (for_registry || status >= 400)
    }

    /// Remembers one answer: every registry answer for its registry's health, and every
    /// answer of status 400 and above among the refusals unless `routine` (a client's probe
    /// that is expected to miss, such as Go's path-prefix lookups).
    pub(crate) fn note(&self, answer: Answer, routine: bool) {
        if let Some(name) = &answer.registry
            && let Ok(mut all) = self.registries.lock()
            && (all.contains_key(name) || all.len() < MAX_REGISTRIES)
            && !routine
        {
            let ring = all.entry(name.clone()).or_default();
            if ring.len() == RECENT_PER_REGISTRY {
                ring.pop_front();
            }
            ring.push_back(answer.clone());
        }
        if answer.status < 400 || routine {
            return;
        }
        let Ok(mut ring) = self.refusals.lock() else {
            return;
        };
        if ring.len() == RECENT_REFUSALS {
            ring.pop_front();
        }
        let mut answer = answer;
        answer.locator = answer.locator.chars().take(512).collect();
        ring.push_back(answer);
    }

    /// The last refusals and errors, oldest first.
    pub(crate) fn refusals(&self) -> Vec<Answer> {
        self.refusals
            .lock()
            .map(|r| r.iter().cloned().collect())
            .unwrap_or_default()
    }

    /// The last answers of registry `name`, oldest first.
    pub(crate) fn of_registry(&self, name: &str) -> Vec<Answer> {
        self.registries
            .lock()
            .ok()
            .and_then(|all| all.get(name).map(|r| r.iter().cloned().collect()))
            .unwrap_or_default()
    }
}

/// True for an answer that says the registry did not deliver: a refusal, a failure or a miss
/// (a client's own malformed request, `400`, is not the registry's health).
pub(crate) fn failed(status: u16) -> bool {
    matches!(status, 403 | 404 | 410 | 424) || status >= 500
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answer(registry: Option<&str>, status: u16) -> Answer {
        Answer {
            at: 1,
            kind: "registry",
            registry: registry.map(str::to_string),
            code: "x",
            status,
            locator: "/registry/r/x".into(),
            client: "127.0.0.1:1".parse().unwrap(),
        }
    }

    #[test]
    fn routine_probes_stay_out_and_rings_stay_bounded() {
        let r = Recent::default();
        r.note(answer(Some("go"), 404), true);
        assert!(r.refusals().is_empty());
        assert!(r.of_registry("go").is_empty());
        r.note(answer(Some("go"), 200), false);
        r.note(answer(None, 200), false);
        assert!(r.refusals().is_empty());
        assert_eq!(r.of_registry("go").len(), 1);
        for _ in 0..(RECENT_PER_REGISTRY + RECENT_REFUSALS + 3) {
            r.note(answer(Some("go"), 502), false);
        }
        assert_eq!(r.refusals().len(), RECENT_REFUSALS);
        assert_eq!(r.of_registry("go").len(), RECENT_PER_REGISTRY);
        assert!(r.of_registry("go").iter().all(|a| a.status == 502));
    }
}
