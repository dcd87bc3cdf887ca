// glibc's heap statistics and trim, which Swift's Glibc module does not show (they are in
// malloc.h). Elsewhere (another C library) they report nothing and do nothing.
#ifndef SWITCHBOARD_CMALLOC_H
#define SWITCHBOARD_CMALLOC_H

#include <stddef.h>

/// Bytes the allocator holds free in its heaps, all arenas (mallinfo2's fordblks); 0 where unknown.
size_t switchboard_heap_free_bytes(void);

/// Gives the free pages of every heap back to the kernel (malloc_trim(0)); 1 if any were.
int switchboard_heap_trim(void);

#endif
