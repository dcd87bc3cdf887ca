#ifndef SWITCHBOARD_CZEROMQ_SHIM_H
#define SWITCHBOARD_CZEROMQ_SHIM_H
#include <zmq.h>
#include <sys/eventfd.h>
#include <poll.h>
#endif
