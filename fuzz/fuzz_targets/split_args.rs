//! The inline/config-line splitter against a line-by-line port of Redis's `sdssplitargs`
//! (deadbolt_fuzz::redis_split_args): same words, same unbalanced-quote verdict.
#![no_main]
use deadbolt::protocol::decode::split_args;
use deadbolt_fuzz::redis_split_args;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let got = split_args(data);
    let want = redis_split_args(data);
    assert_eq!(
        got,
        want,
        "split_args({:?}) differs from sdssplitargs",
        String::from_utf8_lossy(data)
    );
});
