/* fuzz-sagemaker.c - SageMaker's configuration into smddp-run's plan: an
 * input is resourceconfig.json, then hyperparameters.json, then the
 * estimator's distribution JSON, each after a line "%%" (the last two may
 * be left out).  The tool's exit() on a bad one comes back here (exit.h). */
#include "run/sagemaker.c"

#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct options o;
	static struct plan p;
	const uint8_t *part[3];
	size_t len[3], n = fuzz_split(data, size, part, len, 3);

	memset(&o, 0, sizeof(o));
	memset(&p, 0, sizeof(p));
	o.resource_config = fuzz_file(0, part[0], len[0]);
	if (n > 1)
		o.hyperparameters = fuzz_file(1, part[1], len[1]);
	if (n > 2)
		o.distribution = fuzz_file(2, part[2], len[2]);
	int mark = fuzz_fd_mark();
	if (FUZZ_CATCH_EXIT() == 0)
		sagemaker_plan(&o, &p);
	else
		fuzz_close_from(mark); /* what its exit() left open */
	fuzz_exit_armed = 0;
	strv_free(&p.hosts);
	strv_free(&p.env);
	strv_free(&p.fwd);
	strv_free(&p.mpi_opts);
	return 0;
}
