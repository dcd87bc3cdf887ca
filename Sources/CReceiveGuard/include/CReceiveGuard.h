// A bound on what one peer can make libzmq hold, enforced as the bytes arrive.
//
// libzmq hands a multipart message to the application only once its last frame is in: until
// then every frame waits in the connection's pipe, and no socket option bounds their sum
// (ZMQ_MAXMSGSIZE bounds one frame, ZMQ_RCVHWM counts whole messages). One peer sending
// 3,000 frames of 1 MB as one message therefore costs the receiver 3 GB before the application
// can look at a byte of it.
//
// libzmq reads every TCP connection with recv(2). This file defines `recv` (and `close`, so a
// descriptor's state ends with it): the dynamic linker
// binds libzmq's calls to the executable's definition before libc's, so each read of a guarded
// connection is counted here first. A connection is guarded when its local TCP port is one
// registered with `switchboard_receive_guard_port` (a server's bound port: accepted sockets
// share it; a client's connections use ephemeral ports and are never guarded). Its pending
// bytes are those read minus those the application has taken (`..._taken`, from
// `Socket.receive` with libzmq's ZMQ_SRCFD); when they pass the port's limit, recv fails with
// ECONNRESET and libzmq closes the connection, dropping the partial message (its pipe rolls
// back incomplete frames). Every other descriptor, and every recv of another library, goes to
// the kernel unchanged.
#ifndef SWITCHBOARD_CRECEIVEGUARD_H
#define SWITCHBOARD_CRECEIVEGUARD_H

#include <stdint.h>

/// 1 when libzmq's recv reaches this guard (the executable's `recv` came first), else 0.
int switchboard_receive_guard_installed(void);

/// Guards connections accepted on local TCP port `port`: at most `limit` bytes read and not yet
/// taken by the application. A `limit` of 0 stops guarding the port (connections counted
/// already keep theirs until they close). Returns 0.
int switchboard_receive_guard_port(uint16_t port, int64_t limit);

/// The application took a message of `bytes` (as they crossed the wire, an estimate that may
/// be high) from connection `fd`.
void switchboard_receive_guard_taken(int fd, int64_t bytes);

/// Connection `fd` is gone (libzmq's DISCONNECTED or CLOSED event). Returns 1 when the guard
/// dropped it, once. (Its count was reset when the descriptor was closed: this file also
/// defines close(2), which forgets a descriptor's state before it is closed.)
int switchboard_receive_guard_closed(int fd);

/// Bytes read on `fd` that the application has not taken (0 when unguarded).
int64_t switchboard_receive_guard_pending(int fd);

/// Connections dropped since the process started.
uint64_t switchboard_receive_guard_dropped(void);

#endif
