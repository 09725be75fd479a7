//! redis-rs 1.8's async cluster client (the `cluster-async` feature), unchanged, against a real
//! Redis Cluster 7.0 (3 masters) and a three-node deadbolt cluster with `cluster-enabled yes`:
//! a SET NX PX + compare-and-delete lock (`Script::invoke` routed by its key). Failover: the
//! master of a held lock's slot (deadbolt's leader; on Redis, a cluster with a replica per
//! master) is SIGKILLed: the next lock through the same connection must be acknowledged within a
//! bounded time, the held lock must still be its owner's.

use std::time::Duration;

mod groups;

use redis::cluster::ClusterClient;
use redis::cluster_routing::{Route, RoutingInfo, SingleNodeRoutingInfo, SlotAddr};
use redis::{AsyncCommands, Script};

use crate::both_targets;
use crate::support::{self, ClusterTarget, Kind};
use crate::CAD;

const FAILOVER_BUDGET: Duration = Duration::from_secs(10);

async fn cluster_conn(c: &ClusterTarget) -> redis::cluster_async::ClusterConnection {
    ClusterClient::builder(c.urls())
        .retries(20)
        .min_retry_wait(10)
        .max_retry_wait(200)
        .connection_timeout(Duration::from_secs(1))
        .response_timeout(Duration::from_secs(2))
        .build()
        .expect("cluster client")
        .get_async_connection()
        .await
        .expect("cluster connect")
}

async fn try_lock(
    c: &mut redis::cluster_async::ClusterConnection,
    key: &str,
    token: &str,
    ms: u64,
) -> redis::RedisResult<bool> {
    c.set_options(
        key,
        token,
        redis::SetOptions::default()
            .conditional_set(redis::ExistenceCheck::NX)
            .with_expiration(redis::SetExpiry::PX(ms)),
    )
    .await
}

both_targets! {
    async fn cluster_set_nx_px_and_compare_and_delete(kind: Kind) {
        let cl = ClusterTarget::start(kind);
        let mut a = cluster_conn(&cl).await;
        let mut b = cluster_conn(&cl).await;
        let release = Script::new(CAD);
        // Keys over several slots: on Redis they live on different masters.
        for key in ["orders", "invoices", "{user:1}:lock", "x"] {
            assert!(try_lock(&mut a, key, "tok-a", 5000).await.unwrap());
            assert!(!try_lock(&mut b, key, "tok-b", 5000).await.unwrap());
            let v: String = b.get(key).await.unwrap();
            assert_eq!(v, "tok-a");
            let pttl: i64 = b.pttl(key).await.unwrap();
            assert!(pttl > 0 && pttl <= 5000, "{pttl}");
            let n: i64 = release.key(key).arg("tok-b").invoke_async(&mut b).await.unwrap();
            assert_eq!(n, 0, "a rival's release must not delete the lock");
            let n: i64 = release.key(key).arg("tok-a").invoke_async(&mut a).await.unwrap();
            assert_eq!(n, 1);
            assert!(try_lock(&mut b, key, "tok-b", 5000).await.unwrap());
            let n: i64 = release.key(key).arg("tok-b").invoke_async(&mut b).await.unwrap();
            assert_eq!(n, 1);
        }
    }

    // deadbolt: the leader is killed. Redis, the reference: 3 masters + 3 replicas, the master
    // of the lock's slot is killed (after WAIT 1 1000 on its connection: Redis replicates
    // asynchronously). The next locks share the slot ({hash tag}).
    async fn cluster_lock_across_master_kill(kind: Kind) {
        let mut cl = ClusterTarget::start_with_replicas(kind, 1);
        let mut c = cluster_conn(&cl).await;
        let release = Script::new(CAD);
        let held = "{kill}:held";
        let old = cl.master_of(held, Duration::from_secs(15), None);
        assert!(try_lock(&mut c, held, "tok-held", 30000).await.unwrap());
        if let Kind::Redis = kind {
            let slot: u16 = support::raw_cmd(cl.ports[old], &["CLUSTER", "KEYSLOT", held])
                .trim().trim_start_matches(':').parse().unwrap();
            let route = RoutingInfo::SingleNode(SingleNodeRoutingInfo::SpecificNode(Route::new(slot, SlotAddr::Master)));
            let mut wait = redis::cmd("WAIT");
            wait.arg(1).arg(1000);
            let acked = c.route_command(wait, route).await.unwrap();
            assert_eq!(acked, redis::Value::Int(1));
        }
        let killed = cl.kill(old);
        let mut n = 0;
        let took = loop {
            let left = FAILOVER_BUDGET.saturating_sub(killed.elapsed());
            assert!(!left.is_zero(), "no lock acknowledged {FAILOVER_BUDGET:?} after the kill");
            let key = format!("{{kill}}:after:{n}");
            n += 1;
            match tokio::time::timeout(left, try_lock(&mut c, &key, "tok", 30000)).await {
                Ok(Ok(true)) => break killed.elapsed(),
                Ok(Ok(false)) => panic!("{key} was already held"),
                Ok(Err(_)) | Err(_) => tokio::time::sleep(Duration::from_millis(10)).await,
            }
        };
        let now = cl.master_of(held, Duration::from_secs(15), Some(old));
        assert_ne!(now, old);
        let v: String = c.get(held).await.unwrap();
        assert_eq!(v, "tok-held", "the lock acknowledged before the kill was lost");
        assert!(!try_lock(&mut c, held, "rival", 30000).await.unwrap());
        let r: i64 = release.key(held).arg("tok-held").invoke_async(&mut c).await.unwrap();
        assert_eq!(r, 1);
        eprintln!("failover: redis-rs 1.8.1 cluster-async on {kind:?}: kill -> next lock {} ms ({n} attempts)",
            took.as_millis());
    }
}
