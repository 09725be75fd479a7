//! LOLWUT [VERSION v] [args]: Redis 7.0's computer art (lolwut.c, lolwut5.c, lolwut6.c). A
//! 7.0 server's own version has no art of its own ("Redis ver. 7.0.15"); VERSION 5 draws Georg
//! Nees' "Schotter" in Braille characters, VERSION 6 a random city skyline in ANSI colours.
//! Both are random, as in Redis; sizes are clamped to Redis's limits.

use super::args::{int_arg, is};
use super::spec::Ctx;
use super::spec::{flags::*, CommandSpec, NO_KEYS};
use crate::error::CmdResult;
use crate::machine::REDIS_VERSION;
use crate::protocol::Frame;
use bytes::Bytes;

pub static COMMANDS: &[CommandSpec] = &[CommandSpec::leaf(
    "lolwut",
    -1,
    READONLY | FAST,
    NO_KEYS,
    &["read", "fast"],
    lolwut,
)];

fn lolwut(_ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let (version, args) = if argv.len() >= 3 && is(&argv[1], "version") {
        // snprintf("%u.0.0", (unsigned int)ver) and a look at its first characters.
        (Some(int_arg(&argv[2])? as u32), &argv[3..])
    } else {
        (None, &argv[1..])
    };
    let text = match version {
        Some(5) => schotter(args)?,
        Some(6) => skyline(args)?,
        _ => format!("Redis ver. {REDIS_VERSION}\n"),
    };
    Ok(Frame::Verbatim(Bytes::from(text)))
}

/// C's rand(): 0..=RAND_MAX.
fn rand() -> i64 {
    fastrand::i64(0..=i32::MAX as i64)
}

const RAND_MAX: f32 = i32::MAX as f32;

/// An optional numeric argument (getLongFromObjectOrReply), clamped to `lo..=hi`.
fn arg(args: &[Bytes], i: usize, default: i64, lo: i64, hi: i64) -> CmdResult<i64> {
    Ok(match args.get(i) {
        Some(a) => int_arg(a)?,
        None => default,
    }
    .clamp(lo, hi))
}

struct Canvas {
    width: i32,
    height: i32,
    pixels: Vec<u8>,
}

impl Canvas {
    fn new(width: i32, height: i32, color: u8) -> Canvas {
        Canvas {
            width,
            height,
            pixels: vec![color; width as usize * height as usize],
        }
    }

    fn set(&mut self, x: i32, y: i32, color: u8) {
        if x >= 0 && x < self.width && y >= 0 && y < self.height {
            self.pixels[(x + y * self.width) as usize] = color;
        }
    }

    fn get(&self, x: i32, y: i32) -> u8 {
        if x >= 0 && x < self.width && y >= 0 && y < self.height {
            self.pixels[(x + y * self.width) as usize]
        } else {
            0
        }
    }

    /// Bresenham, as lwDrawLine.
    fn line(&mut self, mut x1: i32, mut y1: i32, x2: i32, y2: i32, color: u8) {
        let (dx, dy) = ((x2 - x1).abs(), (y2 - y1).abs());
        let (sx, sy) = (if x1 < x2 { 1 } else { -1 }, if y1 < y2 { 1 } else { -1 });
        let mut err = dx - dy;
        loop {
            self.set(x1, y1, color);
            if x1 == x2 && y1 == y2 {
                break;
            }
            let e2 = err * 2;
            if e2 > -dy {
                err -= dy;
                x1 += sx;
            }
            if e2 < dx {
                err += dx;
                y1 += sy;
            }
        }
    }

    /// lwDrawSquare: a square centred at x,y, rotated by `angle`.
    fn square(&mut self, x: i32, y: i32, size: f32, angle: f32, color: u8) {
        // Redis's own truncated constant, not SQRT_2: the same pixels.
        #[allow(clippy::approx_constant)]
        let size = ((size as f64 / 1.4142135623) as f32).round();
        let mut k: f32 = (std::f64::consts::PI / 4.0 + angle as f64) as f32;
        let (mut px, mut py) = ([0i32; 4], [0i32; 4]);
        for j in 0..4 {
            px[j] = ((k as f64).sin() * size as f64 + x as f64).round() as i32;
            py[j] = ((k as f64).cos() * size as f64 + y as f64).round() as i32;
            k = (k as f64 + std::f64::consts::PI / 2.0) as f32;
        }
        for j in 0..4 {
            self.line(px[j], py[j], px[(j + 1) % 4], py[(j + 1) % 4], color);
        }
    }
}

