/* env.c: parsing of CUDA_DEVICE_MEMORY_LIMIT(_<i>). */
#include "env.h"

#include <stdio.h>
#include <string.h>

#include "log.h"

#define VGPU_SIZE_SYNTAX "a byte count, optionally with a suffix k, m, g, t or KiB, MiB, GiB, " \
                         "TiB (binary multiples), e.g. 3000m or 3GiB; 0 means no limit"

static int vgpu_size_shift(const char *suffix, unsigned *shift)
{
    static const char units[] = "kmgt";
    if (suffix[0] == '\0') {
        *shift = 0;
        return 0;
    }
    char c = suffix[0];
    if (c >= 'A' && c <= 'Z')
        c = (char)(c - 'A' + 'a');
    const char *u = strchr(units, c);
    if (u == NULL || c == '\0')
        return -1;
    const char *rest = suffix + 1;
    if (!(rest[0] == '\0' || strcmp(rest, "iB") == 0))
        return -1;
    *shift = 10u * (unsigned)(u - units + 1);
    return 0;
}

int vgpu_parse_size(const char *text, uint64_t *out)
{
    if (text == NULL || text[0] < '0' || text[0] > '9')
        return -1;
    uint64_t v = 0;
    const char *p = text;
    for (; *p >= '0' && *p <= '9'; p++) {
        uint64_t d = (uint64_t)(*p - '0');
        if (v > (UINT64_MAX - d) / 10)
            return -1;
        v = v * 10 + d;
    }
    unsigned shift;
    if (vgpu_size_shift(p, &shift) != 0)
        return -1;
    if (shift > 0 && v > (UINT64_MAX >> shift))
        return -1;
    *out = v << shift;
    return 0;
}

enum vgpu_env_kind { VGPU_ENV_ABSENT, VGPU_ENV_VALID, VGPU_ENV_MALFORMED };

static enum vgpu_env_kind vgpu_env_size(vgpu_getenv_fn get, const char *name, uint64_t *out)
{
    const char *v = get(name);
    if (v == NULL)
        return VGPU_ENV_ABSENT;
    if (vgpu_parse_size(v, out) != 0)
        return VGPU_ENV_MALFORMED;
    if (*out == 0)
        *out = VGPU_LIMIT_NONE;
    return VGPU_ENV_VALID;
}

void vgpu_env_memory_limits(vgpu_getenv_fn get, struct vgpu_env_limits *out)
{
    static const char general_name[] = "CUDA_DEVICE_MEMORY_LIMIT";
    uint64_t general = VGPU_LIMIT_NONE;
    enum vgpu_env_kind gk = vgpu_env_size(get, general_name, &general);
    out->malformed = 0;
    if (gk == VGPU_ENV_MALFORMED) {
        out->malformed++;
        vgpu_log(VGPU_LOG_ERROR, "%s='%s' is not a memory size (valid: %s); devices without "
                 "a valid %s_<i> refuse device memory", general_name, get(general_name),
                 VGPU_SIZE_SYNTAX, general_name);
    }
    for (unsigned i = 0; i < VGPU_MAX_DEVICES; i++) {
        char name[48];
        snprintf(name, sizeof name, "%s_%u", general_name, i);
        uint64_t own = VGPU_LIMIT_NONE;
        enum vgpu_env_kind k = vgpu_env_size(get, name, &own);
        if (k == VGPU_ENV_VALID) {
            out->limit[i] = own;
            continue;
        }
        if (k == VGPU_ENV_MALFORMED) {
            out->malformed++;
            if (gk == VGPU_ENV_VALID)
                vgpu_log(VGPU_LOG_ERROR, "%s='%s' is not a memory size (valid: %s); device %u "
                         "falls back to %s=%s", name, get(name), VGPU_SIZE_SYNTAX, i,
                         general_name, get(general_name));
            else
                vgpu_log(VGPU_LOG_ERROR, "%s='%s' is not a memory size (valid: %s); no other "
                         "valid limit applies, so device %u refuses device memory", name,
                         get(name), VGPU_SIZE_SYNTAX, i);
        }
        if (gk == VGPU_ENV_VALID)
            out->limit[i] = general;
        else if (gk == VGPU_ENV_MALFORMED || k == VGPU_ENV_MALFORMED)
            out->limit[i] = 0;
        else
            out->limit[i] = VGPU_LIMIT_NONE;
    }
}
