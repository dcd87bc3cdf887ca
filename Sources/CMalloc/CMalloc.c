#include "CMalloc.h"
// Any libc header defines __GLIBC__ on glibc (through features.h); stddef.h is the compiler's.
#include <stdlib.h>

#if defined(__GLIBC__)
#include <malloc.h>

size_t switchboard_heap_free_bytes(void) {
    return mallinfo2().fordblks;
}

int switchboard_heap_trim(void) {
    return malloc_trim(0);
}
#else
size_t switchboard_heap_free_bytes(void) {
    return 0;
}

int switchboard_heap_trim(void) {
    return 0;
}
#endif
