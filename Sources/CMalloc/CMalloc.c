#include "CMalloc.h"
// Any libc header defines __GLIBC__ on glibc (through features.h); stddef.h is the compiler's.
#include <stdlib.h>
#include <stdint.h>

#if defined(__GLIBC__)
#include <dlfcn.h>
#include <malloc.h>
#include <pthread.h>

// jemalloc's mallctl, when jemalloc's malloc is the one this process calls; NULL otherwise
// (not linked, or linked after glibc so that glibc's malloc wins).
typedef int (*mallctl_function)(const char *, void *, size_t *, void *, size_t);

static mallctl_function jemalloc_found = NULL;
static pthread_once_t jemalloc_looked = PTHREAD_ONCE_INIT;

static void jemalloc_look(void) {
    void *library = dlopen("libjemalloc.so.2", RTLD_NOW | RTLD_NOLOAD);
    if (library == NULL) {
        return;
    }
    void *ours = dlsym(library, "malloc");
    if (ours != NULL && ours == dlsym(RTLD_DEFAULT, "malloc")) {
        jemalloc_found = (mallctl_function)dlsym(library, "mallctl");
    }
    dlclose(library);
}

static mallctl_function jemalloc_control(void) {
    pthread_once(&jemalloc_looked, jemalloc_look);
    return jemalloc_found;
}

// jemalloc's MALLCTL_ARENAS_ALL: every arena at once.
#define ALL_ARENAS "4096"

static size_t jemalloc_size(mallctl_function control, const char *name) {
    size_t value = 0;
    size_t length = sizeof(value);
    return control(name, &value, &length, NULL, 0) == 0 ? value : 0;
}

const char *switchboard_heap_allocator(void) {
    return jemalloc_control() != NULL ? "jemalloc" : "glibc";
}

size_t switchboard_heap_free_bytes(void) {
    mallctl_function control = jemalloc_control();
    if (control == NULL) {
        return mallinfo2().fordblks;
    }
    // Statistics are a snapshot taken at the last "epoch" write: take one now.
    uint64_t epoch = 1;
    size_t length = sizeof(epoch);
    control("epoch", &epoch, &length, &epoch, sizeof(epoch));
    size_t pages = jemalloc_size(control, "stats.arenas." ALL_ARENAS ".pdirty")
        + jemalloc_size(control, "stats.arenas." ALL_ARENAS ".pmuzzy");
    return pages * jemalloc_size(control, "arenas.page");
}

int switchboard_heap_trim(void) {
    mallctl_function control = jemalloc_control();
    if (control == NULL) {
        return malloc_trim(0);
    }
    return control("arena." ALL_ARENAS ".purge", NULL, NULL, NULL, 0) == 0;
}
#else
const char *switchboard_heap_allocator(void) {
    return "unknown";
}

size_t switchboard_heap_free_bytes(void) {
    return 0;
}

int switchboard_heap_trim(void) {
    return 0;
}
#endif
