#include "CFuzzDriver.h"

// Both from libFuzzer's interface (compiler-rt, linked in by `-sanitize=fuzzer`), declared here
// because the toolchain ships no header for them. Each fuzz executable defines the test with
// `@_cdecl`; libFuzzer's own main also refers to it, so it must exist even though ours runs.
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerRunDriver(int *argc, char ***argv, int (*test)(const uint8_t *data, size_t size));

int switchboard_fuzz_run(int argc, char **argv) {
    return LLVMFuzzerRunDriver(&argc, &argv, LLVMFuzzerTestOneInput);
}
