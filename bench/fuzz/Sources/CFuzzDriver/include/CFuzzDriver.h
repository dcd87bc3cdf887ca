#ifndef SWITCHBOARD_FUZZ_DRIVER_H
#define SWITCHBOARD_FUZZ_DRIVER_H

#include <stddef.h>
#include <stdint.h>

/// Hands the process to libFuzzer's driver with the executable's `LLVMFuzzerTestOneInput` as
/// the target; returns the driver's exit status.
int switchboard_fuzz_run(int argc, char **argv);

#endif
