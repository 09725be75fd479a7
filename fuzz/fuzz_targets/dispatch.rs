//! Command dispatch against a real in-process executor (deadbolt_fuzz::Executor): argument
//! vectors from the real command table plus keys, numbers, option words, glob patterns, raw
//! bytes and generated Lua scripts, from up to three clients, with MULTI/EXEC and pipelining.
//! No panic, no hang (libFuzzer's -timeout), bounded memory (-rss_limit_mb); after every input
//! a new client must get +PONG.
#![no_main]
use deadbolt_fuzz::{command_names, run_dispatch, Executor};
use libfuzzer_sys::fuzz_target;
use std::cell::RefCell;

thread_local! {
    // Built once per process: the command table and the Lua engine are reused across inputs
    // (`run_dispatch` resets the data, scripts and configuration after each one).
    static EXEC: RefCell<Option<(Executor, Vec<Vec<&'static str>>)>> = const { RefCell::new(None) };
}

fuzz_target!(|data: &[u8]| {
    EXEC.with(|cell| {
        let mut slot = cell.borrow_mut();
        let (exec, names) = slot.get_or_insert_with(|| {
            let exec = Executor::new();
            let names = command_names();
            (exec, names)
        });
        run_dispatch(exec, names, data);
    });
});
