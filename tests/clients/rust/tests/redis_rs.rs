//! redis-rs 1.8 (crate `redis`) and rslock 0.10, unchanged, against redis-server and deadbolt.

mod cluster_mode;
mod support;

use std::time::Duration;

use redis::{AsyncCommands, AsyncConnectionConfig, ProtocolVersion, PushKind, Script, Value};
use support::{Kind, Server};

const CAD: &str = "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end";

async fn conn(s: &Server) -> redis::aio::MultiplexedConnection {
    redis::Client::open(s.url())
        .expect("url")
        .get_multiplexed_async_connection()
        .await
        .expect("connect")
}

both_targets! {
    async fn script_invoke_noscript_load_retry(kind: Kind) {
        let s = Server::start(kind);
        let mut c = conn(&s).await;
        let script = Script::new(CAD);
        let sha = script.get_hash().to_string();
        let _: () = redis::cmd("SCRIPT").arg("FLUSH").query_async(&mut c).await.unwrap();
        let ok: bool = c.set_options("lk", "tok", redis::SetOptions::default()
            .conditional_set(redis::ExistenceCheck::NX)
            .with_expiration(redis::SetExpiry::PX(5000))).await.unwrap();
        assert!(ok);
        // EVALSHA → NOSCRIPT → SCRIPT LOAD → EVALSHA.
        let n: i64 = script.key("lk").arg("other").invoke_async(&mut c).await.unwrap();
        assert_eq!(n, 0);
        let exists: Vec<bool> = redis::cmd("SCRIPT").arg("EXISTS").arg(&sha).query_async(&mut c).await.unwrap();
        assert_eq!(exists, vec![true]);
        let n: i64 = script.key("lk").arg("tok").invoke_async(&mut c).await.unwrap();
        assert_eq!(n, 1);
        let gone: bool = c.exists("lk").await.unwrap();
        assert!(!gone);
        // The sync API takes the same path.
        let client = redis::Client::open(s.url()).unwrap();
        let mut sync = client.get_connection().unwrap();
        redis::cmd("SCRIPT").arg("FLUSH").exec(&mut sync).unwrap();
        let n: i64 = script.key("lk").arg("tok").invoke(&mut sync).unwrap();
        assert_eq!(n, 0);
    }

    async fn binary_lock_values(kind: Kind) {
        let s = Server::start(kind);
        let mut c = conn(&s).await;
        let val: Vec<u8> = vec![0, 13, 10, 255, 254, b'$', b'*', 0, 7];
        let r: Value = redis::cmd("SET").arg("bin").arg(&val[..]).arg("nx").arg("px").arg(2000)
            .query_async(&mut c).await.unwrap();
        assert_eq!(r, Value::Okay);
        let r: Value = redis::cmd("SET").arg("bin").arg(&val[..]).arg("NX").arg("PX").arg(2000)
            .query_async(&mut c).await.unwrap();
        assert_eq!(r, Value::Nil);
        let got: Vec<u8> = c.get("bin").await.unwrap();
        assert_eq!(got, val);
        let n: i64 = Script::new(CAD).key("bin").arg(&val[..]).invoke_async(&mut c).await.unwrap();
        assert_eq!(n, 1);
    }

    async fn resp3_push_pubsub(kind: Kind) {
        let s = Server::start(kind);
        let client = redis::Client::open(format!("{}?protocol=resp3", s.url())).unwrap();
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        let config = AsyncConnectionConfig::new().set_push_sender(tx);
        let mut sub = client.get_multiplexed_async_connection_with_config(&config).await.unwrap();
        assert_eq!(client.get_connection_info().redis_settings().protocol(), ProtocolVersion::RESP3);
        sub.subscribe("chan").await.unwrap();
        let ack = tokio::time::timeout(Duration::from_secs(5), rx.recv()).await.unwrap().unwrap();
        assert_eq!(ack.kind, PushKind::Subscribe);
        assert_eq!(ack.data, vec![Value::BulkString(b"chan".to_vec()), Value::Int(1)]);
        // Commands still work on the subscribed RESP3 connection.
        let pong: String = redis::cmd("PING").query_async(&mut sub).await.unwrap();
        assert_eq!(pong, "PONG");
        let mut publ = conn(&s).await;
        let receivers: i64 = publ.publish("chan", "unlocked").await.unwrap();
        assert_eq!(receivers, 1);
        let msg = tokio::time::timeout(Duration::from_secs(5), rx.recv()).await.unwrap().unwrap();
        assert_eq!(msg.kind, PushKind::Message);
        assert_eq!(msg.data, vec![Value::BulkString(b"chan".to_vec()), Value::BulkString(b"unlocked".to_vec())]);
        // A message published from inside a script (the Redisson unlock path) arrives too.
        let _: Value = redis::cmd("EVAL").arg("return redis.call('publish', KEYS[1], ARGV[1])")
            .arg(1).arg("chan").arg(0).query_async(&mut publ).await.unwrap();
        let msg = tokio::time::timeout(Duration::from_secs(5), rx.recv()).await.unwrap().unwrap();
        assert_eq!(msg.data, vec![Value::BulkString(b"chan".to_vec()), Value::BulkString(b"0".to_vec())]);
        sub.unsubscribe("chan").await.unwrap();
        let ack = tokio::time::timeout(Duration::from_secs(5), rx.recv()).await.unwrap().unwrap();
        assert_eq!(ack.kind, PushKind::Unsubscribe);
    }

    async fn pipeline_atomic(kind: Kind) {
        let s = Server::start(kind);
        let mut c = conn(&s).await;
        let (a, b, v): (i64, i64, String) = redis::pipe().atomic()
            .incr("ctr", 1).incr("ctr", 41).get("ctr")
            .query_async(&mut c).await.unwrap();
        assert_eq!((a, b, v.as_str()), (1, 42, "42"));
    }

    async fn rslock_three_servers(kind: Kind) {
        let mut servers: Vec<Server> = (0..3).map(|_| Server::start(kind)).collect();
        let mut rl = rslock::LockManager::new(servers.iter().map(|s| s.url()).collect());
        rl.set_retry(2, Duration::from_millis(20));
        let lock = rl.lock(b"res", Duration::from_millis(2000)).await.expect("lock");
        assert_eq!(lock.val.len(), 20); // 20 random raw bytes as the value (binary safe)
        for s in &servers {
            let mut c = conn(s).await;
            let v: Vec<u8> = c.get("res").await.unwrap();
            assert_eq!(v, lock.val);
        }
        assert!(rl.lock(b"res", Duration::from_millis(2000)).await.is_err());
        for s in &servers {
            let _: () = redis::cmd("SCRIPT").arg("FLUSH").query_async(&mut conn(s).await).await.unwrap();
        }
        let lock = rl.extend(&lock, Duration::from_millis(5000)).await.expect("extend");
        let pttl: i64 = conn(&servers[0]).await.pttl("res").await.unwrap();
        assert!(pttl > 4000 && pttl <= 5000, "{pttl}");
        servers[2].kill(); // one master crashes: 2 of 3 is still a quorum
        rl.unlock(&lock).await;
        let v: Option<Vec<u8>> = conn(&servers[0]).await.get("res").await.unwrap();
        assert_eq!(v, None);
        let again = rl.lock(b"res", Duration::from_millis(1000)).await.expect("relock with 2 of 3");
        rl.unlock(&again).await;
    }
}
