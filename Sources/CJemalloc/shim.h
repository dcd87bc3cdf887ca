#ifndef SWITCHBOARD_CJEMALLOC_SHIM_H
#define SWITCHBOARD_CJEMALLOC_SHIM_H
// Links jemalloc (Debian's libjemalloc-dev) into the program that imports this module: its
// malloc and free then serve the whole process (Swift's runtime, libzmq, SQLite). Nothing is
// declared here; CMalloc finds jemalloc's control interface at run time.
#endif
