/* log.h: the shim's only logging.  Level from LIBCUDA_LOG_LEVEL, read once by vgpu_log_init();
 * never called on a hot path. */
#ifndef VGPU_LOG_H
#define VGPU_LOG_H

enum vgpu_log_level {
    VGPU_LOG_SILENT = 0,
    VGPU_LOG_ERROR = 1, /* default: configuration errors only, printed once at start */
    VGPU_LOG_WARN = 2,
    VGPU_LOG_INFO = 3,
    VGPU_LOG_DEBUG = 4,
};

void vgpu_log_init(void);
void vgpu_log(enum vgpu_log_level level, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

#endif /* VGPU_LOG_H */
