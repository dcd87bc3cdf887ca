// See include/CReceiveGuard.h for why this file defines recv(2).
#define _GNU_SOURCE
#include "CReceiveGuard.h"

#include <dlfcn.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdatomic.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

// Descriptors at or above this are never guarded (a server with more connections than this
// guards the first ones only).
#define GUARD_DESCRIPTORS 65536
// Bytes a second a guarded connection may send that never reach the application: ZMTP
// heartbeats (PING/PONG) are read by libzmq and consumed by it, so a connection that sends no
// message for weeks would otherwise creep up to its limit.
#define GUARD_ALLOWANCE_PER_SECOND 256

enum { UNKNOWN = 0, GUARDED = 1, UNGUARDED = 2 };

struct slot {
    _Atomic int state;
    _Atomic int dropped;
    _Atomic int64_t pending;
    _Atomic int64_t limit;
    _Atomic int64_t since;  // CLOCK_MONOTONIC seconds when first read
};

static struct slot slots[GUARD_DESCRIPTORS];
// The limit of each local TCP port, 0 for an unguarded one (512 KiB of zero pages, touched only
// for the ports a process guards).
static _Atomic int64_t port_limits[65536];
static _Atomic uint64_t dropped_total;

static int64_t now_seconds(void) {
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (int64_t)now.tv_sec;
}

// The limit of the port `fd` is bound to locally, or 0.
static int64_t classify(int fd) {
    struct sockaddr_storage address;
    socklen_t length = sizeof address;
    if (getsockname(fd, (struct sockaddr *)&address, &length) != 0) return 0;
    uint16_t port;
    if (address.ss_family == AF_INET) {
        port = ntohs(((struct sockaddr_in *)&address)->sin_port);
    } else if (address.ss_family == AF_INET6) {
        port = ntohs(((struct sockaddr_in6 *)&address)->sin6_port);
    } else {
        return 0;
    }
    return atomic_load_explicit(&port_limits[port], memory_order_acquire);
}

ssize_t recv(int fd, void *buffer, size_t length, int flags) {
    ssize_t count = syscall(SYS_recvfrom, fd, buffer, length, flags, NULL, NULL);
    if (count <= 0 || fd < 0 || fd >= GUARD_DESCRIPTORS) return count;
    struct slot *slot = &slots[fd];
    int state = atomic_load_explicit(&slot->state, memory_order_acquire);
    if (state == UNGUARDED) return count;
    if (state == UNKNOWN) {
        int64_t limit = classify(fd);
        atomic_store_explicit(&slot->limit, limit, memory_order_relaxed);
        atomic_store_explicit(&slot->pending, 0, memory_order_relaxed);
        atomic_store_explicit(&slot->since, now_seconds(), memory_order_relaxed);
        atomic_store_explicit(&slot->state, limit > 0 ? GUARDED : UNGUARDED, memory_order_release);
        if (limit <= 0) return count;
    }
    int64_t pending = atomic_fetch_add_explicit(&slot->pending, count, memory_order_relaxed) + count;
    int64_t limit = atomic_load_explicit(&slot->limit, memory_order_relaxed);
    if (pending <= limit) return count;
    int64_t age = now_seconds() - atomic_load_explicit(&slot->since, memory_order_relaxed);
    if (pending <= limit + age * GUARD_ALLOWANCE_PER_SECOND) return count;
    // Over: libzmq takes ECONNRESET as the peer's reset and closes the connection. The
    // descriptor stays guarded (and over) until libzmq's close is reported, so every further
    // read fails too.
    if (atomic_exchange_explicit(&slot->dropped, 1, memory_order_relaxed) == 0) {
        atomic_fetch_add_explicit(&dropped_total, 1, memory_order_relaxed);
    }
    errno = ECONNRESET;
    return -1;
}

// A descriptor's count ends with it: whatever the number is used for next (another connection,
// a file) starts unclassified. Closing is the one moment every owner of a descriptor passes
// through, libzmq and everyone else, so the guard never judges a new socket by an old one's
// state. The dropped mark stays until the monitor event reports the connection gone.
int close(int fd) {
    if (fd >= 0 && fd < GUARD_DESCRIPTORS) {
        struct slot *slot = &slots[fd];
        atomic_store_explicit(&slot->state, UNKNOWN, memory_order_release);
        atomic_store_explicit(&slot->pending, 0, memory_order_relaxed);
    }
    return (int)syscall(SYS_close, fd);
}

int switchboard_receive_guard_installed(void) {
    return dlsym(RTLD_DEFAULT, "recv") == (void *)&recv && dlsym(RTLD_DEFAULT, "close") == (void *)&close ? 1 : 0;
}

int switchboard_receive_guard_port(uint16_t port, int64_t limit) {
    atomic_store_explicit(&port_limits[port], limit > 0 ? limit : 0, memory_order_release);
    return 0;
}

void switchboard_receive_guard_taken(int fd, int64_t bytes) {
    if (fd < 0 || fd >= GUARD_DESCRIPTORS) return;
    struct slot *slot = &slots[fd];
    if (atomic_load_explicit(&slot->state, memory_order_acquire) != GUARDED) return;
    int64_t pending = atomic_fetch_sub_explicit(&slot->pending, bytes, memory_order_relaxed) - bytes;
    // The estimate may run ahead of what was read (it counts generous frame overheads): never
    // below zero, or a connection would bank credit for a later oversized message.
    while (pending < 0) {
        int64_t expected = pending;
        if (atomic_compare_exchange_weak_explicit(&slot->pending, &expected, 0, memory_order_relaxed, memory_order_relaxed)) break;
        pending = expected;
    }
}

int switchboard_receive_guard_closed(int fd) {
    if (fd < 0 || fd >= GUARD_DESCRIPTORS) return 0;
    return atomic_exchange_explicit(&slots[fd].dropped, 0, memory_order_relaxed);
}

int64_t switchboard_receive_guard_pending(int fd) {
    if (fd < 0 || fd >= GUARD_DESCRIPTORS) return 0;
    struct slot *slot = &slots[fd];
    if (atomic_load_explicit(&slot->state, memory_order_acquire) != GUARDED) return 0;
    return atomic_load_explicit(&slot->pending, memory_order_relaxed);
}

uint64_t switchboard_receive_guard_dropped(void) {
    return atomic_load_explicit(&dropped_total, memory_order_relaxed);
}
