/* unit_size.c: for each argument "BARE_SHIFT:TEXT", prints vgpu_parse_size's bytes or "bad". */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vgpu_size.h"

int main(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        char *colon = strchr(argv[i], ':');
        if (colon == NULL)
            return 2;
        unsigned shift = (unsigned)strtoul(argv[i], NULL, 10);
        uint64_t v;
        if (vgpu_parse_size(colon + 1, shift, &v) == 0)
            printf("%" PRIu64 "\n", v);
        else
            printf("bad\n");
    }
    return 0;
}
