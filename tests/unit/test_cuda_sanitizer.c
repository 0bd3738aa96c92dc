/* test_cuda_sanitizer.c - sd_cuda_sanitizer(): which CUDA_INJECTION64_PATH values are compute-sanitizer's. */
#include "config.h"

#include "check.h"
#include "cuda/cuda.h"

static void is(const char *v, int want)
{
	CHECK(sd_cuda_sanitizer(v) == want, "%-75s -> %d", v ? v : "(unset)", want);
}

int main(void)
{
	/* compute-sanitizer's own library, wherever the toolkit is. */
	is("/usr/local/cuda-13.0/compute-sanitizer/libsanitizer-collection.so", 1);
	is("/opt/cuda/compute-sanitizer/libsanitizer-collection.so", 1);
	is("libsanitizer-collection.so", 1);
	is("/usr/lib/nvidia-cuda-toolkit/compute-sanitizer/libsanitizer-public.so", 1);
	/* Another of the tool's libraries, from the tool's folder. */
	is("/usr/local/cuda/compute-sanitizer/libInterceptorInjectionTarget.so", 1);
	is("compute-sanitizer/libTreeLauncherTargetInjection.so", 1);
	/* Among several paths. */
	is("/opt/nsys/libToolsInjection64.so:/usr/local/cuda/compute-sanitizer/"
	   "libsanitizer-collection.so",
	   1);
	is("/x/libfoo.so;/y/libsanitizer-collection.so", 1);

	/* Not the sanitizer: unset, empty, other tools, look-alikes. */
	is(NULL, 0);
	is("", 0);
	is(":", 0);
	is("/opt/nvidia/nsight-systems/2025.1/target-linux-x64/libToolsInjection64.so", 0);
	is("/opt/nvidia/nsight-compute/2025.1/target/linux-desktop-glibc_2_11_3-x64/"
	   "libInterceptorInjectionTarget.so",
	   0);
	is("/home/me/cupti/libmy_injection.so", 0);
	is("/home/me/my-compute-sanitizer/libtool.so", 0);
	is("/home/me/compute-sanitizer-notes.so", 0);
	is("/home/libsanitizer/libtrace.so", 0);
	is("/home/me/mylibsanitizer.so", 0);

	printf("%s\n", failures ? "FAILED" : "all passed");
	return failures ? 1 : 0;
}
