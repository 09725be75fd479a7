//! RESTORE's payload decoder (deadbolt::store::rdb::restore) on arbitrary RDB bodies (the
//! checksum is what a client would compute, so it protects nothing): it must refuse or build a
//! value, never panic, hang or allocate past libFuzzer's -rss_limit_mb. A value it builds must
//! DUMP and RESTORE again to the same value, and OBJECT ENCODING / MEMORY USAGE must answer.
#![no_main]
use deadbolt::store::encoding::{self, Limits};
use deadbolt::store::rdb;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(v) = rdb::restore(data) else {
        return;
    };
    let lim = Limits::default();
    let _ = encoding::name(&v, &lim);
    let _ = encoding::memory_usage(b"k", &v, &lim, 5);
    let payload = rdb::dump(&v, &lim);
    let body = rdb::verify(&payload).expect("our own payload verifies");
    let again = rdb::restore(body).expect("our own payload restores");
    assert_eq!(
        rdb::dump(&again, &lim),
        payload,
        "DUMP of a restored value differs"
    );
});
