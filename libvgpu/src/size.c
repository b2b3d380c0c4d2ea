/* size.c: the one C parser of sizes (see vgpu_size.h). Pure; no allocation. */
#include "../include/vgpu_size.h"

#include <ctype.h>
#include <string.h>

/* The shift of a unit spelling, any case: "", "b", "k", "ki", "kib", ... "tib". */
static int size_unit_shift(const char *unit, unsigned bare_shift, unsigned *shift)
{
    static const char letters[] = "kmgt";
    if (unit[0] == '\0') {
        *shift = bare_shift;
        return 0;
    }
    char first = (char)tolower((unsigned char)unit[0]);
    if (first == 'b' && unit[1] == '\0') {
        *shift = 0;
        return 0;
    }
    const char *at = strchr(letters, first);
    if (at == NULL || first == '\0')
        return -1;
    const char *rest = unit + 1;
    int ok = rest[0] == '\0' ||
             (tolower((unsigned char)rest[0]) == 'i' &&
              (rest[1] == '\0' || (tolower((unsigned char)rest[1]) == 'b' && rest[2] == '\0')));
    if (!ok)
        return -1;
    *shift = 10u * (unsigned)(at - letters + 1);
    return 0;
}

int vgpu_parse_u64(const char **text, uint64_t *out)
{
    const char *p = *text;
    uint64_t x = 0;
    if (!isdigit((unsigned char)*p))
        return -1;
    for (; isdigit((unsigned char)*p); p++) {
        uint64_t d = (uint64_t)(*p - '0');
        if (x > (UINT64_MAX - d) / 10)
            return -1;
        x = x * 10 + d;
    }
    *out = x;
    *text = p;
    return 0;
}

int vgpu_parse_size(const char *text, unsigned bare_shift, uint64_t *out)
{
    uint64_t whole = 0;
    const char *p = text;
    if (text == NULL || vgpu_parse_u64(&p, &whole) != 0)
        return -1;
    /* The decimal part as frac / 10^places, trailing zeros dropped. */
    uint64_t frac = 0;
    unsigned places = 0;
    if (*p == '.') {
        p++;
        if (!isdigit((unsigned char)*p))
            return -1;
        for (; isdigit((unsigned char)*p); p++) {
            if (places == 18)
                return -1;
            frac = frac * 10 + (uint64_t)(*p - '0');
            places++;
        }
        while (places > 0 && frac % 10 == 0) {
            frac /= 10;
            places--;
        }
    }
    unsigned shift;
    if (size_unit_shift(p, bare_shift, &shift) != 0)
        return -1;
    if (shift > 0 && whole > (UINT64_MAX >> shift))
        return -1;
    uint64_t bytes = whole << shift;
    if (places > 0) {
        /* frac / 10^places * 2^shift is whole only when places <= shift and 5^places divides
         * frac; it is then (frac / 5^places) << (shift - places), less than 2^shift. */
        uint64_t five = 1;
        for (unsigned i = 0; i < places; i++)
            five *= 5;
        if (places > shift || frac % five != 0)
            return -1;
        uint64_t part = (frac / five) << (shift - places);
        if (bytes > UINT64_MAX - part)
            return -1;
        bytes += part;
    }
    *out = bytes;
    return 0;
}
