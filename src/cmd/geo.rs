//! Geo commands. A geo set is a sorted set whose scores are 52-bit interleaved geohashes, so
//! ZRANGE & co. work on it unchanged. The geohash math is Redis 7.0's geohash.c and
//! geohash_helper.c transcribed operation for operation (same double operations in the same
//! order, same libm calls), because distances and coordinates are compared byte for byte.

use super::args::{float_arg, int_arg, is};
use super::spec::Ctx;
use super::spec::{flags::*, CommandSpec, KeySpec, KeySpecDoc, KEY1};
use super::support::zset_ref;
use crate::error::{CmdError, CmdResult};
use crate::protocol::number::parse_f64;
use crate::protocol::Frame;
use crate::store::zset::ZSet;
use bytes::Bytes;

const fn spec(
    name: &'static str,
    arity: i32,
    flags: u32,
    keys: KeySpec,
    handler: super::spec::Handler,
) -> CommandSpec {
    CommandSpec::leaf(name, arity, flags, keys, &["geo"], handler)
}

use super::spec::TWO_KEYS;

pub static COMMANDS: &[CommandSpec] = &[
    spec("geoadd", -5, WRITE | DENYOOM, KEY1, geoadd),
    spec("geodist", -4, READONLY, KEY1, geodist),
    spec("geohash", -2, READONLY, KEY1, geohash),
    spec("geopos", -2, READONLY, KEY1, geopos),
    spec(
        "georadius",
        -6,
        WRITE | DENYOOM | MOVABLE_KEYS,
        KEY1,
        georadius,
    ),
    spec("georadius_ro", -6, READONLY, KEY1, georadius_ro),
    spec(
        "georadiusbymember",
        -5,
        WRITE | DENYOOM | MOVABLE_KEYS,
        KEY1,
        georadiusbymember,
    ),
    spec(
        "georadiusbymember_ro",
        -5,
        READONLY,
        KEY1,
        georadiusbymember_ro,
    ),
    spec("geosearch", -7, READONLY, KEY1, geosearch),
    spec(
        "geosearchstore",
        -8,
        WRITE | DENYOOM,
        TWO_KEYS,
        geosearchstore,
    ),
];

const RO1: &[KeySpecDoc] = &[KeySpecDoc::range(&["RO", "access"], 1, 0)];

const OW: &[&str] = &["OW", "update"];

/// Redis 7.0's key specifications, as COMMAND INFO prints them.
pub static KEY_SPECS: &[(&str, &[KeySpecDoc])] = &[
    ("geoadd", &[KeySpecDoc::range(&["RW", "update"], 1, 0)]),
    ("geodist", RO1),
    ("geohash", RO1),
    ("geopos", RO1),
    (
        "georadius",
        &[
            KeySpecDoc::range(&["RO", "access"], 1, 0),
            KeySpecDoc::keyword(OW, "STORE", 6),
            KeySpecDoc::keyword(OW, "STOREDIST", 6),
        ],
    ),
    ("georadius_ro", RO1),
    (
        "georadiusbymember",
        &[
            KeySpecDoc::range(&["RO", "access"], 1, 0),
            KeySpecDoc::keyword(OW, "STORE", 5),
            KeySpecDoc::keyword(OW, "STOREDIST", 5),
        ],
    ),
    ("georadiusbymember_ro", RO1),
    ("geosearch", RO1),
    (
        "geosearchstore",
        &[
            KeySpecDoc::range(&["OW", "update"], 1, 0),
            KeySpecDoc::range(&["RO", "access"], 2, 0),
        ],
    ),
];

// ---- geohash.c / geohash_helper.c ----

const GEO_STEP_MAX: u8 = 26;
const GEO_LAT_MIN: f64 = -85.05112878;
const GEO_LAT_MAX: f64 = 85.05112878;
const GEO_LONG_MIN: f64 = -180.0;
const GEO_LONG_MAX: f64 = 180.0;
const D_R: f64 = std::f64::consts::PI / 180.0;
const EARTH_RADIUS_IN_METERS: f64 = 6372797.560856;
const MERCATOR_MAX: f64 = 20037726.37;

#[derive(Clone, Copy, Default, PartialEq)]
struct Bits {
    bits: u64,
    step: u8,
}

impl Bits {
    fn is_zero(&self) -> bool {
        self.bits == 0 && self.step == 0
    }
}

#[derive(Clone, Copy)]
struct Range {
    min: f64,
    max: f64,
}

const LONG_RANGE: Range = Range {
    min: GEO_LONG_MIN,
    max: GEO_LONG_MAX,
};
const LAT_RANGE: Range = Range {
    min: GEO_LAT_MIN,
    max: GEO_LAT_MAX,
};

#[derive(Clone, Copy, Default)]
struct Area {
    lon_min: f64,
    lon_max: f64,
    lat_min: f64,
    lat_max: f64,
}

fn deg_rad(ang: f64) -> f64 {
    ang * D_R
}

fn rad_deg(ang: f64) -> f64 {
    ang / D_R
}

