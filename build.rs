//! Compiles src/long_double.c: Redis computes INCRBYFLOAT / HINCRBYFLOAT in C `long double`,
//! which Rust lacks (see protocol/number.rs); and src/lua_match.c, Lua's pattern matcher made
//! interruptible (see script/raw.rs). (LZF, for DUMP payloads and RDB files, is a Rust port in
//! store/rdb.rs.)

fn main() {
    println!("cargo:rerun-if-changed=src/long_double.c");
    cc::Build::new()
        .file("src/long_double.c")
        .flag_if_supported("-std=c11")
        .warnings(true)
        .extra_warnings(true)
        .compile("deadbolt_long_double");

    // Lua's pattern matcher with a step hook and a depth bound (see the file's header), built
    // against the headers of the Lua that mlua links (mlua-sys exports them).
    println!("cargo:rerun-if-changed=src/lua_match.c");
    let include = std::env::var("DEP_LUA_INCLUDE").expect("mlua-sys exports its Lua headers");
    cc::Build::new()
        .file("src/lua_match.c")
        .include(include)
        .warnings(true)
        .compile("deadbolt_lua_match");
}
