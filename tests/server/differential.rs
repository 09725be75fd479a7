//! Replays command corpora (tests/corpus/*.txt) against deadbolt and a real redis-server started
//! by the test, and compares the replies byte for byte.
//!
//! Corpus syntax: one command per line in redis-cli quoting. Lines starting with `#` are comments.
//! Prefixes change how one reply is compared:
//!   `!sort `  the reply is an array whose order Redis leaves unspecified: compare it sorted;
//!   `!type `  compare only the reply's RESP type (values that legitimately differ: ids, times);
//!   `!times ` mask what depends on the clock: integers of 10^12 and more (Unix ms: delivery
//!            and seen times), stream ids made from the clock (`*`), the integer after an
//!            `idle` field, and the idle time in XPENDING's `[id, consumer, idle, count]` rows;
//!   `!sleep N` waits N ms (expiry edges only: time itself is what is under test there).
//!   `!resp3` / `!resp2` switch both connections with HELLO (the HELLO replies are compared
//!   with ids masked).

use crate::common;

use common::{reply_len, split_line, Conn};
use std::time::Duration;

fn elements(reply: &[u8]) -> (Vec<u8>, Vec<Vec<u8>>) {
    let header_end = reply.windows(2).position(|w| w == b"\r\n").unwrap() + 2;
    let mut items = Vec::new();
    let mut pos = header_end;
    while pos < reply.len() {
        let n = reply_len(reply, pos).unwrap();
        items.push(reply[pos..pos + n].to_vec());
        pos += n;
    }
    (reply[..header_end].to_vec(), items)
}

fn normalise(reply: Vec<u8>, mode: &str) -> Vec<u8> {
    match mode {
        "sort" if matches!(reply.first(), Some(b'*' | b'~')) && reply.get(1) != Some(&b'-') => {
            let (header, items) = elements(&reply);
            let mut items: Vec<Vec<u8>> = items.into_iter().map(|i| normalise(i, "sort")).collect();
            items.sort();
            let mut out = header;
            for i in items {
                out.extend(i);
            }
            out
        }
        "type" => reply[..1].to_vec(),
        "times" => mask_times(&reply),
        _ => reply,
    }
}

fn mask_times(reply: &[u8]) -> Vec<u8> {
    let text = String::from_utf8_lossy(reply).into_owned();
    let mut lines: Vec<String> = text.split("\r\n").map(str::to_string).collect();
    let is_int = |l: &str| l.starts_with(':');
    for i in 0..lines.len() {
        if let Some(n) = lines[i]
            .strip_prefix(':')
            .and_then(|n| n.parse::<i64>().ok())
        {
            if n >= 1_000_000_000_000 {
                lines[i] = ":T".into();
            }
        }
        if is_clock_stream_id(&lines[i]) {
            lines[i] = "T-id".into();
        }
        if lines[i] == "idle" && i + 1 < lines.len() && is_int(&lines[i + 1]) {
            lines[i + 1] = ":I".into();
        }
        if lines[i] == "*4"
            && i + 6 < lines.len()
            && lines[i + 1].starts_with('$')
            && lines[i + 3].starts_with('$')
            && is_int(&lines[i + 5])
            && is_int(&lines[i + 6])
        {
            lines[i + 5] = ":I".into();
        }
    }
    lines.join("\r\n").into_bytes()
}

/// A stream id made by `*` from the clock: 13 or more millisecond digits, a dash, a sequence.
fn is_clock_stream_id(line: &str) -> bool {
    line.split_once('-').is_some_and(|(ms, seq)| {
        ms.len() >= 13
            && ms.bytes().all(|b| b.is_ascii_digit())
            && !seq.is_empty()
            && seq.bytes().all(|b| b.is_ascii_digit())
    })
}

fn show(b: &[u8]) -> String {
    String::from_utf8_lossy(b).replace("\r\n", "\\r\\n")
}

fn run_corpus(name: &str, text: &str) -> Vec<String> {
    let db = common::deadbolt(&[]);
    let redis = common::redis_server(&[]);
    let mut a = db.conn();
    let mut b = redis.conn();
    assert_eq!(a.cmd(&["FLUSHALL"]), b.cmd(&["FLUSHALL"]));
    let mut failures = Vec::new();
    for (no, raw) in text.lines().enumerate() {
        let line = raw.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let (mode, cmdline) = match line.strip_prefix('!') {
            Some(rest) => {
                let (m, r) = rest.split_once(' ').unwrap_or((rest, ""));
                (m, r)
            }
            None => ("exact", line),
        };
        if mode == "sleep" {
            std::thread::sleep(Duration::from_millis(cmdline.trim().parse().unwrap()));
            continue;
        }
        let (mode, cmdline) = match mode {
            "resp3" => ("hello", "HELLO 3"),
            "resp2" => ("hello", "HELLO 2"),
            m => (m, cmdline),
        };
        let args = split_line(cmdline);
        let ra = send(&mut a, &args);
        let rb = send(&mut b, &args);
        let is_hello = mode == "hello"
            || args
                .first()
                .is_some_and(|a| a.eq_ignore_ascii_case(b"hello"));
        let (na, nb) = if is_hello {
            (mask_hello(ra), mask_hello(rb))
        } else {
            (normalise(ra, mode), normalise(rb, mode))
        };
        if na != nb {
            failures.push(format!(
                "{name}:{}: {cmdline}\n   deadbolt: {}\n   redis:    {}",
                no + 1,
                show(&na),
                show(&nb)
            ));
        }
    }
    failures
}

fn send(c: &mut Conn, args: &[Vec<u8>]) -> Vec<u8> {
    c.send(args);
    c.read_reply()
}

/// HELLO's reply differs in the client id and the exact version only.
fn mask_hello(r: Vec<u8>) -> Vec<u8> {
    let s = String::from_utf8_lossy(&r).into_owned();
    let mut out = Vec::new();
    let mut lines = s.split("\r\n").peekable();
    while let Some(l) = lines.next() {
        out.push(l.to_string());
        if l == "id" {
            lines.next();
            out.push(":ID".into());
        }
    }
    out.join("\r\n").into_bytes()
}

#[test]
fn corpus_matches_real_redis() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/corpus");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    let mut failures = Vec::new();
    let mut count = 0;
    for f in files {
        if f.extension().is_some_and(|e| e == "txt") {
            count += 1;
            let text = std::fs::read_to_string(&f).unwrap();
            failures.extend(run_corpus(&f.file_name().unwrap().to_string_lossy(), &text));
        }
    }
    assert!(count > 0, "no corpus files found");
    assert!(
        failures.is_empty(),
        "{} differences:\n{}",
        failures.len(),
        failures.join("\n")
    );
}
