//! Commands that recreate a key's state, for the log and for rewrites.

use crate::store::{Entry, Value};

fn put_array_header(out: &mut Vec<u8>, n: usize) {
    out.push(b'*');
    out.extend_from_slice(itoa::Buffer::new().format(n).as_bytes());
    out.extend_from_slice(b"\r\n");
}

fn put_bulk(out: &mut Vec<u8>, b: &[u8]) {
    out.push(b'$');
    out.extend_from_slice(itoa::Buffer::new().format(b.len()).as_bytes());
    out.extend_from_slice(b"\r\n");
    out.extend_from_slice(b);
    out.extend_from_slice(b"\r\n");
}

/// Appends one command as a RESP multibulk request.
pub fn command(out: &mut Vec<u8>, args: &[&[u8]]) {
    put_array_header(out, args.len());
    for a in args {
        put_bulk(out, a);
    }
}

/// Fields per HSET/RPUSH/SADD/ZADD command when a big value is written (bounds one command's size).
const BATCH: usize = 64;

/// Commands that make `key` hold exactly `entry` (or be absent).
pub fn key_state(out: &mut Vec<u8>, key: &[u8], entry: Option<&Entry>) {
    let Some(entry) = entry else {
        command(out, &[b"DEL", key]);
        return;
    };
    let mut ms = itoa::Buffer::new();
    let deadline = ms.format(entry.expires_at).as_bytes().to_vec();
    match &entry.value {
        Value::Str(v) => {
            if entry.expires_at != 0 {
                command(out, &[b"SET", key, v, b"PXAT", &deadline]);
            } else {
                command(out, &[b"SET", key, v]);
            }
            return;
        }
        Value::Hash(h) => {
            command(out, &[b"DEL", key]);
            let pairs: Vec<(&[u8], &[u8])> = h.iter().map(|(f, v)| (&f[..], &v[..])).collect();
            for chunk in pairs.chunks(BATCH) {
                put_array_header(out, 2 + chunk.len() * 2);
                put_bulk(out, b"HSET");
                put_bulk(out, key);
                for (f, v) in chunk {
                    put_bulk(out, f);
                    put_bulk(out, v);
                }
            }
        }
    }
    if entry.expires_at != 0 {
        command(out, &[b"PEXPIREAT", key, &deadline]);
    }
}
