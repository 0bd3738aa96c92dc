/* fuzz-checkaz.c - smddp-check-az --compare: records (JSON lines, values
 * or arrays, as other hosts' --emit wrote them) and the verdict on them. */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>

#include "check-az/check-az.h"
#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static FILE *null;
	char *text = fuzz_text(data, size), err[CHECKAZ_ERRLEN];
	cJSON *records = cJSON_CreateArray();

	if (!null && !(null = fopen("/dev/null", "we")))
		abort();
	if (records_parse(records, text, "fuzz", err, sizeof(err)) == 0) {
		(void)compare_records(records, NULL, 0, NULL, 0, false, null);
		(void)compare_records(records, NULL, 0, NULL, 0, true, null);
	}
	cJSON_Delete(records);
	free(text);
	return 0;
}