fn interleave64(xlo: u32, ylo: u32) -> u64 {
    const B: [u64; 5] = [
        0x5555555555555555,
        0x3333333333333333,
        0x0F0F0F0F0F0F0F0F,
        0x00FF00FF00FF00FF,
        0x0000FFFF0000FFFF,
    ];
    const S: [u32; 5] = [1, 2, 4, 8, 16];
    let mut x = xlo as u64;
    let mut y = ylo as u64;
    for i in (0..5).rev() {
        x = (x | (x << S[i])) & B[i];
        y = (y | (y << S[i])) & B[i];
    }
    x | (y << 1)
}

fn deinterleave64(interleaved: u64) -> u64 {
    const B: [u64; 6] = [
        0x5555555555555555,
        0x3333333333333333,
        0x0F0F0F0F0F0F0F0F,
        0x00FF00FF00FF00FF,
        0x0000FFFF0000FFFF,
        0x00000000FFFFFFFF,
    ];
    const S: [u32; 6] = [0, 1, 2, 4, 8, 16];
    let mut x = interleaved;
    let mut y = interleaved >> 1;
    for i in 0..6 {
        x = (x | (x >> S[i])) & B[i];
        y = (y | (y >> S[i])) & B[i];
    }
    x | (y << 32)
}

/// geohashEncode: None where Redis returns 0.
fn encode(lon_r: Range, lat_r: Range, longitude: f64, latitude: f64, step: u8) -> Option<Bits> {
    if step > 32 || step == 0 {
        return None;
    }
    if !(GEO_LONG_MIN..=GEO_LONG_MAX).contains(&longitude)
        || !(GEO_LAT_MIN..=GEO_LAT_MAX).contains(&latitude)
    {
        return None;
    }
    if latitude < lat_r.min
        || latitude > lat_r.max
        || longitude < lon_r.min
        || longitude > lon_r.max
    {
        return None;
    }
    let mut lat_offset = (latitude - lat_r.min) / (lat_r.max - lat_r.min);
    let mut long_offset = (longitude - lon_r.min) / (lon_r.max - lon_r.min);
    lat_offset *= (1u64 << step) as f64;
    long_offset *= (1u64 << step) as f64;
    Some(Bits {
        bits: interleave64(lat_offset as u32, long_offset as u32),
        step,
    })
}

fn encode_wgs84(longitude: f64, latitude: f64, step: u8) -> Option<Bits> {
    encode(LONG_RANGE, LAT_RANGE, longitude, latitude, step)
}

/// geohashDecode over the WGS84 ranges.
fn decode(hash: Bits) -> Option<Area> {
    if hash.is_zero() {
        return None;
    }
    let step = hash.step;
    let hash_sep = deinterleave64(hash.bits);
    let lat_scale = LAT_RANGE.max - LAT_RANGE.min;
    let long_scale = LONG_RANGE.max - LONG_RANGE.min;
    let ilato = hash_sep as u32;
    let ilono = (hash_sep >> 32) as u32;
    let div = (1u64 << step) as f64;
    Some(Area {
        lat_min: LAT_RANGE.min + (ilato as f64 * 1.0 / div) * lat_scale,
        lat_max: LAT_RANGE.min + (ilato.wrapping_add(1) as f64 * 1.0 / div) * lat_scale,
        lon_min: LONG_RANGE.min + (ilono as f64 * 1.0 / div) * long_scale,
        lon_max: LONG_RANGE.min + (ilono.wrapping_add(1) as f64 * 1.0 / div) * long_scale,
    })
}

fn decode_to_lon_lat(hash: Bits) -> Option<[f64; 2]> {
    let a = decode(hash)?;
    let mut x = (a.lon_min + a.lon_max) / 2.0;
    x = x.clamp(GEO_LONG_MIN, GEO_LONG_MAX);
    let mut y = (a.lat_min + a.lat_max) / 2.0;
    y = y.clamp(GEO_LAT_MIN, GEO_LAT_MAX);
    Some([x, y])
}

/// What C's `(uint64_t)d` gives on x86-64 (gcc's sequence: cvttsd2si below 2^63, else
/// subtract 2^63 and flip the top bit; out-of-range conversions yield 0x8000000000000000),
/// so sorted-set scores that are not geohashes decode to the same garbage as in Redis.
fn c_double_to_u64(d: f64) -> u64 {
    const TWO63: f64 = 9223372036854775808.0;
    const INDEFINITE: u64 = 1 << 63;
    fn cvtt(d: f64) -> u64 {
        if !(-TWO63..TWO63).contains(&d) {
            INDEFINITE
        } else {
            d as i64 as u64
        }
    }
    if d >= TWO63 {
        cvtt(d - TWO63) ^ INDEFINITE
    } else {
        cvtt(d)
    }
}

/// decodeGeohash: a member's score to (longitude, latitude).
fn decode_score(score: f64) -> Option<[f64; 2]> {
    decode_to_lon_lat(Bits {
        bits: c_double_to_u64(score),
        step: GEO_STEP_MAX,
    })
}

