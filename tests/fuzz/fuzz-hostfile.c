/* fuzz-hostfile.c - smddp-run's hosts: an Open MPI hostfile, and the first
 * line again as a --hosts list.  The tool's exit() on a bad one comes back
 * here (exit.h). */
#include "run/plan.c"

#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct hostlist hl; /* static: still there after a longjmp */
	const char *path = fuzz_file(0, data, size);

	memset(&hl, 0, sizeof(hl));
	int mark = fuzz_fd_mark();
	if (FUZZ_CATCH_EXIT() == 0)
		parse_hostfile(path, &hl);
	else
		fuzz_close_from(mark); /* the hostfile, left open by its exit() */
	fuzz_exit_armed = 0;
	strv_free(&hl.names);

	const uint8_t *nl = memchr(data, '\n', size);
	char *arg = fuzz_text(data, nl ? (size_t)(nl - data) : size);
	memset(&hl, 0, sizeof(hl));
	if (FUZZ_CATCH_EXIT() == 0)
		parse_hosts_arg(arg, &hl);
	fuzz_exit_armed = 0;
	strv_free(&hl.names);
	free(arg);
	return 0;
}
