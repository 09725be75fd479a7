//! CLIENT TRACKING / CACHING / GETREDIR / TRACKINGINFO: client-side caching's commands, with
//! Redis 7.0's options, checks and texts (networking.c clientCommand). The table of tracked
//! keys and the invalidations are the state machine's (machine/tracking.rs); what a command
//! remembers is decided here, after it runs (`remember`).

use super::args::is;
use super::spec::flags;
use super::spec::Ctx;
use super::table::TableEntry;
use crate::error::{CmdError, CmdResult};
use crate::machine::tracking::{ClientTracking, Tracking};
use crate::protocol::Frame;
use bytes::Bytes;

/// BCAST prefixes one client may name: the overlap check compares every pair.
const MAX_PREFIXES_PER_CLIENT: usize = 1000;
/// BCAST prefixes on the server: every write is compared with each.
const MAX_PREFIXES: usize = 10_000;

pub fn client_tracking(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let mut mode = ClientTracking::default();
    let mut redirect: i64 = 0;
    let mut prefixes: Vec<Bytes> = Vec::new();
    let mut j = 3;
    while j < argv.len() {
        let more = j + 1 < argv.len();
        let opt = &argv[j];
        if is(opt, "redirect") && more {
            j += 1;
            if redirect != 0 {
                return Err(CmdError::err(
                    "ERR A client can only redirect to a single other client",
                ));
            }
            redirect = super::args::int_arg(&argv[j])?;
            // It must exist now, though it may go away later (then: broken_redirect).
            let exists = redirect > 0
                && (redirect as u64 == ctx.client.id
                    || ctx.srv.clients.contains_key(&(redirect as u64)));
            if !exists {
                return Err(CmdError::err(
                    "ERR The client ID you want redirect to does not exist",
                ));
            }
        } else if is(opt, "bcast") {
            mode.bcast = true;
        } else if is(opt, "optin") {
            mode.optin = true;
        } else if is(opt, "optout") {
            mode.optout = true;
        } else if is(opt, "noloop") {
            mode.noloop = true;
        } else if is(opt, "prefix") && more {
            j += 1;
            prefixes.push(argv[j].clone());
        } else {
            return Err(CmdError::Syntax);
        }
        j += 1;
    }
    if is(&argv[2], "on") {
        if !mode.bcast && !prefixes.is_empty() {
            return Err(CmdError::err(
                "ERR PREFIX option requires BCAST mode to be enabled",
            ));
        }
        if let Some(old) = ctx.client.tracking.as_deref() {
            if old.bcast != mode.bcast {
                return Err(CmdError::err("ERR You can't switch BCAST mode on/off before disabling tracking for this client, and then re-enabling it with a different mode."));
            }
        }
        if mode.bcast && (mode.optin || mode.optout) {
            return Err(CmdError::err(
                "ERR OPTIN and OPTOUT are not compatible with BCAST",
            ));
        }
        if mode.optin && mode.optout {
            return Err(CmdError::err(
                "ERR You can't specify both OPTIN mode and OPTOUT mode",
            ));
        }
        if let Some(old) = ctx.client.tracking.as_deref() {
            if (mode.optin && old.optout) || (mode.optout && old.optin) {
                return Err(CmdError::err("ERR You can't switch OPTIN/OPTOUT mode before disabling tracking for this client, and then re-enabling it with a different mode."));
            }
        }
        if mode.bcast {
            let existing = ctx
                .client
                .tracking
                .as_deref()
                .map_or(&[][..], |t| &t.prefixes[..]);
            // Redis has no bound, and checks every pair of a client's prefixes and every write
            // against every prefix: bounded here so one request cannot stall the server.
            if existing.len() + prefixes.len() > MAX_PREFIXES_PER_CLIENT {
                return Err(CmdError::erf(format!(
                    "too many tracking prefixes: at most {MAX_PREFIXES_PER_CLIENT} per client"
                )));
            }
            if ctx.srv.tracking.total_prefixes() + prefixes.len() > MAX_PREFIXES {
                return Err(CmdError::erf(format!(
                    "too many tracking prefixes: at most {MAX_PREFIXES} on the server"
                )));
            }
            if let Some(e) = Tracking::prefix_collision(existing, &prefixes) {
                return Err(CmdError::erf(e));
            }
        }
        mode.redirect = redirect as u64;
        let bcast = mode.bcast;
        ctx.srv.enable_tracking(ctx.client, mode);
        if bcast {
            ctx.srv.add_bcast_prefixes(ctx.client, &prefixes);
        }
    } else if is(&argv[2], "off") {
        ctx.srv.disable_tracking(ctx.client);
    } else {
        return Err(CmdError::Syntax);
    }
    Ok(Frame::ok())
}