fn move_x(hash: &mut Bits, d: i8) {
    if d == 0 {
        return;
    }
    let mut x = hash.bits & 0xaaaaaaaaaaaaaaaa;
    let y = hash.bits & 0x5555555555555555;
    let zz = 0x5555555555555555u64 >> (64 - hash.step as u32 * 2);
    if d > 0 {
        x = x.wrapping_add(zz + 1);
    } else {
        x |= zz;
        x = x.wrapping_sub(zz + 1);
    }
    x &= 0xaaaaaaaaaaaaaaaau64 >> (64 - hash.step as u32 * 2);
    hash.bits = x | y;
}

fn move_y(hash: &mut Bits, d: i8) {
    if d == 0 {
        return;
    }
    let x = hash.bits & 0xaaaaaaaaaaaaaaaa;
    let mut y = hash.bits & 0x5555555555555555;
    let zz = 0xaaaaaaaaaaaaaaaau64 >> (64 - hash.step as u32 * 2);
    if d > 0 {
        y = y.wrapping_add(zz + 1);
    } else {
        y |= zz;
        y = y.wrapping_sub(zz + 1);
    }
    y &= 0x5555555555555555u64 >> (64 - hash.step as u32 * 2);
    hash.bits = x | y;
}

/// The 8 neighbours in membersOfAllNeighbors' order after the centre: N S E W NE NW SE SW.
fn neighbors(hash: Bits) -> [Bits; 8] {
    let mv = |dx: i8, dy: i8| {
        let mut h = hash;
        move_x(&mut h, dx);
        move_y(&mut h, dy);
        h
    };
    [
        mv(0, 1),
        mv(0, -1),
        mv(1, 0),
        mv(-1, 0),
        mv(1, 1),
        mv(-1, 1),
        mv(1, -1),
        mv(-1, -1),
    ]
}
const N: usize = 0;
const S: usize = 1;
const E: usize = 2;
const W: usize = 3;
const NE: usize = 4;
const NW: usize = 5;
const SE: usize = 6;
const SW: usize = 7;

fn estimate_steps_by_radius(mut range_meters: f64, lat: f64) -> u8 {
    if range_meters == 0.0 {
        return 26;
    }
    let mut step: i32 = 1;
    // Doubling from the smallest positive double reaches MERCATOR_MAX in ~1100 rounds.
    while range_meters < MERCATOR_MAX {
        range_meters *= 2.0;
        step += 1;
    }
    step -= 2;
    if !(-66.0..=66.0).contains(&lat) {
        step -= 1;
        if !(-80.0..=80.0).contains(&lat) {
            step -= 1;
        }
    }
    step.clamp(1, 26) as u8
}

#[derive(Clone, Copy)]
enum ShapeKind {
    Radius(f64),
    Box { width: f64, height: f64 },
}

#[derive(Clone, Copy)]
struct Shape {
    xy: [f64; 2],
    conversion: f64,
    kind: ShapeKind,
}

/// geohashBoundingBox: [min_lon, min_lat, max_lon, max_lat].
fn bounding_box(shape: &Shape) -> [f64; 4] {
    let longitude = shape.xy[0];
    let latitude = shape.xy[1];
    let (height, width) = match shape.kind {
        ShapeKind::Radius(r) => (shape.conversion * r, shape.conversion * r),
        ShapeKind::Box { width, height } => (
            shape.conversion * (height / 2.0),
            shape.conversion * (width / 2.0),
        ),
    };
    let lat_delta = rad_deg(height / EARTH_RADIUS_IN_METERS);
    let long_delta_top =
        rad_deg(width / EARTH_RADIUS_IN_METERS / deg_rad(latitude + lat_delta).cos());
    let long_delta_bottom =
        rad_deg(width / EARTH_RADIUS_IN_METERS / deg_rad(latitude - lat_delta).cos());
    let southern = latitude < 0.0;
    [
        if southern {
            longitude - long_delta_bottom
        } else {
            longitude - long_delta_top
        },
        latitude - lat_delta,
        if southern {
            longitude + long_delta_bottom
        } else {
            longitude + long_delta_top
        },
        latitude + lat_delta,
    ]
}

/// geohashCalculateAreasByShapeWGS84: the centre box and its 8 neighbours (zeroed where
/// useless), in search order.
fn areas_by_shape(shape: &Shape) -> [Bits; 9] {
    let [min_lon, min_lat, max_lon, max_lat] = bounding_box(shape);
    let longitude = shape.xy[0];
    let latitude = shape.xy[1];
    let mut radius_meters = match shape.kind {
        ShapeKind::Radius(r) => r,
        ShapeKind::Box { width, height } => {
            ((width / 2.0) * (width / 2.0) + (height / 2.0) * (height / 2.0)).sqrt()
        }
    };
    radius_meters *= shape.conversion;
    let mut steps = estimate_steps_by_radius(radius_meters, latitude);
    let mut hash = encode_wgs84(longitude, latitude, steps).unwrap_or_default();
    let mut nb = neighbors(hash);
    let mut area = decode(hash).unwrap_or_default();
    let dec = |h: Bits| decode(h).unwrap_or_default();
    let decrease_step = dec(nb[N]).lat_max < max_lat
        || dec(nb[S]).lat_min > min_lat
        || dec(nb[E]).lon_max < max_lon
        || dec(nb[W]).lon_min > min_lon;
    if steps > 1 && decrease_step {
        steps -= 1;
        hash = encode_wgs84(longitude, latitude, steps).unwrap_or_default();
        nb = neighbors(hash);
        area = decode(hash).unwrap_or_default();
    }
    if steps >= 2 {
        let zero = |nb: &mut [Bits; 8], ids: [usize; 3]| {
            for i in ids {
                nb[i] = Bits::default();
            }
        };
        if area.lat_min < min_lat {
            zero(&mut nb, [S, SW, SE]);
        }
        if area.lat_max > max_lat {
            zero(&mut nb, [N, NE, NW]);
        }
        if area.lon_min < min_lon {
            zero(&mut nb, [W, SW, NW]);
        }
        if area.lon_max > max_lon {
            zero(&mut nb, [E, SE, NE]);
        }
    }
    [
        hash, nb[N], nb[S], nb[E], nb[W], nb[NE], nb[NW], nb[SE], nb[SW],
    ]
}

