/* unit_env.c: prints the memory limits vgpu_env_memory_limits() derives from NAME=VALUE
 * arguments (the environment is injected, not read), one line per device 0..3:
 *   <i> none | <i> <bytes>   and finally "malformed <n>". */
#include <stdio.h>
#include <string.h>

#include "env.h"

static int g_argc;
static char **g_argv;

static const char *fake_getenv(const char *name)
{
    size_t n = strlen(name);
    for (int i = 1; i < g_argc; i++)
        if (strncmp(g_argv[i], name, n) == 0 && g_argv[i][n] == '=')
            return g_argv[i] + n + 1;
    return NULL;
}

int main(int argc, char **argv)
{
    struct vgpu_env_limits lim;
    g_argc = argc;
    g_argv = argv;
    vgpu_env_memory_limits(fake_getenv, &lim);
    for (unsigned i = 0; i < 4; i++) {
        if (lim.limit[i] == VGPU_LIMIT_NONE)
            printf("%u none\n", i);
        else
            printf("%u %llu\n", i, (unsigned long long)lim.limit[i]);
    }
    printf("malformed %d\n", lim.malformed);
    return 0;
}