pub fn client_caching(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let Some(t) = ctx.client.tracking.as_deref_mut() else {
        return Err(CmdError::err("ERR CLIENT CACHING can be called only when the client is in tracking mode with OPTIN or OPTOUT mode enabled"));
    };
    if is(&argv[2], "yes") {
        if !t.optin {
            return Err(CmdError::err(
                "ERR CLIENT CACHING YES is only valid when tracking is enabled in OPTIN mode.",
            ));
        }
    } else if is(&argv[2], "no") {
        if !t.optout {
            return Err(CmdError::err(
                "ERR CLIENT CACHING NO is only valid when tracking is enabled in OPTOUT mode.",
            ));
        }
    } else {
        return Err(CmdError::Syntax);
    }
    t.caching = true;
    Ok(Frame::ok())
}

pub fn client_getredir(ctx: &mut Ctx, _argv: &[Bytes]) -> CmdResult {
    Ok(Frame::Integer(
        ctx.client
            .tracking
            .as_deref()
            .map_or(-1, |t| t.redirect as i64),
    ))
}

pub fn client_trackinginfo(ctx: &mut Ctx, _argv: &[Bytes]) -> CmdResult {
    let t = ctx.client.tracking.as_deref();
    let mut flags = vec![if t.is_some() { "on" } else { "off" }];
    if let Some(t) = t {
        let caching = t.caching;
        for (on, name) in [
            (t.bcast, "bcast"),
            (t.optin, "optin"),
            (t.optin && caching, "caching-yes"),
            (t.optout, "optout"),
            (t.optout && caching, "caching-no"),
            (t.noloop, "noloop"),
            (t.broken_redirect, "broken_redirect"),
        ] {
            if on {
                flags.push(name);
            }
        }
    }
    Ok(Frame::Map(vec![
        (
            Frame::bulk_from("flags"),
            Frame::Set(flags.into_iter().map(Frame::bulk_from).collect()),
        ),
        (
            Frame::bulk_from("redirect"),
            Frame::Integer(t.map_or(-1, |t| t.redirect as i64)),
        ),
        (
            Frame::bulk_from("prefixes"),
            Frame::Array(
                t.map(|t| t.prefixes.iter().cloned().map(Frame::Bulk).collect())
                    .unwrap_or_default(),
            ),
        ),
    ]))
}

/// After a command of a tracking client (Redis's call(): trackingRememberKeys): a read-only
/// command's keys are remembered for it; inside a script the script's declared keys are, once
/// it ends, if it read anything (EVAL_RO itself does not count, its reads do).
pub fn remember(ctx: &mut Ctx, entry: &TableEntry, argv: &[Bytes]) {
    let Some(t) = ctx.client.tracking.as_deref_mut() else {
        return;
    };
    let spec = entry.spec;
    let reads =
        spec.has(flags::READONLY) && !matches!(spec.name, "eval_ro" | "evalsha_ro" | "fcall_ro");
    if ctx.in_script {
        if reads {
            t.script_read = true;
        }
        return;
    }
    if !(reads || std::mem::take(&mut t.script_read)) || !t.remembers() {
        return;
    }
    // Shard channels are keys for COMMAND's sake only.
    if spec.has(flags::PUBSUB) {
        return;
    }
    let id = ctx.client.id;
    for k in super::keyspec::key_refs(entry, argv).iter() {
        ctx.srv.tracking.remember(id, &argv[k.pos]);
    }
    limit_table(ctx.srv);
}

/// Forgets tracked keys (telling their clients) until the table is within
/// `tracking-table-max-keys` (Redis's trackingLimitUsedSlots).
pub fn limit_table(srv: &mut crate::machine::State) {
    let max = srv
        .config
        .compat_value("tracking-table-max-keys")
        .parse()
        .unwrap_or(0);
    srv.tracking_limit(max);
}
