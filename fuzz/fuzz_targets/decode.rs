//! The RESP request decoder (multibulk and inline): never panics, and how the bytes are split
//! into reads never changes what is decoded (whole, byte at a time, and in the split sizes the
//! input chooses). Each decoded request also survives re-encoding as multibulk.
#![no_main]
use deadbolt::protocol::DecodeLimits;
use deadbolt_fuzz::decode_in_chunks;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&ctl, rest)) = data.split_first() else {
        return;
    };
    // A small bulk limit half the time, so the limit's error paths are reached too.
    let limits = DecodeLimits {
        max_bulk_len: if ctl & 1 == 0 { 512 * 1024 * 1024 } else { 16 },
    };
    // The next `nsplit` bytes are split sizes; the rest is the wire input.
    let nsplit = ((ctl >> 1) as usize % 16).min(rest.len());
    let (splits, input) = rest.split_at(nsplit);
    let splits: Vec<usize> = splits.iter().map(|&b| b as usize % 64 + 1).collect();

    let whole = decode_in_chunks(input, &[input.len()], &limits);
    let bytewise = decode_in_chunks(input, &vec![1; input.len()], &limits);
    assert_eq!(whole, bytewise, "byte-at-a-time differs from one read");
    let split = decode_in_chunks(input, &splits, &limits);
    assert_eq!(
        whole, split,
        "reads of sizes {splits:?} differ from one read"
    );

    for req in &whole.requests {
        assert!(!req.is_empty(), "an empty request was returned");
        let mut wire = format!("*{}\r\n", req.len()).into_bytes();
        for a in req {
            wire.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
            wire.extend_from_slice(a);
            wire.extend_from_slice(b"\r\n");
        }
        let again = decode_in_chunks(&wire, &[wire.len()], &DecodeLimits::default());
        assert_eq!(
            again.requests,
            vec![req.clone()],
            "re-encoded request decodes differently"
        );
        assert_eq!(again.error, None);
        assert_eq!(again.leftover, 0);
    }
});
