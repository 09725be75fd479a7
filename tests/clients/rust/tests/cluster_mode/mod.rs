//! redis-rs 1.8's async cluster client (the `cluster-async` feature), unchanged, against a real
//! Redis Cluster 7.0 (3 masters) and a three-node deadbolt cluster with `cluster-enabled yes`:
//! a SET NX PX + compare-and-delete lock (`Script::invoke` routed by its key). On deadbolt only,
//! the leader is SIGKILLed while a lock is held: the next lock through the same connection must
//! be acknowledged within a bounded time, the held lock must still be its owner's.

use std::time::Duration;

use redis::cluster::ClusterClient;
use redis::{AsyncCommands, Script};

use crate::both_targets;
use crate::support::{ClusterTarget, Kind};
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
}

/// deadbolt only: a Redis Cluster without replicas has nothing to fail over to.
mod leader_kill {
    mod on_deadbolt {
        use super::super::*;

        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn cluster_lock_across_leader_kill() {
            let mut cl = ClusterTarget::start(Kind::Deadbolt);
            let mut c = cluster_conn(&cl).await;
            let release = Script::new(CAD);
            let old = cl.leader(Duration::from_secs(15));
            assert!(try_lock(&mut c, "held", "tok-held", 30000).await.unwrap());
            let killed = cl.kill(old);
            let mut n = 0;
            let took = loop {
                let left = FAILOVER_BUDGET.saturating_sub(killed.elapsed());
                assert!(
                    !left.is_zero(),
                    "no lock acknowledged {FAILOVER_BUDGET:?} after the kill"
                );
                let key = format!("after:{n}");
                n += 1;
                match tokio::time::timeout(left, try_lock(&mut c, &key, "tok", 30000)).await {
                    Ok(Ok(true)) => break killed.elapsed(),
                    Ok(Ok(false)) => panic!("{key} was already held"),
                    Ok(Err(_)) | Err(_) => tokio::time::sleep(Duration::from_millis(10)).await,
                }
            };
            let now = cl.leader(Duration::from_secs(15));
            assert_ne!(now, old);
            let v: String = c.get("held").await.unwrap();
            assert_eq!(
                v, "tok-held",
                "the lock acknowledged before the kill was lost"
            );
            assert!(!try_lock(&mut c, "held", "rival", 30000).await.unwrap());
            let r: i64 = release
                .key("held")
                .arg("tok-held")
                .invoke_async(&mut c)
                .await
                .unwrap();
            assert_eq!(r, 1);
            eprintln!("failover: redis-rs 1.8.1 cluster-async on deadbolt cluster-enabled: kill -> next lock {} ms ({n} attempts)",
            took.as_millis());
        }
    }
}
