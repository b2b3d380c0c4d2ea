/* dlsym.h: the dlsym interposer (exported as dlsym).  CUDA runtimes and NVML users reach the
 * driver through dlopen + dlsym, so a look-up of a hooked name returns the hook. */
#ifndef VGPU_DLSYM_H
#define VGPU_DLSYM_H

void *vgpu_dlsym(void *handle, const char *name);

#endif /* VGPU_DLSYM_H */
