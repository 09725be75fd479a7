//! redis-rs 1.8's async cluster client, unchanged, on three deadbolt nodes running three Raft
//! groups (`cluster-enabled yes`, `cluster-groups 3`, each node leading one group), so locks of
//! different groups have different masters, as on a three-master Redis Cluster. One cluster,
//! three phases:
//! 1. a SET NX PX + compare-and-delete lock in every group's slots, served by its group's leader;
//! 2. `RAFT RESHARD <slot> <slot> <other group>` of a lock's slot (sent to its group's leader)
//!    while two connections contend for a lock there and another lock is held: the test polls
//!    every node's CLUSTER SLOTS until it names the other group's leader; the client follows
//!    -MOVED and retries -TRYAGAIN; never two holders, locking resumes, the held lock is still
//!    its owner's on the new master; the longest gap between two granted locks is printed;
//! 3. SIGKILL of group 2's leader (node 3) while a lock is held in its slots: the next lock in
//!    that slot is acknowledged within a bound, the other groups keep locking, the held lock stays.
//!
//! deadbolt only: Redis Cluster has no Raft groups or RAFT RESHARD (its failover reference is
//! in mod.rs).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use redis::{AsyncCommands, Script};

use super::{cluster_conn, try_lock};
use crate::support::{self, key_in_group, key_slot, ClusterTarget};
use crate::CAD;

const FAILOVER_BUDGET: Duration = Duration::from_secs(10);
/// Locking must resume within this after RAFT RESHARD (moving a few keys takes milliseconds).
const RESHARD_BUDGET: Duration = Duration::from_secs(10);

#[derive(Default)]
struct Contention {
    inside: Option<String>,
    overlaps: Vec<(String, String)>,
    grants: Vec<Instant>,
    errors: std::collections::BTreeMap<String, u64>,
}

