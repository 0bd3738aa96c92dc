/* fuzz.h - what the fuzz targets share: libFuzzer's entry point, and inputs
 * as text, as files and in parts.
 *
 * Each tests/fuzz/fuzz-*.c defines LLVMFuzzerTestOneInput().  Built with
 * clang and --enable-fuzzer it links libFuzzer; otherwise driver.c replays
 * the files named on its command line (make check, tests/fuzz/replay.sh). */
#ifndef SD_FUZZ_H
#define SD_FUZZ_H

#include <stddef.h>
#include <stdint.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* A NUL-terminated copy of the input (free() it). */
char *fuzz_text(const uint8_t *data, size_t size);

/* A path that reads back the input: an in-memory file (memfd) of this
 * process, one per slot (0..3), rewritten on every call. */
const char *fuzz_file(int slot, const void *data, size_t size);

/* The input cut at each line "%%" (the separator of the multi-file
 * targets' corpora): up to max parts, their count returned. */
size_t fuzz_split(const uint8_t *data, size_t size, const uint8_t **part, size_t *len, size_t max);

/* A tool that gives up (exit.h) leaves its files open, which the real
 * tool's exit would close: fuzz_fd_mark() before it, fuzz_close_from(mark)
 * after its exit, closes every descriptor opened in between. */
int fuzz_fd_mark(void);
void fuzz_close_from(int mark);

#endif