/// LOLWUT VERSION 5 [cols] [squares-per-row] [squares-per-col].
fn schotter(args: &[Bytes]) -> CmdResult<String> {
    let cols = arg(args, 0, 66, 1, 1000)?;
    let per_row = arg(args, 1, 8, 1, 200)?;
    let per_col = arg(args, 2, 12, 1, 200)?;
    let width = (cols * 2) as i32;
    let padding = if width > 4 { 2 } else { 0 };
    let side: f32 = (width - padding * 2) as f32 / per_row as f32;
    let height = (side * per_col as f32 + (padding * 2) as f32) as i32;
    let mut c = Canvas::new(width, height, 0);
    for y in 0..per_col {
        for x in 0..per_row {
            let mut sx = (x as f32 * side + side / 2.0 + padding as f32) as i32;
            let mut sy = (y as f32 * side + side / 2.0 + padding as f32) as i32;
            let mut angle = 0.0f32;
            if y > 1 {
                let mut r = [0f32; 3];
                for v in &mut r {
                    *v = rand() as f32 / RAND_MAX / per_col as f32 * y as f32;
                }
                for v in &mut r {
                    if rand() % 2 == 1 {
                        *v = -*v;
                    }
                }
                angle = r[0];
                sx = (sx as f32 + r[1] * side / 3.0) as i32;
                sy = (sy as f32 + r[2] * side / 3.0) as i32;
            }
            c.square(sx, sy, side, angle, 1);
        }
    }
    // Braille: each character is a 2x4 group of pixels.
    let mut text = String::new();
    let mut y = 0;
    while y < c.height {
        let mut x = 0;
        while x < c.width {
            let bits = [
                (x, y),
                (x, y + 1),
                (x, y + 2),
                (x + 1, y),
                (x + 1, y + 1),
                (x + 1, y + 2),
                (x, y + 3),
                (x + 1, y + 3),
            ];
            let byte = bits
                .iter()
                .enumerate()
                .filter(|(_, &(px, py))| c.get(px, py) != 0)
                .fold(0u32, |b, (i, _)| b | 1 << i);
            text.push(char::from_u32(0x2800 + byte).unwrap_or(' '));
            x += 2;
        }
        if y != c.height - 1 {
            text.push('\n');
        }
        y += 4;
    }
    text.push_str("\nGeorg Nees - schotter, plotter on paper, 1968. Redis ver. ");
    text.push_str(REDIS_VERSION);
    text.push('\n');
    Ok(text)
}

struct Skyscraper {
    xoff: i32,
    width: i32,
    height: i32,
    windows: bool,
    color: u8,
}

fn skyscraper(c: &mut Canvas, s: &Skyscraper) {
    let starty = c.height - 1;
    let endy = starty - s.height + 1;
    let mut y = starty;
    while y >= endy {
        for x in s.xoff..s.xoff + s.width {
            // The roof is four pixels less wide.
            if y == endy && (x <= s.xoff + 1 || x >= s.xoff + s.width - 2) {
                continue;
            }
            let mut color = s.color;
            if s.windows
                && x > s.xoff + 1
                && x < s.xoff + s.width - 2
                && y > endy + 1
                && y < starty - 1
            {
                let relx = x - (s.xoff + 1);
                let rely = y - (endy + 1);
                if (relx / 2) % 2 != 0 && rely % 2 != 0 {
                    loop {
                        color = 1 + (rand() % 2) as u8;
                        if color != s.color {
                            break;
                        }
                    }
                    if relx % 2 != 0 {
                        color = c.get(x - 1, y);
                    }
                }
            }
            c.set(x, y, color);
        }
        y -= 1;
    }
}

/// LOLWUT VERSION 6 [cols] [rows].
fn skyline(args: &[Bytes]) -> CmdResult<String> {
    let cols = arg(args, 0, 80, 1, 1000)? as i32;
    let rows = arg(args, 1, 20, 1, 1000)? as i32;
    let mut c = Canvas::new(cols, rows, 3);
    let r = |n: i32| (rand() % n as i64) as i32;
    for color in [2u8, 1] {
        let mut offset = -10;
        while offset < c.width {
            offset += r(8);
            let width = 10 + r(9);
            let height = if color == 2 {
                c.height / 2 + r(c.height) / 2
            } else {
                c.height / 2 + r(c.height) / 3
            };
            let s = Skyscraper {
                xoff: offset,
                width,
                height,
                windows: false,
                color,
            };
            skyscraper(&mut c, &s);
            offset += if color == 2 { width / 2 } else { width + 1 };
        }
    }
    let mut offset = -10;
    while offset < c.width {
        offset += r(8);
        let mut width = 5 + r(14);
        if width % 4 != 0 {
            width += width % 3;
        }
        let height = c.height / 3 + r(c.height) / 2;
        let s = Skyscraper {
            xoff: offset,
            width,
            height,
            windows: true,
            color: 0,
        };
        skyscraper(&mut c, &s);
        offset += width + 5;
    }
    let mut text = String::new();
    for y in 0..c.height {
        for x in 0..c.width {
            let ce = match c.get(x, y) {
                1 => "0;90;100m",
                2 => "0;37;47m",
                3 => "0;97;107m",
                _ => "0;30;40m",
            };
            text.push_str("\x1b[");
            text.push_str(ce);
            text.push_str(" \x1b[0m");
        }
        if y != c.height - 1 {
            text.push('\n');
        }
    }
    text.push_str("\nDedicated to the 8 bit game developers of past and present.\nOriginal 8 bit image from Plaguemon by hikikomori. Redis ver. ");
    text.push_str(REDIS_VERSION);
    text.push('\n');
    Ok(text)
}
