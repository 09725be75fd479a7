/* Redis's long double arithmetic for INCRBYFLOAT / HINCRBYFLOAT (util.c string2ld and
 * ld2string LD_STR_HUMAN, t_string.c incrbyfloatCommand). Rust has no long double, and Redis's
 * replies depend on it: x86-64's 80-bit extended precision both decides which sums are finite
 * (1e308 + 1e308) and, printed with %.17Lf, gives texts such as 1001.59999999999999998.
 *
 * Values cross the FFI boundary as the 16 bytes of storage a long double occupies, never as
 * long double arguments, so the Rust side needs no knowledge of the format. Every buffer comes
 * with its length; nothing here writes past it or reads past the given input length. */

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* util.h MAX_LONG_DOUBLE_CHARS: Redis's bound for a long double's text, both ways. */
#define DEADBOLT_LD_MAX_CHARS (5 * 1024)

_Static_assert(sizeof(long double) <= 16, "long double must fit the 16-byte slot");

static long double ld_load(const unsigned char slot[16]) {
    long double v;
    memcpy(&v, slot, sizeof v);
    return v;
}

static void ld_store(unsigned char slot[16], long double v) {
    memset(slot, 0, 16);
    memcpy(slot, &v, sizeof v);
}

/* Redis's string2ld. Returns 1 and stores the value in `out` when `s[0..len]` is a valid long
 * double (inf accepted, nan, spaces, empty and 5 KB or longer refused); 0 otherwise. */
int deadbolt_ld_parse(const char *s, size_t len, unsigned char out[16]) {
    char buf[DEADBOLT_LD_MAX_CHARS];
    char *eptr;
    long double value;

    if (len == 0 || len >= sizeof(buf)) return 0;
    memcpy(buf, s, len);
    buf[len] = '\0';

    errno = 0;
    value = strtold(buf, &eptr);
    if (isspace((unsigned char)buf[0]) || eptr[0] != '\0' || (size_t)(eptr - buf) != len ||
        (errno == ERANGE &&
         (value == HUGE_VALL || value == -HUGE_VALL || fpclassify(value) == FP_ZERO)) ||
        errno == EINVAL || isnan(value))
        return 0;
    ld_store(out, value);
    return 1;
}

/* Whether the stored value is infinite (HINCRBYFLOAT refuses such an increment). */
int deadbolt_ld_is_inf(const unsigned char v[16]) {
    return isinf(ld_load(v)) ? 1 : 0;
}

/* Redis's getTimeoutFromObjectOrReply in seconds: (long long) ceill(v * 1000.0), so a positive
 * timeout under a millisecond waits one millisecond rather than for ever. Converting a value
 * outside long long's range is undefined in C; x86-64 Redis gets LLONG_MIN there and answers
 * "timeout is negative", so LLONG_MIN is returned explicitly. */
long long deadbolt_ld_ceil_millis(const unsigned char v[16]) {
    long double ms = ceill(ld_load(v) * 1000.0L);
    if (!(ms >= -9223372036854775808.0L && ms < 9223372036854775808.0L)) return LLONG_MIN;
    return (long long)ms;
}

/* a + b printed as Redis's ld2string(LD_STR_HUMAN) into out[0..out_len]. Returns the text's
 * length (0: no room, which Redis stores as an empty string), or -1 when the sum is NaN or
 * infinite ("increment would produce NaN or Infinity"). */
long deadbolt_ld_add_human(const unsigned char a[16], const unsigned char b[16], char *out,
                           size_t out_len) {
    long double value = ld_load(a) + ld_load(b);
    int n;
    size_t l;

    if (isnan(value) || isinf(value)) return -1;
    if (out_len == 0) return 0;
    /* 17 digits after the point, then trailing zeros (and a bare point) removed. */
    n = snprintf(out, out_len, "%.17Lf", value);
    if (n < 0) return 0;
    l = (size_t)n;
    if (l + 1 > out_len) return 0;
    if (memchr(out, '.', l) != NULL) {
        while (l > 0 && out[l - 1] == '0') l--;
        if (l > 0 && out[l - 1] == '.') l--;
    }
    if (l == 2 && out[0] == '-' && out[1] == '0') {
        out[0] = '0';
        l = 1;
    }
    return (long)l;
}
