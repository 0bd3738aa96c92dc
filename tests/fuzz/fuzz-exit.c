/* fuzz-exit.c - the other half of exit.h: a tool's exit() back to the target. */
#include <setjmp.h>
#include <stdlib.h>

#include "exit.h"

#undef exit

jmp_buf fuzz_exit_jmp;
int fuzz_exit_armed;

void fuzz_exit(int status)
{
	if (!fuzz_exit_armed)
		exit(status);
	fuzz_exit_armed = 0;
	longjmp(fuzz_exit_jmp, 1 + (status & 0xff));
}

/* The tool code's memory is lost on that jump, as in the real tool's exit:
 * no leak reports for these targets (ASan reads this at start-up). */
const char *__asan_default_options(void);
const char *__asan_default_options(void)
{
	return "detect_leaks=0";
}
