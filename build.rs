//! Compiles src/long_double.c: Redis computes INCRBYFLOAT / HINCRBYFLOAT in C `long double`,
//! which Rust lacks (see protocol/number.rs).

fn main() {
    println!("cargo:rerun-if-changed=src/long_double.c");
    cc::Build::new()
        .file("src/long_double.c")
        .flag_if_supported("-std=c11")
        .warnings(true)
        .extra_warnings(true)
        .compile("deadbolt_long_double");
}