fn uniq(prefix: &str) -> String {
    use std::sync::atomic::AtomicU64;
    static N: AtomicU64 = AtomicU64::new(0);
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    format!(
        "{prefix}:{}:{t:x}:{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    )
}

/// The group serving a slot now, from the live CLUSTER SLOTS.
fn group_of(cl: &ClusterTarget, leaders: &[usize], slot: u16) -> usize {
    let port = support::slot_master_port(cl.ports[cl.live()[0]], slot).expect("CLUSTER SLOTS");
    let node = cl
        .ports
        .iter()
        .position(|&p| p == port)
        .expect("a node's port");
    leaders
        .iter()
        .position(|&l| l == node)
        .expect("a group's leader")
}

async fn worker(
    mut c: redis::cluster_async::ClusterConnection,
    key: String,
    id: String,
    state: Arc<Mutex<Contention>>,
    stop: Arc<AtomicBool>,
) {
    let release = Script::new(CAD);
    let mut n = 0u64;
    while !stop.load(Ordering::Relaxed) {
        let token = format!("{id}:{n}");
        n += 1;
        match try_lock(&mut c, &key, &token, 5000).await {
            Ok(true) => {}
            Ok(false) => {
                tokio::time::sleep(Duration::from_millis(1)).await;
                continue;
            }
            Err(e) => {
                *state
                    .lock()
                    .unwrap()
                    .errors
                    .entry(format!("{:?}", e.kind()))
                    .or_default() += 1;
                tokio::time::sleep(Duration::from_millis(5)).await;
                continue;
            }
        }
        {
            let mut s = state.lock().unwrap();
            if let Some(other) = s.inside.clone() {
                s.overlaps.push((other, id.clone()));
            }
            s.inside = Some(id.clone());
            s.grants.push(Instant::now());
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
        state.lock().unwrap().inside = None;
        loop {
            match release
                .key(&key)
                .arg(&token)
                .invoke_async::<i64>(&mut c)
                .await
            {
                Ok(1) => break,
                Ok(other) => panic!("release of a held lock returned {other}"),
                Err(e) => {
                    *state
                        .lock()
                        .unwrap()
                        .errors
                        .entry(format!("release {:?}", e.kind()))
                        .or_default() += 1;
                    tokio::time::sleep(Duration::from_millis(5)).await;
                }
            }
        }
    }
}

fn grants(state: &Arc<Mutex<Contention>>) -> usize {
    state.lock().unwrap().grants.len()
}

async fn wait_grants(
    state: &Arc<Mutex<Contention>>,
    n: usize,
    since: Instant,
    budget: Duration,
    what: &str,
) {
    while grants(state) < n {
        assert!(
            since.elapsed() < budget,
            "{what}: {} grants, errors {:?}",
            grants(state),
            state.lock().unwrap().errors
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

mod on_deadbolt {
    use super::*;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn groups_every_group_reshard_and_leader_kill() {
        let mut cl = tokio::task::block_in_place(ClusterTarget::start_groups);
        let leaders = tokio::task::block_in_place(|| cl.group_leaders(Duration::from_secs(20)));
        let release = Script::new(CAD);
        let mut a = cluster_conn(&cl).await;
        let mut b = cluster_conn(&cl).await;

        // 1. Every group's slots.
        for (g, &leader) in leaders.iter().enumerate() {
            let key = key_in_group(&uniq(&format!("g{g}")), g);
            assert_eq!(group_of(&cl, &leaders, key_slot(&key)), g);
            assert!(try_lock(&mut a, &key, "tok-a", 5000).await.unwrap());
            let on_leader = support::raw_cmd(cl.ports[leader], &["GET", &key]);
            assert!(
                on_leader.ends_with("tok-a\r\n"),
                "group {g}'s leader: {on_leader:?}"
            );
            assert!(!try_lock(&mut b, &key, "tok-b", 5000).await.unwrap());
            let pttl: i64 = b.pttl(&key).await.unwrap();
            assert!(pttl > 0 && pttl <= 5000, "{pttl}");
            let n: i64 = release
                .key(&key)
                .arg("tok-b")
                .invoke_async(&mut b)
                .await
                .unwrap();
            assert_eq!(n, 0, "a rival's release must not delete the lock");
            let n: i64 = release
                .key(&key)
                .arg("tok-a")
                .invoke_async(&mut a)
                .await
                .unwrap();
            assert_eq!(n, 1);
        }

        // 2. RAFT RESHARD of a lock's slot while clients lock in it.
        let tag = uniq("rs");
        let slot = key_slot(&tag);
        let src = group_of(&cl, &leaders, slot);
        let dest = (src + 1) % 3;
        let (src_port, dest_port) = (cl.ports[leaders[src]], cl.ports[leaders[dest]]);
        let state = Arc::new(Mutex::new(Contention::default()));
        let stop = Arc::new(AtomicBool::new(false));
        let mut tasks = Vec::new();
        for (i, conn) in [cluster_conn(&cl).await, cluster_conn(&cl).await]
            .into_iter()
            .enumerate()
        {
            // One multiplexed cluster connection per client, two workers on each.
            for j in 0..2 {
                tasks.push(tokio::spawn(worker(
                    conn.clone(),
                    format!("{{{tag}}}:contended"),
                    format!("c{i}w{j}"),
                    state.clone(),
                    stop.clone(),
                )));
            }
        }
        let t = Instant::now();
        wait_grants(&state, 20, t, RESHARD_BUDGET, "the workers never got going").await;
        let held = format!("{{{tag}}}:held");
        assert!(try_lock(&mut a, &held, "tok-held", 60000).await.unwrap());
        let before = grants(&state);
        let t0 = Instant::now();
        let (s, l, d) = (slot.to_string(), slot.to_string(), dest.to_string());
        let r = support::raw_cmd(src_port, &["RAFT", "RESHARD", &s, &l, &d]);
        assert_eq!(
            r, "+OK\r\n",
            "RAFT RESHARD {slot} {slot} {dest} on group {src}'s leader"
        );
        // The move is done when every node's CLUSTER SLOTS names the other group's leader.
        while cl
            .ports
            .iter()
            .any(|&p| support::slot_master_port(p, slot) != Some(dest_port))
        {
            assert!(
                t0.elapsed() < RESHARD_BUDGET,
                "slot {slot} never moved to group {dest}"
            );
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        let moved = t0.elapsed();
        let at = grants(&state);
        wait_grants(
            &state,
            at + 20,
            t0,
            RESHARD_BUDGET,
            "locking did not resume after the move",
        )
        .await;
        stop.store(true, Ordering::Relaxed);
        for t in tasks {
            t.await.unwrap();
        }
        let s = std::mem::take(&mut *state.lock().unwrap());
        assert!(
            s.overlaps.is_empty(),
            "two holders at once: {:?}",
            s.overlaps
        );
        let gaps: Vec<Duration> = s.grants.windows(2).map(|w| w[1] - w[0]).collect();
        let mut sorted = gaps.clone();
        sorted.sort();
        let on_dest = support::raw_cmd(dest_port, &["GET", &held]);
        assert!(
            on_dest.ends_with("tok-held\r\n"),
            "the held lock on the new master: {on_dest:?}"
        );
        let v: String = a.get(&held).await.unwrap();
        assert_eq!(v, "tok-held");
        assert!(!try_lock(&mut b, &held, "rival", 60000).await.unwrap());
        let n: i64 = release
            .key(&held)
            .arg("tok-held")
            .invoke_async(&mut a)
            .await
            .unwrap();
        assert_eq!(n, 1);
        let probe = format!("{{{tag}}}:probe");
        assert_eq!(
            support::raw_cmd(src_port, &["SET", &probe, "x"]),
            format!("-MOVED {slot} 127.0.0.1:{dest_port}\r\n"),
            "the old group's leader redirects the moved slot"
        );
        eprintln!(
            "reshard: redis-rs 1.8.1 cluster-async x4 workers on deadbolt cluster-groups 3, slot {slot} group {src} -> {dest}: \
             moved in {} ms; longest gap between locks {} ms (median {:.1} ms, {} locks, {} after RESHARD); errors passed on: {:?}",
            moved.as_millis(),
            sorted.last().copied().unwrap_or_default().as_millis(),
            sorted[sorted.len() / 2].as_secs_f64() * 1000.0,
            s.grants.len(),
            s.grants.len() - before,
            s.errors
        );

        // 3. SIGKILL of group 2's leader with a lock held in its slots.
        let victim = 2;
        let old = leaders[victim];
        let tag = key_in_group(&uniq("kill"), victim);
        assert_eq!(group_of(&cl, &leaders, key_slot(&tag)), victim);
        let held = format!("{{{tag}}}:held");
        assert!(try_lock(&mut a, &held, "tok-held", 30000).await.unwrap());
        let killed = cl.kill(old);
        let mut n = 0;
        let took = loop {
            let left = FAILOVER_BUDGET.saturating_sub(killed.elapsed());
            assert!(
                !left.is_zero(),
                "no lock acknowledged {FAILOVER_BUDGET:?} after the kill"
            );
            let key = format!("{{{tag}}}:after:{n}");
            n += 1;
            match tokio::time::timeout(left, try_lock(&mut a, &key, "tok", 30000)).await {
                Ok(Ok(true)) => break killed.elapsed(),
                Ok(Ok(false)) => panic!("{key} was already held"),
                Ok(Err(_)) | Err(_) => tokio::time::sleep(Duration::from_millis(10)).await,
            }
        };
        for g in [0, 1] {
            let key = key_in_group(&uniq(&format!("other{g}")), g);
            assert!(
                try_lock(&mut a, &key, "tok", 5000).await.unwrap(),
                "group {g} after the kill"
            );
            let r: i64 = release
                .key(&key)
                .arg("tok")
                .invoke_async(&mut a)
                .await
                .unwrap();
            assert_eq!(r, 1);
        }
        let slot = key_slot(&tag);
        let now = tokio::task::block_in_place(|| {
            cl.slot_master(slot, Duration::from_secs(15), Some(old))
        });
        assert_ne!(now, old);
        let v: String = a.get(&held).await.unwrap();
        assert_eq!(
            v, "tok-held",
            "the lock acknowledged before the kill was lost"
        );
        assert!(!try_lock(&mut b, &held, "rival", 30000).await.unwrap());
        let r: i64 = release
            .key(&held)
            .arg("tok-held")
            .invoke_async(&mut a)
            .await
            .unwrap();
        assert_eq!(r, 1);
        eprintln!(
            "failover: redis-rs 1.8.1 cluster-async on deadbolt cluster-groups 3, group {victim}'s leader killed: kill -> next lock {} ms ({n} attempts)",
            took.as_millis()
        );
    }
}