fn align52(hash: Bits) -> u64 {
    hash.bits << (52 - hash.step as u32 * 2)
}

fn lat_distance(lat1d: f64, lat2d: f64) -> f64 {
    EARTH_RADIUS_IN_METERS * (deg_rad(lat2d) - deg_rad(lat1d)).abs()
}

/// geohashGetDistance: the haversine distance in meters.
fn distance(lon1d: f64, lat1d: f64, lon2d: f64, lat2d: f64) -> f64 {
    let lon1r = deg_rad(lon1d);
    let lon2r = deg_rad(lon2d);
    let v = ((lon2r - lon1r) / 2.0).sin();
    if v == 0.0 {
        return lat_distance(lat1d, lat2d);
    }
    let lat1r = deg_rad(lat1d);
    let lat2r = deg_rad(lat2d);
    let u = ((lat2r - lat1r) / 2.0).sin();
    let a = u * u + lat1r.cos() * lat2r.cos() * v * v;
    2.0 * EARTH_RADIUS_IN_METERS * a.sqrt().asin()
}

/// geoWithinShape: the point's coordinates and distance from the centre if it is inside.
fn within_shape(shape: &Shape, score: f64) -> Option<([f64; 2], f64)> {
    let xy = decode_score(score)?;
    let [x1, y1] = shape.xy;
    let [x2, y2] = xy;
    match shape.kind {
        ShapeKind::Radius(r) => {
            let d = distance(x1, y1, x2, y2);
            (d <= r * shape.conversion).then_some((xy, d))
        }
        ShapeKind::Box { width, height } => {
            let width_m = width * shape.conversion;
            let height_m = height * shape.conversion;
            if lat_distance(y2, y1) > height_m / 2.0 {
                return None;
            }
            if distance(x2, y2, x1, y2) > width_m / 2.0 {
                return None;
            }
            Some((xy, distance(x1, y1, x2, y2)))
        }
    }
}

struct Point {
    member: Bytes,
    score: f64,
    xy: [f64; 2],
    dist: f64,
}

/// membersOfAllNeighbors: every member of the 9 boxes inside the shape, box by box in score
/// order, stopping once `limit` (COUNT ANY; 0 = none) points were found.
fn members_of_all_neighbors(z: &ZSet, shape: &Shape, limit: usize) -> Vec<Point> {
    let boxes = areas_by_shape(shape);
    let mut out: Vec<Point> = Vec::new();
    let mut last_processed = 0usize;
    for (i, &hash) in boxes.iter().enumerate() {
        if hash.is_zero() {
            continue;
        }
        // Redis only skips a box equal to the previously *processed* one, and never compares
        // with the centre box (index 0 reads as "nothing processed yet").
        if last_processed != 0 && hash == boxes[last_processed] {
            continue;
        }
        if !out.is_empty() && limit != 0 && out.len() >= limit {
            break;
        }
        let min = align52(hash) as f64;
        let max = align52(Bits {
            bits: hash.bits.wrapping_add(1),
            step: hash.step,
        }) as f64;
        let start = z.count_before(|s, _| s < min);
        for (m, s) in z.iter_from(start) {
            if s >= max {
                break;
            }
            if let Some((xy, dist)) = within_shape(shape, s) {
                out.push(Point {
                    member: m.clone(),
                    score: s,
                    xy,
                    dist,
                });
            }
            if !out.is_empty() && limit != 0 && out.len() >= limit {
                break;
            }
        }
        last_processed = i;
    }
    out
}

/// Redis's pqsort.c (BSD qsort that only recurses into partitions overlapping the element
/// range lrange..=rrange), in element indices, so ties at a COUNT cut fall as in Redis.
fn pqsort<T>(v: &mut [T], cmp: &impl Fn(&T, &T) -> i32, lrange: usize, rrange: usize) {
    pqsort_part(v, 0, v.len(), cmp, lrange, rrange);
}

fn med3<T>(v: &[T], a: usize, b: usize, c: usize, cmp: &impl Fn(&T, &T) -> i32) -> usize {
    if cmp(&v[a], &v[b]) < 0 {
        if cmp(&v[b], &v[c]) < 0 {
            b
        } else if cmp(&v[a], &v[c]) < 0 {
            c
        } else {
            a
        }
    } else if cmp(&v[b], &v[c]) > 0 {
        b
    } else if cmp(&v[a], &v[c]) < 0 {
        a
    } else {
        c
    }
}

