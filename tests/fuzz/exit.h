/* exit.h - forced into the tools' sources built into fuzz targets
 * (-include): their exit() on bad input (a usage error, exit 2) returns to
 * the target instead of ending the fuzzer.
 *
 * What a tool had allocated before it gave up is lost on that jump, as it
 * is lost when the real tool exits: those targets turn LeakSanitizer off
 * (fuzz-exit.c), and leaks of the library's own parsers are looked for in
 * the targets that link no tool code. */
#ifndef SD_FUZZ_EXIT_H
#define SD_FUZZ_EXIT_H

/* first of all includes: as config.h would (AC_USE_SYSTEM_EXTENSIONS) */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif
#include <setjmp.h>
#include <stdlib.h>

extern jmp_buf fuzz_exit_jmp;
extern int fuzz_exit_armed;
__attribute__((noreturn)) void fuzz_exit(int status);

#define exit(status) fuzz_exit(status)
/* setjmp() for a tool's exit(): 0 first, then 1 + the exit status. */
#define FUZZ_CATCH_EXIT() (fuzz_exit_armed = 1, setjmp(fuzz_exit_jmp))

#endif
