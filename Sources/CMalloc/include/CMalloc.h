// The allocator's heap statistics and trim, which Swift's Glibc module does not show: glibc's
// (malloc.h), or jemalloc's when it is the process's malloc (the broker links it). Elsewhere
// (another C library) they report nothing and do nothing.
#ifndef SWITCHBOARD_CMALLOC_H
#define SWITCHBOARD_CMALLOC_H

#include <stddef.h>

/// The allocator that serves malloc in this process: "jemalloc", "glibc", or "unknown".
const char *switchboard_heap_allocator(void);

/// Bytes the allocator holds free but resident, all arenas: glibc's free chunks (mallinfo2's
/// fordblks), or jemalloc's dirty and muzzy pages; 0 where unknown.
size_t switchboard_heap_free_bytes(void);

/// Gives the free pages of every heap back to the kernel (glibc's malloc_trim(0), jemalloc's
/// purge of every arena); 1 if it did.
int switchboard_heap_trim(void);

#endif