fn vecswap<T>(v: &mut [T], a: usize, b: usize, n: usize) {
    for i in 0..n {
        v.swap(a + i, b + i);
    }
}

fn pqsort_part<T>(
    v: &mut [T],
    mut a: usize,
    mut n: usize,
    cmp: &impl Fn(&T, &T) -> i32,
    lr: usize,
    rr: usize,
) {
    // Whether the partition [l, l + cnt) holds none of lr..=rr.
    let outside = |l: usize, cnt: usize| (lr < l && rr < l) || (lr >= l + cnt && rr >= l + cnt);
    loop {
        if n < 7 {
            for pm in a + 1..a + n {
                let mut pl = pm;
                while pl > a && cmp(&v[pl - 1], &v[pl]) > 0 {
                    v.swap(pl, pl - 1);
                    pl -= 1;
                }
            }
            return;
        }
        let mut pm = a + n / 2;
        if n > 7 {
            let mut pl = a;
            let mut pn = a + n - 1;
            if n > 40 {
                let d = n / 8;
                pl = med3(v, pl, pl + d, pl + 2 * d, cmp);
                pm = med3(v, pm - d, pm, pm + d, cmp);
                pn = med3(v, pn - 2 * d, pn - d, pn, cmp);
            }
            pm = med3(v, pl, pm, pn, cmp);
        }
        v.swap(a, pm);
        let (mut pa, mut pb) = (a + 1, a + 1);
        let (mut pc, mut pd) = (a + n - 1, a + n - 1);
        loop {
            while pb <= pc {
                let c = cmp(&v[pb], &v[a]);
                if c > 0 {
                    break;
                }
                if c == 0 {
                    v.swap(pa, pb);
                    pa += 1;
                }
                pb += 1;
            }
            while pb <= pc {
                let c = cmp(&v[pc], &v[a]);
                if c < 0 {
                    break;
                }
                if c == 0 {
                    v.swap(pc, pd);
                    pd -= 1;
                }
                pc -= 1;
            }
            if pb > pc {
                break;
            }
            v.swap(pb, pc);
            pb += 1;
            pc -= 1;
        }
        let pn = a + n;
        let r = (pa - a).min(pb - pa);
        vecswap(v, a, pb - r, r);
        let r = (pd - pc).min(pn - pd - 1);
        vecswap(v, pb, pn - r, r);
        let r = pb - pa;
        if r > 1 && !outside(a, r) {
            pqsort_part(v, a, r, cmp, lr, rr);
        }
        let r = pd - pc;
        if r > 1 {
            a = pn - r;
            n = r;
            if !outside(a, n) {
                continue;
            }
        }
        return;
    }
}

// ---- reply formatting ----

/// Redis's `ld2string(LD_STR_HUMAN)` of a double: `%.17Lf` with trailing zeros (and a bare
/// point) removed. A double widens to long double exactly and Rust's fixed-precision
/// formatting rounds the exact value half-to-even, as glibc does.
fn human(v: f64) -> String {
    let mut s = format!("{v:.17}");
    if s.contains('.') {
        let t = s.trim_end_matches('0').trim_end_matches('.').len();
        s.truncate(t);
    }
    if s == "-0" {
        s = "0".into();
    }
    s
}

/// addReplyHumanLongDouble: a bulk string in RESP2, a double in RESP3, both with the
/// `%.17Lf`-trimmed text rather than the `%.17g` of other doubles.
/// The encoder (and a script's RESP2 conversion) turns it into the bulk string.
fn coord(v: f64) -> Frame {
    Frame::DoubleText(v, Bytes::from(human(v)))
}

/// addReplyDoubleDistance: fixedpoint_d2string(d, 4) as a bulk string.
fn distance_reply(d: f64) -> Frame {
    let v = (d * 10000.0).round_ties_even();
    let v = if v.is_finite() && v.abs() < 9.2e18 {
        v as i64
    } else {
        i64::MIN
    };
    let neg = v < 0;
    let a = v.unsigned_abs();
    Frame::Bulk(Bytes::from(format!(
        "{}{}.{:04}",
        if neg { "-" } else { "" },
        a / 10000,
        a % 10000
    )))
}

// ---- argument helpers ----

fn unit(b: &[u8]) -> CmdResult<f64> {
    if is(b, "m") {
        Ok(1.0)
    } else if is(b, "km") {
        Ok(1000.0)
    } else if is(b, "ft") {
        Ok(0.3048)
    } else if is(b, "mi") {
        Ok(1609.34)
    } else {
        Err(CmdError::err(
            "ERR unsupported unit provided. please use M, KM, FT, MI",
        ))
    }
}

fn double_or(b: &[u8], msg: &'static str) -> CmdResult<f64> {
    parse_f64(b).ok_or(CmdError::err(msg))
}

