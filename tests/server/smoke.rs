use crate::common;

#[test]
fn ping_set_get_over_tcp() {
    let s = common::deadbolt(&[]);
    let mut c = s.conn();
    assert_eq!(c.cmd(&["PING"]), b"+PONG\r\n");
    assert_eq!(c.cmd(&["SET", "k", "v", "NX", "PX", "10000"]), b"+OK\r\n");
    assert_eq!(c.cmd(&["GET", "k"]), b"$1\r\nv\r\n");
}
