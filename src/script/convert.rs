//! Number conversion shared by the reply paths (`raw.rs` does the table walking with the Lua C
//! API: Redis's `luaReplyToRedisReply` and `redisProtocolToLuaType`).

/// A Lua number as Redis returns it: a C `(long long)` cast. Out-of-range values, NaN and
/// infinities give what x86's conversion instruction gives, i64::MIN.
pub fn truncate(n: f64) -> i64 {
    if n.is_nan() || !(-9.223_372_036_854_776e18..9.223_372_036_854_776e18).contains(&n) {
        i64::MIN
    } else {
        n as i64
    }
}

#[cfg(test)]
mod tests {
    use super::truncate;

    #[test]
    fn truncation_like_a_c_cast() {
        assert_eq!(truncate(3.99), 3);
        assert_eq!(truncate(-3.99), -3);
        assert_eq!(truncate(9007199254740993.0), 9007199254740992);
        assert_eq!(truncate(1e20), i64::MIN);
        assert_eq!(truncate(f64::NAN), i64::MIN);
        assert_eq!(truncate(f64::INFINITY), i64::MIN);
        assert_eq!(truncate(-9.223_372_036_854_776e18), i64::MIN);
    }
}