/// extractLongLatOrReply.
fn lon_lat(lon: &[u8], lat: &[u8]) -> CmdResult<[f64; 2]> {
    let x = float_arg(lon)?;
    let y = float_arg(lat)?;
    if !(GEO_LONG_MIN..=GEO_LONG_MAX).contains(&x) || !(GEO_LAT_MIN..=GEO_LAT_MAX).contains(&y) {
        return Err(CmdError::erf(format!(
            "invalid longitude,latitude pair {x:.6},{y:.6}"
        )));
    }
    Ok([x, y])
}

/// extractDistanceOrReply: (radius, conversion).
fn radius_arg(r: &[u8], u: &[u8]) -> CmdResult<(f64, f64)> {
    let d = double_or(r, "ERR need numeric radius")?;
    if d < 0.0 {
        return Err(CmdError::err("ERR radius cannot be negative"));
    }
    Ok((d, unit(u)?))
}

/// extractBoxOrReply: (width, height, conversion).
fn box_arg(w: &[u8], h: &[u8], u: &[u8]) -> CmdResult<(f64, f64, f64)> {
    let w = double_or(w, "ERR need numeric width")?;
    let h = double_or(h, "ERR need numeric height")?;
    if h < 0.0 || w < 0.0 {
        return Err(CmdError::err("ERR height or width cannot be negative"));
    }
    Ok((w, h, unit(u)?))
}

fn member_xy(z: &ZSet, member: &[u8]) -> CmdResult<[f64; 2]> {
    z.score(member)
        .and_then(decode_score)
        .ok_or(CmdError::err("ERR could not decode requested zset member"))
}

// ---- commands ----

/// GEOADD key [NX|XX] [CH] lon lat member ...: rewritten into ZADD, as Redis does, so events
/// (`zadd`), replies and flag rules are ZADD's.
fn geoadd(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let (mut xx, mut nx) = (false, false);
    let mut longidx = 2;
    while longidx < argv.len() {
        let o = &argv[longidx];
        if is(o, "nx") {
            nx = true;
        } else if is(o, "xx") {
            xx = true;
        } else if !is(o, "ch") {
            break;
        }
        longidx += 1;
    }
    let rest = &argv[longidx..];
    if rest.len() % 3 != 0 || (xx && nx) {
        return Err(CmdError::Syntax);
    }
    let mut zargv: Vec<Bytes> = Vec::with_capacity(longidx + rest.len() / 3 * 2);
    zargv.push(Bytes::from_static(b"zadd"));
    zargv.extend_from_slice(&argv[1..longidx]);
    let mut buf = itoa::Buffer::new();
    for t in rest.chunks(3) {
        let [x, y] = lon_lat(&t[0], &t[1])?;
        let bits = encode_wgs84(x, y, GEO_STEP_MAX).map_or(0, align52);
        zargv.push(Bytes::copy_from_slice(buf.format(bits).as_bytes()));
        zargv.push(t[2].clone());
    }
    super::dispatch::call_handler(ctx, &zargv)
}

fn geodist(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let to_meter = match argv.len() {
        5 => unit(&argv[4])?,
        n if n > 5 => return Err(CmdError::Syntax),
        _ => 1.0,
    };
    let Some(z) = zset_ref(ctx, &argv[1])? else {
        return Ok(Frame::Null);
    };
    let (Some(s1), Some(s2)) = (z.score(&argv[2]), z.score(&argv[3])) else {
        return Ok(Frame::Null);
    };
    match (decode_score(s1), decode_score(s2)) {
        (Some(a), Some(b)) => Ok(distance_reply(distance(a[0], a[1], b[0], b[1]) / to_meter)),
        _ => Ok(Frame::Null),
    }
}

fn geohash(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    const ALPHABET: &[u8; 32] = b"0123456789bcdefghjkmnpqrstuvwxyz";
    let z = zset_ref(ctx, &argv[1])?;
    let out = argv[2..]
        .iter()
        .map(|m| {
            let Some(xy) = z.and_then(|z| z.score(m)).and_then(decode_score) else {
                return Frame::Null;
            };
            // Redis stores latitudes in -85..85; the standard geohash string uses -90..90.
            let r_lon = Range {
                min: -180.0,
                max: 180.0,
            };
            let r_lat = Range {
                min: -90.0,
                max: 90.0,
            };
            let bits = encode(r_lon, r_lat, xy[0], xy[1], 26).map_or(0, |h| h.bits);
            let mut s = [0u8; 11];
            for (i, c) in s.iter_mut().enumerate() {
                let idx = if i == 10 {
                    0
                } else {
                    (bits >> (52 - (i + 1) * 5)) & 0x1f
                };
                *c = ALPHABET[idx as usize];
            }
            Frame::Bulk(Bytes::copy_from_slice(&s))
        })
        .collect();
    Ok(Frame::Array(out))
}

fn geopos(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let z = zset_ref(ctx, &argv[1])?;
    let out = argv[2..]
        .iter()
        .map(
            |m| match z.and_then(|z| z.score(m)).and_then(decode_score) {
                Some([x, y]) => Frame::Array(vec![coord(x), coord(y)]),
                None => Frame::NullArray,
            },
        )
        .collect();
    Ok(Frame::Array(out))
}

