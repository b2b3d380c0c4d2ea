/* log.c: one vgpu_log() to stderr, prefixed "libvgpu[pid]: ", level read once. */
#include "log.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int vgpu_log_level = VGPU_LOG_ERROR;

void vgpu_log_init(void)
{
    const char *v = getenv("LIBCUDA_LOG_LEVEL");
    if (v == NULL || v[0] == '\0')
        return;
    if (v[1] == '\0' && v[0] >= '0' && v[0] <= '4') {
        vgpu_log_level = v[0] - '0';
        return;
    }
    vgpu_log(VGPU_LOG_ERROR, "LIBCUDA_LOG_LEVEL='%s' is not a log level (valid: 0 silent, "
             "1 errors, 2 warnings, 3 info, 4 debug); keeping 1", v);
}

void vgpu_log(enum vgpu_log_level level, const char *fmt, ...)
{
    if ((int)level > vgpu_log_level || level == VGPU_LOG_SILENT)
        return;
    char buf[1024];
    int n = snprintf(buf, sizeof buf, "libvgpu[%d]: ", (int)getpid());
    if (n < 0)
        return;
    va_list ap;
    va_start(ap, fmt);
    int m = vsnprintf(buf + n, sizeof buf - (size_t)n - 1, fmt, ap);
    va_end(ap);
    size_t len = strlen(buf);
    (void)m;
    buf[len++] = '\n';
    /* one write(2): lines of concurrent processes do not interleave */
    ssize_t w = write(STDERR_FILENO, buf, len);
    (void)w;
}
