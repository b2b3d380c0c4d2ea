/* env.c: parsing of CUDA_DEVICE_MEMORY_LIMIT(_<i>). */
#include "env.h"

#include <stdio.h>
#include <string.h>

#include "log.h"
#include "vgpu_size.h"

enum vgpu_env_kind { VGPU_ENV_ABSENT, VGPU_ENV_VALID, VGPU_ENV_MALFORMED };

static enum vgpu_env_kind vgpu_env_size(vgpu_getenv_fn get, const char *name, uint64_t *out)
{
    const char *v = get(name);
    if (v == NULL)
        return VGPU_ENV_ABSENT;
    if (vgpu_parse_size(v, 0, out) != 0) /* bytes without a unit: HAMi's contract */
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