#[derive(Clone, Copy, PartialEq)]
enum Kind {
    /// GEORADIUS / GEORADIUS_RO (`nostore`).
    Coords { nostore: bool },
    /// GEORADIUSBYMEMBER / _RO.
    Member { nostore: bool },
    /// GEOSEARCH / GEOSEARCHSTORE.
    Search { store: bool },
}

#[derive(Clone, Copy, PartialEq)]
enum Sort {
    None,
    Asc,
    Desc,
}

/// Redis's georadiusGeneric, with its parsing order (and so its error precedence).
fn georadius_generic(ctx: &mut Ctx, argv: &[Bytes], src: usize, kind: Kind) -> CmdResult {
    let has_key = zset_ref(ctx, &argv[src])?.is_some();
    let mut storekey: Option<&Bytes> = None;
    let mut storedist = false;
    let mut shape = Shape {
        xy: [0.0, 0.0],
        conversion: 0.0,
        kind: ShapeKind::Radius(0.0),
    };
    let base_args;
    let nostore;
    let search;
    match kind {
        Kind::Coords { nostore: ns } => {
            base_args = 6;
            nostore = ns;
            search = false;
            shape.xy = lon_lat(&argv[2], &argv[3])?;
            let (r, c) = radius_arg(&argv[4], &argv[5])?;
            shape.kind = ShapeKind::Radius(r);
            shape.conversion = c;
        }
        Kind::Member { nostore: ns } => {
            base_args = 5;
            nostore = ns;
            search = false;
            if has_key {
                let z = zset_ref(ctx, &argv[src])?.ok_or(CmdError::WrongType)?;
                shape.xy = member_xy(z, &argv[2])?;
                let (r, c) = radius_arg(&argv[3], &argv[4])?;
                shape.kind = ShapeKind::Radius(r);
                shape.conversion = c;
            }
        }
        Kind::Search { store } => {
            nostore = false;
            search = true;
            base_args = if store { 3 } else { 2 };
            if store {
                storekey = Some(&argv[1]);
            }
        }
    }
    let searchstore = kind == Kind::Search { store: true };
    let (mut withdist, mut withhash, mut withcoords) = (false, false, false);
    let (mut frommember, mut fromloc, mut byradius, mut bybox) = (false, false, false, false);
    let mut sort = Sort::None;
    let mut any = false;
    let mut count: i64 = 0;
    let opts = argv.get(base_args..).unwrap_or_default();
    let remaining = opts.len();
    let mut i = 0;
    while i < remaining {
        let arg = &opts[i];
        if is(arg, "withdist") {
            withdist = true;
        } else if is(arg, "withhash") {
            withhash = true;
        } else if is(arg, "withcoord") {
            withcoords = true;
        } else if is(arg, "any") {
            any = true;
        } else if is(arg, "asc") {
            sort = Sort::Asc;
        } else if is(arg, "desc") {
            sort = Sort::Desc;
        } else if is(arg, "count") && i + 1 < remaining {
            count = int_arg(&opts[i + 1])?;
            if count <= 0 {
                return Err(CmdError::err("ERR COUNT must be > 0"));
            }
            i += 1;
        } else if (is(arg, "store") || is(arg, "storedist"))
            && i + 1 < remaining
            && !nostore
            && !search
        {
            storekey = Some(&opts[i + 1]);
            storedist = is(arg, "storedist");
            i += 1;
        } else if is(arg, "storedist") && searchstore {
            storedist = true;
        } else if is(arg, "frommember") && i + 1 < remaining && search && !fromloc {
            if has_key {
                let z = zset_ref(ctx, &argv[src])?.ok_or(CmdError::WrongType)?;
                shape.xy = member_xy(z, &opts[i + 1])?;
            }
            frommember = true;
            i += 1;
        } else if is(arg, "fromlonlat") && i + 2 < remaining && search && !frommember {
            shape.xy = lon_lat(&opts[i + 1], &opts[i + 2])?;
            fromloc = true;
            i += 2;
        } else if is(arg, "byradius") && i + 2 < remaining && search && !bybox {
            let (r, c) = radius_arg(&opts[i + 1], &opts[i + 2])?;
            shape.kind = ShapeKind::Radius(r);
            shape.conversion = c;
            byradius = true;
            i += 2;
        } else if is(arg, "bybox") && i + 3 < remaining && search && !byradius {
            let (w, h, c) = box_arg(&opts[i + 1], &opts[i + 2], &opts[i + 3])?;
            shape.kind = ShapeKind::Box {
                width: w,
                height: h,
            };
            shape.conversion = c;
            bybox = true;
            i += 3;
        } else {
            return Err(CmdError::Syntax);
        }
        i += 1;
    }
    if storekey.is_some() && (withdist || withhash || withcoords) {
        return Err(CmdError::erf(format!(
            "{} is not compatible with WITHDIST, WITHHASH and WITHCOORD options",
            if searchstore {
                "GEOSEARCHSTORE"
            } else {
                "STORE option in GEORADIUS"
            }
        )));
    }
    if search && !(frommember || fromloc) {
        return Err(CmdError::erf(format!(
            "exactly one of FROMMEMBER or FROMLONLAT can be specified for {}",
            String::from_utf8_lossy(&argv[0])
        )));
    }
    if search && !(byradius || bybox) {
        return Err(CmdError::erf(format!(
            "exactly one of BYRADIUS and BYBOX can be specified for {}",
            String::from_utf8_lossy(&argv[0])
        )));
    }
    if any && count == 0 {
        return Err(CmdError::err(
            "ERR the ANY argument requires COUNT argument",
        ));
    }
    let Some(z) = zset_ref(ctx, &argv[src])? else {
        return match storekey {
            Some(dest) => {
                super::support::delete_dest(ctx, dest);
                Ok(Frame::Integer(0))
            }
            None => Ok(Frame::Array(Vec::new())),
        };
    };
    if count != 0 && sort == Sort::None && !any {
        sort = Sort::Asc;
    }
    // COUNT only bounds what is kept: nothing is allocated by it before points are found.
    let limit = if any {
        usize::try_from(count).unwrap_or(usize::MAX)
    } else {
        0
    };
    let mut points = members_of_all_neighbors(z, &shape, limit);
    if points.is_empty() && storekey.is_none() {
        return Ok(Frame::Array(Vec::new()));
    }
    let returned = if count == 0 {
        points.len()
    } else {
        points
            .len()
            .min(usize::try_from(count).unwrap_or(usize::MAX))
    };
    if sort != Sort::None {
        let desc = sort == Sort::Desc;
        let cmp = |a: &Point, b: &Point| {
            // sort_gp_asc / sort_gp_desc.
            let c = if a.dist > b.dist {
                1
            } else if a.dist == b.dist {
                0
            } else {
                -1
            };
            if desc {
                -c
            } else {
                c
            }
        };
        if returned == points.len() {
            // glibc 2.36's qsort is a stable merge sort: equal distances keep scan order.
            points.sort_by(|a, b| cmp(a, b).cmp(&0));
        } else if returned > 0 {
            // Which of several equidistant points make the cut is pqsort's choice.
            pqsort(&mut points, &cmp, 0, returned - 1);
        }
    }
    points.truncate(returned);
    for p in points.iter_mut() {
        p.dist /= shape.conversion;
    }
    if let Some(dest) = storekey {
        let mut out = ZSet::new();
        for p in points {
            out.insert(p.member, if storedist { p.dist } else { p.score });
        }
        let ev = if search {
            "geosearchstore"
        } else {
            "georadiusstore"
        };
        return super::support::store_result(ctx, dest, out, ev);
    }
    let extra = withdist as usize + withhash as usize + withcoords as usize;
    let reply = points
        .into_iter()
        .map(|p| {
            if extra == 0 {
                return Frame::Bulk(p.member);
            }
            let mut item = Vec::with_capacity(extra + 1);
            item.push(Frame::Bulk(p.member));
            if withdist {
                item.push(distance_reply(p.dist));
            }
            if withhash {
                item.push(Frame::Integer(p.score as i64));
            }
            if withcoords {
                item.push(Frame::Array(vec![coord(p.xy[0]), coord(p.xy[1])]));
            }
            Frame::Array(item)
        })
        .collect();
    Ok(Frame::Array(reply))
}

