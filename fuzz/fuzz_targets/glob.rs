//! The glob matcher (KEYS, SCAN MATCH, PSUBSCRIBE, ACL key patterns) against a memoised port of
//! Redis's `stringmatchlen` (deadbolt_fuzz::redis_glob_match). The first byte chooses nocase
//! and where the input splits into pattern and string. Hangs are caught by libFuzzer's -timeout.
#![no_main]
use deadbolt::cmd::args::glob_match;
use deadbolt_fuzz::redis_glob_match;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&ctl, rest)) = data.split_first() else {
        return;
    };
    let nocase = ctl & 1 == 1;
    // Pattern first, then the string: the split is at the first 0xff byte, or at a point the
    // control byte picks when there is none.
    let cut = rest
        .iter()
        .position(|&b| b == 0xff)
        .unwrap_or((ctl as usize >> 1) % (rest.len() + 1));
    let pattern = &rest[..cut];
    let string = rest.get(cut + 1..).unwrap_or(&[]);
    let got = glob_match(pattern, string, nocase);
    // Redis's recursion is one level per '*' group; beyond 1000 levels deadbolt may refuse.
    if pattern.iter().filter(|&&b| b == b'*').count() < 900 {
        let want = redis_glob_match(pattern, string, nocase);
        assert_eq!(
            got,
            want,
            "glob_match({:?}, {:?}, nocase={nocase}) differs from stringmatchlen",
            String::from_utf8_lossy(pattern),
            String::from_utf8_lossy(string)
        );
    }
});