fn georadius(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    georadius_generic(ctx, argv, 1, Kind::Coords { nostore: false })
}

fn georadius_ro(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    georadius_generic(ctx, argv, 1, Kind::Coords { nostore: true })
}

fn georadiusbymember(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    georadius_generic(ctx, argv, 1, Kind::Member { nostore: false })
}

fn georadiusbymember_ro(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    georadius_generic(ctx, argv, 1, Kind::Member { nostore: true })
}

fn geosearch(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    georadius_generic(ctx, argv, 1, Kind::Search { store: false })
}

fn geosearchstore(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    georadius_generic(ctx, argv, 2, Kind::Search { store: true })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encode_decode_round_trip_matches_redis_examples() {
        // GEOADD Sicily 13.361389 38.115556 "Palermo": score 3479099956230698 in Redis.
        let h = encode_wgs84(13.361389, 38.115556, GEO_STEP_MAX).map(align52);
        assert_eq!(h, Some(3479099956230698));
        let xy = decode_score(3479099956230698.0).unwrap();
        assert_eq!(human(xy[0]), "13.36138933897018433");
        assert_eq!(human(xy[1]), "38.11555639549629859");
    }

    #[test]
    fn distance_text_rounds_like_fixedpoint_d2string() {
        assert_eq!(distance_reply(0.0), Frame::bulk_static("0.0000"));
        assert_eq!(distance_reply(0.00049), Frame::bulk_static("0.0005"));
        assert_eq!(
            distance_reply(166274.15156960033),
            Frame::bulk_static("166274.1516")
        );
    }

    #[test]
    fn c_conversion_of_odd_scores() {
        assert_eq!(c_double_to_u64(-1.0), u64::MAX);
        assert_eq!(c_double_to_u64(f64::INFINITY), 0);
        assert_eq!(c_double_to_u64(f64::NEG_INFINITY), 1 << 63);
        assert_eq!(c_double_to_u64(1e19), 10_000_000_000_000_000_000);
    }
}
